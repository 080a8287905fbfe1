"""A one-connection STOMP server on a plain blocking socket, built on ServerConnection.

    python examples/plain_socket_server.py PORT

It accepts one client and delivers every SEND to the subscriptions on the same
connection (a SEND in a transaction at its COMMIT): enough to show the server
half of the loop.  It offers no heart-beats (``examples/selectors_server.py``
drives them); the real broker is ``stomp_proto.broker``.
"""

from __future__ import annotations

import itertools
import socket
import sys

from stomp_proto import (
    Abort,
    Commit,
    Connect,
    Connected,
    ConnectionState,
    Error,
    Event,
    Message,
    RemoteProtocolError,
    Send,
    ServerConnection,
    drain_and_close,
)


class Echo:
    """The server's policy: whom to let in, where a SEND goes."""

    def __init__(self, conn: ServerConnection) -> None:
        self.conn = conn
        self.ids = itertools.count(1)
        #: SENDs of open transactions, delivered at COMMIT (1.2 §BEGIN).
        self.held: dict[str, list[Send]] = {}

    def answer(self, event: Event) -> bytes:
        """The bytes that answer ``event``: what it asked for, then its RECEIPT."""
        conn = self.conn
        reply = b""
        if isinstance(event, Connect):
            # A CONNECT is answered with CONNECTED, or with an ERROR that refuses it.
            if event.login not in (None, "guest"):
                return conn.send(Error(message="unknown user"))
            reply = conn.send(Connected(session="demo", server="plain-socket-example/1"))
        elif isinstance(event, Send) and event.transaction is not None:
            self.held.setdefault(event.transaction, []).append(event)
        elif isinstance(event, Send):
            reply = self.deliver(event)
        elif isinstance(event, Commit):
            reply = b"".join(self.deliver(send) for send in self.held.pop(event.transaction, []))
        elif isinstance(event, Abort):
            self.held.pop(event.transaction, None)
        # SUBSCRIBE, UNSUBSCRIBE, ACK, NACK, BEGIN: the connection keeps their books.
        # DISCONNECT: its RECEIPT (below) ends the session.  HeartBeat: nothing to do.
        # The RECEIPT comes last, once the frame's work is done (1.2 §RECEIPT).
        return reply + conn.send_receipt(event)

    def deliver(self, send: Send) -> bytes:
        out = b""
        for sub in self.conn.subscriptions.values():
            if sub.destination == send.destination:
                n = next(self.ids)
                ack = f"a{n}" if sub.ack != "auto" else None
                message = Message(send.destination, f"m{n}", sub.id, send.body, ack=ack)
                out += self.conn.send(message)
        return out


def serve_one(listener: socket.socket, *, strict: bool = True) -> None:
    """Serve one client until its session ends, then close so that the last frame arrives.

    ``strict=False``: let in the clients RabbitMQ and ActiveMQ let in (stomp.py's
    default connection sends no ``host``, which STOMP 1.1 requires).
    """
    sock, _ = listener.accept()
    conn = ServerConnection(strict=strict)
    policy = Echo(conn)
    try:
        while conn.state is not ConnectionState.CLOSED:
            conn.receive_data(sock.recv(65536) or None)  # b"": the client closed
            # One event at a time, each answered before the next is parsed: a good
            # frame before a bad one in the same read is still served.
            while (event := conn.next_event()) is not None:
                sock.sendall(policy.answer(event))
    except RemoteProtocolError as exc:
        # The hint is the ERROR the specs ask a server to send before closing.
        if exc.event_hint is not None:
            sock.sendall(conn.send(exc.event_hint))
    # Half-close, discard what the client still sends, close: a plain close
    # could reset the connection and destroy the ERROR before it is read.
    drain_and_close(sock)


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", int(sys.argv[1]))) as listener:
        serve_one(listener)
