"""Spans, metrics and trace context through the broker: ``stomp_proto.tracing`` (the
``otel`` extra), on every adapter.

A producer's ``send`` span and the consumer's ``receive`` span of the same message
share one trace, through the embedded broker and through RabbitMQ; an ambient span
of the consumer's is the parent of its ``receive``, ``ack`` and ``nack`` spans, the
message's context a link; a failed send says why in ``error.type``; the metrics are
the messaging conventions' counters and durations.  Spans and metrics follow
OpenTelemetry's messaging semantic conventions (``receive`` and ``settle`` spans
are ``CLIENT`` spans, ``send`` spans ``PRODUCER`` ones).  Without the extra nothing
of OpenTelemetry is imported.
"""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra (and its SDK) is not installed")

from adapter_harness import HOST, WAIT, Harness, on_every_adapter
from brokers import endpoint
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind, StatusCode

from stomp_proto import ConnectionLost
from stomp_proto.tracing import Tracing

_queues = itertools.count()
TRACEPARENT = re.compile(r"00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


def test_without_the_extra_nothing_imports_opentelemetry() -> None:
    code = textwrap.dedent(
        """
        import sys
        import stomp_proto, stomp_proto.asyncio, stomp_proto.threads, stomp_proto.trio
        import stomp_proto.broker
        from stomp_proto._client._options import ConnectOptions
        ConnectOptions.build("failover:(stomp://h1,stomp://h2)", None, {})
        loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry"))
        assert not loaded, loaded
        print("clean")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "clean"


async def _one_trace(h: Harness, broker: str) -> None:
    where = await endpoint(h, broker)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(tracer_provider=provider)
    tracer = provider.get_tracer("the application")
    queue = f"/queue/stomp-proto-tracing-{h.adapter}-{next(_queues)}"
    options = where.options(tracing=tracing)
    async with (
        h.connect(where.port, **options) as consumer,
        consumer.subscribe(queue) as messages,
        h.connect(where.port, **options) as producer,
    ):
        with tracer.start_as_current_span("checkout"):
            await producer.send(queue, b"order 1", receipt=True, headers={"x-order": "1"})
        message = await messages.get(WAIT)
    assert message is not None and message.body == b"order 1"
    headers = dict(message.headers)
    assert TRACEPARENT.fullmatch(headers["traceparent"]), headers
    assert headers["x-order"] == "1"

    spans = exporter.get_finished_spans()
    [send] = [s for s in spans if s.kind is SpanKind.PRODUCER]
    [receive] = [s for s in spans if s.kind is SpanKind.CLIENT]
    assert send.name == f"send {queue}"
    assert receive.name == f"receive {queue}"
    # One trace: producer -> (broker) -> consumer, which had no span of its own.
    assert receive.context.trace_id == send.context.trace_id
    assert receive.parent is not None and receive.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in receive.links] == [send.context.span_id]
    assert headers["traceparent"].split("-")[2] == f"{send.context.span_id:016x}"
    checkout = next(s for s in spans if s.name == "checkout")
    assert send.parent is not None and send.parent.span_id == checkout.context.span_id
    assert send.context.trace_id == checkout.context.trace_id

    # The messaging semantic conventions.
    common = {
        "messaging.system": "stomp",
        "messaging.destination.name": queue,
        "server.address": HOST,
        "server.port": where.port,
        "network.protocol.name": "stomp",
    }
    for span, operation in ((send, "send"), (receive, "receive")):
        attributes: dict[str, Any] = dict(span.attributes or {})
        assert {k: attributes.get(k) for k in common} == common
        assert attributes["messaging.operation.name"] == operation
        assert attributes["messaging.operation.type"] == operation
        assert attributes["messaging.message.body.size"] == len(b"order 1")
        assert attributes["network.protocol.version"] in ("1.0", "1.1", "1.2")
    receive_attributes = dict(receive.attributes or {})
    assert receive_attributes["messaging.message.id"] == message.message_id
    assert receive_attributes["messaging.destination.subscription.name"] == message.subscription


@on_every_adapter(versions=(None,))
async def test_one_trace_through_the_embedded_broker(h: Harness) -> None:
    await _one_trace(h, "embedded")


@on_every_adapter(versions=(None,))
async def test_one_trace_through_rabbitmq(h: Harness) -> None:
    await _one_trace(h, "rabbitmq")


@on_every_adapter(versions=(None,))
async def test_a_trace_context_the_application_set_is_kept(h: Harness) -> None:
    where = await endpoint(h, "embedded")
    provider = TracerProvider()
    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    queue = "/queue/own-context"
    options = where.options(tracing=Tracing(tracer_provider=provider))
    async with h.connect(where.port, **options) as client, client.subscribe(queue) as messages:
        await client.send(queue, b"x", headers={"traceparent": mine}, receipt=True)
        message = await messages.get(WAIT)
    assert [v for n, v in message.headers if n == "traceparent"] == [mine]


def _recorded() -> tuple[Tracing, InMemorySpanExporter, InMemoryMetricReader, TracerProvider]:
    """A Tracing whose spans and metrics go to memory, and the tracer provider."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    tracing = Tracing(tracer_provider=provider, meter_provider=MeterProvider([reader]))
    return tracing, exporter, reader, provider


def _named(spans: Any, name: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name == name]


@on_every_adapter(versions=(None,))
async def test_an_ambient_span_parents_the_consumer_spans_the_message_is_their_link(
    h: Harness,
) -> None:
    where = await endpoint(h, "embedded")
    tracing, exporter, _, provider = _recorded()
    tracer = provider.get_tracer("the application")
    queue = f"/queue/stomp-proto-ambient-{h.adapter}"
    async with (
        h.connect(where.port, **where.options(tracing=tracing)) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        await client.send(queue, b"first", receipt=True)
        await client.send(queue, b"second", receipt=True)
        with tracer.start_as_current_span("handle"):
            first = await messages.get(WAIT)
            assert first is not None
            await client.ack(first)
            second = await messages.get(WAIT)
            assert second is not None
            # NACK (STOMP 1.1 and later; 1.2 was negotiated), with a receipt.
            await client.nack(second, receipt=True)
    spans = exporter.get_finished_spans()
    [handle] = _named(spans, "handle")
    sends = _named(spans, f"send {queue}")
    receives = _named(spans, f"receive {queue}")
    [ack] = _named(spans, f"ack {queue}")
    [nack] = _named(spans, f"nack {queue}")
    assert len(sends) == 2 and len(receives) == 2
    for span, send in ((receives[0], sends[0]), (receives[1], sends[1]), (ack, sends[0])):
        assert span.kind is SpanKind.CLIENT
        assert span.parent is not None and span.parent.span_id == handle.context.span_id
        assert span.context.trace_id == handle.context.trace_id
        assert [link.context.span_id for link in span.links] == [send.context.span_id]
    assert nack.kind is SpanKind.CLIENT
    assert nack.parent is not None and nack.parent.span_id == handle.context.span_id
    assert [link.context.span_id for link in nack.links] == [sends[1].context.span_id]
    for span, name, message in ((ack, "ack", first), (nack, "nack", second)):
        attributes = dict(span.attributes or {})
        assert attributes["messaging.operation.name"] == name
        assert attributes["messaging.operation.type"] == "settle"
        assert attributes["messaging.message.id"] == message.message_id
        assert attributes["messaging.destination.name"] == queue
        assert (attributes["server.address"], attributes["server.port"]) == (HOST, where.port)
        assert span.status.status_code is StatusCode.UNSET
    # A receive span lasts from the call to the message: it holds the wait, the
    # settlement spans the write (and for the NACK, its receipt).
    for span in (*receives, ack, nack):
        assert span.start_time is not None and span.end_time is not None
        assert span.start_time <= span.end_time


@on_every_adapter(versions=(None,))
async def test_a_failed_send_says_why_in_its_span_and_its_measurements(h: Harness) -> None:
    where = await endpoint(h, "embedded")
    tracing, exporter, reader, _ = _recorded()
    queue = "/queue/stomp-proto-failed-send"
    async with h.connect(where.port, **where.options(tracing=tracing)) as client:
        await client.close()
        with pytest.raises(ConnectionLost):
            await client.send(queue, b"too late")
    [send] = exporter.get_finished_spans()
    assert send.name == f"send {queue}" and send.kind is SpanKind.PRODUCER
    assert send.status.status_code is StatusCode.ERROR
    assert dict(send.attributes or {})["error.type"] == "stomp_proto.ConnectionLost"
    [(attributes, count)] = _points(reader)["messaging.client.sent.messages"]
    assert count == 1 and attributes["error.type"] == "stomp_proto.ConnectionLost"


def _points(reader: InMemoryMetricReader) -> dict[str, list[tuple[dict[str, Any], Any]]]:
    """Each metric's data points: (attributes, the sum of a counter or the data point
    of a histogram)."""
    found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "stomp_proto"
            for metric in scope.metrics:
                found[metric.name] = [
                    (dict(point.attributes or {}), getattr(point, "value", point))
                    for point in metric.data.data_points
                ]
    return found


@on_every_adapter(versions=(None,))
async def test_metrics_count_and_time_sends_receives_and_settlements(h: Harness) -> None:
    where = await endpoint(h, "embedded")
    tracing, _, reader, _ = _recorded()
    queue = f"/queue/stomp-proto-metrics-{h.adapter}"
    async with (
        h.connect(where.port, **where.options(tracing=tracing)) as client,
        client.subscribe(queue, ack="client-individual") as messages,
    ):
        for number in range(3):
            await client.send(queue, f"order {number}", receipt=True)
        taken = [await messages.get(WAIT) for _ in range(3)]
        for message in taken:
            assert message is not None
            await client.ack(message, receipt=True)
    points = _points(reader)
    common = {
        "messaging.system": "stomp",
        "messaging.destination.name": queue,
        "server.address": HOST,
        "server.port": where.port,
    }
    [(sent, sent_count)] = points["messaging.client.sent.messages"]
    send = {"messaging.operation.name": "send", "messaging.operation.type": "send"}
    assert sent == {**common, **send}
    assert sent_count == 3
    [(consumed, consumed_count)] = points["messaging.client.consumed.messages"]
    assert consumed_count == 3
    assert consumed == {
        **common,
        "messaging.operation.name": "receive",
        "messaging.operation.type": "receive",
        "messaging.destination.subscription.name": messages.id,
    }
    durations = {
        attributes["messaging.operation.name"]: point
        for attributes, point in points["messaging.client.operation.duration"]
    }
    assert set(durations) == {"send", "receive", "ack"}
    for point in durations.values():
        assert point.count == 3 and point.sum > 0
        # The bucket boundaries the conventions give, in seconds.
        assert list(point.explicit_bounds)[:3] == [0.005, 0.01, 0.025]
    for series in points.values():
        assert all("error.type" not in attributes for attributes, _ in series)


def test_with_no_sdk_configured_nothing_is_recorded_and_an_ambient_context_still_travels() -> None:
    code = textwrap.dedent(
        """
        from opentelemetry import trace
        from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags
        from stomp_proto import Message, Send
        from stomp_proto.tracing import Tracing

        tracing = Tracing()  # the global providers: none set
        send = Send("/queue/a", b"x")
        with tracing.sending(send, ("h", 1), "1.2") as traced:
            assert traced is send, traced
        message = Message("/queue/a", "m-1", "0", b"x")
        tracing.received(message, ("h", 1), "1.2", 0)
        with tracing.settling(message, False, ("h", 1), "1.2"):
            pass
        # A context from elsewhere (an incoming request, say) is carried on.
        ambient = SpanContext(0xA, 0xB, is_remote=True, trace_flags=TraceFlags(1))
        with trace.use_span(NonRecordingSpan(ambient)):
            with tracing.sending(send, ("h", 1), "1.2") as traced:
                headers = dict(traced.headers)
        assert headers["traceparent"] == f"00-{0xA:032x}-{0xB:016x}-01", headers
        print("quiet")
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "quiet"
