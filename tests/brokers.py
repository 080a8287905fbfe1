"""The brokers of the interop tests: RabbitMQ, ActiveMQ and the embedded one.

The real brokers are started once per test run by ``scripts/start-brokers.sh``
(``scripts/test.sh`` does that: it installs them first when run as root on
Debian), which exports their coordinates (``RABBITMQ_STOMP_PORT=61613``, ...).
Run by hand, the tests read the same lines from
``$STOMP_BROKERS_DIR/last-start.env``, or try the default ports.

:func:`real_broker` checks, once per test session, that a broker answers a
STOMP CONNECT with CONNECTED from the right server.  When it does not, the
tests that need it are skipped with a message saying how to start it - except
under ``CI=true``, where they fail: in CI a missing broker is an error, never a
silent skip.

:func:`endpoint` gives a scenario where to connect: for the embedded broker it
starts one on the harness's service loop (with the same users as the real
ones).  :class:`Wire` is a blocking, raw-socket STOMP session built on the
sans-IO :class:`~stomp_proto.ClientConnection`, for the checks that need the
bytes on the wire (is the socket closed after an ERROR? what came first?).
:func:`restartable_port` gives a test that stops a broker and starts it again on
the same port one below the system's ephemeral range.

Like ``helpers``, this module is imported by name (pytest puts ``tests/`` on
``sys.path``).
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from timeouts import bound_text, scaled

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ConnectionClosed,
    Event,
    HeartBeat,
    Version,
)

__all__ = [
    "BROKERS",
    "EMBEDDED_HEARTBEAT",
    "REAL_BROKERS",
    "USERS",
    "Endpoint",
    "Wire",
    "broker_pid",
    "connect_event",
    "endpoint",
    "in_ci",
    "real_broker",
    "restartable_port",
]

HOST = "127.0.0.1"
REAL_BROKERS = ("rabbitmq", "activemq")
BROKERS = (*REAL_BROKERS, "embedded")
#: The logins the start scripts create on both real brokers; the embedded broker gets them too.
USERS = {"guest": "guest", "stomptest": "stomptest"}
#: What the embedded broker offers in CONNECTED (can send every ms, wants every ms).
EMBEDDED_HEARTBEAT = (1000, 1000)

_DEFAULTS = {
    "rabbitmq": {"port": 61613, "vhost": "/", "server": "RabbitMQ/"},
    "activemq": {"port": 61614, "vhost": "localhost", "server": "ActiveMQ/"},
}
_HOW_TO = (
    "To run the real-broker tests: run `bash scripts/test.sh` as root on Debian 12 (it "
    "installs RabbitMQ and ActiveMQ with apt-get and starts them on 127.0.0.1), or start "
    "them yourself with `scripts/start-brokers.sh` (needs the packages rabbitmq-server and "
    "activemq; see docs/interop.rst). Under CI=true a broker that is not up fails the tests."
)


def in_ci() -> bool:
    """True when ``CI`` is set to something other than ``0``/``false`` (as CI services do)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@dataclass(frozen=True)
class Endpoint:
    """Where a scenario connects, and as whom."""

    name: str
    port: int
    login: str = "guest"
    passcode: str = "guest"
    vhost: str = "/"
    #: The CONNECTED ``server`` header (e.g. ``RabbitMQ/3.10.8``); "" for the embedded broker.
    server: str = ""

    @property
    def is_rabbitmq(self) -> bool:
        return self.name == "rabbitmq"

    @property
    def is_activemq(self) -> bool:
        return self.name == "activemq"

    @property
    def is_embedded(self) -> bool:
        return self.name == "embedded"

    def options(self, **options: Any) -> dict[str, Any]:
        """``connect`` options: this endpoint's login, passcode and vhost, unless given."""
        options.setdefault("login", self.login)
        options.setdefault("passcode", self.passcode)
        options.setdefault("vhost", self.vhost)
        return options


# -- finding the real brokers ---------------------------------------------------------


def _state_dir() -> Path:
    return Path(os.environ.get("STOMP_BROKERS_DIR", "/tmp/stomp-proto-brokers"))


@functools.cache
def _start_record() -> dict[str, str]:
    """What the last ``scripts/start-brokers.sh`` printed (the environment wins)."""
    values: dict[str, str] = {}
    path = _state_dir() / "last-start.env"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        text = ""
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key] = value
    for key, value in os.environ.items():
        if key.startswith(("RABBITMQ_", "ACTIVEMQ_", "STOMP_BROKERS_")):
            values[key] = value
    return values


def _stomp_ping(port: int, vhost: str, login: str, passcode: str) -> dict[str, str]:
    """CONNECT and DISCONNECT on a fresh socket; the CONNECTED headers (or OSError)."""
    with socket.create_connection((HOST, port), timeout=scaled(5)) as sock:
        sock.settimeout(scaled(5))
        conn = ClientConnection()
        sock.sendall(
            conn.send(Connect(host=vhost, accept_versions=("1.2",), login=login, passcode=passcode))
        )
        while True:
            data = sock.recv(65536)
            conn.receive_data(data or None)
            for event in conn:
                if isinstance(event, Connected):
                    return {"server": event.server or "", "version": event.version or ""}
                if not isinstance(event, HeartBeat):
                    raise ConnectionError(f"expected CONNECTED, got {event!r}")


@functools.cache
def _probe(name: str) -> Endpoint | str:
    """The broker's endpoint, or why it cannot be used."""
    record = _start_record()
    prefix = name.upper()
    label = {"rabbitmq": "RabbitMQ", "activemq": "ActiveMQ"}[name]
    defaults = _DEFAULTS[name]
    port = int(record.get(f"{prefix}_STOMP_PORT") or defaults["port"])
    vhost = record.get(f"{prefix}_STOMP_VHOST") or str(defaults["vhost"])
    login = record.get(f"{prefix}_STOMP_USER") or "guest"
    passcode = record.get(f"{prefix}_STOMP_PASSWORD") or "guest"
    try:
        connected = _stomp_ping(port, vhost, login, passcode)
    except (OSError, ValueError, ConnectionError) as exc:
        failed = record.get("STOMP_BROKERS_FAILED", "")
        why = f"{label} does not answer STOMP on {HOST}:{port} ({exc})."
        if name in failed.split(","):
            log = record.get("STOMP_BROKERS_LOG", "")
            why += f" scripts/start-brokers.sh could not start it; see {log}."
        return f"{why} {_HOW_TO}"
    except Exception as exc:  # a protocol error: something else listens there
        return f"{HOST}:{port} is not a usable {label} ({exc!r}). {_HOW_TO}"
    server = connected["server"]
    if not server.startswith(str(defaults["server"])):
        return f"{HOST}:{port} answers as {server!r}, not {label}. {_HOW_TO}"
    return Endpoint(name, port, login, passcode, vhost, server)


def spark_settings(endpoint: Endpoint) -> Any:
    """The Spark sources' ``ConnectionSettings`` for ``endpoint`` (a 20 s timeout).

    Imported here, not at the top: the Spark-free tests import this module too.
    """
    from stomp_proto.spark._options import ConnectionSettings

    return ConnectionSettings(
        host="127.0.0.1",
        port=endpoint.port,
        login=endpoint.login,
        passcode=endpoint.passcode,
        vhost=endpoint.vhost,
        timeout=20.0,
    )


def real_broker(name: str) -> Endpoint:
    """The endpoint of RabbitMQ or ActiveMQ; skips the test (fails it under CI) if it is down."""
    found = _probe(name)
    if isinstance(found, Endpoint):
        return found
    if in_ci():
        pytest.fail(f"CI=true and the broker is not available: {found}", pytrace=False)
    pytest.skip(found)


def broker_pid(name: str) -> int:
    """The PID of the RabbitMQ or ActiveMQ that scripts/start-brokers.sh started.

    When ``STOMP_BROKERS_STARTED`` (what scripts/test.sh's start of the brokers
    printed) does not name the broker, this run did not start it: skipped.

    Only a process proven to be ours is returned (as the stop scripts check it:
    the PID file in the state directory, and the process's environment or
    command line naming that directory), so that fault tests signal nothing
    else.  Skips the test (fails it under CI) otherwise.
    """
    started = os.environ.get("STOMP_BROKERS_STARTED")
    if started is not None and name not in started.split(","):
        # scripts/test.sh found this broker running and reused it: it is someone else's,
        # maybe serving other runs, which a freeze or a restart would break.
        pytest.skip(
            f"{name} was running before this test run began (STOMP_BROKERS_STARTED="
            f"{started!r}): not this run's to freeze or restart"
        )
    state = _state_dir() / name
    pid_file, mark, where = {
        "rabbitmq": ("rabbitmq.pid", f"RABBITMQ_MNESIA_BASE={state}/mnesia", "environ"),
        "activemq": ("activemq.pid", f"-Dactivemq.base={state}", "cmdline"),
    }[name]
    try:
        pid = int((state / pid_file).read_text().strip())
        entries = Path(f"/proc/{pid}/{where}").read_bytes().split(b"\0")
    except (OSError, ValueError) as exc:
        why = f"no {name} process started by scripts/start-brokers.sh ({exc})"
    else:
        if mark.encode() in entries:
            return pid
        why = f"PID {pid} in {state / pid_file} is not our {name}"
    if in_ci():
        pytest.fail(f"CI=true: {why}", pytrace=False)
    pytest.skip(why)


async def endpoint(h: Any, name: str, **broker_options: Any) -> Endpoint:
    """Where a scenario connects: a real broker, or a new embedded one on ``h``'s service loop.

    ``h`` is an ``adapter_harness.Harness``; ``broker_options`` go to the embedded broker.
    """
    if name == "embedded":
        broker_options.setdefault("users", USERS)
        broker_options.setdefault("heartbeat", EMBEDDED_HEARTBEAT)
        broker = await h.start_broker(**broker_options)
        return Endpoint("embedded", broker.port)
    return real_broker(name)


# -- a raw session on the wire -----------------------------------------------------------


@dataclass
class Wire:
    """A blocking STOMP session over a plain socket, driven by a sans-IO ClientConnection.

    Every byte received is kept in ``received`` (raw, as the broker sent it);
    ``events`` are the connection's events in order, heart-beats included.
    """

    port: int
    conn: ClientConnection = field(default_factory=ClientConnection)
    received: bytearray = field(default_factory=bytearray)
    events: list[Event] = field(default_factory=list)
    closed: bool = False

    def __post_init__(self) -> None:
        self.sock = socket.create_connection((HOST, self.port), timeout=scaled(5))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, event: Event) -> bytes:
        data = self.conn.send(event)
        self.sock.sendall(data)
        return data

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read(self, timeout: float) -> bool:
        """Read once (up to ``timeout`` s); False on timeout."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return False
        except ConnectionResetError:
            data = b""
        self.received += data
        if not data:
            self.closed = True
        self.conn.receive_data(data or None)
        return True

    def _drain(self) -> Iterator[Event]:
        while (event := self.conn.next_event()) is not None:
            self.events.append(event)
            yield event

    def frames(self, count: int, timeout: float = 5.0) -> list[Event]:
        """The next ``count`` events other than heart-beats (ConnectionClosed counts);
        ``timeout`` is the bound on an idle machine (scaled by the load factor)."""
        got: list[Event] = []
        deadline = time.monotonic() + scaled(timeout)
        while True:
            for event in self._drain():
                if not isinstance(event, HeartBeat):
                    got.append(event)
            if len(got) >= count or any(isinstance(e, ConnectionClosed) for e in got):
                return got
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"got {got!r}, wanted {count} events in {bound_text(timeout)}")
            self._read(left)

    def settle(self, quiet: float = 0.2, timeout: float = 3.0) -> list[Event]:
        """Read until nothing arrived for ``quiet`` seconds (or EOF); the events read."""
        got: list[Event] = []
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            if not self._read(quiet):
                break
            got.extend(self._drain())
        got.extend(self._drain())
        return got

    def closed_within(self, seconds: float) -> bool:
        """Whether the peer closes the socket within ``seconds`` (data read meanwhile is kept)."""
        deadline = time.monotonic() + seconds
        while not self.closed:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._read(left)
            list(self._drain())
        return True


def connect_event(
    ep: Endpoint,
    version: Version | None = None,
    *,
    heartbeat: tuple[int, int] = (0, 0),
    **overrides: Any,
) -> Connect:
    """The CONNECT an endpoint's client sends (``versions``: one, or all when None)."""
    values: dict[str, Any] = {
        "host": ep.vhost,
        "accept_versions": (version,) if version else ("1.0", "1.1", "1.2"),
        "login": ep.login,
        "passcode": ep.passcode,
        "heartbeat": heartbeat,
    }
    values.update(overrides)
    return Connect(**values)


def _ephemeral_low() -> int:
    """The lowest port the system hands out to outgoing connections (32768 by default)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def restartable_port(low: int, high: int) -> int:
    """A free port in [low, high), below the system's ephemeral range, for a broker that a
    test stops and starts again on the same port.

    A port in the ephemeral range can meanwhile become the local end of any outgoing
    connection (Spark opens many), and the restart then fails: a CI run failed so, when a
    private RabbitMQ found its distribution port (at AMQP + 20000, 45,700 and up) taken and
    stopped with ``dist_port_already_used``.  ``bind(0)`` picks from that range too.
    """
    if high > (ephemeral := _ephemeral_low()):
        raise RuntimeError(
            f"ports [{low}, {high}) reach the ephemeral range (from {ephemeral}); "
            "a restarted broker could find one taken by an outgoing connection"
        )
    # From a point of the range that depends on the process, so that test runs side by
    # side mostly try different ports first.
    offset = os.getpid() % (high - low)
    for port in [*range(low + offset, high), *range(low, low + offset)]:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in [{low}, {high})")
