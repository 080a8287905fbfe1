"""Fan-out over WebSocket: N subscribers on one topic, one publisher, three servers.

::

    python benchmarks/fanout.py                      # 1,000 and 10,000 subscribers, a few minutes
    python benchmarks/fanout.py --quick              # smoke run: 5 subscribers, our two servers
    python benchmarks/fanout.py --json benchmarks/results/fanout.json

Servers, measured in the same run, one after the other in an order that turns
round each round:

``asgi``
    ``stomp_proto.asgi.StompApp()`` served by uvicorn (a subprocess, one worker,
    ``uvicorn --factory fanout:asgi_app``).
``broker``
    the embedded broker's own WebSocket endpoint (``python -m stomp_proto broker
    --websocket /ws``, a subprocess).

Both have their connection limits (``max_connections``, 1,000, and
``max_connections_per_login``, 100) raised to N + 10, and nothing else changed.
``rabbitmq``
    RabbitMQ Web-STOMP (``--rabbitmq-url``, ``ws://127.0.0.1:15674/ws`` by default,
    guest/guest), left out when nothing listens there.

Each run connects N WebSocket STOMP sessions (``--procs`` subscriber processes
share them; connects go in batches of ``--batch``), each subscribed to one
``/topic/`` destination with ``ack:auto`` and confirmed by a RECEIPT.  The
subscribers are a lean client written here on ``asyncio.Protocol`` (the
WebSocket handshake and framing by hand, one object and no task per session),
not stomp_proto's asyncio client: at 10,000 sessions a client with its tasks
and buffers per session costs the subscriber processes more memory and CPU
than the servers being measured, on a two-core machine that they share.

With every session subscribed and idle, the server's resident memory
(``VmRSS`` of ``/proc/PID/status``; for RabbitMQ its ``beam.smp``) is read
against the figure before the first session connected: memory per idle
session.  Then one publisher (a WebSocket session too) sends ``--messages``
messages as fast as the server takes them (the *burst*), each body the
publisher's ``time.monotonic_ns()`` (one clock for every process of the
machine); deliveries/s is N x messages over the time from the first send to
the last delivery, and each delivery's latency is its arrival time minus the
body's.  After the burst, ``--paced`` more messages go one at a time to idle
subscribers, a pause between them: the latency of one fan-out to N sessions,
from the send to each of the N deliveries.  The server's CPU seconds (user and
system, ``/proc/PID/stat``) over the burst, per delivery, say where the time
goes; RabbitMQ's include whatever else that broker serves at the time.

Nothing is enforced; the exit status is 1 only when a run lost deliveries or
failed.  The script raises its open-files limit (``RLIMIT_NOFILE``) to the hard
limit, and the servers it starts inherit it; 10,000 sessions need more than
10,000 (``ulimit -n``) for the server and for this script.
"""

from __future__ import annotations

import argparse
import array
import asyncio
import base64
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
DESTINATION = "/topic/fanout"
RABBITMQ_URL = "ws://127.0.0.1:15674/ws"
TARGETS = ("asgi", "broker", "rabbitmq")
CLK_TCK = os.sysconf("SC_CLK_TCK")

# -- a lean WebSocket STOMP client -------------------------------------------------------


def _ws_frame(payload: bytes, opcode: int = 1) -> bytes:
    """One client-to-server WebSocket frame: FIN, masked (RFC 6455 5.3)."""
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n < 65536:
        head = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
    mask = os.urandom(4)
    if not n:
        return head + mask
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    return head + mask + (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")


def _stomp(command: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = "".join(f"{name}:{value}\n" for name, value in headers.items())
    return f"{command}\n{lines}\n".encode() + body + b"\0"


class Session(asyncio.Protocol):
    """One WebSocket STOMP session: handshake, CONNECT, SUBSCRIBE (with a receipt), then
    every MESSAGE's body handed to ``on_message(body, now_ns)``.

    Server frames are taken whole or in fragments; pings are answered; the STOMP stream
    of the frames' payloads is split at each NUL (the bodies here hold none).
    """

    def __init__(
        self,
        url: str,
        login: str,
        passcode: str,
        subscribe: bool,
        on_message: Callable[[bytes, int], None] | None = None,
    ) -> None:
        parts = urlsplit(url)
        self.host = parts.netloc
        self.path = parts.path or "/"
        self.login, self.passcode, self.subscribe = login, passcode, subscribe
        self.on_message = on_message
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        #: Set by the RECEIPT after the first (SUBSCRIBE's, or none for a publisher).
        self.receipt: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.transport: asyncio.Transport | None = None
        self.handshaken = False
        self.buffer = bytearray()
        self.fragments = bytearray()
        self.stream = bytearray()
        self.writable = asyncio.Event()
        self.writable.set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        key = base64.b64encode(os.urandom(16)).decode()
        transport.write(
            (
                f"GET {self.path} HTTP/1.1\r\nHost: {self.host}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: v12.stomp\r\n\r\n"
            ).encode()
        )

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(_ws_frame(data))

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable.set()
        for future in (self.ready, self.receipt):
            if not future.done():
                future.set_exception(ConnectionError(f"connection lost: {exc}"))
        self.receipt.exception()  # awaited by a publisher only: no "never retrieved" warning

    def _fail(self, why: str) -> None:
        if not self.ready.done():
            self.ready.set_exception(ConnectionError(why))
        assert self.transport is not None
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        now = time.monotonic_ns()
        buffer = self.buffer
        buffer += data
        if not self.handshaken:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(buffer[: buffer.find(b"\r\n")])
            if b" 101 " not in status:
                self._fail(f"upgrade refused: {status.decode(errors='replace')}")
                return
            del buffer[: end + 4]
            self.handshaken = True
            headers = {"accept-version": "1.2", "host": "/", "heart-beat": "0,0"}
            headers.update(login=self.login, passcode=self.passcode)
            self.send(_stomp("CONNECT", headers))
        while len(buffer) >= 2:
            opcode, length = buffer[0] & 0x0F, buffer[1] & 0x7F
            start = 2
            if length == 126:
                if len(buffer) < 4:
                    return
                length, start = int.from_bytes(buffer[2:4], "big"), 4
            elif length == 127:
                if len(buffer) < 10:
                    return
                length, start = int.from_bytes(buffer[2:10], "big"), 10
            if len(buffer) < start + length:
                return
            payload = bytes(buffer[start : start + length])
            fin = buffer[0] & 0x80
            del buffer[: start + length]
            if opcode == 9:
                assert self.transport is not None
                self.transport.write(_ws_frame(payload, 10))
            elif opcode == 8:
                assert self.transport is not None
                self.transport.close()
                return
            elif opcode in (0, 1, 2):
                if not fin:
                    self.fragments += payload
                    continue
                if self.fragments:
                    payload = bytes(self.fragments + payload)
                    self.fragments.clear()
                self._stomp_data(payload, now)

    def _stomp_data(self, payload: bytes, now: int) -> None:
        if not self.stream and payload.endswith(b"\0") and payload.count(b"\0") == 1:
            self._frame(payload.lstrip(b"\r\n"), now)  # the usual case: one whole frame
            return
        stream = self.stream
        stream += payload
        while True:
            end = stream.find(b"\0")
            if end < 0:
                return
            frame = bytes(stream[:end]).lstrip(b"\r\n")
            del stream[: end + 1]
            if frame:
                self._frame(frame + b"\0", now)

    def _frame(self, frame: bytes, now: int) -> None:
        if frame.startswith(b"MESSAGE"):
            if self.on_message is not None:
                self.on_message(frame[frame.index(b"\n\n") + 2 : -1], now)
        elif frame.startswith(b"CONNECTED"):
            if self.subscribe:
                headers = {"id": "0", "destination": DESTINATION, "ack": "auto", "receipt": "s"}
                self.send(_stomp("SUBSCRIBE", headers))
            elif not self.ready.done():
                self.ready.set_result(None)
        elif frame.startswith(b"RECEIPT"):
            if not self.ready.done():
                self.ready.set_result(None)
            elif not self.receipt.done():
                self.receipt.set_result(None)
        elif frame.startswith(b"ERROR"):
            self._fail(frame.decode(errors="replace"))


async def _open(url: str, session: Session) -> Session:
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()
    await loop.create_connection(lambda: session, parts.hostname, parts.port or 80)
    await session.ready
    return session


# -- subscriber processes ---------------------------------------------------------------


def _say(kind: str, **values: Any) -> None:
    sys.stdout.write(f"{kind} {json.dumps(values)}\n")
    sys.stdout.flush()


#: Seconds between the EOLs each idle session sends (RabbitMQ's Web-STOMP closes a
#: WebSocket that has sent nothing for 60 s).
KEEPALIVE = 20.0


async def _keepalive(sessions: Sequence[Session]) -> None:
    """An EOL (a STOMP heart-beat, allowed whatever was negotiated) from every session
    every ``KEEPALIVE`` seconds, spread evenly: the same for every server."""
    eol = _ws_frame(b"\n")
    step = max(1, len(sessions) // int(KEEPALIVE * 10))
    while True:
        for i in range(0, len(sessions), step):
            for session in sessions[i : i + step]:
                if session.transport is not None and not session.transport.is_closing():
                    session.transport.write(eol)
            await asyncio.sleep(KEEPALIVE * step / len(sessions))


async def _subscriber_main(
    url: str, n: int, burst_count: int, paced_count: int, batch: int, login: str, out: str
) -> None:
    """``n`` sessions; "ready" once all have their RECEIPT; "burst" after ``burst_count``
    burst deliveries in all and "done" after ``paced_count`` paced ones (both at once at
    "stop" on stdin, with what has come); the latencies are written to ``out``."""
    burst, paced = array.array("q"), array.array("q")
    first = last = 0
    loop = asyncio.get_running_loop()
    burst_done, paced_done = loop.create_future(), loop.create_future()

    def on_message(body: bytes, now: int) -> None:
        nonlocal first, last
        if body[:1] == b"b":
            burst.append(now - int(body[1:]))
            first = first or now
            last = now
            if len(burst) == burst_count and not burst_done.done():
                burst_done.set_result(None)
        else:
            paced.append(now - int(body[1:]))
            if len(paced) == paced_count and not paced_done.done():
                paced_done.set_result(None)

    started = time.monotonic()
    sessions: list[Session] = []
    for i in range(0, n, batch):
        opened = [
            Session(url, login, login, subscribe=True, on_message=on_message)
            for _ in range(min(batch, n - i))
        ]
        await asyncio.gather(*(_open(url, session) for session in opened))
        sessions.extend(opened)
    _say("ready", seconds=time.monotonic() - started)
    keepalive = asyncio.ensure_future(_keepalive(sessions))
    cpu0 = time.process_time()
    stop = asyncio.ensure_future(asyncio.to_thread(sys.stdin.readline))
    await asyncio.wait([burst_done, stop], return_when=asyncio.FIRST_COMPLETED)
    _say("burst", received=len(burst), first=first, last=last, cpu=time.process_time() - cpu0)
    if paced_count:
        await asyncio.wait([paced_done, stop], return_when=asyncio.FIRST_COMPLETED)
    with open(out, "wb") as file:
        burst.tofile(file)
    with open(out + ".paced", "wb") as file:
        paced.tofile(file)
    _say("done", received=len(paced))
    await stop
    keepalive.cancel()
    for session in sessions:
        if session.transport is not None:
            session.transport.abort()


# -- servers -------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int, process: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"nothing listens on {port}")


def _listener_pid(port: int) -> int | None:
    """The process holding the listening TCP socket on 127.0.0.1/0.0.0.0:``port``."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as file:
            for line in list(file)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                    return int(pid)
        except OSError:
            continue
    return None


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as file:
        fields = file.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


#: How many sessions ``asgi_app`` admits, from the process that starts uvicorn.
_SESSIONS_ENV = "STOMP_FANOUT_SESSIONS"


def asgi_app() -> Any:
    """The ASGI target, for ``uvicorn --factory fanout:asgi_app``: ``StompApp()`` with
    its connection limits (1,000 in all, 100 per login by default) raised to N."""
    from stomp_proto.asgi import StompApp

    sessions = int(os.environ.get(_SESSIONS_ENV, "1000"))
    return StompApp(max_connections=sessions, max_connections_per_login=sessions)


def _wait_quiet(pid: int, timeout: float = 90.0) -> None:
    """Until ``pid`` spends under 10% of a CPU for a second (a RabbitMQ still closing the
    sessions of the previous run, say), ``timeout`` seconds at most."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cpu = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - cpu < 0.1:
            return


class Server:
    """A server under test: its WebSocket URL and the pid whose memory and CPU count."""

    def __init__(self, target: str, rabbitmq_url: str, sessions: int) -> None:
        self.target = target
        self.process: subprocess.Popen[bytes] | None = None
        if target == "rabbitmq":
            self.url = rabbitmq_url
            port = urlsplit(rabbitmq_url).port or 80
            pid = _listener_pid(port)
            if pid is None:
                raise RuntimeError(f"no process found listening on {port}")
            self.pid = pid
            return
        port = _free_port()
        python = sys.executable
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'benchmarks'}{os.pathsep}{ROOT}"}
        env[_SESSIONS_ENV] = str(sessions)

        if target == "asgi":
            command = [python, "-m", "uvicorn", "--factory", "fanout:asgi_app"]
            command += ["--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
            command += ["--log-level", "warning"]
            self.url = f"ws://127.0.0.1:{port}/"
        else:
            command = [python, "-m", "stomp_proto", "broker", "--port", str(port)]
            command += ["--websocket", "/ws", "--no-metrics", "--log-level", "warning"]
            command += ["--max-connections", str(sessions)]
            command += ["--max-connections-per-login", str(sessions)]
            self.url = f"ws://127.0.0.1:{port}/ws"
        self.process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
        _wait_port(port, self.process)
        self.pid = self.process.pid

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# -- one run ---------------------------------------------------------------------------------


@dataclass
class Run:
    target: str
    subscribers: int
    messages: int
    paced: int
    round: int
    ok: bool = False
    error: str = ""
    connect_s: float = 0.0
    deliveries: int = 0
    expected: int = 0
    deliveries_per_s: float = 0.0
    burst_p50_ms: float = 0.0
    burst_p99_ms: float = 0.0
    paced_p50_ms: float = 0.0
    paced_p99_ms: float = 0.0
    server_cpu_s: float = 0.0
    server_cpu_us_per_delivery: float = 0.0
    client_cpu_s: float = 0.0
    rss_before: int = 0
    rss_idle: int = 0
    rss_per_session: float = 0.0
    loadavg: list[float] = field(default_factory=list)


def _percentile(values: Sequence[int], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1e6


class Child:
    """A subscriber process (this script's ``_subscribe`` command) and its reports."""

    def __init__(self, url: str, n: int, counts: tuple[int, int], batch: int, out: str):
        command = [sys.executable, __file__, "_subscribe", url, str(n), str(counts[0])]
        command += [str(counts[1]), str(batch), "guest", out]
        self.out = out
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def read(self, kind: str) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(kind + " "):
            raise RuntimeError(f"subscriber process: expected {kind!r}, got {line!r}")
        data: dict[str, Any] = json.loads(line.split(" ", 1)[1])
        return data

    def tell(self) -> None:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def close(self) -> None:
        self.tell()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _collect(children: Sequence[Child], kind: str, timeout: float) -> list[dict[str, Any]]:
    """Each child's ``kind`` report; after ``timeout`` seconds the stragglers are told to
    stop, and report what they have."""
    import selectors

    done: dict[int, dict[str, Any]] = {}
    selector = selectors.DefaultSelector()
    for i, child in enumerate(children):
        assert child.process.stdout is not None
        selector.register(child.process.stdout, selectors.EVENT_READ, i)
    deadline = time.monotonic() + timeout
    told = False
    while len(done) < len(children):
        left = deadline - time.monotonic()
        if left <= 0:
            if told:
                raise RuntimeError(f"subscriber processes gave no {kind!r} report")
            for i, child in enumerate(children):
                if i not in done:
                    child.tell()
            told, deadline = True, time.monotonic() + 30
            continue
        for key, _ in selector.select(min(left, 1.0)):
            i = key.data
            done[i] = children[i].read(kind)
            selector.unregister(key.fileobj)
    selector.close()
    return [done[i] for i in range(len(children))]


async def _publish(url: str, messages: int, kind: bytes) -> int:
    """``messages`` SENDs as fast as the server takes them; the first one's time.

    A burst goes out back to back (waiting only while the transport's buffer is
    full); paced messages (``kind`` b"p") one at a time, ``_GAP[0]`` seconds
    apart.  The last SEND asks for a receipt, which is awaited before closing.
    """
    session = await _open(url, Session(url, "guest", "guest", subscribe=False))
    first = time.monotonic_ns()
    headers = {"destination": DESTINATION}
    for i in range(messages):
        await session.writable.wait()
        if i == messages - 1:
            headers["receipt"] = "last"  # answered once the server has taken every SEND
        session.send(_stomp("SEND", headers, kind + b"%d" % time.monotonic_ns()))
        if kind == b"p":
            await asyncio.sleep(_GAP[0])
    eol = _ws_frame(b"\n")
    deadline = time.monotonic() + 180
    while not session.receipt.done() and time.monotonic() < deadline:
        await asyncio.wait([session.receipt], timeout=KEEPALIVE / 4)
        if not session.receipt.done() and session.transport is not None:
            session.transport.write(eol)  # keeps a waiting publisher from looking idle
    await asyncio.wait_for(session.receipt, 0)
    assert session.transport is not None
    session.transport.close()
    return first


#: The pause after each paced message, set per run: long enough for one fan-out.
_GAP = [0.2]


def one_run(args: argparse.Namespace, target: str, n: int, messages: int, rnd: int) -> Run:
    run = Run(target, n, messages, args.paced, rnd, expected=n * messages)
    run.loadavg = list(os.getloadavg())
    server = None
    children: list[Child] = []
    tmp = tempfile.mkdtemp(prefix="fanout-")
    phase = "start"
    try:
        server = Server(target, args.rabbitmq_url, n + 10)
        _wait_quiet(server.pid)
        run.rss_before = rss(server.pid)
        procs = max(1, min(args.procs, n))
        shares = [n // procs + (1 if i < n % procs else 0) for i in range(procs)]
        started, phase = time.monotonic(), "connect"
        children = [
            Child(server.url, share, (share * messages, share * args.paced), args.batch,
                  f"{tmp}/lat{i}")
            for i, share in enumerate(shares)
        ]  # fmt: skip
        for child in children:
            child.read("ready")
        run.connect_s = time.monotonic() - started
        time.sleep(args.settle)
        run.rss_idle = rss(server.pid)
        run.rss_per_session = (run.rss_idle - run.rss_before) / n
        cpu0, phase = cpu_seconds(server.pid), "burst"
        first = asyncio.run(_publish(server.url, messages, b"b"))
        results = _collect(children, "burst", args.timeout)
        run.server_cpu_s = cpu_seconds(server.pid) - cpu0
        run.deliveries = sum(r["received"] for r in results)
        last = max(r["last"] for r in results)
        if run.deliveries and last > first:
            run.deliveries_per_s = run.deliveries / ((last - first) / 1e9)
        # One paced message's fan-out should be over before the next: 3x what a burst's
        # pace says it takes, 0.2 s at least.
        _GAP[0] = max(0.2, 3 * n / run.deliveries_per_s if run.deliveries_per_s else 1.0)
        phase = "paced"
        if args.paced:
            asyncio.run(_publish(server.url, args.paced, b"p"))
        _collect(children, "done", args.timeout)
        burst: array.array[int] = array.array("q")
        paced: array.array[int] = array.array("q")
        for child in children:
            child.close()
            with open(child.out, "rb") as file:
                burst.frombytes(file.read())
            with open(child.out + ".paced", "rb") as file:
                paced.frombytes(file.read())
        run.client_cpu_s = sum(r["cpu"] for r in results)
        if run.deliveries:
            run.server_cpu_us_per_delivery = run.server_cpu_s / run.deliveries * 1e6
        run.burst_p50_ms, run.burst_p99_ms = (_percentile(burst, q) for q in (0.5, 0.99))
        run.paced_p50_ms, run.paced_p99_ms = (_percentile(paced, q) for q in (0.5, 0.99))
        run.ok = run.deliveries == run.expected and len(paced) == n * args.paced
        if not run.ok:
            run.error = f"{run.deliveries} of {run.expected} burst deliveries, "
            run.error += f"{len(paced)} of {n * args.paced} paced"
    except Exception as exc:  # a failed run is a row that says so
        run.error = f"{phase}: {type(exc).__name__}: {exc}"
    finally:
        for child in children:
            if child.process.poll() is None:
                child.process.kill()
                child.process.wait()
        if server is not None:
            server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return run


# -- the report --------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def summarize(runs: Sequence[Run]) -> list[dict[str, Any]]:
    """Per server and N: the medians over the rounds that moved every message."""
    rows = []
    for n in sorted({run.subscribers for run in runs}):
        for target in TARGETS:
            good = [r for r in runs if r.target == target and r.subscribers == n and r.ok]
            tried = [r for r in runs if r.target == target and r.subscribers == n]
            if not tried:
                continue
            row: dict[str, Any] = {"target": target, "subscribers": n, "runs": len(tried)}
            row["ok_runs"] = len(good)
            for key in (
                "deliveries_per_s", "burst_p50_ms", "burst_p99_ms", "paced_p50_ms",
                "paced_p99_ms", "server_cpu_us_per_delivery", "rss_per_session", "connect_s",
            ):  # fmt: skip
                row[key] = _median([getattr(r, key) for r in good])
            row["errors"] = sorted({r.error for r in tried if r.error})
            rows.append(row)
    for row in rows:
        theirs = [
            r for r in rows
            if r["target"] == "rabbitmq" and r["subscribers"] == row["subscribers"]
        ]  # fmt: skip
        rabbit = theirs[0]["deliveries_per_s"] if theirs else 0.0
        row["x_rabbitmq"] = row["deliveries_per_s"] / rabbit if rabbit else None
    return rows


def targets(rows: Sequence[dict[str, Any]]) -> dict[str, bool | None]:
    """The issue's targets: more deliveries/s than RabbitMQ Web-STOMP at 1,000
    subscribers (for the ASGI endpoint; the broker's is reported beside it), and
    10,000 sessions held (every message to every one of them)."""

    def get(target: str, n: int) -> dict[str, Any] | None:
        return next((r for r in rows if r["target"] == target and r["subscribers"] == n), None)

    ours, theirs = get("asgi", 1000), get("rabbitmq", 1000)
    faster = None
    if ours and theirs and ours["ok_runs"] and theirs["ok_runs"]:
        faster = ours["deliveries_per_s"] > theirs["deliveries_per_s"]
    held = get("asgi", 10000)
    return {
        "asgi_faster_than_rabbitmq_at_1000": faster,
        "asgi_holds_10000": None if held is None else held["ok_runs"] == held["runs"],
    }


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    head = ("server", "N", "ok", "deliv/s", "x rmq", "burst p50", "p99", "paced p50",
            "p99", "CPU us/deliv", "RSS B/session", "connect s")  # fmt: skip
    print(" ".join(f"{h:>12}" for h in head))
    for r in rows:
        ratio = "-" if r["x_rabbitmq"] is None else f"{r['x_rabbitmq']:.2f}"
        cells = (
            r["target"], r["subscribers"], f"{r['ok_runs']}/{r['runs']}",
            f"{r['deliveries_per_s']:,.0f}", ratio, f"{r['burst_p50_ms']:.1f}",
            f"{r['burst_p99_ms']:.1f}", f"{r['paced_p50_ms']:.1f}", f"{r['paced_p99_ms']:.1f}",
            f"{r['server_cpu_us_per_delivery']:.1f}", f"{r['rss_per_session']:,.0f}",
            f"{r['connect_s']:.1f}",
        )  # fmt: skip
        print(" ".join(f"{c:>12}" for c in cells))
        for error in r["errors"]:
            print(f"    {r['target']} N={r['subscribers']}: {error}")


def _raise_nofile(need: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if hard < need:
        print(f"warning: open-files limit {hard} < {need}; raise it (ulimit -n)", file=sys.stderr)
    return hard


def _reachable(url: str) -> bool:
    parts = urlsplit(url)
    try:
        socket.create_connection((parts.hostname, parts.port or 80), timeout=1).close()
    except OSError:
        return False
    return True


def environment() -> dict[str, Any]:
    import datetime
    import platform
    from importlib import metadata

    versions = {}
    for name in ("stomp-proto", "uvicorn", "websockets"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    with open("/proc/uptime") as file:
        uptime = float(file.read().split()[0])
    return {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "loadavg": list(os.getloadavg()),
        "uptime_s": round(uptime),
        "versions": versions,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscribers", default="1000,10000", help="N, comma-separated")
    parser.add_argument(
        "--deliveries", type=int, default=200_000,
        help="burst deliveries per run: messages = max(--min-messages, this / N)",
    )  # fmt: skip
    parser.add_argument("--min-messages", type=int, default=20)
    parser.add_argument("--paced", type=int, default=5, help="paced messages after the burst")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per N (order turns)")
    parser.add_argument("--targets", help=f"of {','.join(TARGETS)} (default: all; --quick: ours)")
    parser.add_argument("--rabbitmq-url", default=RABBITMQ_URL)
    parser.add_argument("--procs", type=int, default=2, help="subscriber processes")
    parser.add_argument("--batch", type=int, default=250, help="connects at a time, per process")
    parser.add_argument("--settle", type=float, default=2.0, help="idle seconds before RSS")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait a burst")
    parser.add_argument("--quick", action="store_true", help="5 subscribers, our servers, 1 round")
    parser.add_argument("--json", type=Path, help="write the results here")

    args = parser.parse_args(argv)
    if args.quick:
        args.subscribers, args.rounds, args.deliveries, args.min_messages = "5", 1, 100, 10
        args.paced, args.settle = 2, 0.5
        args.targets = args.targets or "asgi,broker"
    args.targets = args.targets or ",".join(TARGETS)
    sizes = [int(n) for n in args.subscribers.split(",")]
    chosen = [t for t in args.targets.split(",") if t]
    if any(t not in TARGETS for t in chosen):
        parser.error(f"--targets: choose from {', '.join(TARGETS)}")
    skipped = []
    if "rabbitmq" in chosen and not _reachable(args.rabbitmq_url):
        chosen.remove("rabbitmq")
        skipped.append(f"rabbitmq: nothing listens at {args.rabbitmq_url}")
        print(f"skipped {skipped[-1]}", file=sys.stderr)
    limit = _raise_nofile(max(sizes) + 1000)
    env = environment()
    print(f"{env['date']}  load average {env['loadavg']}  up {env['uptime_s']} s", flush=True)
    runs: list[Run] = []
    for n in sizes:
        messages = max(args.min_messages, args.deliveries // n)
        for rnd in range(args.rounds):
            shift = rnd % len(chosen)
            for target in chosen[shift:] + chosen[:shift]:
                run = one_run(args, target, n, messages, rnd)
                runs.append(run)
                state = "ok" if run.ok else f"FAILED ({run.error})"
                print(
                    f"{target:>8} N={n:<6} round {rnd}: {run.deliveries_per_s:>9,.0f} deliv/s "
                    f"p99 {run.burst_p99_ms:.1f} ms, {run.server_cpu_us_per_delivery:.1f} us "
                    f"CPU/deliv, {run.rss_per_session:,.0f} B/session, load "
                    f"{run.loadavg[0]:.2f}  {state}",
                    flush=True,
                )
    rows = summarize(runs)
    print_table(rows)
    verdicts = targets(rows)
    print("targets:", verdicts)
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        settings.update(nofile_limit=limit, destination=DESTINATION, targets=chosen)
        out = {
            "settings": settings, "environment": env, "end_loadavg": list(os.getloadavg()),
            "rows": rows, "targets": verdicts, "runs": [asdict(r) for r in runs],
            "skipped": skipped,
        }  # fmt: skip
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0 if all(run.ok for run in runs) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["_subscribe"]:
        _raise_nofile(0)
        url, n, burst, paced, batch, login, out = sys.argv[2:9]
        asyncio.run(_subscriber_main(url, int(n), int(burst), int(paced), int(batch), login, out))
        sys.exit(0)
    sys.exit(main())
