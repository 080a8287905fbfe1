"""A one-connection STOMP server on a plain socket, built on ServerConnection.

    python examples/plain_socket_server.py PORT

It accepts one client and delivers every SEND to the subscriptions on the same
connection: enough to show the server half of the loop.  The real broker is
``stomp_proto.broker``.
"""

from __future__ import annotations

import itertools
import socket
import sys

from stomp_proto import (
    Connect,
    Connected,
    ConnectionClosed,
    Disconnect,
    Message,
    Receipt,
    RemoteProtocolError,
    Send,
    ServerConnection,
    Subscribe,
)


def serve_one(listener: socket.socket) -> None:
    sock, _ = listener.accept()
    conn = ServerConnection()
    ids = itertools.count(1)
    with sock:
        while True:
            data = sock.recv(65536)
            conn.receive_data(data or None)
            try:
                events = list(conn)
            except RemoteProtocolError as exc:
                # The hint is the ERROR the specs ask a server to send before closing.
                if exc.event_hint is not None:
                    sock.sendall(conn.send(exc.event_hint))
                return
            for event in events:
                reply = b""
                if isinstance(event, Connect):
                    reply = conn.send(Connected(session="demo", server="plain-socket-example/1"))
                elif isinstance(event, Send):
                    for sub in conn.subscriptions.values():
                        if sub.destination == event.destination:
                            n = next(ids)
                            reply += conn.send(
                                Message(
                                    event.destination,
                                    f"m{n}",
                                    sub.id,
                                    event.body,
                                    ack=f"a{n}" if sub.ack != "auto" else None,
                                )
                            )
                elif isinstance(event, Subscribe):
                    pass  # the connection already records it in conn.subscriptions
                if getattr(event, "receipt", None) is not None:
                    reply += conn.send(Receipt(event.receipt))  # type: ignore[attr-defined]
                if reply:
                    sock.sendall(reply)
                if isinstance(event, (Disconnect, ConnectionClosed)):
                    return


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", int(sys.argv[1]))) as listener:
        serve_one(listener)
