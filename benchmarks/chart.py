"""A bar chart (SVG, standard library only) of the ratios in a ``codec.py --json`` result.

    python benchmarks/chart.py results.json chart.svg

``codec.py --svg PATH`` calls :func:`render` on the run it has just made.  Two panels:
stomp_proto's speed over the fastest peer per workload and read size (encode: over the
fastest escaping peer), with the targets marked; and the 1 MiB rows' time over the scan
floor's.  One bar per build (pure Python, and the accelerated or mypyc build when it
was timed).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

WIDTH = 820
LABEL_W = 200
PLOT_W = 540
BAR_H = 11
ROW_GAP = 9
PANEL_GAP = 46
COLOURS = {
    "stomp_proto": "#3b6ea8",
    "stomp_proto[accelerated]": "#e08a2c",
    "stomp_proto[mypyc]": "#e08a2c",
}
BUILD_NAMES = {
    "stomp_proto": "pure Python",
    "stomp_proto[accelerated]": "accelerated build",
    "stomp_proto[mypyc]": "mypyc build",
}
TARGET_COLOUR = "#c0392b"


def _size(n: int | None) -> str:
    if n is None:
        return ""
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"


def _panels(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of both panels: label, target, and one value per build."""
    speed: dict[tuple[str, str, int | None], dict[str, Any]] = {}
    floor: dict[tuple[str, str, int | None], dict[str, Any]] = {}
    for entry in results["ratios"]:
        key = (entry["group"], entry["workload"], entry["read_size"])
        build = entry["build"]
        value = entry.get(
            "vs_fastest_escaping_peer" if entry["group"] == "encode" else "vs_fastest_peer"
        )
        if value is not None:
            row = speed.setdefault(key, {"values": {}})
            row["values"][build] = value
            if entry["group"] == "encode":
                row["label"] = "encode SEND (escaping peers)"
                row["target"] = 3.0
            else:
                row["label"] = f"decode {entry['workload']}, {_size(entry['read_size'])} reads"
                row["target"] = 5.0 if entry["workload"] == "small" else None
        if entry.get("time_vs_floor") is not None:
            row = floor.setdefault(key, {"values": {}, "target": 1.5})
            row["values"][build] = entry["time_vs_floor"]
            row["label"] = f"decode {entry['workload']}, {_size(entry['read_size'])} reads"
    return [
        {
            "title": "Speed over the fastest peer (higher is better; x = times as fast)",
            "rows": list(speed.values()),
        },
        {
            "title": "1 MiB bodies: time over the scan floor's (lower is better)",
            "rows": list(floor.values()),
        },
    ]


def render(results: dict[str, Any]) -> str:
    """The SVG document for one benchmark result (as written by ``codec.py --json``)."""
    panels = [p for p in _panels(results) if p["rows"]]
    builds = [b for b in COLOURS if any(b in r["values"] for p in panels for r in p["rows"])]
    out: list[str] = []
    y = 54
    for panel in panels:
        rows = panel["rows"]
        top = max(
            [v for r in rows for v in r["values"].values()]
            + [r["target"] or 0 for r in rows]
            + [1.0]
        )
        scale = PLOT_W / (top * 1.12)
        out.append(f'<text x="8" y="{y}" class="title">{escape(panel["title"])}</text>')
        y += 14
        first = y
        for row in rows:
            height = BAR_H * len(builds)
            out.append(
                f'<text x="{LABEL_W - 8}" y="{y + height / 2 + 4:.1f}" '
                f'text-anchor="end">{escape(row["label"])}</text>'
            )
            for i, build in enumerate(builds):
                value = row["values"].get(build)
                if value is None:
                    continue
                bar_y = y + i * BAR_H
                out.append(
                    f'<rect x="{LABEL_W}" y="{bar_y}" width="{value * scale:.1f}" '
                    f'height="{BAR_H - 2}" fill="{COLOURS[build]}"/>'
                )
                out.append(
                    f'<text x="{LABEL_W + value * scale + 4:.1f}" y="{bar_y + BAR_H - 3}" '
                    f'class="value">{value:.2f}x</text>'
                )
            if row["target"]:
                tx = LABEL_W + row["target"] * scale
                out.append(
                    f'<line x1="{tx:.1f}" y1="{y - 2}" x2="{tx:.1f}" y2="{y + height}" '
                    f'stroke="{TARGET_COLOUR}" stroke-width="2" stroke-dasharray="3,2"/>'
                )
            y += height + ROW_GAP
        one = LABEL_W + scale
        out.append(
            f'<line x1="{one:.1f}" y1="{first - 4}" x2="{one:.1f}" y2="{y - ROW_GAP + 2}" '
            'stroke="#555" stroke-width="1"/>'
        )
        out.append(f'<text x="{one:.1f}" y="{y + 6}" text-anchor="middle" class="value">1x</text>')
        y += PANEL_GAP
    legend: list[str] = []
    x = 8
    for build in builds:
        legend.append(f'<rect x="{x}" y="22" width="12" height="10" fill="{COLOURS[build]}"/>')
        legend.append(f'<text x="{x + 16}" y="31">{BUILD_NAMES[build]}</text>')
        x += 130
    legend.append(
        f'<line x1="{x}" y1="27" x2="{x + 14}" y2="27" stroke="{TARGET_COLOUR}" '
        'stroke-width="2" stroke-dasharray="3,2"/>'
    )
    legend.append(f'<text x="{x + 18}" y="31">target</text>')
    meta = results.get("meta", {})
    caption = (
        f"stomp_proto codec benchmark, {meta.get('date', '')}, Python {meta.get('python', '')}"
    )
    height = y - PANEL_GAP + 24
    return "\n".join(
        [
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
            "<style>.title{font-weight:bold}.value{font-size:10px;fill:#333}</style>",
            f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
            f'<text x="8" y="14" class="value">{escape(caption)}</text>',
            *legend,
            *out,
            "</svg>",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    results = json.loads(Path(args[0]).read_text())
    Path(args[1]).write_text(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
