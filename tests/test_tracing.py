"""Trace context through the broker: ``stomp_proto.tracing`` (the ``otel`` extra).

A producer's ``send`` span and the consumer's ``process`` span of the same
message share one trace, through the embedded broker and through RabbitMQ;
the spans follow OpenTelemetry's messaging semantic conventions.  Without the
extra nothing of OpenTelemetry is imported.
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
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind

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
    [process] = [s for s in spans if s.kind is SpanKind.CONSUMER]
    assert send.name == f"send {queue}"
    assert process.name == f"process {queue}"
    # One trace: producer -> (broker) -> consumer.
    assert process.context.trace_id == send.context.trace_id
    assert process.parent is not None and process.parent.span_id == send.context.span_id
    assert [link.context.span_id for link in process.links] == [send.context.span_id]
    assert headers["traceparent"].split("-")[2] == f"{send.context.span_id:016x}"
    if h.adapter != "threads":  # (the harness runs blocking calls in fresh threads)
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
    for span, operation in ((send, "send"), (process, "process")):
        attributes: dict[str, Any] = dict(span.attributes or {})
        assert {k: attributes.get(k) for k in common} == common
        assert attributes["messaging.operation.name"] == operation
        assert attributes["messaging.operation.type"] == operation
        assert attributes["messaging.message.body.size"] == len(b"order 1")
        assert attributes["network.protocol.version"] in ("1.0", "1.1", "1.2")
    process_attributes = dict(process.attributes or {})
    assert process_attributes["messaging.message.id"] == message.message_id
    assert process_attributes["messaging.destination.subscription.name"] == message.subscription


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
