"""The command line, run as ``python -m stomp_proto`` in subprocesses.

One broker process (``broker --port P``) serves the module; each test uses
its own queue.  Every subprocess has a timeout, and the broker is stopped
(SIGINT, then SIGKILL if need be) at the end.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from adapter_harness import HOST, ServiceLoop, dead_port, free_port
from timeouts import bound_text, scaled

import stomp_proto
from stomp_proto import Limits
from stomp_proto._cli import broker_limits, broker_resource_limits, build_parser
from stomp_proto.broker import Broker

pytestmark = pytest.mark.timeout(120)

#: Seconds any one command may take.
COMMAND_TIMEOUT = 30.0
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def cli(*args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``python -m stomp_proto ARGS`` to completion (bounded)."""
    return subprocess.run(
        [sys.executable, "-m", "stomp_proto", *args],
        input=input if input is not None else "",
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


#: What each broker that start_broker started wrote to stderr while it read the line
#: saying where the broker listens, by process id: stop() puts it back in front.
_EARLY_ERR: dict[int, bytes] = {}


def listening_port(process: subprocess.Popen[str], timeout: float = 15.0) -> int:
    """The port ``process`` (``stomp-proto broker --port 0``) says it listens on, within
    ``timeout`` seconds on an idle machine (scaled by the load factor)."""
    said = re.compile(rb"listening on " + re.escape(HOST.encode()) + rb":(\d+)\D")
    found = wait_for_stderr(process, said, timeout, "where it listens")
    return int(found.group(1))


def wait_for_stderr(
    process: subprocess.Popen[str], pattern: re.Pattern[bytes], timeout: float, what: str
) -> re.Match[bytes]:
    """The first match of ``pattern`` in what ``process`` writes to stderr, within
    ``timeout`` seconds on an idle machine (scaled by the load factor).

    Read from the pipe's descriptor, never its buffered file: what is read here is
    kept for :func:`stop`, and ``communicate()`` reads on from the descriptor.
    """
    assert process.stderr is not None
    fd = process.stderr.fileno()
    seen = _EARLY_ERR.get(process.pid, b"")
    deadline = time.monotonic() + scaled(timeout)
    try:
        while (found := pattern.search(seen)) is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"the broker said nothing of {what} in {bound_text(timeout)}: {seen!r}"
                )
            if select.select([fd], [], [], min(left, 0.5))[0]:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise AssertionError(f"the broker exited early: {seen!r}")
                seen += chunk
    finally:
        _EARLY_ERR[process.pid] = seen
    return found


def stop(process: subprocess.Popen[str], sig: int = signal.SIGINT) -> tuple[int, str, str]:
    """Stop ``process`` with ``sig`` (killing it after a while); its exit code and output."""
    if process.poll() is None:
        process.send_signal(sig)
    try:
        # Generous: the broker's close may wait up to 5 s on a client, and a loaded
        # 2-core machine was seen to need more than 10 s in all.
        out, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate(timeout=10)
    return process.returncode, out, _EARLY_ERR.pop(process.pid, b"").decode() + (err or "")


@dataclass
class BrokerProcess:
    port: int
    process: subprocess.Popen[str]

    def args(self) -> list[str]:
        """Connection options for a client command."""
        return ["--port", str(self.port), "--timeout", "10"]


def start_broker(*extra: str) -> BrokerProcess:
    """``stomp-proto broker`` on a port it picks itself, as the line it logs says.

    A free port picked here and passed on could be taken meanwhile by another test
    process's server, which a wait for "something listens" would take for the broker:
    CI once saw a client of this module talk to another run's fake broker.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "stomp_proto", "broker", "--port", "0", *extra],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        port = listening_port(process)
    except BaseException:
        stop(process, signal.SIGKILL)
        raise
    return BrokerProcess(port, process)


@pytest.fixture(scope="module")
def broker() -> Iterator[BrokerProcess]:
    running = start_broker()
    yield running
    code, _, err = stop(running.process)
    assert code == EXIT_INTERRUPTED, err
    assert err.count(f"listening on {HOST}:{running.port}") == 1, err


@pytest.mark.parametrize("level", ["info", "warning"])
def test_the_broker_says_where_it_listens_once(level: str) -> None:
    running = start_broker("--log-level", level, "--websocket", "/ws")
    code, _, err = stop(running.process)
    assert code == EXIT_INTERRUPTED, err
    assert err.count("listening on") == 1, err
    assert f"listening on {HOST}:{running.port}" in err


def bodies(listen: subprocess.CompletedProcess[str]) -> list[str]:
    """The bodies printed by ``listen --json``, checking every line is one JSON object."""
    records = [json.loads(line) for line in listen.stdout.splitlines()]
    return [record["body"] for record in records]


# -- send and listen ---------------------------------------------------------------------


def test_send_then_listen_json(broker: BrokerProcess) -> None:
    sent = cli("send", "/queue/cli-args", "a", "b", "c", *broker.args(), "--receipt")
    assert sent.returncode == EXIT_OK, sent.stderr
    listened = cli("listen", "/queue/cli-args", "--count", "3", "--json", *broker.args())
    assert listened.returncode == EXIT_OK, listened.stderr
    lines = listened.stdout.splitlines()
    assert len(lines) == 3
    records = [json.loads(line) for line in lines]
    assert [r["body"] for r in records] == ["a", "b", "c"]
    assert all(r["destination"] == "/queue/cli-args" for r in records)
    assert len({r["message_id"] for r in records}) == 3


def test_send_lines_from_stdin(broker: BrokerProcess) -> None:
    lines = "first line\nsecond: with colon\n\u00fcnicode \u2713\n"
    sent = cli("send", "/queue/cli-stdin", *broker.args(), input=lines)
    assert sent.returncode == EXIT_OK, sent.stderr
    listened = cli("listen", "/queue/cli-stdin", "--count", "3", "--json", *broker.args())
    assert listened.returncode == EXIT_OK, listened.stderr
    assert bodies(listened) == ["first line", "second: with colon", "\u00fcnicode \u2713"]


def test_send_headers_and_listen_with_client_acks(broker: BrokerProcess) -> None:
    sent = cli(
        "send", "/queue/cli-headers", "payload", *broker.args(),
        "--header", "x-one=1", "--header", "x-two=a=b", "--content-type", "text/x-test",
    )  # fmt: skip
    assert sent.returncode == EXIT_OK, sent.stderr
    listened = cli(
        "listen", "/queue/cli-headers", "--count", "1", "--json", "--ack", "client-individual",
        *broker.args(),
    )  # fmt: skip
    assert listened.returncode == EXIT_OK, listened.stderr
    (record,) = [json.loads(line) for line in listened.stdout.splitlines()]
    assert record["body"] == "payload"
    assert record["headers"]["x-one"] == "1"
    assert record["headers"]["x-two"] == "a=b"
    # Acknowledged: nothing is left for the next listener but what comes next.
    assert cli("send", "/queue/cli-headers", "next", *broker.args()).returncode == EXIT_OK
    again = cli("listen", "/queue/cli-headers", "--count", "1", "--json", *broker.args())
    assert bodies(again) == ["next"]


def test_listen_shows_content_type(broker: BrokerProcess) -> None:
    outputs = []
    for option in ("--headers", "--json"):
        send = ["send", "/queue/cli-ctype", "x", "--content-type", "text/x-test"]
        assert cli(*send, *broker.args()).returncode == EXIT_OK
        listened = cli("listen", "/queue/cli-ctype", "--count", "1", option, *broker.args())
        assert listened.returncode == EXIT_OK, listened.stderr
        outputs.append(listened.stdout)
    plain, as_json = outputs
    assert "content-type:text/x-test" in plain.splitlines()
    assert json.loads(as_json)["headers"]["content-type"] == "text/x-test"


@pytest.fixture
def local_broker() -> Iterator[tuple[ServiceLoop, Broker]]:
    """An in-process broker (on a loop in a thread), for looking at its queues."""
    service = ServiceLoop()
    try:
        yield service, service.call(service.start_broker(0, False, {}))
    finally:
        assert service.close() == []


def queued(service: ServiceLoop, broker: Broker, destination: str) -> int:
    async def count() -> int:
        return broker.core.queued(destination)

    return service.call(count())


def test_listen_count_with_client_acks_leaves_the_rest(
    local_broker: tuple[ServiceLoop, Broker],
) -> None:
    service, broker = local_broker
    args = ["--port", str(broker.port), "--timeout", "10"]
    assert cli("send", "/queue/rest", "1", "2", "3", *args).returncode == EXIT_OK
    listen = ["listen", "/queue/rest", "--count", "1", "--ack", "client-individual"]
    listened = cli(*listen, *args)
    assert listened.stdout.splitlines() == ["1"]
    assert queued(service, broker, "/queue/rest") == 2


def test_listen_count_leaves_the_rest(local_broker: tuple[ServiceLoop, Broker]) -> None:
    service, broker = local_broker
    args = ["--port", str(broker.port), "--timeout", "10"]
    assert cli("send", "/queue/rest", "1", "2", "3", *args).returncode == EXIT_OK
    listened = cli("listen", "/queue/rest", "--count", "1", *args)
    assert listened.stdout.splitlines() == ["1"]
    assert queued(service, broker, "/queue/rest") == 2  # messages 2 and 3 are lost


def test_listen_plain_output(broker: BrokerProcess) -> None:
    assert cli("send", "/queue/cli-plain", "one", "two", *broker.args()).returncode == EXIT_OK
    listened = cli("listen", "/queue/cli-plain", "--count", "2", *broker.args())
    assert listened.returncode == EXIT_OK, listened.stderr
    assert listened.stdout.splitlines() == ["one", "two"]


def test_listen_timeout_ends_when_nothing_arrives(broker: BrokerProcess) -> None:
    port = ["--port", str(broker.port)]
    listened = cli("listen", "/queue/cli-empty", "--count", "1", "--timeout", "1", *port)
    assert listened.returncode == EXIT_FAILED
    assert listened.stdout == ""
    assert listened.stderr.strip() == (
        "stomp-proto listen: no message on /queue/cli-empty within 1 s (received 0 of 1)"
    )


def test_listen_timeout_counts_from_the_last_message(broker: BrokerProcess) -> None:
    port = ["--port", str(broker.port)]
    assert cli("send", "/queue/cli-drain", "a", "b", *port).returncode == EXIT_OK
    listened = cli("listen", "/queue/cli-drain", "--timeout", "1", *port)
    assert listened.stdout.splitlines() == ["a", "b"]
    assert listened.returncode == EXIT_FAILED
    assert "within 1 s (received 2)" in listened.stderr


def test_listen_help_says_what_the_timeout_covers() -> None:
    listen_help = " ".join(cli("listen", "--help").stdout.split())
    assert "seconds allowed for connecting, and then for each next message" in listen_help
    assert "wait for messages forever" in listen_help
    send_help = " ".join(cli("send", "--help").stdout.split())
    assert "seconds allowed for connecting and for each answer awaited" in send_help


# -- demo ----------------------------------------------------------------------------------


def test_demo() -> None:
    demo = cli("demo", "--messages", "500")
    assert demo.returncode == EXIT_OK, demo.stderr
    assert "messages/s" in demo.stdout
    assert "500 messages" in demo.stdout
    assert "latency" in demo.stdout
    # The first line names the build that ran (the subprocess imports this stomp_proto).
    assert f", {stomp_proto.BUILD} build" in demo.stdout.splitlines()[0]


# -- failures --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        pytest.param([], id="no-command"),
        pytest.param(["send"], id="send-without-destination"),
        pytest.param(["listen", "/queue/x", "--ack", "sometimes"], id="bad-ack-mode"),
        pytest.param(["send", "/queue/x", "a", "--port", "many"], id="bad-port"),
        pytest.param(["send", "/queue/x", "a", "--header", "novalue"], id="bad-header"),
        pytest.param(["broker", "--user", "nopassword"], id="bad-user"),
        pytest.param(["broker", "--allowed-origin", "a.example"], id="bad-origin"),
        pytest.param(["frobnicate"], id="unknown-command"),
    ],
)
def test_bad_arguments_exit_2(args: list[str]) -> None:
    result = cli(*args)
    assert result.returncode == EXIT_USAGE
    assert "usage:" in result.stderr
    assert result.stdout == ""


def test_unreachable_broker_exits_1() -> None:
    port = free_port()
    result = cli("send", "/queue/x", "hello", "--port", str(port), "--timeout", "5")
    assert result.returncode == EXIT_FAILED
    message = result.stderr.strip()
    assert message.startswith("stomp-proto send: ConnectionLost: cannot connect to")
    assert f"{HOST}:{port}" in message
    assert "Traceback" not in result.stderr
    listened = cli("listen", "/queue/x", "--port", str(port), "--timeout", "5")
    assert listened.returncode == EXIT_FAILED
    assert "stomp-proto listen: ConnectionLost" in listened.stderr


def test_login_required_and_refused() -> None:
    secured = start_broker("--user", "alice:s3cret")
    try:
        args = ["--port", str(secured.port), "--timeout", "10"]
        refused = cli("send", "/queue/x", "a", *args, "--login", "alice", "--passcode", "nope")
        assert refused.returncode == EXIT_FAILED
        assert "BrokerError: Bad CONNECT: login failed" in refused.stderr
        assert "Traceback" not in refused.stderr
        ok = cli("send", "/queue/x", "a", *args, "--login", "alice", "--passcode", "s3cret")
        assert ok.returncode == EXIT_OK, ok.stderr
    finally:
        code, _, err = stop(secured.process)
    assert code == EXIT_INTERRUPTED, err
    # Logged at INFO (the default level), with the client's address and the reason.
    [refusal] = [line for line in err.splitlines() if "login failed" in line]
    assert " INFO " in refusal and f"from {HOST}:" in refusal, refusal


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_sigterm_shuts_down_as_sigint_does(sig: signal.Signals) -> None:
    running = start_broker()
    try:
        clients = []
        for _ in range(2):
            client = socket.create_connection((HOST, running.port), timeout=COMMAND_TIMEOUT)
            conn = stomp_proto.ClientConnection()
            client.sendall(conn.send(stomp_proto.Connect(host="/")))
            clients.append((client, conn))
        for client, conn in clients:
            while not any(isinstance(e, stomp_proto.Connected) for e in conn):
                conn.receive_data(client.recv(65536))
    finally:
        code, _, err = stop(running.process, sig)
    # Every client was told why, then the connection was closed.
    for client, conn in clients:
        events = []
        while data := client.recv(65536):
            conn.receive_data(data)
            events.extend(conn)
        client.close()
        errors = [e for e in events if isinstance(e, stomp_proto.Error)]
        assert [e.message for e in errors] == ["broker shutting down"], events
    assert "closed: 2 session(s) ended with ERROR 'broker shutting down'" in err, err
    if sig is signal.SIGTERM:
        assert code == EXIT_OK, err  # asked to stop, and stopped cleanly
        assert "SIGTERM: closing 2 connection(s)" in err, err
    else:
        assert code == EXIT_INTERRUPTED, err


def test_a_url_as_host() -> None:
    secured = start_broker("--user", "alice:s3cret")
    try:
        url = f"stomp://alice:s3cret@{HOST}:{secured.port}"
        sent = cli("send", "/queue/cli-url", "a", "b", "--host", url, "--receipt")
        assert sent.returncode == EXIT_OK, sent.stderr
        # The failover form: the first address is dead, the second one answers.
        with dead_port() as dead:
            failover = f"failover:(stomp://alice:s3cret@{HOST}:{dead},{url})?randomize=false"
            listened = cli("listen", "/queue/cli-url", "--count", "2", "--json", "--host", failover)
        assert listened.returncode == EXIT_OK, listened.stderr
        assert bodies(listened) == ["a", "b"]
        refused = cli(
            "send", "/queue/x", "a", "--host", f"stomp://alice:wrong-pw@{HOST}:{secured.port}"
        )
        assert refused.returncode == EXIT_FAILED
        assert "login failed" in refused.stderr
        assert "wrong-pw" not in refused.stderr + refused.stdout
    finally:
        code, _, err = stop(secured.process)
    assert code == EXIT_INTERRUPTED, err
    assert "s3cret" not in err and "wrong-pw" not in err  # nor in the broker's log


@pytest.mark.parametrize(
    ("args", "named"),
    [
        pytest.param(["--host", "stomp://h:61613", "--port", "61613"], "port", id="url-and-port"),
        pytest.param(["--host", "stomp://a@h", "--login", "b"], "'login'", id="url-and-login"),
        pytest.param(["--host", "stomp://h/v", "--vhost", "w"], "'vhost'", id="url-and-vhost"),
        pytest.param(["--host", "stomp://h", "--tls"], "not TLS", id="plain-url-and-tls"),
        pytest.param(["--host", "stomp://h:x"], "the port is not", id="bad-port-in-url"),
        pytest.param(["--host", "failover:(stomp://h)?nope=1"], "'nope'", id="bad-failover-option"),
    ],
)
def test_a_url_that_cannot_be_used_exits_2(args: list[str], named: str) -> None:
    result = cli("send", "/queue/x", "a", *args, "--passcode", "top-secret")
    assert result.returncode == EXIT_USAGE, result.stderr
    assert named in result.stderr
    assert "top-secret" not in result.stderr


def test_version() -> None:
    result = cli("--version")
    assert result.returncode == EXIT_OK
    assert result.stdout.startswith("stomp-proto ")
    # ... and which build runs, on the one line.
    assert f"({stomp_proto.BUILD} build" in result.stdout
    assert result.stdout.count("\n") == 1


def test_version_says_why_the_build_is_pure_when_forced() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "stomp_proto", "--version"],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        env={**os.environ, "STOMP_PROTO_NO_EXTENSIONS": "1"},
    )
    assert result.returncode == EXIT_OK, result.stderr
    assert "(pure build: STOMP_PROTO_NO_EXTENSIONS is set)" in result.stdout


# -- what real clients send, with their default settings: the broker takes it all ---------

#: A stomp.py program as its users write it: the default ``stomp.Connection`` (STOMP
#: 1.1, whose CONNECT - a STOMP frame - has no ``host`` header), no options.
STOMPPY_PROGRAM = """
import sys, threading, stomp

class Listener(stomp.ConnectionListener):
    def __init__(self):
        self.got = threading.Event()
        self.body = None
        self.error = None
    def on_message(self, frame):
        self.body = frame.body
        self.got.set()
    def on_error(self, frame):
        self.error = frame.headers.get("message")
        self.got.set()

conn = stomp.Connection([("127.0.0.1", int(sys.argv[1]))])
listener = Listener()
conn.set_listener("", listener)
try:
    conn.connect(wait=True)
except Exception as exc:
    print("refused:", type(exc).__name__, listener.error)
    sys.exit(3)
conn.subscribe("/queue/cli-stomppy", id=1, ack="auto")
conn.send("/queue/cli-stomppy", "hello from stomp.py")
listener.got.wait(10)
print("received:", listener.body)
conn.disconnect()
"""


def run_stomppy_program(port: int) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("stomp")
    return subprocess.run(
        [sys.executable, "-c", STOMPPY_PROGRAM, str(port)],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
    )


def test_unmodified_stomppy_program_works_against_the_broker(broker: BrokerProcess) -> None:
    """The default broker lets in what RabbitMQ and ActiveMQ let in: no host header."""
    result = run_stomppy_program(broker.port)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["received: hello from stomp.py"]


def test_strict_broker_refuses_a_connect_without_host() -> None:
    """``broker --strict``: STOMP 1.1 §CONNECT or STOMP Frame requires host; refused."""
    strict = start_broker("--strict")
    try:
        result = run_stomppy_program(strict.port)
    finally:
        code, _, err = stop(strict.process)
    assert code == EXIT_INTERRUPTED, err
    assert result.returncode == 3, result.stdout + result.stderr
    assert "needs a 'host' header" in result.stdout


# -- broker options: heart-beats, limits, log level ----------------------------------------


def test_broker_options_parse() -> None:
    args = build_parser().parse_args(
        ["broker", "--heartbeat", "0,500", "--max-frame-size", "1000", "--max-headers", "7"]
    )
    assert args.heartbeat == (0, 500)
    assert broker_limits(args) == Limits(max_frame_size=1000, max_headers=7)
    assert broker_limits(build_parser().parse_args(["broker"])) is None
    assert build_parser().parse_args(["broker"]).log_level == "info"
    caps = build_parser().parse_args(
        ["broker", "--max-connections", "5", "--max-connections-per-login", "2",
         "--idle-timeout", "0"]
    )  # fmt: skip
    assert broker_resource_limits(caps) == {"max_connections": 5, "max_connections_per_login": 2}
    assert caps.idle_timeout is None
    assert build_parser().parse_args(["broker"]).idle_timeout == 600.0


@pytest.mark.parametrize(
    "bad",
    [
        ["--heartbeat", "5"],
        ["--heartbeat", "-1,0"],
        ["--max-body-size", "0"],
        ["--idle-timeout", "-1"],
        ["--max-connections", "0"],
    ],
)
def test_broker_refuses_bad_option_values(bad: list[str]) -> None:
    result = cli("broker", *bad)
    assert result.returncode == EXIT_USAGE
    assert "expected" in result.stderr


def test_broker_heartbeat_limit_and_the_log_of_a_refusal() -> None:
    """The options reach the broker; a refused connection is one INFO line naming
    the client and the reason; --log-level warning hides it."""
    for level, logged in (("info", True), ("warning", False)):
        running = start_broker("--heartbeat", "0,0", "--max-body-size", "10", "--log-level", level)
        try:
            with socket.create_connection((HOST, running.port), timeout=10) as sock:
                sock.sendall(b"CONNECT\naccept-version:1.2\nhost:/\nheart-beat:1000,1000\n\n\x00")
                sock.sendall(b"SEND\ndestination:/queue/x\n\n" + b"x" * 20 + b"\x00")
                reply = b""
                while chunk := sock.recv(65536):
                    reply += chunk
        finally:
            code, _, err = stop(running.process)
        assert code == EXIT_INTERRUPTED, err
        assert b"heart-beat:0,0" in reply  # 1.2 §Heart-beating: the broker offers none
        assert b"ERROR" in reply and b"max_body_size" in reply
        refusals = [line for line in err.splitlines() if "refused: TOO_LARGE" in line]
        if logged:
            assert len(refusals) == 1 and f"from {HOST}:" in refusals[0], err
            assert " INFO " in refusals[0] and "max_body_size" in refusals[0]
        else:
            assert refusals == [], err


def _http(port: int, request: str, head_only: bool = False) -> bytes:
    """The answer to ``request``: all of it, or (``head_only``) up to the end of its head."""
    with socket.create_connection((HOST, port), timeout=10) as sock:
        sock.sendall(request.encode())
        answer = b""
        while not (head_only and b"\r\n\r\n" in answer) and (chunk := sock.recv(65536)):
            answer += chunk
    return answer


def _upgrade_from(port: int, origin: str) -> bytes:
    return _http(
        port,
        f"GET /ws HTTP/1.1\r\nHost: {HOST}:{port}\r\nUpgrade: websocket\r\n"
        "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
        f"Sec-WebSocket-Version: 13\r\nOrigin: {origin}\r\n\r\n",
        head_only=True,
    )


def test_broker_allowed_origins_and_metrics() -> None:
    """--allowed-origin lets that page in, others get 403 and a log line naming
    their origin; GET /metrics answers on the same port unless --no-metrics."""
    running = start_broker(
        "--websocket", "/ws", "--allowed-origin", "http://a.example:8000",
        "--allowed-origin", "http://b.example",
    )  # fmt: skip
    try:
        assert _upgrade_from(running.port, "http://b.example").startswith(b"HTTP/1.1 101 ")
        assert _upgrade_from(running.port, "http://evil.example").startswith(b"HTTP/1.1 403 ")
        metrics = _http(running.port, f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\n\r\n")
    finally:
        code, _, err = stop(running.process)
    assert code == EXIT_INTERRUPTED, err
    assert "metrics: http://" in err
    refusals = [line for line in err.splitlines() if "evil.example" in line]
    assert len(refusals) == 1 and f"from {HOST}:" in refusals[0] and "not allowed" in refusals[0]
    assert metrics.startswith(b"HTTP/1.1 200 OK")
    assert b'stomp_broker_websocket_upgrades_refused_total{status="403"} 1' in metrics
    quiet = start_broker("--no-metrics")
    try:
        # Plain STOMP only: the request is no STOMP frame.
        answer = _http(quiet.port, f"GET /metrics HTTP/1.1\r\nHost: {HOST}\r\n\r\n")
    finally:
        stop(quiet.process)
    assert answer.startswith(b"ERROR\n")
