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

Chromium is driven over its DevTools protocol with the ``websockets`` package (the
dev extra has it); ``scripts/ensure-chromium.sh`` installs Debian's chromium.
``scripts/test.sh`` runs this after building the site.  Exit status 1 on a failure,
2 when Chromium cannot be started.
"""

from __future__ import annotations

import argparse
import base64
import functools
import http.server
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

ROOT = Path(__file__).resolve().parent.parent
#: The pages photographed; every page of the site is checked for the faults below.
PAGES = ("index", "install", "examples", "clients", "api", "benchmarks")
WIDTHS = (1280, 390)
HEIGHT = 900
#: The longest screenshot kept, in CSS pixels: enough to see the page's layout.
MAX_SHOT_HEIGHT = 8000
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
)

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


class DevTools:
    """One page target of a Chromium started here, spoken to over its DevTools socket."""

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        self._socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self._socket.recv(timeout=60))
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def wait_for(self, event: str, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = json.loads(self._socket.recv(timeout=deadline - time.monotonic()))
            if message.get("method") == event:
                return
        raise TimeoutError(event)


def start_chromium(profile: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Chromium, headless, and the DevTools address of its first page."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise FileNotFoundError("chromium is not installed (bash scripts/ensure-chromium.sh)")
    process = subprocess.Popen(
        [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    port_file = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while not port_file.exists() or not port_file.read_text().strip():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise RuntimeError("chromium did not start its DevTools server")
        time.sleep(0.1)
    port = port_file.read_text().split()[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
        targets = json.load(answer)
    page = next(t for t in targets if t["type"] == "page")
    return process, page["webSocketDebuggerUrl"]


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(html: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(html))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def look(tools: DevTools, url: str, width: int, shot: Path | None) -> list[str]:
    """Open ``url`` at ``width``; save a screenshot to ``shot``; return what is wrong."""
    tools.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=HEIGHT,
        deviceScaleFactor=1,
        mobile=width < 600,
    )
    tools.call("Page.navigate", url=url)
    tools.wait_for("Page.loadEventFired")
    measured = json.loads(tools.call("Runtime.evaluate", expression=PROBE)["result"]["value"])
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
    height = min(measured["height"], MAX_SHOT_HEIGHT)
    image = tools.call(
        "Page.captureScreenshot",
        format="png",
        captureBeyondViewport=True,
        clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
    )
    shot.write_bytes(base64.b64decode(image["data"]))
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
    with tempfile.TemporaryDirectory(prefix="stomp-proto-chromium-") as profile:
        try:
            process, address = start_chromium(Path(profile))
        except (OSError, RuntimeError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            server.shutdown()
            return 2
        try:
            with connect(address, max_size=64 * 1024 * 1024) as socket:
                tools = DevTools(socket)
                tools.call("Page.enable")
                pages = sorted(p.stem for p in args.html.glob("*.html"))
                for page, width in itertools.product(pages, WIDTHS):
                    shot = args.out / f"{page}-{width}.png" if page in PAGES else None
                    problems = look(tools, f"{base}/{page}.html", width, shot)
                    status = "ok" if not problems else "FAILED"
                    print(f"{page:<22} {width:>5} px  {status:<6} {shot or ''}")
                    for problem in problems:
                        print(f"    {problem}")
                    failures += bool(problems)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            server.shutdown()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
