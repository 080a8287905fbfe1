"""The brokers the transport's tests run on: the embedded one, RabbitMQ, ActiveMQ.

The embedded broker is started here (``python -m stomp_proto broker``, a
process of its own on a free port).  RabbitMQ and ActiveMQ are the ones the
repository's ``scripts/start-brokers.sh`` starts (``scripts/test.sh`` does),
found from its environment (``RABBITMQ_STOMP_PORT=61613`` ...) or from its
``last-start.env``.  A real broker that does not answer skips its tests with a
message, except under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import stomp_proto.threads


@dataclass(frozen=True)
class BrokerUnderTest:
    """Where a broker listens, and what it does that not every broker does."""

    name: str
    host: str
    port: int
    login: str = "guest"
    passcode: str = "guest"
    #: Broker features some Kombu tests need, by the name a skip gives them.
    missing: dict[str, str] = field(default_factory=dict)

    def url(self, scheme: str = "stomp") -> str:
        return f"{scheme}://{self.login}:{self.passcode}@{self.host}:{self.port}//"

    def require(self, feature: str) -> None:
        """Skip the test when this broker lacks ``feature`` (the skip says so)."""
        if feature in self.missing:
            pytest.skip(f"{self.name}: {self.missing[feature]}")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _coordinates() -> dict[str, str]:
    found: dict[str, str] = {}
    state = os.environ.get("STOMP_BROKERS_DIR", "/tmp/stomp-proto-brokers")
    env_file = Path(state) / "last-start.env"
    if env_file.exists():
        for line in env_file.read_text().splitlines():
            name, _, value = line.partition("=")
            if name and value:
                found[name] = value
    found.update({k: v for k, v in os.environ.items() if k.startswith(("RABBITMQ_", "ACTIVEMQ_"))})
    return found


def _answers(broker: BrokerUnderTest) -> str | None:
    """None when ``broker`` takes a STOMP login; what went wrong otherwise."""
    try:
        with stomp_proto.threads.connect(
            broker.host, broker.port, login=broker.login, passcode=broker.passcode, timeout=10
        ):
            return None
    except (stomp_proto.threads.ClientError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _real(name: str, prefix: str, missing: dict[str, str]) -> BrokerUnderTest:
    found = _coordinates()
    broker = BrokerUnderTest(
        name,
        found.get(f"{prefix}_STOMP_HOST", "127.0.0.1"),
        int(found.get(f"{prefix}_STOMP_PORT", "61613" if prefix == "RABBITMQ" else "61614")),
        found.get(f"{prefix}_STOMP_USER", "guest"),
        found.get(f"{prefix}_STOMP_PASSWORD", "guest"),
        missing,
    )
    problem = _answers(broker)
    if problem is not None:
        message = (
            f"{name} does not answer on {broker.host}:{broker.port} ({problem}); start it with "
            "scripts/start-brokers.sh from the repository root"
        )
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    return broker


@pytest.fixture(scope="session")
def embedded_broker() -> Iterator[BrokerUnderTest]:
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stomp_proto",
            "broker",
            "--port",
            str(port),
            "--user",
            "guest:guest",
            "--log-level",
            "warning",
        ],
    )
    broker = BrokerUnderTest(
        "the embedded broker",
        "127.0.0.1",
        port,
        missing={
            "ttl": "the embedded broker keeps no message time to live (expires)",
            "priority": "the embedded broker delivers in order, without priorities",
        },
    )
    try:
        # Ready when it takes a login; it fails the wait only by exiting.
        while (problem := _answers(broker)) is not None:
            if process.poll() is not None:
                pytest.fail(f"the embedded broker exited with {process.returncode}: {problem}")
            time.sleep(0.05)
        yield broker
    finally:
        process.terminate()
        process.wait()


@pytest.fixture(scope="session")
def rabbitmq() -> BrokerUnderTest:
    return _real(
        "RabbitMQ",
        "RABBITMQ",
        {
            "requeue-through-the-queue": "RabbitMQ's STOMP adapter settles a message only "
            "while its subscription lives, so a message requeued after its consumer was "
            "cancelled cannot go back through the queue's priority order",
        },
    )


@pytest.fixture(scope="session")
def activemq() -> BrokerUnderTest:
    return _real(
        "ActiveMQ",
        "ACTIVEMQ",
        {
            "priority": "ActiveMQ orders queues by priority only with the destination "
            "policy prioritizedMessages=true, off in its default configuration",
        },
    )


BROKERS = ("embedded", "rabbitmq", "activemq")


@pytest.fixture(params=BROKERS)
def broker(request: pytest.FixtureRequest) -> BrokerUnderTest:
    fixture = {"embedded": "embedded_broker"}.get(request.param, request.param)
    value: BrokerUnderTest = request.getfixturevalue(fixture)
    return value


# -- brokers of a test's own, which it may stop and start ---------------------------

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "brokers"


def restartable_port(low: int, high: int) -> int:
    """A free port in [low, high): below the ephemeral range, so that no outgoing
    connection takes it while the broker that owns it is down for a restart."""
    start = low + os.getpid() % (high - low)
    for offset in range(high - low):
        port = low + (start - low + offset) % (high - low)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in [{low}, {high})")


class PrivateBroker:
    """A broker on ports of its own, started for the tests that stop and start it:
    the shared brokers serve every other test."""

    def __init__(
        self, name: str, state: Path, missing: dict[str, str], *, extra: list[str] | None = None
    ) -> None:
        self.name = name
        #: More command-line arguments for the embedded broker.
        self.extra = extra or []
        self.state = state
        self.port = restartable_port(20000, 24000)
        self.missing = missing
        self._process: subprocess.Popen[bytes] | None = None
        self._ports = {
            "RMQ_AMQP_PORT": str(restartable_port(24000, 25000)),
            "RMQ_DIST_PORT": str(restartable_port(19000, 20000)),
            "RMQ_EPMD_PORT": str(restartable_port(18000, 19000)),
        }

    @property
    def under_test(self) -> BrokerUnderTest:
        return BrokerUnderTest(self.name, "127.0.0.1", self.port, missing=self.missing)

    def _env(self) -> dict[str, str]:
        env = {**os.environ, "STOMP_BROKERS_DIR": str(self.state)}
        if self.name == "RabbitMQ":
            env.update(
                self._ports,
                RMQ_STOMP_PORT=str(self.port),
                RMQ_WS_PORT="0",
                RMQ_NODENAME=f"kombu{os.getpid()}@localhost",
            )
        else:
            env["AMQ_STOMP_PORT"] = str(self.port)
        return env

    def _script(self, action: str, **env: str) -> None:
        script = SCRIPTS / f"{action}-{self.name.lower()}.sh"
        done = subprocess.run(
            ["bash", str(script)], env={**self._env(), **env}, capture_output=True,
            text=True, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{script.name} exited {done.returncode}: {done.stderr[-3000:]}")

    def start(self, *, fresh: bool) -> None:
        """Start it (``fresh``: with no messages kept from before); return once it
        takes a login."""
        if self.name == "the embedded broker":
            self._process = subprocess.Popen(
                [sys.executable, "-m", "stomp_proto", "broker", "--port", str(self.port),
                 "--user", "guest:guest", "--log-level", "warning", *self.extra],
            )  # fmt: skip
            while (problem := _answers(self.under_test)) is not None:
                if self._process.poll() is not None:
                    raise RuntimeError(f"the embedded broker exited: {problem}")
                time.sleep(0.05)
        elif self.name == "RabbitMQ":
            self._script("start", RMQ_FRESH="1" if fresh else "0")
        else:
            self._script("start", AMQ_FRESH="1" if fresh else "0")

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            self._process.wait()
            self._process = None
        elif self.name != "the embedded broker":
            self._script("stop")

    def restart(self) -> None:
        """Stop it, then start it again on what it kept (the embedded broker keeps
        nothing: its messages live in memory only)."""
        self.stop()
        self.start(fresh=False)


@pytest.fixture(params=BROKERS)
def private_broker(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[PrivateBroker]:
    """A broker of the test's own, of each kind; a failure to start it skips the
    test, or fails it under ``CI=true``."""
    name, missing = {
        "embedded": ("the embedded broker", {
            "durability": "the embedded broker keeps messages in memory only: a restart "
            "loses what was queued",
        }),
        "rabbitmq": ("RabbitMQ", {}),
        "activemq": ("ActiveMQ", {}),
    }[request.param]  # fmt: skip
    broker = PrivateBroker(name, tmp_path_factory.mktemp(f"private-{request.param}"), missing)
    try:
        broker.start(fresh=True)
    except (RuntimeError, OSError) as exc:
        broker.stop()
        message = f"a private {name} did not start: {exc}"
        if in_ci():
            pytest.fail(message)
        pytest.skip(message)
    try:
        yield broker
    finally:
        broker.stop()
