"""The same small program in every I/O style: this is asyncio's.

    python examples/asyncio_example.py [PORT]

Sends three messages to a queue with receipts, reads them back with
client-individual acknowledgements, then sends two more in one transaction.
"""

from __future__ import annotations

import asyncio
import sys

import stomp_proto.asyncio as stomp


async def main(port: int = 61613) -> list[bytes]:
    async with (
        stomp.connect("127.0.0.1", port, heartbeat=(5000, 5000)) as client,
        client.subscribe("/queue/example", ack="client-individual") as messages,
    ):
        for n in range(3):
            await client.send("/queue/example", f"message {n}", receipt=True)
        async with client.transaction() as tx:
            await client.send("/queue/example", "in a transaction", transaction=tx)
            await client.send("/queue/example", "delivered on COMMIT", transaction=tx)

        received = []
        async for message in messages:
            received.append(message.body)
            await client.ack(message)
            if len(received) == 5:
                break
    return received


if __name__ == "__main__":
    for body in asyncio.run(main(*map(int, sys.argv[1:]))):
        print(body.decode())
