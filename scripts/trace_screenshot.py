"""Draw one trace - producer, broker hop, consumer - for docs/tracing.rst.

    python scripts/trace_screenshot.py [--out docs/_static/one-trace.svg]

Runs the program of the tracing page against an embedded broker, with the
OpenTelemetry SDK's in-memory exporter and metric reader in place of the console
ones, prints the spans and the metrics as the page shows them, and draws the
spans as a waterfall (an SVG, as a trace viewer would show them).  Needs the otel
extra and the SDK.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from xml.sax.saxutils import escape

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import stomp_proto.asyncio
from stomp_proto.broker import Broker
from stomp_proto.tracing import Tracing

ROOT = Path(__file__).resolve().parent.parent
COLORS = {"INTERNAL": "#6b7280", "PRODUCER": "#2563eb", "CLIENT": "#16a34a"}


async def one_trace() -> tuple[list[ReadableSpan], InMemoryMetricReader]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    tracing = Tracing(tracer_provider=provider, meter_provider=MeterProvider([reader]))
    tracer = provider.get_tracer("shop")
    async with (
        Broker("127.0.0.1", 0) as broker,
        stomp_proto.asyncio.connect("127.0.0.1", broker.port, tracing=tracing) as client,
        client.subscribe("/queue/orders", ack="client-individual") as orders,
    ):
        with tracer.start_as_current_span("checkout"):
            await client.send("/queue/orders", b"order 1", receipt=True)
        message = await orders.get()
        assert message is not None
        with tracer.start_as_current_span("ship", context=tracing.context(message)):
            await client.ack(message)
    spans = sorted(exporter.get_finished_spans(), key=lambda span: span.start_time or 0)
    return spans, reader


def measurements(reader: InMemoryMetricReader) -> str:
    """One line per data point: the metric, its operation and destination (or its
    broker), the value."""
    lines = []
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    if "messaging.operation.name" in attributes:
                        operation = attributes["messaging.operation.name"]
                        what = f"{operation} {attributes['messaging.destination.name']}"
                    else:  # a session's
                        what = f"{attributes['server.address']}:{attributes['server.port']}"
                    if isinstance(point, HistogramDataPoint):
                        value = f"count {point.count}, sum {point.sum * 1e3:.2f} ms"
                    else:
                        value = f"{point.value}"  # type: ignore[union-attr]
                    lines.append(f"{metric.name:38} {what:22} {value}")
    return "\n".join(lines)


def table(spans: list[ReadableSpan]) -> str:
    start = spans[0].start_time or 0
    names = {span.context.span_id: span.name for span in spans}
    lines = [f"{'span':24} {'kind':9} {'parent':20} {'start':9} duration"]
    for span in spans:
        parent = names.get(span.parent.span_id, "?") if span.parent else "-"
        begin = ((span.start_time or 0) - start) / 1e6
        length = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        lines.append(
            f"{span.name:24} {span.kind.name:9} {parent:20} +{begin:.2f} ms  {length:.2f} ms"
        )
    traces = {span.context.trace_id for span in spans}
    lines.append(f"{len(spans)} spans in {len(traces)} trace(s)")
    return "\n".join(lines)


def waterfall(spans: list[ReadableSpan]) -> str:
    start = spans[0].start_time or 0
    end = max(span.end_time or 0 for span in spans)
    total_ms = max((end - start) / 1e6, 0.001)
    width, left, right, row = 760, 230, 150, 34
    scale = (width - left - right) / total_ms
    height = 40 + row * len(spans) + 40
    depth: dict[int, int] = {}
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        '<text x="12" y="22" font-weight="bold">One trace: producer, broker, consumer</text>',
    ]
    step = next(s for s in (0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100) if total_ms / s <= 6)
    tick = 0.0
    while tick <= total_ms + 1e-9:
        x = left + tick * scale
        parts.append(
            f'<line x1="{x:.1f}" y1="32" x2="{x:.1f}" y2="{height - 30}" stroke="#e5e7eb"/>'
        )
        parts.append(
            f'<text x="{x:.1f}" y="{height - 12}" text-anchor="middle" fill="#6b7280">'
            f"{tick:g} ms</text>"
        )
        tick += step
    for index, span in enumerate(spans):
        parent = span.parent.span_id if span.parent else None
        level = depth[parent] + 1 if parent in depth else 0
        depth[span.context.span_id] = level
        y = 40 + index * row
        begin = ((span.start_time or 0) - start) / 1e6 * scale
        length = max(3.0, ((span.end_time or 0) - (span.start_time or 0)) / 1e6 * scale)
        kind = span.kind.name
        parts.append(f'<text x="{12 + 14 * level}" y="{y + 18}">{escape(span.name)}</text>')
        parts.append(
            f'<rect x="{left + begin:.1f}" y="{y + 4}" width="{length:.1f}" height="20" rx="3" '
            f'fill="{COLORS.get(kind, "#6b7280")}"/>'
        )
        millis = ((span.end_time or 0) - (span.start_time or 0)) / 1e6
        parts.append(
            f'<text x="{left + begin + length + 6:.1f}" y="{y + 18}" fill="#374151">'
            f"{kind} {millis:.2f} ms</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_static" / "one-trace.svg")
    args = parser.parse_args()
    spans, reader = asyncio.run(one_trace())
    print(table(spans))
    print()
    print(measurements(reader))
    args.out.write_text(waterfall(spans), encoding="utf-8")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
