"""The same small program in every I/O style: this is trio's.

python examples/trio_example.py [PORT]
"""

from __future__ import annotations

import sys

import trio

import stomp_proto.trio as stomp


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
    for body in trio.run(main, *map(int, sys.argv[1:])):
        print(body.decode())
