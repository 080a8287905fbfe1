"""@stomp/stompjs (the browser world's STOMP client) under Node against the embedded broker.

``tests/js/roundtrip.mjs`` runs stompjs with the ``ws`` package as its
WebSocket, for each of STOMP 1.0, 1.1 and 1.2 (stompjs then offers only that
version's subprotocol): it consumes and acknowledges messages our asyncio
client left in a queue, publishes a text and a binary message with receipts,
and reports what it negotiated and received; our client then reads what it
published.

Needs Node.js and npm: ``npm ci`` runs in tests/js when its node_modules is
missing (versions pinned by package-lock.json).  Without node or npm the
tests skip - except under ``CI=true``, where they fail.
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from adapter_harness import HOST, WAIT, Harness, run
from brokers import in_ci

from stomp_proto import Version

pytestmark = pytest.mark.timeout(300)

JS_DIR = Path(__file__).parent / "js"
PATH = "/ws"
#: Seconds the Node script may take (it gives up itself after 20).
NODE_TIMEOUT = 60.0


@functools.cache
def _node() -> str | Path:
    """The node executable once tests/js is installed, or why it cannot be."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return (
            "node and npm are needed for the stompjs interop tests (Debian: apt-get install "
            "nodejs npm; scripts/test.sh installs them when run as root)"
        )
    if not (JS_DIR / "node_modules" / "@stomp" / "stompjs").is_dir():
        try:
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund"],
                cwd=JS_DIR,
                check=True,
                capture_output=True,
                timeout=300,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            output = getattr(exc, "stderr", b"") or b""
            return f"npm ci in {JS_DIR} failed: {exc} {output.decode(errors='replace')[-2000:]}"
    return Path(node)


def node() -> Path:
    found = _node()
    if isinstance(found, Path):
        return found
    if in_ci():
        pytest.fail(f"CI=true: {found}", pytrace=False)
    pytest.skip(found)


async def run_node(*args: str) -> dict[str, object]:
    process = await asyncio.create_subprocess_exec(
        str(node()),
        str(JS_DIR / "roundtrip.mjs"),
        *args,
        cwd=JS_DIR,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with asyncio.timeout(NODE_TIMEOUT):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode == 0, err.decode(errors="replace")
    result: dict[str, object] = json.loads(out.decode().strip().splitlines()[-1])
    return result


SENT = [b"plain text", "h\u00e9llo \u2603".encode(), b"\x00binary\xff\xfe"]


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_stompjs_roundtrip(version: Version) -> None:
    node()  # skip (or fail under CI) before starting anything
    inbox = f"/queue/to-stompjs-{uuid.uuid4()}"
    outbox = f"/queue/from-stompjs-{uuid.uuid4()}"

    async def scenario(h: Harness) -> None:
        broker = await h.start_broker(websocket=PATH)
        async with h.connect(broker.port, websocket=PATH) as client:
            for n, body in enumerate(SENT):
                await client.send(inbox, body, headers={"x-n": str(n)}, receipt=True)
        url = f"ws://{HOST}:{broker.port}{PATH}"
        result = await run_node(url, version, inbox, str(len(SENT)), outbox)
        # The CONNECTED version header (a 1.0 CONNECTED has none).
        assert result["version"] == (None if version == "1.0" else version)
        assert result["subprotocol"] == f"v{version.replace('.', '')}.stomp"
        received = result["received"]
        assert isinstance(received, list)
        assert [bytes.fromhex(m["hex"]) for m in received] == SENT
        assert [m["headers"]["x-n"] for m in received] == ["0", "1", "2"]
        # stompjs acknowledged everything: the queue is empty.
        assert await h.queued(broker, inbox) == 0
        async with (
            h.connect(broker.port, websocket=PATH) as client,
            client.subscribe(outbox) as messages,
        ):
            text = await messages.get(WAIT)
            binary = await messages.get(WAIT)
        assert text.body == "h\u00e9llo from stompjs".encode()
        assert ("x-origin", "stompjs") in text.headers
        assert binary.body == bytes([0, 1, 2, 255, 254, 0])
        assert binary.content_type == "application/octet-stream"

    run("asyncio", scenario, timeout=NODE_TIMEOUT + 30)
