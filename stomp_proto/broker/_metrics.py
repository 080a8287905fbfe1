"""The embedded broker's counters, and their Prometheus text exposition (``GET /metrics``).

:class:`Counters` only ever grows; the core bumps the STOMP ones (sessions,
messages, refusals), the transport the rest (connections, bytes, refused
WebSocket upgrades).  :func:`exposition` writes them, with the gauges read
from the core at that moment (open connections; per destination the queue
depth, the unacknowledged messages and the subscribers), in the Prometheus
text format 0.0.4.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["CONTENT_TYPE", "METRICS_PATH", "Counters", "exposition"]

#: Where the broker serves its metrics (on its own port, beside the WebSocket path).
METRICS_PATH = "/metrics"
#: The media type of the Prometheus text format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_PREFIX = "stomp_broker_"


class Counters:
    """What the broker has done since it started; every field only grows."""

    __slots__ = (
        "bytes_received",
        "bytes_sent",
        "connections_opened",
        "messages_acked",
        "messages_delivered",
        "messages_nacked",
        "messages_received",
        "refused",
        "sessions_opened",
        "upgrades_refused",
    )

    def __init__(self) -> None:
        #: Client connections carrying STOMP, by transport (``"tcp"``, ``"websocket"``).
        self.connections_opened: Counter[str] = Counter()
        #: Sessions the broker accepted (CONNECTED sent).
        self.sessions_opened = 0
        #: Messages published (SENDs taken in; those of a transaction at COMMIT).
        self.messages_received = 0
        #: MESSAGE frames sent to subscribers (redeliveries too).
        self.messages_delivered = 0
        #: Deliveries settled by an ACK.
        self.messages_acked = 0
        #: Deliveries handed back by a NACK.
        self.messages_nacked = 0
        #: Sessions ended by an ERROR, by reason (``"login_failed"``, ``"too_large"`` ...).
        self.refused: Counter[str] = Counter()
        #: WebSocket upgrades refused, by HTTP status (``403`` for a foreign origin).
        self.upgrades_refused: Counter[int] = Counter()
        #: STOMP bytes read from clients and written to them (WebSocket framing not counted).
        self.bytes_received = 0
        self.bytes_sent = 0


def _escape(value: str) -> str:
    # The label-value escapes of the text format: backslash, double quote, line feed.
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(
    name: str, kind: str, help_text: str, samples: Iterable[tuple[str, object]]
) -> list[str]:
    lines = [f"# HELP {_PREFIX}{name} {help_text}", f"# TYPE {_PREFIX}{name} {kind}"]
    lines += [f"{_PREFIX}{name}{labels} {value}" for labels, value in samples]
    return lines


def _labelled(label: str, values: Mapping[str, int] | Mapping[int, int]) -> list[tuple[str, int]]:
    return [(f'{{{label}="{_escape(str(key))}"}}', count) for key, count in sorted(values.items())]


def exposition(
    counters: Counters,
    open_connections: int,
    open_sessions: int,
    destinations: Mapping[str, tuple[int, int, int]],
) -> str:
    """The Prometheus text exposition of the broker's metrics.

    ``destinations`` maps each destination to ``(queued, unacked, subscribers)``.
    """
    lines: list[str] = []
    counter_families = [
        ("connections_opened_total", "Client connections carrying STOMP, by transport.",
         _labelled("transport", counters.connections_opened)),
        ("sessions_opened_total", "STOMP sessions accepted (CONNECTED sent).",
         [("", counters.sessions_opened)]),
        ("messages_received_total", "Messages published to the broker.",
         [("", counters.messages_received)]),
        ("messages_delivered_total", "MESSAGE frames sent to subscribers.",
         [("", counters.messages_delivered)]),
        ("messages_acked_total", "Deliveries settled by an ACK.",
         [("", counters.messages_acked)]),
        ("messages_nacked_total", "Deliveries handed back by a NACK.",
         [("", counters.messages_nacked)]),
        ("frames_refused_total", "Sessions ended by an ERROR, by reason.",
         _labelled("reason", counters.refused)),
        ("websocket_upgrades_refused_total", "WebSocket upgrades refused, by HTTP status.",
         _labelled("status", counters.upgrades_refused)),
        ("received_bytes_total", "STOMP bytes read from clients.",
         [("", counters.bytes_received)]),
        ("sent_bytes_total", "STOMP bytes written to clients.", [("", counters.bytes_sent)]),
    ]  # fmt: skip
    for name, help_text, samples in counter_families:
        lines += _family(name, "counter", help_text, samples)
    lines += _family(
        "connections_open", "gauge", "Client connections open now.", [("", open_connections)]
    )
    lines += _family("sessions_open", "gauge", "STOMP sessions open now.", [("", open_sessions)])
    for index, (name, help_text) in enumerate(
        (
            ("queue_depth", "Messages waiting for a consumer, per destination."),
            ("unacked_messages", "Messages delivered and not yet settled, per destination."),
            ("subscribers", "Subscriptions, per destination."),
        )
    ):
        column = {destination: stats[index] for destination, stats in destinations.items()}
        samples = _labelled("destination", column)
        lines += _family(name, "gauge", help_text, samples)
    return "\n".join(lines) + "\n"
