"""A blocking STOMP client on a plain socket: the loop every adapter runs.

    python examples/plain_socket_client.py HOST PORT

Sends three messages to a queue it subscribes to, reads them back with
client-individual acknowledgements, and disconnects with a receipt.  All
protocol decisions are the ClientConnection's; this file only moves bytes and
tells the connection the time.
"""

from __future__ import annotations

import select
import socket
import sys
import time
from typing import TypeVar

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ConnectionState,
    Disconnect,
    Event,
    Message,
    Receipt,
    Send,
    Subscribe,
)

E = TypeVar("E", bound=Event)


class PlainSocketClient:
    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port))
        # Each frame goes out at once: with Nagle's algorithm a small frame
        # sent after a larger one can wait for the peer's delayed ACK (40 ms).
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.conn = ClientConnection()

    def send(self, event: Event) -> None:
        # send() returns the bytes; writing them is our job.
        self.sock.sendall(self.conn.send(event))

    def next_event(self) -> Event:
        """Block until the connection has an event for us."""
        while True:
            event = self.conn.next_event()
            if event is not None:
                return event
            # Nothing buffered: wait for data, but no longer than the next timer.
            deadline = self.conn.get_timer()
            now = time.monotonic()
            if deadline is not None and deadline <= now:
                # Time is only ever an argument: heart-beats to send, or a timeout event.
                self.sock.sendall(self.conn.handle_timer(now))
                continue
            # Wait with select() rather than a socket timeout: a timeout would
            # make every sendall() poll the socket first, one more system call
            # per frame sent.
            if deadline is not None:
                readable, _, _ = select.select([self.sock], [], [], deadline - now)
                if not readable:
                    continue  # the timer is due: handled at the top of the loop
            data = self.sock.recv(65536)
            self.conn.receive_data(data or None)  # b"" from recv means the peer closed

    def expect(self, kind: type[E]) -> E:
        """The next event of ``kind``, skipping others (heart-beats); raise if the session ends."""
        while True:
            event = self.next_event()
            if isinstance(event, kind):
                return event
            if self.conn.state is ConnectionState.CLOSED:
                # Error, HeartBeatTimeout, ConnectionClosed: conn.ended_by says which.
                raise RuntimeError(f"session ended: {self.conn.ended_by}")


def main(host: str, port: int) -> list[bytes]:
    client = PlainSocketClient(host, port)
    client.send(Connect(host="/", heartbeat=(1000, 1000)))
    connected = client.expect(Connected)
    print(f"connected: STOMP {connected.version}")

    client.send(Subscribe("/queue/demo", id="s1", ack="client-individual"))
    for n in range(3):
        client.send(Send("/queue/demo", f"hello {n}".encode(), content_type="text/plain"))

    bodies = []
    for _ in range(3):
        message = client.expect(Message)
        bodies.append(message.body)
        client.sock.sendall(client.conn.ack(message))  # the right ACK for the version

    client.send(Disconnect(receipt="bye"))
    client.expect(Receipt)
    client.sock.close()
    return bodies


if __name__ == "__main__":
    for body in main(sys.argv[1], int(sys.argv[2])):
        print(body.decode())
