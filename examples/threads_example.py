"""The same small program in every I/O style: this is the blocking one.

python examples/threads_example.py [PORT]
"""

from __future__ import annotations

import sys

import stomp_proto.threads as stomp


def main(port: int = 61613) -> list[bytes]:
    with (
        stomp.connect("127.0.0.1", port, heartbeat=(5000, 5000)) as client,
        client.subscribe("/queue/example", ack="client-individual") as messages,
    ):
        for n in range(3):
            client.send("/queue/example", f"message {n}", receipt=True)
        with client.transaction() as tx:
            client.send("/queue/example", "in a transaction", transaction=tx)
            client.send("/queue/example", "delivered on COMMIT", transaction=tx)

        received = []
        for message in messages:
            received.append(message.body)
            client.ack(message)
            if len(received) == 5:
                break
    return received


if __name__ == "__main__":
    for body in main(*map(int, sys.argv[1:])):
        print(body.decode())
