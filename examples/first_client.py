# A first client: python -m stomp_proto broker in one terminal, this in another.
import asyncio

import stomp_proto.asyncio as stomp


async def main() -> None:
    async with (
        stomp.connect("127.0.0.1", 61613, login="guest", passcode="guest") as client,
        client.subscribe("/queue/work", ack="client-individual") as messages,
    ):
        await client.send("/queue/work", "hello", receipt=True)
        async for message in messages:
            print(message.body)  # b'hello'
            await client.ack(message)  # the ACK this STOMP version wants
            break


asyncio.run(main())
