"""OpenTelemetry trace context in STOMP messages (the ``otel`` extra).

``connect(..., tracing=Tracing())`` makes a client

* start a ``PRODUCER`` span ``send <destination>`` for each ``send()``, for
  as long as the call lasts (until the broker's receipt when one is asked
  for), and put its W3C trace context (``traceparent``, ``tracestate``) into
  the SEND's headers;
* start a ``CONSUMER`` span ``process <destination>`` for each MESSAGE the
  application takes from a subscription, as a child of the context the
  message carries (and linked to it), so that producer and consumer share
  one trace across the broker.

Spans follow OpenTelemetry's messaging semantic conventions: the operation
names and types ``send`` and ``process``, ``messaging.system`` ``"stomp"``,
the destination, message id, subscription and body size, and the broker as
``server.address``/``server.port``.  :meth:`Tracing.context` gives the
context a message carries, to parent the application's own spans on it.

Without this module imported, no client imports OpenTelemetry, and the
hook is a single ``is None`` test per send and per message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager

try:
    from opentelemetry import trace
    from opentelemetry.context import Context
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import Link, SpanKind
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
except ImportError as exc:  # pragma: no cover - the extra is missing
    raise ImportError(
        "stomp_proto.tracing needs OpenTelemetry: pip install 'stomp_proto[otel]'"
    ) from exc

from . import __version__
from ._events import Message, Send
from ._frame import Version

__all__ = ["SYSTEM", "Tracing"]

#: The ``messaging.system`` of every span.
SYSTEM = "stomp"


class Tracing:
    """The tracing hook; pass it to ``connect(..., tracing=Tracing())``.

    ``tracer_provider``: where spans go (default: the global one).
    ``propagator``: how the context is written into headers and read back
    (default: W3C Trace Context, ``traceparent`` and ``tracestate``).
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self._tracer = trace.get_tracer("stomp_proto", __version__, tracer_provider=tracer_provider)
        self._propagator = propagator or TraceContextTextMapPropagator()

    @contextmanager
    def sending(
        self, send: Send, broker: tuple[str, int], version: Version | None
    ) -> Iterator[Send]:
        """The ``send`` span, current for the block; yields ``send`` with its context.

        ``broker`` (``(host, port)``) and ``version`` (the negotiated STOMP
        version) become the span's ``server.*`` and ``network.protocol.*``
        attributes.  A trace context the application put in the headers itself
        is kept.
        """
        attributes = _attributes("send", send.destination, broker, version)
        attributes["messaging.message.body.size"] = len(send.body)
        with self._tracer.start_as_current_span(
            f"send {send.destination}", kind=SpanKind.PRODUCER, attributes=attributes
        ):
            carrier: dict[str, str] = {}
            self._propagator.inject(carrier)
            given = {name for name, _ in send.headers}
            added = tuple((name, value) for name, value in carrier.items() if name not in given)
            yield dataclasses.replace(send, headers=send.headers + added) if added else send

    def received(self, message: Message, broker: tuple[str, int], version: Version | None) -> None:
        """Record that the application took ``message``: a ``process`` span, a child of
        the context it carries; ``broker`` and ``version`` as for :meth:`sending`."""
        parent = self.context(message)
        sent_by = trace.get_current_span(parent).get_span_context()
        attributes = _attributes("process", message.destination, broker, version)
        attributes["messaging.message.id"] = message.message_id
        attributes["messaging.message.body.size"] = len(message.body)
        if message.subscription is not None:
            attributes["messaging.destination.subscription.name"] = message.subscription
        span = self._tracer.start_span(
            f"process {message.destination}",
            context=parent,
            kind=SpanKind.CONSUMER,
            attributes=attributes,
            links=[Link(sent_by)] if sent_by.is_valid else None,
        )
        span.end()

    def context(self, message: Message) -> Context:
        """The trace context ``message`` carries (empty if none): the parent for the
        application's own spans about it."""
        # The first of repeated headers counts, as everywhere in STOMP.
        return self._propagator.extract({name: value for name, value in reversed(message.headers)})


def _attributes(
    operation: str, destination: str, broker: tuple[str, int], version: Version | None
) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {
        "messaging.system": SYSTEM,
        "messaging.operation.name": operation,
        "messaging.operation.type": operation,
        "messaging.destination.name": destination,
        "server.address": broker[0],
        "server.port": broker[1],
        "network.protocol.name": "stomp",
    }
    if version is not None:
        attributes["network.protocol.version"] = version
    return attributes
