"""Two real processes share a topic through a channel layer that works across
processes without a server: channels-lite's SQLite layer on one database file.

Each process is tests/layer_node.py: an app of make_app() with one client.  A
SEND to the topic through the second process reaches the subscriber of the
first; the steps go one line of output at a time, with no sleeping.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("channels_lite")

pytestmark = pytest.mark.timeout(180)

NODE = Path(__file__).resolve().parent / "layer_node.py"


def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(NODE), *args], stdout=subprocess.PIPE, text=True)


def test_a_topic_crosses_two_processes(tmp_path: Path) -> None:
    database = str(tmp_path / "layer.sqlite3")
    migrate = subprocess.run(
        [sys.executable, str(NODE), database, "migrate", "-"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert migrate.stdout.strip() == "migrated", migrate.stderr
    subscriber = start(database, "subscribe", "/topic/across")
    try:
        assert subscriber.stdout is not None
        assert subscriber.stdout.readline().strip() == "subscribed"
        sender = start(database, "send", "/topic/across", "hello from the other process")
        out, _ = sender.communicate(timeout=120)
        assert (out.strip(), sender.returncode) == ("sent", 0)
        line = subscriber.stdout.readline().strip()
        assert line == "hello from the other process"
        assert subscriber.wait(timeout=120) == 0
    finally:
        if subscriber.poll() is None:
            subscriber.kill()
            subscriber.wait()
