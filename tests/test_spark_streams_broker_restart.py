"""A ``stomp-streams`` query and a write ride out a RabbitMQ restart, exactly once.

RabbitMQ is stopped for 10 s and started again on the same data while a
streaming query (``stomp-streams`` -> parquet, four streams, ``local[2]``)
is reading and while a write is sending.  Every call of the source and the
sink retries a refused or lost connection, and a stream not yet back, for
up to ``retryTimeout`` seconds (60 by default), logging each retry with the
broker's host and port.  Afterwards ``spark.read.parquet`` must find every
message exactly once: none lost, none twice.

The broker stopped is a private RabbitMQ on ports of its own (the shared one
serves every other test), started and stopped by ``scripts/brokers``.  The
query and the write run as their own processes (``scripts/spark_streams_check.py``).
Needs rabbitmq-server, pyspark and Java 17; skipped without them, except under
CI=true, where that is a failure.  Marked ``serial``: it stops a broker for
10 s and keeps both cores busy, so it runs alone.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from brokers import in_ci, restartable_port
from test_spark_integration import _unavailable

pytestmark = [pytest.mark.timeout(1500), pytest.mark.serial]

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts" / "brokers"
CHECK = ROOT / "scripts" / "spark_streams_check.py"
#: How long the broker stays down.
OUTAGE = 10.0


class PrivateRabbitMQ:
    """A RabbitMQ of this test's own: its ports, its node name, its state directory."""

    def __init__(self, state: Path) -> None:
        amqp = restartable_port(25700, 26700)
        self.port = restartable_port(26800, 27800)
        self.env = {
            **os.environ,
            "STOMP_BROKERS_DIR": str(state),
            "RMQ_STOMP_PORT": str(self.port),
            "RMQ_WS_PORT": "0",
            "RMQ_AMQP_PORT": str(amqp),
            "RMQ_DIST_PORT": str(restartable_port(29000, 30000)),
            "RMQ_EPMD_PORT": str(restartable_port(27900, 28900)),
            "RMQ_NODENAME": f"restart{os.getpid()}@localhost",
        }

    def _script(self, name: str, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPTS / name)], env={**self.env, **env}, capture_output=True,
            text=True, timeout=180, check=False,
        )  # fmt: skip

    def start(self, *, fresh: bool) -> None:
        done = self._script("start-rabbitmq.sh", RMQ_FRESH="1" if fresh else "0")
        if done.returncode != 0:
            raise RuntimeError(f"start-rabbitmq.sh exited {done.returncode}:\n{self._why(done)}")

    def _why(self, done: subprocess.CompletedProcess[str]) -> str:
        """The script's own lines (why it gave up), then what the node printed and logged last.

        The node's log tail alone shows only the shutdown that follows a failed boot; the
        reason is in the script's lines and in ``server.out`` (RabbitMQ's BOOT FAILED report).
        """
        ours = [line for line in done.stderr.splitlines() if line.startswith("[rabbitmq]")]
        state = Path(self.env["STOMP_BROKERS_DIR"]) / "rabbitmq"
        server_out = state / "server.out"
        printed = server_out.read_text(errors="replace")[-6000:] if server_out.exists() else ""
        return "\n".join(
            [*ours, "--- server.out (end):", printed, "--- stderr (end):", done.stderr[-3000:]]
        )

    def stop(self) -> None:
        done = self._script("stop-rabbitmq.sh")
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def private_rabbitmq(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateRabbitMQ]:
    problem = _unavailable()
    broker: PrivateRabbitMQ | None = None
    if problem is None:
        try:
            broker = PrivateRabbitMQ(tmp_path_factory.mktemp("private-rabbitmq"))
            broker.start(fresh=True)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            problem = f"a private RabbitMQ did not start: {exc}"
            if broker is not None:
                broker.stop()
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI=true and the restart test cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    assert broker is not None
    try:
        yield broker
    finally:
        broker.stop()


def check(broker: PrivateRabbitMQ, step: str, *args: str) -> list[str]:
    return [sys.executable, str(CHECK), step, "--port", str(broker.port), *args]


def committed(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return sum(1 for p in commits.iterdir() if p.name.isdigit()) if commits.is_dir() else 0


def run_step(command: list[str], log: Path) -> str:
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False)
    text = log.read_text()
    assert done.returncode == 0, f"{command[2]} failed:\n{text[-4000:]}"
    return text


def retries(log: str, port: int) -> list[str]:
    """The retry lines of a log: each names the broker and the reason."""
    return re.findall(rf"stomp-streams: .*: broker 127\.0\.0\.1:{port}: .*; retry \d+ in .*", log)


def test_a_query_and_a_write_ride_out_a_10_s_outage_exactly_once(
    private_rabbitmq: PrivateRabbitMQ, tmp_path: Path
) -> None:
    broker = private_rabbitmq
    base = f"restart-{uuid.uuid4().hex[:8]}"
    common = ["--stream", base, "--partitions", "4", "--run", "rs"]
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    run_step(check(broker, "publish", *common, "--count", "6000"), tmp_path / "publish-1.log")
    query = [
        *check(broker, "run", *common), "--out", str(out), "--checkpoint", str(checkpoint),
    ]  # fmt: skip
    # A write that lasts: 3,000 rows in 15 chunks, 1 s apart (stopping the broker alone can
    # take several seconds on a loaded machine).
    write = check(
        broker, "publish", *common, "--first", "6000", "--count", "3000", "--chunk", "200",
        "--pace", "1.0",
    )  # fmt: skip
    query_log, write_log = tmp_path / "query.log", tmp_path / "write.log"
    with query_log.open("w") as qout, write_log.open("w") as wout:
        running = subprocess.Popen(
            [*query, "--per-trigger", "400"], cwd=ROOT, stdout=qout, stderr=subprocess.STDOUT
        )
        writing: subprocess.Popen[bytes] | None = None
        try:
            deadline = time.monotonic() + 300
            while committed(checkpoint) < 2:
                assert running.poll() is None, query_log.read_text()[-4000:]
                assert time.monotonic() < deadline, "no two committed batches in 300 s"
                time.sleep(0.1)
            writing = subprocess.Popen(write, cwd=ROOT, stdout=wout, stderr=subprocess.STDOUT)
            time.sleep(1.0)
            batches_before = committed(checkpoint)
            broker.stop()
            stopped = time.monotonic()
            time.sleep(OUTAGE)
            assert running.poll() is None, "the query ended while the broker was down"
            assert writing.poll() is None, "the write ended while the broker was down"
            batches_down = committed(checkpoint)
            broker.start(fresh=False)
            back = time.monotonic() - stopped
            assert running.wait(600) == 0, query_log.read_text()[-4000:]
            assert writing.wait(300) == 0, write_log.read_text()[-4000:]
        finally:
            for process in (running, writing):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait(30)
    first_run, written = query_log.read_text(), write_log.read_text()
    # The query had more to do after the outage: the first run stops at the tails it found
    # when it started (availableNow), 6,000 offsets in batches of at most 400.
    assert batches_before < 15
    assert committed(checkpoint) > batches_down
    assert retries(first_run, broker.port), first_run[-4000:]
    assert retries(written, broker.port), written[-4000:]
    # The rows written under the outage: a second run from the checkpoint reads them, in
    # one batch (its batches' size proves nothing more).
    second_run = run_step([*query, "--per-trigger", "9000"], tmp_path / "query-2.log")
    report = json.loads(
        run_step(
            check(broker, "verify", *common, "--out", str(out), "--count", "9000"),
            tmp_path / "verify.log",
        )
        .strip()
        .splitlines()[-1]
    )
    assert report == {
        "rows": 9000, "distinct": 9000, "expected": 9000, "lost": 0, "duplicated": 0,
        "unexpected": 0,
    }, (batches_before, batches_down, back, second_run[-2000:])  # fmt: skip
    # What the closing note of the outage quotes (pytest -s shows it).
    print(
        f"\noutage: broker down {OUTAGE:.0f} s, back after {back:.1f} s; batches committed: "
        f"{batches_before} before, {batches_down} when it came back, "
        f"{committed(checkpoint)} at the end; "
        f"query retries logged: {len(retries(first_run, broker.port))}, write retries: "
        f"{len(retries(written, broker.port))}; {json.dumps(report)}"
    )
    for line in retries(first_run, broker.port)[:3] + retries(written, broker.port)[:3]:
        print(line)


def test_a_restart_that_finds_a_port_taken_fails_at_once_and_says_why(
    private_rabbitmq: PrivateRabbitMQ,
) -> None:
    """The cause of a CI failure, shown: the node stops at once, and the script names why.

    An outgoing connection holds the broker's distribution port while it is down, as any
    client's connection could when that port lies in the ephemeral range.  Before, the
    script printed only the end of the node's log, which ended with the previous run's
    shutdown.
    """
    broker = private_rabbitmq
    broker.stop()
    dist = int(broker.env["RMQ_DIST_PORT"])
    try:
        with socket.create_server(("127.0.0.1", 0)) as peer, socket.socket() as outgoing:
            outgoing.bind(("127.0.0.1", dist))
            outgoing.connect(peer.getsockname())
            with pytest.raises(RuntimeError) as failed:
                broker.start(fresh=False)
        said = [line for line in str(failed.value).splitlines() if line.startswith("[rabbitmq]")]
        assert any(
            "exited during start-up: Kernel pid terminated" in line
            and f"dist_port_already_used,{dist}" in line
            for line in said
        ), str(failed.value)[-4000:]
    finally:
        broker.start(fresh=False)  # the port is free again: the module's broker is back
