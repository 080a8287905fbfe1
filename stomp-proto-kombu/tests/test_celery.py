"""Celery end to end on the transport: a worker (solo and prefork pools) runs tasks
published by another process, answers through ``rpc://`` results, and answers
``celery inspect ping`` (a fanout exchange and direct replies), on every broker."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import BrokerUnderTest

APP = Path(__file__).parent / "celery_app"
TASKS = 200


@pytest.fixture(params=["solo", "prefork"])
def worker(broker: BrokerUnderTest, request: pytest.FixtureRequest) -> Iterator[str]:
    env = {**os.environ, "STOMP_PROTO_KOMBU_BROKER": broker.url()}
    process = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tasks", "worker", "-P", request.param,
         "-c", "2", "--loglevel", "warning", "--without-gossip", "--without-mingle",
         "-n", f"{request.param}@%h"],
        cwd=APP, env=env,
    )  # fmt: skip
    os.environ["STOMP_PROTO_KOMBU_BROKER"] = broker.url()
    sys.path.insert(0, str(APP))
    try:
        yield request.param
    finally:
        sys.path.remove(str(APP))
        process.terminate()
        process.wait(60)
        sys.modules.pop("tasks", None)


def test_a_worker_runs_tasks_and_answers_ping(worker: str) -> None:
    import tasks  # the app, on the broker the worker uses

    results = [tasks.add.delay(n, n) for n in range(TASKS)]
    # Each wait is for the worker's answer; a worker that starts slowly is waited for.
    assert [r.get(timeout=120) for r in results] == [2 * n for n in range(TASKS)]
    replies = tasks.app.control.inspect(timeout=10).ping() or {}
    assert any(name.startswith(f"{worker}@") and reply == {"ok": "pong"}
               for name, reply in replies.items()), replies  # fmt: skip
