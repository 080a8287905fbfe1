"""Celery end to end on the transport, on every broker: a worker (solo and prefork
pools) runs 10,000 tasks published by another process and answers through
``rpc://`` results and ``celery inspect ping`` (a fanout exchange and direct
replies); with ``acks_late`` a worker killed with SIGKILL mid-task loses no task
(another worker runs it again), and a broker restart mid-run loses none and
leaves the worker consuming."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest
from conftest import BrokerUnderTest, PrivateBroker

APP = Path(__file__).parent / "celery_app"
TASKS = 10_000


@contextlib.contextmanager
def celery_app(url: str, record: Path) -> Iterator[ModuleType]:
    """The app's tasks module, imported on ``url``, its ``record`` tasks logging to
    ``record``; the environment the app reads is the workers' too."""
    saved = {
        name: os.environ.get(name)
        for name in ("STOMP_PROTO_KOMBU_BROKER", "STOMP_PROTO_KOMBU_RECORD")
    }
    os.environ["STOMP_PROTO_KOMBU_BROKER"] = url
    os.environ["STOMP_PROTO_KOMBU_RECORD"] = str(record)
    sys.path.insert(0, str(APP))
    try:
        yield __import__("tasks")
    finally:
        sys.path.remove(str(APP))
        module = sys.modules.pop("tasks", None)
        if module is not None:
            module.app.close()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@contextlib.contextmanager
def worker(
    pool: str, name: str, *, queue: str = "celery", concurrency: int = 2
) -> Iterator[subprocess.Popen[bytes]]:
    """A ``celery worker`` on the app's broker, in a process group of its own (a
    test can kill it with its pool's children), stopped warm (SIGTERM) at the end."""
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tasks", "worker", "-P", pool,
         "-c", str(concurrency), "-Q", queue, "--loglevel", "warning",
         "--without-gossip", "--without-mingle", "-n", f"{name}@%h"],
        cwd=APP, start_new_session=True,
    )  # fmt: skip
    try:
        yield process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(120)


class Record:
    """What the ``record`` tasks logged: which started and which finished, where."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[tuple[str, int, int]]:
        if not self.path.exists():
            return []
        found = []
        for line in self.path.read_text().splitlines():
            word, number, pid = line.split()
            found.append((word, int(number), int(pid)))
        return found

    def done(self) -> set[int]:
        return {number for word, number, _ in self.lines() if word == "done"}

    def wait(self, what: str, ready: Callable[[], bool], seconds: float = 300) -> None:
        """Wait until ``ready()``: the workers' progress.  ``seconds`` only bounds a
        worker that never gets there, and the failure says what was waited for."""
        deadline = time.monotonic() + seconds
        while not ready():
            assert time.monotonic() < deadline, (
                f"waited {seconds:.0f} s for {what}; last lines: {self.lines()[-5:]}"
            )
            time.sleep(0.05)


def queue_name(test: str) -> str:
    """A queue of the test's own: nothing left by another run reaches its workers."""
    return f"{test}-{uuid.uuid4().hex[:8]}"


# Bounds only a run that hangs: ActiveMQ takes 10,000 tasks in about a minute on an
# idle machine and in over five with other work beside it.
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("pool", ["solo", "prefork"])
def test_a_worker_runs_10000_tasks_and_answers_ping(
    broker: BrokerUnderTest, pool: str, tmp_path: Path
) -> None:
    with celery_app(broker.url(), tmp_path / "record") as tasks, worker(pool, pool):
        results = [tasks.add.delay(n, n) for n in range(TASKS)]
        # Each wait is for the worker's answer; a worker that starts slowly is waited for.
        assert [r.get(timeout=300) for r in results] == [2 * n for n in range(TASKS)]
        replies = tasks.app.control.inspect(timeout=10).ping() or {}
        assert any(name.startswith(f"{pool}@") and reply == {"ok": "pong"}
                   for name, reply in replies.items()), replies  # fmt: skip


def test_a_worker_killed_mid_task_loses_no_task(broker: BrokerUnderTest, tmp_path: Path) -> None:
    """``acks_late``: a task is acknowledged when it has run, so what a worker held
    when it was killed (the task it ran, and its prefetched ones) is delivered
    again, by the broker, to the worker that is left."""
    record = Record(tmp_path / "record")
    queue = queue_name("killed")
    with celery_app(broker.url(), record.path) as tasks:
        for number in range(20):
            tasks.record.apply_async((number, 0.3), queue=queue)
        with worker("prefork", "doomed", queue=queue, concurrency=1) as doomed:
            record.wait("the first task to start", lambda: bool(record.lines()))
            os.killpg(doomed.pid, signal.SIGKILL)
            doomed.wait()
        killed = [
            number
            for word, number, pid in record.lines()
            if word == "start" and number not in record.done()
        ]
        assert killed, "the worker was killed between tasks, not in one"
        with worker("solo", "survivor", queue=queue):
            record.wait("every task done", lambda: record.done() == set(range(20)))
    starts = [number for word, number, _ in record.lines() if word == "start"]
    assert all(starts.count(number) >= 2 for number in killed), record.lines()


def test_a_broker_restart_mid_run_loses_no_task(
    private_broker: PrivateBroker, tmp_path: Path
) -> None:
    """Tasks are sent ``persistent`` to a queue the broker keeps on disk; the worker
    rides the restart out through Celery's reconnect, and then takes new ones.  The
    embedded broker keeps its queues in memory only: there, only the tasks sent after
    the restart are owed."""
    broker = private_broker.under_test
    durable = "durability" not in broker.missing
    record = Record(tmp_path / "record")
    queue = queue_name("restart")
    with celery_app(broker.url(), record.path) as tasks, worker("solo", "restart", queue=queue):
        for number in range(200):
            tasks.record.apply_async((number, 0.02), queue=queue)
        record.wait("40 tasks done before the restart", lambda: len(record.done()) >= 40)
        private_broker.restart()
        for number in range(200, 220):
            tasks.record.apply_async((number, 0.0), queue=queue)
        owed = set(range(220)) if durable else set(range(200, 220))
        record.wait("every task owed done after the restart", lambda: owed <= record.done())
