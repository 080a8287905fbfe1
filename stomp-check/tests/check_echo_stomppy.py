"""The echo script of ``stomp-check client``, written for stomp.py.

``python stomp-check/tests/check_echo_stomppy.py PORT``: connect (STOMP 1.2, heart-beats
500,500), subscribe to /queue/check, echo each message's body and ``x-``
headers to /queue/echo; start over when the session ends; stop when CONNECT
gets the ERROR ``check-client done``.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any

import stomp

DONE = "check-client done"


class Echo(stomp.ConnectionListener):  # type: ignore[misc]
    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.ended = threading.Event()
        self.done = False

    def on_message(self, frame: Any) -> None:
        headers = {k: v for k, v in frame.headers.items() if k.startswith("x-")}
        self.conn.send("/queue/echo", frame.body, headers=headers, receipt="echo")

    def on_error(self, frame: Any) -> None:
        if frame.headers.get("message") == DONE:
            self.done = True
        self.ended.set()

    def on_disconnected(self) -> None:
        self.ended.set()


def main(port: int, sessions: int = 500) -> int:
    for count in range(1, sessions + 1):
        conn = stomp.Connection12(
            [("127.0.0.1", port)],
            heartbeats=(500, 500),
            auto_decode=False,
            reconnect_attempts_max=1,
        )
        listener = Echo(conn)
        conn.set_listener("echo", listener)
        try:
            conn.connect(wait=True, headers={"host": "/"})
            conn.subscribe("/queue/check", id="1", ack="auto")
            listener.ended.wait(30)
        except Exception:
            pass
        if listener.done:
            return count
        with contextlib.suppress(Exception):
            conn.disconnect()
    return sessions


if __name__ == "__main__":
    main(int(sys.argv[1]))
