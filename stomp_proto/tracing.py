"""OpenTelemetry spans, metrics and trace context in STOMP messages (the ``otel`` extra).

``connect(..., tracing=Tracing())`` makes a client

* start a ``PRODUCER`` span ``send <destination>`` for each ``send()``, for
  as long as the call lasts (until the broker's receipt when one is asked
  for), and put its W3C trace context (``traceparent``, ``tracestate``) into
  the SEND's headers; a send that fails says why in ``error.type``;
* record a ``CLIENT`` span ``receive <destination>`` for each message the
  application takes from a subscription (``get()`` or iteration: a pull),
  from the call to the message, linked to the context the message carries;
* record a ``CLIENT`` span ``ack <destination>`` (``nack``) for each ``ack()``
  and ``nack()``, a settlement, linked the same way;
* count and time all of these as OpenTelemetry metrics.

A consumer's span is a child of the application's current (ambient) span when
there is one, else of the context the message carries, so that without one
producer and consumer share one trace across the broker.

Spans and metrics follow OpenTelemetry's messaging semantic conventions: the
operation names and types, ``messaging.system`` ``"stomp"``, the destination,
message id, subscription and body size, and the broker as
``server.address``/``server.port``.  :meth:`Tracing.context` gives the context
a message carries, to parent the application's own spans on it.

Without this module imported, no client imports OpenTelemetry, and the hook is
a single ``is None`` test per send, message taken and settlement.  With it but
with no OpenTelemetry SDK configured, each of those costs one more check.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

try:
    from opentelemetry import metrics, trace
    from opentelemetry.context import Context, get_current
    from opentelemetry.metrics import Counter
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import Link, SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    from ._otel_metrics import Instruments, metrics_configured
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "stomp_proto.tracing needs OpenTelemetry: pip install 'stomp_proto[otel]'"
    ) from exc

from . import __version__
from ._client._errors import ClientError
from ._events import Message, Send
from ._frame import Version

__all__ = ["RECHECK", "SYSTEM", "Tracing"]

#: The ``messaging.system`` of every span and measurement.
SYSTEM = "stomp"

#: Seconds between two looks for an SDK configured after the :class:`Tracing` was made.
RECHECK = 1.0

#: The tracer providers of the API alone: spans started there go nowhere.
_NO_SDK = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)

#: The attributes the metrics carry (the spans carry more: the message id, the body size
#: ... which would make a series per message).
_METRIC_ATTRIBUTES = frozenset(
    {
        "messaging.system",
        "messaging.operation.name",
        "messaging.operation.type",
        "messaging.destination.name",
        "messaging.destination.subscription.name",
        "server.address",
        "server.port",
        "error.type",
    }
)

_Attributes = dict[str, str | int]

#: The block around an operation that records nothing (reusable: it holds no state).
_NOTHING: AbstractContextManager[None] = nullcontext()


class Tracing:
    """The tracing hook; pass it to ``connect(..., tracing=Tracing())``.

    ``tracer_provider``: where spans go (default: the global one).
    ``meter_provider``: where the metrics go (default: the global one).
    ``propagator``: how the context is written into headers and read back
    (default: W3C Trace Context, ``traceparent`` and ``tracestate``).

    While neither provider reaches an OpenTelemetry SDK (none is configured), it
    records nothing and costs a clock read per call; it still carries the context
    of an ambient span into the messages sent.  A global provider set later is
    used within :data:`RECHECK` seconds.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        propagator: TextMapPropagator | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("stomp_proto", __version__, tracer_provider=tracer_provider)
        self._tracer_provider = tracer_provider
        self._meter_provider = meter_provider
        self._instruments = Instruments(meter_provider)
        self._propagator = propagator or TraceContextTextMapPropagator()
        # Once an SDK is seen it stays: OpenTelemetry sets a global provider only once.
        self._spans = False
        self._metrics = False
        self._next_check = float("-inf")

    def _recording(self) -> tuple[bool, bool]:
        """Whether spans, and metrics, reach an SDK now.

        Asking OpenTelemetry for its global providers reads the environment each
        time: while one is missing it is asked again at most every :data:`RECHECK`
        seconds, so that a message costs a clock read.
        """
        if not (self._spans and self._metrics):
            now = time.monotonic()
            if now >= self._next_check:
                self._next_check = now + RECHECK
                provider = self._tracer_provider or trace.get_tracer_provider()
                self._spans = not isinstance(provider, _NO_SDK)
                self._metrics = metrics_configured(self._meter_provider)
        return self._spans, self._metrics

    def sending(
        self, send: Send, broker: tuple[str, int], version: Version | None
    ) -> AbstractContextManager[Send]:
        """The ``send`` span, current for the block; yields ``send`` with its context.

        ``broker`` (``(host, port)``) and ``version`` (the negotiated STOMP
        version) become the span's ``server.*`` and ``network.protocol.*``
        attributes.  A trace context the application put in the headers itself
        is kept.  An exception out of the block is the span's ``error.type``.
        """
        spans, measured = self._recording()
        if not (spans or measured):
            # An empty context has no span to carry (the common case, and cheap to see).
            return nullcontext(self._carry(send) if get_current() else send)
        return self._sending(send, broker, version, spans, measured)

    @contextmanager
    def _sending(
        self,
        send: Send,
        broker: tuple[str, int],
        version: Version | None,
        spans: bool,
        measured: bool,
    ) -> Iterator[Send]:
        attributes = _attributes("send", "send", send.destination, broker, version)
        attributes["messaging.message.body.size"] = len(send.body)
        with self._operation(
            f"send {send.destination}",
            SpanKind.PRODUCER,
            attributes,
            spans=spans,
            measured=measured,
            counter=self._instruments.sent,
        ):
            yield self._carry(send)

    def received(
        self, message: Message, broker: tuple[str, int], version: Version | None, began: int
    ) -> None:
        """Record that the application took ``message``: a ``receive`` span from
        ``began`` (:func:`time.time_ns`, when it asked) to now; ``broker`` and
        ``version`` as for :meth:`sending`.

        Its parent is the current span, or without one the context ``message``
        carries; it is linked to that context.
        """
        spans, measured = self._recording()
        if not (spans or measured):
            return
        attributes = _message_attributes("receive", "receive", message, broker, version)
        ended = time.time_ns()
        if spans:
            parent, links = self._consumer_context(message)
            span = self._tracer.start_span(
                f"receive {message.destination}",
                context=parent,
                kind=SpanKind.CLIENT,
                attributes=attributes,
                links=links,
                start_time=began,
            )
            span.end(end_time=ended)
        if measured:
            measurement = _measurement(attributes, None)
            self._instruments.duration.record((ended - began) / 1e9, measurement)
            self._instruments.consumed.add(1, measurement)

    def settling(
        self, message: Message, nack: bool, broker: tuple[str, int], version: Version | None
    ) -> AbstractContextManager[None]:
        """The ``ack`` (``nack``: ``nack``) span of ``message``, a settlement, current
        for the block; parented and linked as the ``receive`` span, ``broker`` and
        ``version`` as for :meth:`sending`."""
        spans, measured = self._recording()
        if not (spans or measured):
            return _NOTHING
        name = "nack" if nack else "ack"
        attributes = _message_attributes(name, "settle", message, broker, version)
        del attributes["messaging.message.body.size"]  # the frame carries no body
        parent, links = self._consumer_context(message) if spans else (None, None)
        return self._operation(
            f"{name} {message.destination}",
            SpanKind.CLIENT,
            attributes,
            spans=spans,
            measured=measured,
            parent=parent,
            links=links,
        )

    def session_up(self, broker: tuple[str, int], reconnect: bool) -> None:
        """Count a session with ``broker`` that came up (and, ``reconnect``, a
        reconnect) on ``stomp_proto.client.sessions`` (``.reconnects``)."""
        if self._recording()[1]:
            where = _broker_attributes(broker)
            self._instruments.sessions.add(1, where)
            if reconnect:
                self._instruments.reconnects.add(1, where)

    def session_lost(self, broker: tuple[str, int], error: ClientError) -> None:
        """Count the session with ``broker`` lost with ``error`` on
        ``stomp_proto.client.lost_sessions``, with its ``error.type``."""
        if self._recording()[1]:
            where = _broker_attributes(broker)
            where["error.type"] = _error_type(error)
            self._instruments.lost.add(1, where)

    def context(self, message: Message) -> Context:
        """The trace context ``message`` carries (empty if none): the parent for the
        application's own spans about it."""
        # The first of repeated headers counts, as everywhere in STOMP.
        return self._propagator.extract({name: value for name, value in reversed(message.headers)})

    # -- the parts ---------------------------------------------------------------

    def _carry(self, send: Send) -> Send:
        """``send`` with the current trace context in its headers (unless it has one)."""
        carrier: dict[str, str] = {}
        self._propagator.inject(carrier)
        given = {name for name, _ in send.headers}
        added = tuple((name, value) for name, value in carrier.items() if name not in given)
        return dataclasses.replace(send, headers=send.headers + added) if added else send

    def _consumer_context(self, message: Message) -> tuple[Context | None, list[Link] | None]:
        """The parent of a span about ``message`` (None: the current span's context),
        and its links: to the context the message carries."""
        carried = self.context(message)
        sent_by = trace.get_current_span(carried).get_span_context()
        links = [Link(sent_by)] if sent_by.is_valid else None
        ambient = trace.get_current_span().get_span_context().is_valid
        return (None if ambient else carried), links

    @contextmanager
    def _operation(
        self,
        name: str,
        kind: SpanKind,
        attributes: _Attributes,
        *,
        spans: bool,
        measured: bool,
        parent: Context | None = None,
        links: list[Link] | None = None,
        counter: Counter | None = None,
    ) -> Iterator[None]:
        """One operation of the application's, as a span current for the block and as
        measurements: its duration, and one on ``counter``."""
        began = time.time_ns()
        span = (
            self._tracer.start_span(
                name, parent, kind, attributes=attributes, links=links, start_time=began
            )
            if spans
            else trace.INVALID_SPAN
        )
        error: str | None = None
        try:
            if spans:
                with trace.use_span(span, end_on_exit=False):  # records what is raised
                    yield
            else:
                yield  # the ambient span stays current: its context is carried
        except BaseException as exc:
            error = _error_type(exc)
            span.set_attribute("error.type", error)
            raise
        finally:
            ended = time.time_ns()
            span.end(end_time=ended)
            if measured:
                measurement = _measurement(attributes, error)
                self._instruments.duration.record((ended - began) / 1e9, measurement)
                if counter is not None:
                    counter.add(1, measurement)


def _attributes(
    operation: str,
    kind: str,
    destination: str,
    broker: tuple[str, int],
    version: Version | None,
) -> _Attributes:
    attributes: _Attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": kind,
        "messaging.destination.name": destination,
        "server.address": broker[0],
        "server.port": broker[1],
        "network.protocol.name": "stomp",
    }
    if version is not None:
        attributes["network.protocol.version"] = version
    return attributes


def _broker_attributes(broker: tuple[str, int]) -> _Attributes:
    return {"messaging.system": SYSTEM, "server.address": broker[0], "server.port": broker[1]}


def _message_attributes(
    operation: str,
    kind: str,
    message: Message,
    broker: tuple[str, int],
    version: Version | None,
) -> _Attributes:
    attributes = _attributes(operation, kind, message.destination, broker, version)
    attributes["messaging.message.id"] = message.message_id
    attributes["messaging.message.body.size"] = len(message.body)
    if message.subscription is not None:
        attributes["messaging.destination.subscription.name"] = message.subscription
    return attributes


def _measurement(attributes: _Attributes, error: str | None) -> _Attributes:
    """The attributes of a metric measurement: those of few values, and ``error.type``."""
    measurement = {key: value for key, value in attributes.items() if key in _METRIC_ATTRIBUTES}
    if error is not None:
        measurement["error.type"] = error
    return measurement


def _error_type(exc: BaseException) -> str:
    """``error.type`` for ``exc``: its class's full name (``stomp_proto.ConnectionLost``)."""
    kind = type(exc)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
