"""STOMP without a broker, over UDP multicast (stomp.py's ``stomp.adapter.multicast``).

``MulticastConnection()`` is a 1.2 connection whose "broker" is the local
network: each SEND goes to a multicast group as one datagram, and every
connection that joined the group delivers it to its own subscriptions on that
destination as a MESSAGE.  The broker's other replies are made locally: CONNECTED
at once, a RECEIPT for every frame that asks, sends inside a transaction held
until COMMIT (dropped at ABORT).  Nothing is stored or acknowledged: a message
reaches the connections listening when it is sent, or no one; a datagram lost
on the way is lost, and one that is not a SEND frame is ignored.

The listeners, the reader thread and the frames are the TCP connection's; only
the stream underneath differs.  The group (``MCAST_GRP``) and port
(``MCAST_PORT``) are stomp.py's defaults; ``group=`` and ``port=`` choose others
(the datagrams go no further than the local network: time-to-live 1).
"""

from __future__ import annotations

import contextlib
import itertools
import select
import socket
import struct
import threading
import uuid
from typing import Any

from ..._decoder import FrameDecoder
from ..._encoder import FrameEncoder
from ..._errors import ProtocolError
from ..._events import HeartBeat
from ..._frame import Frame as WireFrame
from ..connect import BaseConnection
from ..protocol import Protocol12
from ..transport import Transport

__all__ = ["MCAST_GRP", "MCAST_PORT", "MulticastConnection", "MulticastTransport"]

#: The multicast group joined by default (stomp.py's).
MCAST_GRP = "224.1.1.1"
#: The UDP port of the group by default (stomp.py's).
MCAST_PORT = 5000
#: The largest datagram read: a SEND frame must fit in one (UDP's limit).
_DATAGRAM = 65_535
#: The header that names the connection a SEND came from (not shown in MESSAGEs).
_SENDER = "x-stomp-proto-multicast-sender"


class _GroupStream:
    """A :class:`BlockingStream` that plays the broker: frames written to it are
    answered locally, SENDs go to the group, and SENDs from the group come back as
    MESSAGEs for the subscriptions made on this stream."""

    def __init__(self, group: str, port: int, ids: itertools.count[int]) -> None:
        self._group = (group, port)
        self._ids = ids
        self._listening = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        self._sending = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        # Local replies go through a socket pair, so that one select() waits on both.
        self._replies, self._reply_end = socket.socketpair()
        try:
            self._listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._listening.bind(("", port))
            membership = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton("0.0.0.0"))
            self._listening.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, membership)
            self._sending.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)
            self._sending.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        except BaseException:
            self.close()
            raise
        self._reply_end.setblocking(False)
        self._lock = threading.Lock()
        self._outgoing = FrameDecoder("1.2", strict=False)  # what the client writes
        self._encoder = FrameEncoder("1.2")
        self._subscriptions: dict[str, str] = {}  # destination -> subscription id
        self._transactions: dict[str, list[bytes]] = {}
        self._ended = False
        # Names this stream's datagrams, so that it knows its own SENDs coming back.
        self._token = uuid.uuid4().hex

    # -- the client's frames -----------------------------------------------------

    def send(self, data: bytes) -> None:
        with self._lock:
            if self._ended:
                raise OSError("the multicast connection is closed")
            self._outgoing.receive_data(data)
            while (item := self._outgoing.next_frame()) is not None:
                if not isinstance(item, HeartBeat):
                    self._handle(item)

    def _handle(self, frame: WireFrame) -> None:
        headers = dict(frame.headers[::-1])  # the first of repeated headers wins
        command = frame.command
        transaction = headers.get("transaction")
        if command in ("CONNECT", "STOMP"):
            self._reply("CONNECTED", [("version", "1.2"), ("server", "stomp_proto multicast")])
        elif command == "SUBSCRIBE":
            self._subscriptions[headers.get("destination", "")] = headers.get("id", "")
        elif command == "UNSUBSCRIBE":
            for destination, sid in list(self._subscriptions.items()):
                if sid == headers.get("id") or destination == headers.get("destination"):
                    del self._subscriptions[destination]
        elif command == "SEND":
            # The receipt of a SEND comes when the group has carried it back here (after
            # this connection's own copy of the message): for a SEND in a transaction,
            # after the COMMIT.
            sent = WireFrame(command, (*frame.headers, (_SENDER, self._token)), frame.body)
            datagram = self._encoder.encode(sent)
            if transaction is not None and transaction in self._transactions:
                self._transactions[transaction].append(datagram)
            else:
                self._sending.sendto(datagram, self._group)
            if "receipt" in headers:
                return
        elif command == "BEGIN" and transaction is not None:
            if transaction in self._transactions:
                self._error(f"transaction {transaction} was begun already")
            else:
                self._transactions[transaction] = []
        elif command in ("COMMIT", "ABORT") and transaction is not None:
            held = self._transactions.pop(transaction, None)
            if held is None:
                self._error(f"transaction {transaction} was not begun")
            elif command == "COMMIT":
                for datagram in held:
                    self._sending.sendto(datagram, self._group)
        if command == "DISCONNECT":
            self._ended = True
        if "receipt" in headers:
            # After a DISCONNECT's, the reader ends the connection (and closes this).
            self._reply("RECEIPT", [("receipt-id", headers["receipt"])])
        elif command == "DISCONNECT":
            self.shutdown()  # no receipt asked for: the reader sees the end

    def _error(self, message: str) -> None:
        # As a broker would say it, but the session goes on: there is no broker to end it.
        self._reply("ERROR", [("message", message)])

    def _reply(self, command: str, headers: list[tuple[str, str]], body: bytes = b"") -> None:
        self._reply_end.sendall(self._encoder.encode(WireFrame(command, tuple(headers), body)))

    # -- what the reader reads ---------------------------------------------------

    def fileno(self) -> int:
        return -1  # two sockets: an event loop cannot watch one for both

    def wait_readable(self, timeout: float | None) -> bool:
        ready, _, _ = select.select([self._replies, self._listening], [], [], timeout)
        return bool(ready)

    def receive(self) -> bytes | None:
        ready, _, _ = select.select([self._replies, self._listening], [], [], 0)
        if self._replies in ready:
            data = self._replies.recv(_DATAGRAM)
            return data or None
        if self._listening in ready:
            return self._delivered(self._listening.recv(_DATAGRAM))
        return b""

    def _delivered(self, datagram: bytes) -> bytes:
        """The MESSAGE frames that a datagram from the group makes here (maybe none)."""
        decoder = FrameDecoder("1.2", strict=False)
        try:
            decoder.receive_data(datagram)
            frame = decoder.next_frame()
        except ProtocolError:  # not ours, or cut short: a group carries others' datagrams
            return b""
        if not isinstance(frame, WireFrame) or frame.command != "SEND":
            return b""
        headers = dict(frame.headers[::-1])
        with self._lock:
            sid = self._subscriptions.get(headers.get("destination", ""))
        delivered = b""
        if sid is not None:
            ident = str(next(self._ids))
            dropped = ("receipt", "transaction", _SENDER)
            kept = [(n, v) for n, v in frame.headers if n not in dropped]
            message = (("subscription", sid), ("message-id", ident), ("ack", ident), *kept)
            delivered = bytes(self._encoder.encode(WireFrame("MESSAGE", message, frame.body)))
        if headers.get(_SENDER) == self._token and "receipt" in headers:
            receipt = WireFrame("RECEIPT", (("receipt-id", headers["receipt"]),), b"")
            delivered += bytes(self._encoder.encode(receipt))
        return delivered

    def shutdown(self) -> None:
        with contextlib.suppress(OSError):  # closed already: the reader saw the end
            self._reply_end.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        for sock in (self._listening, self._sending, self._replies, self._reply_end):
            sock.close()


class MulticastTransport(Transport):
    """The connection's engine, on the multicast group instead of a broker's socket."""

    def __init__(self, group: str = MCAST_GRP, port: int = MCAST_PORT, **options: Any) -> None:
        # One attempt: a group that cannot be joined (no multicast route) will not
        # become joinable by trying again.
        Transport.__init__(
            self, [(group, port)], reconnect_attempts_max=1, version="1.2", **options
        )
        self._message_ids = itertools.count(1)

    def _open(self, host: str, port: int) -> _GroupStream:
        return _GroupStream(host, port, self._message_ids)


class MulticastConnection(BaseConnection, Protocol12):
    """A STOMP 1.2 connection to a multicast group (no broker); see the module.

    Bodies reach the listeners as ``bytes`` (as from stomp.py's multicast
    connection; ``auto_decode=True`` gives ``str``); ``encoding`` is that of
    ``str`` bodies sent.
    """

    def __init__(
        self,
        encoding: str = "utf-8",
        auto_decode: bool = False,
        group: str = MCAST_GRP,
        port: int = MCAST_PORT,
    ) -> None:
        transport = MulticastTransport(group, port, encoding=encoding, auto_decode=auto_decode)
        Protocol12.__init__(self, transport, (0, 0))
