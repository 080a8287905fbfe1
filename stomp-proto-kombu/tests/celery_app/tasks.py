"""The Celery app of test_celery.py: two config lines, a task."""

from __future__ import annotations

import os

import stomp_proto_kombu  # noqa: F401  (registers the stomp:// scheme)
from celery import Celery

app = Celery("tasks", broker=os.environ["STOMP_PROTO_KOMBU_BROKER"], backend="rpc://")
app.conf.broker_connection_retry_on_startup = True


@app.task
def add(x: int, y: int) -> int:
    return x + y
