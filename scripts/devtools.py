"""Headless Chromium driven over its DevTools protocol, for the docs check and the browser tests.

    with chromium_page() as page:
        page.call("Page.navigate", url="http://127.0.0.1:8000/")
        page.evaluate("document.title")

The protocol is spoken with the ``websockets`` package (a dev and test
dependency) to the Debian ``chromium`` that ``scripts/ensure-chromium.sh``
installs: nothing is downloaded at run time.  Used by ``scripts/docs_screens.py``
and ``tests/test_browser_stompjs.py`` (which puts this directory on ``sys.path``).
"""

from __future__ import annotations

import base64
import functools
import http.server
import itertools
import json
import shutil
import subprocess
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

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
#: Seconds one DevTools command may take, unless told otherwise.
CALL_TIMEOUT = 60.0


class DevToolsError(RuntimeError):
    """A DevTools command failed, or an evaluated script threw."""


class DevTools:
    """One page target of a Chromium started here, spoken to over its DevTools socket.

    ``handlers`` maps an event name (``"Fetch.requestPaused"``) to a function
    called with its parameters whenever it arrives, while a command waits.
    """

    def __init__(self, socket: ClientConnection) -> None:
        self._socket = socket
        self._ids = itertools.count(1)
        self.handlers: dict[str, Callable[[dict[str, Any]], None]] = {}

    def _next(self, deadline: float) -> dict[str, Any]:
        message: dict[str, Any] = json.loads(
            self._socket.recv(timeout=max(0.0, deadline - time.monotonic()))
        )
        handler = self.handlers.get(message.get("method", ""))
        if handler is not None:
            handler(message.get("params", {}))
        return message

    def call(self, method: str, timeout: float = CALL_TIMEOUT, **params: Any) -> dict[str, Any]:
        number = next(self._ids)
        self._socket.send(json.dumps({"id": number, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = self._next(deadline)
            if message.get("id") == number:
                if "error" in message:
                    raise DevToolsError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def wait_for(self, event: str, timeout: float = CALL_TIMEOUT) -> dict[str, Any]:
        """The parameters of the next ``event``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self._next(deadline)
            if message.get("method") == event:
                params: dict[str, Any] = message.get("params", {})
                return params
        raise TimeoutError(event)

    def evaluate(self, expression: str, timeout: float = CALL_TIMEOUT) -> Any:
        """The value of a JavaScript expression in the page (a promise is awaited)."""
        result = self.call(
            "Runtime.evaluate",
            timeout=timeout,
            expression=expression,
            awaitPromise=True,
            returnByValue=True,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            thrown = details.get("exception", {}).get("description") or details.get("text")
            raise DevToolsError(f"{expression[:80]!r} threw: {thrown}")
        return result["result"].get("value")

    def screenshot(self, path: Path, width: int, height: int) -> None:
        """Save the top ``width`` x ``height`` CSS pixels of the page (beyond the window too)."""
        image = self.call(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        )
        path.write_bytes(base64.b64decode(image["data"]))

    def open(self, url: str, timeout: float = CALL_TIMEOUT) -> None:
        """Navigate to ``url`` and wait for its load event (``Page.enable`` first)."""
        self.call("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired", timeout)


def find_chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def start_chromium(profile: Path) -> tuple[subprocess.Popen[bytes], str]:
    """Chromium, headless, and the DevTools address of its first page."""
    chromium = find_chromium()
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
            process.wait()
            raise RuntimeError("chromium did not start its DevTools server")
        time.sleep(0.1)
    port = port_file.read_text().split()[0]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
        targets = json.load(answer)
    page = next(t for t in targets if t["type"] == "page")
    return process, page["webSocketDebuggerUrl"]


def stop_chromium(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextmanager
def chromium_page() -> Iterator[DevTools]:
    """A headless Chromium with a throw-away profile, and its first page (``Page`` enabled).

    FileNotFoundError or RuntimeError when Chromium is missing or does not start.
    """
    profile = Path(tempfile.mkdtemp(prefix="stomp-proto-chromium-"))
    try:
        process, address = start_chromium(profile)
        try:
            with connect(address, max_size=64 * 1024 * 1024) as socket:
                tools = DevTools(socket)
                tools.call("Page.enable")
                yield tools
        finally:
            stop_chromium(process)
    finally:
        remove_profile(profile)


def remove_profile(profile: Path, patience: float = 10.0) -> None:
    """Remove a Chromium profile directory once Chromium's helper processes are done with it.

    The browser process has exited when this runs, but its helpers can still write
    into the profile for a moment: CI once saw ``Directory not empty: 'Default'``.
    """
    deadline = time.monotonic() + patience
    while True:
        try:
            shutil.rmtree(profile)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.2)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def serve(directory: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    """A static file server for ``directory`` on 127.0.0.1 and a free port, and its URL.

    ``server.shutdown()`` stops it.
    """
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(directory))
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"
