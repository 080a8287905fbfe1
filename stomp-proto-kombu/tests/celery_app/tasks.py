"""The Celery app of test_celery.py: two config lines, and its tasks."""

from __future__ import annotations

import os
import time
from pathlib import Path

import stomp_proto_kombu  # noqa: F401  (registers the stomp:// scheme)
from celery import Celery

app = Celery("tasks", broker=os.environ["STOMP_PROTO_KOMBU_BROKER"], backend="rpc://")
app.conf.broker_connection_retry_on_startup = True


@app.task
def add(x: int, y: int) -> int:
    return x + y


def _log(line: str) -> None:
    # One short append per line: whole lines, whichever worker process writes.
    with Path(os.environ["STOMP_PROTO_KOMBU_RECORD"]).open("a") as record:
        record.write(f"{line}\n")


@app.task(acks_late=True, ignore_result=True)
def record(number: int, seconds: float = 0.0) -> None:
    """Log its start and its end to the file ``$STOMP_PROTO_KOMBU_RECORD`` names, with
    the worker's pid: a test sees which task ran, where, and whether it finished."""
    _log(f"start {number} {os.getpid()}")
    time.sleep(seconds)
    _log(f"done {number} {os.getpid()}")
