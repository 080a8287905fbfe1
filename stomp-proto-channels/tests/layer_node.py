"""One "Django process" of test_processes.py: an app of make_app() on the SQLite
channel layer of channels-lite, in the database file given, with one STOMP
client connected through channels.testing.WebsocketCommunicator.

    python layer_node.py DATABASE subscribe DESTINATION   # prints "subscribed", then each body
    python layer_node.py DATABASE send DESTINATION BODY   # prints "sent" once it has the RECEIPT

The subscriber ends after its first MESSAGE.  Run by the tests, one line at a
time on stdout.
"""

from __future__ import annotations

import asyncio
import sys

import django
from django.conf import settings


def configure(database: str) -> None:
    settings.configure(
        SECRET_KEY="stomp-proto-channels tests",
        INSTALLED_APPS=["channels", "channels_lite"],
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": database}},
        CHANNEL_LAYERS={
            "default": {
                "BACKEND": "channels_lite.layers.core.SQLiteChannelLayer",
                "CONFIG": {"database": "default"},
            }
        },
        USE_TZ=True,
    )
    django.setup()


async def node(role: str, destination: str, body: str) -> None:
    from channels.testing import WebsocketCommunicator
    from stomp_proto_channels import StompConsumer, close_app, make_app

    from stomp_proto import Frame, FrameDecoder, FrameEncoder, HeartBeat

    app = make_app()
    communicator = WebsocketCommunicator(
        StompConsumer.as_asgi(app=app), "/ws", subprotocols=["v12.stomp"]
    )
    connected, _ = await communicator.connect(60)
    assert connected
    encoder, decoder = FrameEncoder(), FrameDecoder()

    async def write(command: str, *headers: tuple[str, str], data: bytes = b"") -> None:
        await communicator.send_to(bytes_data=encoder.encode(Frame(command, headers, data)))

    async def expect(command: str) -> Frame:
        while True:
            output = await communicator.receive_output(60)
            decoder.receive_data(output["bytes"])
            while (item := decoder.next_frame()) is not None:
                if not isinstance(item, HeartBeat):
                    assert item.command == command, item
                    return item

    await write("CONNECT", ("accept-version", "1.2"), ("host", "x"))
    await expect("CONNECTED")
    if role == "subscribe":
        await write("SUBSCRIBE", ("id", "1"), ("destination", destination), ("receipt", "s"))
        await expect("RECEIPT")
        print("subscribed", flush=True)
        print((await expect("MESSAGE")).body.decode(), flush=True)
    else:
        await write("SEND", ("destination", destination), ("receipt", "r"), data=body.encode())
        await expect("RECEIPT")
        print("sent", flush=True)
    await communicator.disconnect(timeout=60)
    await close_app(app)


def main() -> None:
    database, role, destination, *rest = sys.argv[1:]
    configure(database)
    if role == "migrate":
        from django.core.management import call_command

        call_command("migrate", "channels_lite", verbosity=0)
        print("migrated", flush=True)
        return
    asyncio.run(node(role, destination, rest[0] if rest else ""))


if __name__ == "__main__":
    main()
