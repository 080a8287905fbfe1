# What each error means, and a consumer that survives a broker restart.
# Self-contained: it starts the embedded broker itself.
import asyncio

import stomp_proto.asyncio as stomp
from stomp_proto import LocalProtocolError
from stomp_proto.broker import Broker

USERS = {"app": "secret"}


async def show_errors(port: int) -> None:
    # Nothing listens there: the connect fails with ConnectionLost.
    try:
        async with stomp.connect("127.0.0.1", 1, timeout=2):
            pass
    except stomp.ConnectionLost as exc:
        print("ConnectionLost:", exc)

    # The broker refuses the login: BrokerError carries its ERROR frame.
    try:
        async with stomp.connect("127.0.0.1", port, login="app", passcode="wrong"):
            pass
    except stomp.BrokerError as exc:
        print("BrokerError:", exc.message)

    # A mistake in our own use of the API: LocalProtocolError, the session goes on.
    async with (
        stomp.connect("127.0.0.1", port, login="app", passcode="secret") as client,
        client.subscribe("/queue/errors", ack="client-individual") as messages,
    ):
        await client.send("/queue/errors", "once", receipt=True)
        async for message in messages:
            await client.ack(message)
            try:
                await client.ack(message)  # acknowledged already
            except LocalProtocolError as exc:
                print("LocalProtocolError:", exc)
            break


async def survive_a_restart() -> None:
    # reconnect=Backoff(...) makes the client come back after the broker
    # restarts, and subscribe again; the broker's shutdown ERROR does not end it.
    broker = Broker("127.0.0.1", 0, users=USERS)
    await broker.start()
    port = broker.port
    async with (
        stomp.connect(
            "127.0.0.1",
            port,
            login="app",
            passcode="secret",
            reconnect=stomp.Backoff(initial=0.1, maximum=1.0),
        ) as client,
        client.subscribe("/queue/restart") as messages,
    ):
        await broker.close()  # the client is cut off...
        async with Broker("127.0.0.1", port, users=USERS):  # ...and comes back
            await client.send("/queue/restart", "sent after the restart", receipt=True)
            async for message in messages:
                print("received:", message.body.decode())
                break


async def main() -> None:
    async with Broker("127.0.0.1", 0, users=USERS) as broker:
        await show_errors(broker.port)
    await survive_a_restart()


asyncio.run(main())
