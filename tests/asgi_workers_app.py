"""The app tests/test_asgi_workers.py serves with ``uvicorn --workers 2 --factory``.

A :class:`~stomp_proto.asgi.StompApp` relaying ``/topic/`` and ``/queue/``
to the broker that ``STOMP_RELAY_PORT`` (and ``STOMP_RELAY_LOGIN``,
``STOMP_RELAY_PASSCODE``, ``STOMP_RELAY_VHOST``) name, with app handlers
that tell the workers apart by their process id.  The user of a WebSocket is
named in its query string (``/ws?user=alice``).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import MutableMapping
from typing import Any

from stomp_proto.asgi import AppMessage, Relay, StompApp


def query_user(scope: MutableMapping[str, Any]) -> str | None:
    query = urllib.parse.parse_qs(bytes(scope.get("query_string", b"")).decode())
    return query.get("user", [None])[0]


def create_app() -> StompApp:
    relay = Relay(
        "127.0.0.1",
        int(os.environ["STOMP_RELAY_PORT"]),
        login=os.environ.get("STOMP_RELAY_LOGIN", "guest"),
        passcode=os.environ.get("STOMP_RELAY_PASSCODE", "guest"),
        vhost=os.environ.get("STOMP_RELAY_VHOST", "/"),
        timeout=20.0,
    )
    app = StompApp(relay=relay, authenticate=query_user)
    pid = str(os.getpid())

    @app.handler("/app/whoami")
    async def whoami(message: AppMessage) -> None:
        # To the sender's session only: which worker serves it.
        await message.reply(pid, destination="/user/queue/whoami")

    @app.handler("/app/shout")
    async def shout(message: AppMessage) -> None:
        # To a relayed topic: through the broker, to every worker's subscribers.
        topic = message.header("topic") or "/topic/shouts"
        await message.app.publish(topic, message.text.upper(), headers=[("worker", pid)])

    @app.handler("/app/notify")
    async def notify(message: AppMessage) -> None:
        # A user destination: this worker's sessions of the user only.
        assert message.user is not None
        await message.app.send_to_user(
            message.user, "/queue/news", message.text, headers=[("worker", pid)]
        )

    return app
