"""The frames each STOMP version's calls send, as stomp.py's methods build them.

:class:`Protocol10`, :class:`Protocol11` and :class:`Protocol12` are mixed into
the connections of :mod:`stomp_proto.stomppy.connect`; they differ in the ack
headers (1.0: ``message-id``; 1.1: ``message-id`` and ``subscription``; 1.2:
``id``) and in the login frame (STOMP from 1.1, with ``host`` from 1.2).
Header values are escaped by the codec, per version, not here.
"""

from __future__ import annotations

from typing import Any

from .constants import (
    CMD_ABORT,
    CMD_ACK,
    CMD_BEGIN,
    CMD_COMMIT,
    CMD_CONNECT,
    CMD_DISCONNECT,
    CMD_NACK,
    CMD_SEND,
    CMD_STOMP,
    CMD_SUBSCRIBE,
    CMD_UNSUBSCRIBE,
    HDR_ACCEPT_VERSION,
    HDR_ACK,
    HDR_CONTENT_TYPE,
    HDR_DESTINATION,
    HDR_HEARTBEAT,
    HDR_HOST,
    HDR_ID,
    HDR_LOGIN,
    HDR_MESSAGE_ID,
    HDR_PASSCODE,
    HDR_RECEIPT,
    HDR_SUBSCRIPTION,
    HDR_TRANSACTION,
)
from .exception import ConnectFailedException
from .transport import DISCONNECT_WAIT, Transport
from .utils import Frame, get_uuid, merge_headers

__all__ = ["Protocol10", "Protocol11", "Protocol12"]


class Protocol10:
    """STOMP 1.0's calls."""

    #: The STOMP version the connection asks for.
    version = "1.0"

    def __init__(self, transport: Transport, auto_content_length: bool = True) -> None:
        #: The connection's engine (socket, reader thread, heart-beats, reconnects).
        self.transport = transport
        #: Whether frames with a body get a ``content-length`` header.
        self.auto_content_length = auto_content_length
        transport.auto_content_length = auto_content_length

    def send_frame(self, cmd: str, headers: dict[str, Any] | None = None, body: Any = "") -> None:
        """Send one frame of ``cmd``, ``headers`` and ``body``."""
        self.transport.transmit(Frame(cmd, headers if headers is not None else {}, body))

    def _login_headers(self, username: str | None, passcode: str | None) -> dict[str, Any]:
        headers: dict[str, Any] = {HDR_ACCEPT_VERSION: self.version}
        if username is not None:
            headers[HDR_LOGIN] = username
        if passcode is not None:
            headers[HDR_PASSCODE] = passcode
        return headers

    def _login(self, command: str, headers: dict[str, Any], wait: bool) -> None:
        transport = self.transport
        if transport.owns_reconnect() or transport.is_connected():
            # The reader is reconnecting (or is connected): connect() joins it.
            if wait and not transport.on_reader_thread():
                transport.wait_for_connection()
            return
        transport.start()
        self._logging_in(headers)
        self.send_frame(command, headers)
        if wait:
            try:
                transport.wait_for_connection()
            except ConnectFailedException:
                transport.stop()
                raise

    def _logging_in(self, headers: dict[str, Any]) -> None:
        """Complete the login headers once the socket is open (1.2 names the host)."""

    def connect(
        self,
        username: str | None = None,
        passcode: str | None = None,
        wait: bool = False,
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Open the connection and log in; with ``wait=True`` return once the broker
        accepted (ConnectFailedException when it did not)."""
        merged = merge_headers([headers, keyword_headers])
        merged.update(self._login_headers(username, passcode))
        self._login(CMD_CONNECT, merged, wait)

    def disconnect(
        self,
        receipt: str | None = None,
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Send DISCONNECT and wait (10 s at most) for its receipt; no reconnect follows."""
        transport = self.transport
        if not transport.is_connected():
            transport.stop()  # reconnecting, or gone: stop for good
            return
        transport.notify("disconnecting")
        merged = merge_headers([headers, keyword_headers])
        merged[HDR_RECEIPT] = receipt or get_uuid()
        try:
            self.send_frame(CMD_DISCONNECT, merged)
        except Exception:
            transport.stop()
            raise
        if not transport.wait_until_stopped(DISCONNECT_WAIT):
            transport.stop()

    def send(
        self,
        destination: str,
        body: Any,
        content_type: str | None = None,
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Send a message to ``destination``."""
        if destination is None or body is None:
            raise ValueError("send() needs a destination and a body")
        merged = merge_headers([headers, keyword_headers])
        merged[HDR_DESTINATION] = destination
        if content_type:
            merged[HDR_CONTENT_TYPE] = content_type
        self.send_frame(CMD_SEND, merged, body)

    def subscribe(
        self,
        destination: str,
        id: str | None = None,
        ack: str = "auto",
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Subscribe to ``destination``; the subscription survives reconnects."""
        if destination is None:
            raise ValueError("subscribe() needs a destination")
        merged = merge_headers([headers, keyword_headers])
        merged[HDR_DESTINATION] = destination
        if id is not None:
            merged[HDR_ID] = id
        merged[HDR_ACK] = ack
        self.send_frame(CMD_SUBSCRIBE, merged)

    def unsubscribe(
        self,
        destination: str | None = None,
        id: str | None = None,
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """End the subscription named by ``id`` (or ``destination``, in 1.0)."""
        merged = merge_headers([headers, keyword_headers])
        if id is not None:
            merged[HDR_ID] = id
        elif destination is not None:
            merged[HDR_DESTINATION] = destination
        else:
            raise ValueError("unsubscribe() needs an id or a destination")
        self.send_frame(CMD_UNSUBSCRIBE, merged)

    def _settle(
        self, cmd: str, headers: dict[str, Any], transaction: str | None, receipt: str | None
    ) -> None:
        if transaction:
            headers[HDR_TRANSACTION] = transaction
        if receipt:
            headers[HDR_RECEIPT] = receipt
        self.send_frame(cmd, headers)

    def ack(self, id: str, transaction: str | None = None, receipt: str | None = None) -> None:
        """Acknowledge the message ``id`` (its ``message-id``)."""
        self._settle(CMD_ACK, {HDR_MESSAGE_ID: id}, transaction, receipt)

    def begin(
        self,
        transaction: str | None = None,
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> str:
        """Begin a transaction (named ``transaction``, else a fresh id); returns its id."""
        merged = merge_headers([headers, keyword_headers])
        name = transaction or get_uuid()
        merged[HDR_TRANSACTION] = name
        self.send_frame(CMD_BEGIN, merged)
        return name

    def commit(
        self,
        transaction: str | None = None,
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Commit ``transaction``."""
        if transaction is None:
            raise ValueError("commit() needs the transaction's id")
        merged = merge_headers([headers, keyword_headers])
        merged[HDR_TRANSACTION] = transaction
        self.send_frame(CMD_COMMIT, merged)

    def abort(
        self, transaction: str, headers: dict[str, Any] | None = None, **keyword_headers: Any
    ) -> None:
        """Abort ``transaction``: the broker drops what was sent and acked in it."""
        if transaction is None:
            raise ValueError("abort() needs the transaction's id")
        merged = merge_headers([headers, keyword_headers])
        merged[HDR_TRANSACTION] = transaction
        self.send_frame(CMD_ABORT, merged)


class Protocol11(Protocol10):
    """STOMP 1.1's calls: heart-beats, NACK, ``subscription`` on acks."""

    version = "1.1"

    def __init__(
        self,
        transport: Transport,
        heartbeats: tuple[int, int] = (0, 0),
        auto_content_length: bool = True,
        heart_beat_receive_scale: float = 1.5,
    ) -> None:
        Protocol10.__init__(self, transport, auto_content_length)
        transport.requested_heartbeats = (int(heartbeats[0]), int(heartbeats[1]))
        transport.heartbeats = transport.requested_heartbeats
        transport.heart_beat_receive_scale = heart_beat_receive_scale

    @property
    def heartbeats(self) -> tuple[int, int]:
        """What was asked for, then (once connected) the agreed ``(send, receive)`` ms."""
        return self.transport.heartbeats

    @property
    def heartbeat_thread(self) -> Any:
        """The thread that keeps heart-beats (the reader), None when none are kept."""
        return self.transport if self.transport.heart_beating else None

    def _login_headers(self, username: str | None, passcode: str | None) -> dict[str, Any]:
        headers = Protocol10._login_headers(self, username, passcode)
        if self.transport.vhost:
            headers[HDR_HOST] = self.transport.vhost
        if self.transport.requested_heartbeats != (0, 0):
            headers[HDR_HEARTBEAT] = "{},{}".format(*self.transport.requested_heartbeats)
        return headers

    def connect(
        self,
        username: str | None = None,
        passcode: str | None = None,
        wait: bool = False,
        headers: dict[str, Any] | None = None,
        with_connect_command: bool = False,
        **keyword_headers: Any,
    ) -> None:
        """Open the connection and log in (a STOMP frame, or CONNECT with
        ``with_connect_command=True``); ``wait=True`` returns once accepted."""
        merged = merge_headers([headers, keyword_headers])
        merged.update(self._login_headers(username, passcode))
        self._login(CMD_CONNECT if with_connect_command else CMD_STOMP, merged, wait)

    def subscribe(
        self,
        destination: str,
        id: str | None = None,
        ack: str = "auto",
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Subscribe to ``destination`` under ``id`` (required from 1.1)."""
        if id is None:
            raise ValueError("subscribe() needs an id from STOMP 1.1")
        Protocol10.subscribe(self, destination, id, ack, headers, **keyword_headers)

    def unsubscribe(  # type: ignore[override]
        self,
        id: str,
        headers: dict[str, Any] | None = None,
        **keyword_headers: Any,
    ) -> None:
        """End the subscription ``id`` (other keywords are headers, ``destination`` too)."""
        Protocol10.unsubscribe(self, None, id, merge_headers([headers, keyword_headers]))

    def ack(  # type: ignore[override]
        self,
        id: str,
        subscription: str,
        transaction: str | None = None,
        receipt: str | None = None,
    ) -> None:
        """Acknowledge message ``id`` of ``subscription``."""
        self._settle(
            CMD_ACK, {HDR_MESSAGE_ID: id, HDR_SUBSCRIPTION: subscription}, transaction, receipt
        )

    def nack(
        self,
        id: str,
        subscription: str,
        transaction: str | None = None,
        receipt: str | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Refuse message ``id`` of ``subscription``."""
        headers = {**keyword_headers, HDR_MESSAGE_ID: id, HDR_SUBSCRIPTION: subscription}
        self._settle(CMD_NACK, headers, transaction, receipt)


class Protocol12(Protocol11):
    """STOMP 1.2's calls: acks by the message's ``ack`` header, ``host`` on login."""

    version = "1.2"

    def _logging_in(self, headers: dict[str, Any]) -> None:
        if HDR_HOST not in headers:  # 1.2 requires it: the host connected to
            current = self.transport.current_host_and_port or self.transport.host_and_ports[0]
            headers[HDR_HOST] = current[0]

    def ack(  # type: ignore[override]
        self,
        id: str,
        transaction: str | None = None,
        receipt: str | None = None,
    ) -> None:
        """Acknowledge the message whose ``ack`` header is ``id``."""
        self._settle(CMD_ACK, {HDR_ID: id}, transaction, receipt)

    def nack(  # type: ignore[override]
        self,
        id: str,
        transaction: str | None = None,
        receipt: str | None = None,
        **keyword_headers: Any,
    ) -> None:
        """Refuse the message whose ``ack`` header is ``id``."""
        self._settle(CMD_NACK, {**keyword_headers, HDR_ID: id}, transaction, receipt)
