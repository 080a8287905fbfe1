"""The OpenTelemetry metrics of the clients (the ``otel`` extra), after the messaging
semantic conventions for client metrics.

:class:`Instruments` holds the instruments of one :class:`~stomp_proto.tracing.Tracing`;
it records what that hook sees: each send, each message taken, each settlement.
Imported only by :mod:`stomp_proto.tracing`.
"""

from __future__ import annotations

from opentelemetry import metrics

from . import __version__

__all__ = ["COUNTERS", "DURATION_BUCKETS", "Instruments", "metrics_configured"]

#: The bucket boundaries (seconds) the conventions give for operation durations.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10)

try:  # what the API returns until an SDK is set: recording then goes nowhere
    from opentelemetry.metrics._internal import _ProxyMeterProvider as _Proxy

    _UNSET: tuple[type, ...] = (metrics.NoOpMeterProvider, _Proxy)
except ImportError:  # pragma: no cover - another API version: always record
    _UNSET = (metrics.NoOpMeterProvider,)


def metrics_configured(provider: metrics.MeterProvider | None) -> bool:
    """Whether recording to ``provider`` (None: the global one) can reach an SDK."""
    return not isinstance(provider or metrics.get_meter_provider(), _UNSET)


#: The counters: (the :class:`Instruments` attribute, the metric's name, its unit,
#: its description).  The first two are the messaging conventions'; no convention
#: names the sessions' counts, which are those of :class:`~stomp_proto.ClientStats`.
COUNTERS = (
    (
        "sent",
        "messaging.client.sent.messages",
        "{message}",
        "Messages the application sent, or tried to send (with error.type), to the broker.",
    ),
    (
        "consumed",
        "messaging.client.consumed.messages",
        "{message}",
        "Messages the application took from its subscriptions.",
    ),
    ("sessions", "stomp_proto.client.sessions", "{session}", "Sessions that came up."),
    (
        "reconnects",
        "stomp_proto.client.reconnects",
        "{session}",
        "Sessions that came up after the client's first.",
    ),
    (
        "lost",
        "stomp_proto.client.lost_sessions",
        "{session}",
        "Sessions lost (the connection dropped, the broker fell silent or refused).",
    ),
)


class Instruments:
    """The counters and the duration histogram, from one meter provider."""

    __slots__ = ("consumed", "duration", "lost", "reconnects", "sent", "sessions")

    consumed: metrics.Counter
    lost: metrics.Counter
    reconnects: metrics.Counter
    sent: metrics.Counter
    sessions: metrics.Counter

    def __init__(self, meter_provider: metrics.MeterProvider | None) -> None:
        meter = metrics.get_meter("stomp_proto", __version__, meter_provider=meter_provider)
        for attribute, name, unit, description in COUNTERS:
            setattr(self, attribute, meter.create_counter(name, unit, description))
        #: ``messaging.client.operation.duration``: each send, receive and settlement.
        self.duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="How long a send, receive, ack or nack took.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
