"""The embedded broker's counters, and their Prometheus text exposition (``GET /metrics``).

:class:`Counters` only ever grows; the core bumps the STOMP ones (sessions,
messages, refusals), the transport the rest (connections, bytes, refused
WebSocket upgrades).  :func:`exposition_lines` writes them, with the gauges
read from the core at that moment (open connections, memory; the totals over
every destination, and per destination the queue depth, the unacknowledged
messages and the subscribers), in the Prometheus text format 0.0.4.

A broker may hold 100,000 destinations, and one line per destination made a
scrape of megabytes.  :class:`DestinationSummary` takes the destinations one
at a time and keeps the totals and only the ``top`` deepest (queued plus
unacknowledged); ``top=None`` keeps every one (the opt-in detail).  Both the
summary and the lines are produced a piece at a time, so that a transport can
let other work run in between (``Broker`` does every :data:`SCRAPE_SLICE`).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_TOP_DESTINATIONS",
    "GAUGES",
    "METRICS_PATH",
    "SCRAPE_SLICE",
    "Counters",
    "DestinationSummary",
    "exposition",
    "exposition_lines",
]

#: Where the broker serves its metrics (on its own port, beside the WebSocket path).
METRICS_PATH = "/metrics"
#: The media type of the Prometheus text format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_PREFIX = "stomp_broker_"
#: Destinations listed one by one in a scrape, by default: the deepest ones.
DEFAULT_TOP_DESTINATIONS = 100
#: Destinations looked at, or lines written, between two chances for other work to run.
SCRAPE_SLICE = 1000


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


class DestinationSummary:
    """The totals over every destination added, and the ``top`` deepest of them.

    Depth is queued plus unacknowledged messages; ``top=None`` keeps them all.
    """

    __slots__ = ("_heap", "_kept", "count", "queued", "subscribers", "top", "unacked")

    def __init__(self, top: int | None = DEFAULT_TOP_DESTINATIONS) -> None:
        if top is not None and top < 0:
            raise ValueError("top must be a count of destinations, or None for all")
        #: How many destinations are listed one by one; ``None``: every one.
        self.top = top
        #: Destinations added, and their queued, unacknowledged messages and subscriptions.
        self.count = self.queued = self.unacked = self.subscribers = 0
        self._heap: list[tuple[int, str, tuple[int, int, int]]] = []
        self._kept: dict[str, tuple[int, int, int]] = {}

    def add(self, destination: str, stats: tuple[int, int, int]) -> None:
        """One destination's ``(queued, unacked, subscribers)``."""
        queued, unacked, subscribers = stats
        self.count += 1
        self.queued += queued
        self.unacked += unacked
        self.subscribers += subscribers
        if self.top is None:
            self._kept[destination] = stats
            return
        entry = (queued + unacked, destination, stats)
        if len(self._heap) < self.top:
            heapq.heappush(self._heap, entry)
        elif self.top and entry > self._heap[0]:
            heapq.heapreplace(self._heap, entry)

    def listed(self) -> dict[str, tuple[int, int, int]]:
        """The destinations to list one by one, by name."""
        kept = self._kept if self.top is None else {name: s for _, name, s in self._heap}
        return dict(sorted(kept.items()))


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
    gauges: Mapping[str, int],
    destinations: DestinationSummary,
) -> str:
    """The Prometheus text exposition of the broker's metrics, in one piece."""
    return "".join(line + "\n" for line in exposition_lines(counters, gauges, destinations))


#: The broker-wide gauges :func:`exposition_lines` takes, and what each says.
GAUGES = {
    "connections_open": "Client connections open now.",
    "sessions_open": "STOMP sessions open now.",
    "memory_used_bytes": "Bytes of messages held, as charged to the memory budget.",
    "memory_limit_bytes": "The memory budget: bytes of messages held at most (max_memory).",
    "memory_alarm": "1 while publishers are held back by the memory alarm, else 0.",
}


def exposition_lines(
    counters: Counters,
    gauges: Mapping[str, int],
    destinations: DestinationSummary,
) -> Iterator[str]:
    """The lines of the Prometheus text exposition, one at a time.

    ``gauges`` gives a value for each name of :data:`GAUGES`; ``destinations``
    the totals and the destinations to list.
    """
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
        yield from _family(name, "counter", help_text, samples)
    for name, help_text in GAUGES.items():
        yield from _family(name, "gauge", help_text, [("", gauges[name])])
    listed = destinations.listed()
    totals = [
        ("destinations", "Destinations in use (queues, and topics with subscribers).",
         destinations.count),
        ("destinations_listed", "Destinations listed one by one below (the deepest ones).",
         len(listed)),
        ("messages_queued", "Messages waiting for a consumer, over every destination.",
         destinations.queued),
        ("messages_unacked", "Messages delivered and not yet settled, over every destination.",
         destinations.unacked),
        ("subscriptions", "Subscriptions, over every destination.", destinations.subscribers),
    ]  # fmt: skip
    for name, help_text, value in totals:
        yield from _family(name, "gauge", help_text, [("", value)])
    for index, (name, help_text) in enumerate(
        (
            ("queue_depth", "Messages waiting for a consumer, per destination."),
            ("unacked_messages", "Messages delivered and not yet settled, per destination."),
            ("subscribers", "Subscriptions, per destination."),
        )
    ):
        yield f"# HELP {_PREFIX}{name} {help_text}"
        yield f"# TYPE {_PREFIX}{name} gauge"
        for destination, stats in listed.items():
            yield f'{_PREFIX}{name}{{destination="{_escape(destination)}"}} {stats[index]}'
