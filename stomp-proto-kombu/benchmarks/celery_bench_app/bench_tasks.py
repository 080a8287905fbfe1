"""The Celery app of celery_vs_pyamqp.py: its broker and queue from the environment."""

from __future__ import annotations

import os

import stomp_proto_kombu  # noqa: F401  (registers the stomp:// scheme)
from celery import Celery

app = Celery("bench_tasks", broker=os.environ["BENCH_BROKER"], backend="rpc://")
app.conf.task_default_queue = os.environ["BENCH_QUEUE"]
app.conf.broker_connection_retry_on_startup = True


@app.task
def add(x: int, y: int) -> int:
    return x + y
