"""A non-blocking STOMP server on selectors: many clients, heart-beats, one thread.

    python examples/selectors_server.py PORT

A SEND goes to every subscription to its destination, on any connection
(topic semantics: nothing is stored).  Next to the blocking
``plain_socket_server.py`` it shows what a non-blocking server adds: an output
buffer per client, heart-beat timers (``get_timer`` / ``handle_timer``), and a
lingering close that does not block the loop.  The real broker is
``stomp_proto.broker``.
"""

from __future__ import annotations

import itertools
import selectors
import socket
import sys
import time

from stomp_proto import (
    DRAIN_BYTES,
    DRAIN_TIMEOUT,
    Connect,
    Connected,
    ConnectionState,
    Error,
    Event,
    Message,
    RemoteProtocolError,
    Send,
    ServerConnection,
)


class Client:
    """One connection: its session, what is still to be written, how it is closing."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.conn = ServerConnection()
        self.out = bytearray()
        #: Once the session is over: when to stop waiting for the client to close.
        self.linger_until: float | None = None
        self.discarded = 0
        self.half_closed = False


class SelectorsServer:
    """Serve STOMP on ``listener`` until ``stop_after`` sessions have ended and their
    connections are closed (or forever).

    ``heartbeat`` is what the server offers in CONNECTED, ``(send every ms,
    expect every ms)``.  ``endings`` records what ended each session
    (``ServerConnection.ended_by``).
    """

    def __init__(self, listener: socket.socket, *, heartbeat: tuple[int, int] = (1000, 1000)):
        listener.setblocking(False)
        self.listener = listener
        self.heartbeat = heartbeat
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ)
        self.clients: dict[socket.socket, Client] = {}
        self.ids = itertools.count(1)
        self.endings: list[object] = []

    def run(self, stop_after: int | None = None) -> None:
        # Until enough sessions have ended and every connection is closed.
        while stop_after is None or len(self.endings) < stop_after or self.clients:
            for key, mask in self.selector.select(self.wait()):
                if key.fileobj is self.listener:
                    self.accept()
                    continue
                client: Client = key.data
                if mask & selectors.EVENT_WRITE and self.serving(client):
                    self.flush(client)
                if mask & selectors.EVENT_READ and self.serving(client):
                    self.read(client)
            self.on_time(time.monotonic())
        self.selector.close()

    def wait(self) -> float | None:
        """Seconds until the earliest timer of any client: a heart-beat or a linger."""
        deadlines = [
            c.linger_until if c.linger_until is not None else c.conn.get_timer()
            for c in self.clients.values()
        ]
        due = [d for d in deadlines if d is not None]
        return max(0.0, min(due) - time.monotonic()) if due else None

    # -- reading ---------------------------------------------------------------------

    def accept(self) -> None:
        sock, _ = self.listener.accept()
        sock.setblocking(False)
        client = self.clients[sock] = Client(sock)
        self.selector.register(sock, selectors.EVENT_READ, client)

    def serving(self, client: Client) -> bool:
        return self.clients.get(client.sock) is client

    def read(self, client: Client) -> None:
        try:
            data = client.sock.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""  # reset: as good as the end of the stream
        if client.linger_until is not None:
            # The session is over: discard, until the client closes or sent too much.
            client.discarded += len(data)
            if not data or client.discarded >= DRAIN_BYTES:
                self.drop(client)
            return
        client.conn.receive_data(data or None)
        self.process(client)

    def process(self, client: Client) -> None:
        """Answer every event the session has, one at a time; end it if it is over."""
        conn = client.conn
        try:
            while (event := conn.next_event()) is not None:
                self.answer(client, event)
        except RemoteProtocolError as exc:
            if exc.event_hint is not None:
                self.write(client, conn.send(exc.event_hint))
        if self.serving(client):
            self.end_if_over(client)

    def answer(self, client: Client, event: Event) -> None:
        conn = client.conn
        if isinstance(event, Connect):
            # A CONNECT is answered with CONNECTED, or refused with an ERROR.
            if event.login not in (None, "guest"):
                self.write(client, conn.send(Error(message="unknown user")))
                return
            connected = Connected(heartbeat=self.heartbeat, server="selectors-example/1")
            self.write(client, conn.send(connected))
        elif isinstance(event, Send):
            for other in list(self.clients.values()):  # a failed write drops one
                if other.conn.state is ConnectionState.CONNECTED:
                    self.deliver(other, event)
        # The rest - SUBSCRIBE, ACK, DISCONNECT, HeartBeat, ... - needs only its RECEIPT.
        self.write(client, conn.send_receipt(event))

    def deliver(self, client: Client, send: Send) -> None:
        for sub in client.conn.subscriptions.values():
            if sub.destination == send.destination:
                n = next(self.ids)
                ack = f"a{n}" if sub.ack != "auto" else None
                message = Message(send.destination, f"m{n}", sub.id, send.body, ack=ack)
                self.write(client, client.conn.send(message))

    # -- time ------------------------------------------------------------------------

    def on_time(self, now: float) -> None:
        for client in list(self.clients.values()):
            if client.linger_until is not None:
                if now >= client.linger_until:
                    self.drop(client)
                continue
            deadline = client.conn.get_timer()
            if deadline is not None and deadline <= now:
                # A heart-beat to send, or the client silent too long (HeartBeatTimeout).
                self.write(client, client.conn.handle_timer(now))
                if self.serving(client):
                    self.process(client)

    # -- writing and closing ----------------------------------------------------------

    def write(self, client: Client, data: bytes) -> None:
        if data and self.serving(client):
            client.out += data
            self.flush(client)

    def flush(self, client: Client) -> None:
        try:
            sent = client.sock.send(client.out) if client.out else 0
        except BlockingIOError:
            sent = 0
        except OSError:
            self.drop(client)
            return
        del client.out[:sent]
        if client.linger_until is not None and not client.out and not client.half_closed:
            # Everything written: half-close, so the client reads it and then the end.
            client.half_closed = True
            try:
                client.sock.shutdown(socket.SHUT_WR)
            except OSError:
                self.drop(client)
                return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.out else 0)
        self.selector.modify(client.sock, events, client)

    def end_if_over(self, client: Client) -> None:
        """Once the session is over, linger: half-close when everything is written,
        discard what still comes, close when the client does or the bounds pass."""
        conn = client.conn
        if conn.state is not ConnectionState.CLOSED or client.linger_until is not None:
            return
        self.endings.append(conn.ended_by)
        client.linger_until = time.monotonic() + DRAIN_TIMEOUT
        self.flush(client)

    def drop(self, client: Client) -> None:
        if not self.serving(client):
            return
        if client.linger_until is None:
            self.endings.append(client.conn.ended_by)  # a transport failure
        self.selector.unregister(client.sock)
        client.sock.close()
        del self.clients[client.sock]


if __name__ == "__main__":
    with socket.create_server(("127.0.0.1", int(sys.argv[1]))) as listener:
        SelectorsServer(listener).run()
