"""Look at the built documentation in headless Chromium, as a reader would.

    python scripts/docs_screens.py [--html docs/_build/html] [--out docs/_build/screenshots]

Serves the built site on 127.0.0.1 and opens every page at 1280 px (a laptop) and
390 px (a phone) wide.  For each:

- fails if the page scrolls sideways (the document is wider than the window), naming
  the widest elements;
- fails if a chart is shown at less than 60% of its own width without a link to
  the full-size image (its text would be unreadable on a phone);
- for the index, the install and first-programs pages, a guide (clients), the
  reference (api) and the benchmarks page,
  saves a full-page screenshot, ``<page>-<width>.png``, to look at.

Chromium is driven over its DevTools protocol by ``scripts/devtools.py`` (with the
``websockets`` package, which the dev extra has); ``scripts/ensure-chromium.sh``
installs Debian's chromium.
``scripts/test.sh`` runs this after building the site.  Exit status 1 on a failure,
2 when Chromium cannot be started.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from contextlib import ExitStack
from pathlib import Path

from devtools import DevTools, chromium_page, serve

ROOT = Path(__file__).resolve().parent.parent
#: The pages photographed; every page of the site is checked for the faults below.
PAGES = ("index", "install", "examples", "clients", "api", "benchmarks")
WIDTHS = (1280, 390)
HEIGHT = 900
#: The longest screenshot kept, in CSS pixels: enough to see the page's layout.
MAX_SHOT_HEIGHT = 8000

# Measured in the page: how far it scrolls sideways, what sticks out, and each chart.
PROBE = """
(() => {
  const root = document.documentElement;
  const width = root.clientWidth;
  const wide = [];
  for (const el of document.body.querySelectorAll('*')) {
    const box = el.getBoundingClientRect();
    if (box.width === 0) continue;
    let clipped = false;
    for (let up = el.parentElement; up && up !== document.body; up = up.parentElement) {
      const style = getComputedStyle(up);
      if (style.overflowX !== 'visible') { clipped = true; break; }
    }
    if (!clipped && box.right > width + 1) {
      wide.push(`${el.tagName.toLowerCase()}.${el.className || ''} right=${Math.round(box.right)}`);
    }
  }
  const charts = [...document.querySelectorAll('img')]
    .filter(img => img.src.endsWith('.svg') && img.naturalWidth > 0)
    .map(img => ({src: img.src.split('/').pop(), shown: img.getBoundingClientRect().width,
                  natural: img.naturalWidth, linked: img.closest('a') !== null}));
  return JSON.stringify({scroll: root.scrollWidth - width, width, wide: wide.slice(0, 8),
                         charts, height: root.scrollHeight});
})()
"""


def look(tools: DevTools, url: str, width: int, shot: Path | None) -> list[str]:
    """Open ``url`` at ``width``; save a screenshot to ``shot``; return what is wrong."""
    tools.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=HEIGHT,
        deviceScaleFactor=1,
        mobile=width < 600,
    )
    tools.open(url)
    measured = json.loads(tools.evaluate(PROBE))
    problems = []
    if measured["scroll"] > 0:
        problems.append(
            f"scrolls sideways by {measured['scroll']} px; widest: {', '.join(measured['wide'])}"
        )
    for chart in measured["charts"]:
        if chart["shown"] < 0.6 * chart["natural"] and not chart["linked"]:
            problems.append(
                f"chart {chart['src']} shown at {chart['shown']:.0f} of {chart['natural']} px"
                " with no link to the full size"
            )
    if shot is None:
        return problems
    tools.screenshot(shot, width, min(measured["height"], MAX_SHOT_HEIGHT))
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "docs" / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "_build" / "screenshots")
    args = parser.parse_args(argv)
    missing = [page for page in PAGES if not (args.html / f"{page}.html").exists()]
    if missing:
        print(f"error: build the site first; {args.html} lacks {missing}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    server, base = serve(args.html)
    failures = 0
    with ExitStack() as stack:
        stack.callback(server.shutdown)
        try:
            tools = stack.enter_context(chromium_page())
        except (OSError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        pages = sorted(p.stem for p in args.html.glob("*.html"))
        for page, width in itertools.product(pages, WIDTHS):
            shot = args.out / f"{page}-{width}.png" if page in PAGES else None
            problems = look(tools, f"{base}/{page}.html", width, shot)
            status = "ok" if not problems else "FAILED"
            print(f"{page:<22} {width:>5} px  {status:<6} {shot or ''}")
            for problem in problems:
                print(f"    {problem}")
            failures += bool(problems)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
