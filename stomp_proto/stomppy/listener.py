"""Listeners: the callbacks a stomp.py program registers with ``set_listener``.

The connection calls them from its reader thread (one per connection), in the
order of the names they were registered under.  An exception raised by a
listener is logged and does not stop the reader, the heart-beats or the other
listeners.  ``on_disconnected`` is informational: the connection reconnects on
its own (see :doc:`/stomppy`); a listener that calls ``connect()`` from it
joins that reconnect instead of starting a second one.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from . import log
from .constants import CMD_CONNECT, CMD_STOMP, HDR_HEARTBEAT
from .exception import NotConnectedException
from .utils import Frame, calculate_heartbeats, clean_headers, default_create_thread

__all__ = [
    "ConnectionListener",
    "HeartbeatListener",
    "PrintingListener",
    "Publisher",
    "StatsListener",
    "TestListener",
    "WaitingListener",
]


class Publisher:
    """A registry of listeners by name (what connections implement)."""

    def set_listener(self, name: str, listener: ConnectionListener | None) -> None:
        """Register ``listener`` under ``name`` (replacing one registered there)."""

    def remove_listener(self, name: str) -> None:
        """Forget the listener registered under ``name``."""

    def get_listener(self, name: str) -> ConnectionListener | None:
        """The listener registered under ``name``, or None."""
        return None


class ConnectionListener:
    """The base of listeners: every callback, doing nothing."""

    def on_connecting(self, host_and_port: tuple[str, int]) -> None:
        """A socket to ``host_and_port`` is open; the CONNECT frame comes next."""

    def on_connected(self, frame: Frame) -> None:
        """The broker's CONNECTED frame arrived (on every connect and reconnect)."""

    def on_disconnecting(self) -> None:
        """``disconnect()`` is about to send DISCONNECT."""

    def on_disconnected(self) -> None:
        """The connection is gone (asked for, or lost: a reconnect then follows)."""

    def on_heartbeat_timeout(self) -> None:
        """Nothing arrived within the negotiated heart-beat deadline."""

    def on_before_message(self, frame: Frame) -> None:
        """A MESSAGE arrived; change ``frame`` here and ``on_message`` sees the change."""

    def on_message(self, frame: Frame) -> None:
        """A MESSAGE arrived."""

    def on_receipt(self, frame: Frame) -> None:
        """A RECEIPT arrived."""

    def on_error(self, frame: Frame) -> None:
        """An ERROR frame arrived."""

    def on_send(self, frame: Frame) -> None:
        """``frame`` is about to be sent (its passcode is in it: do not log it)."""

    def on_heartbeat(self) -> None:
        """A heart-beat (an end-of-line on its own) arrived."""

    def on_receiver_loop_completed(self, frame: Frame | None) -> None:
        """The reader thread has ended (no reconnect is left to try)."""


class WaitingListener(ConnectionListener):
    """Lets a thread wait for one receipt, or for the disconnection."""

    def __init__(self, receipt: str | None) -> None:
        #: Notified when the awaited receipt arrives.
        self.receipt_condition = threading.Condition()
        #: Notified on ``on_disconnected``.
        self.disconnect_condition = threading.Condition()
        #: The receipt id waited for.
        self.receipt = receipt
        #: Whether the receipt arrived (and was not waited for yet).
        self.received = False
        #: Whether ``on_disconnected`` was called.
        self.disconnected = False

    def on_receipt(self, frame: Frame) -> None:
        if frame.headers.get("receipt-id") == self.receipt:
            with self.receipt_condition:
                self.received = True
                self.receipt_condition.notify_all()

    def on_disconnected(self) -> None:
        with self.disconnect_condition:
            self.disconnected = True
            self.disconnect_condition.notify_all()

    def wait_on_receipt(self, timeout: float | None = None) -> bool:
        """Wait for the receipt (then forget it); False if ``timeout`` passed first."""
        with self.receipt_condition:
            got = self.receipt_condition.wait_for(lambda: self.received, timeout)
            self.received = False
            return got

    def wait_on_disconnected(self, timeout: float | None = None) -> bool:
        """Wait for ``on_disconnected``; False if ``timeout`` passed first."""
        with self.disconnect_condition:
            return self.disconnect_condition.wait_for(lambda: self.disconnected, timeout)


class StatsListener(ConnectionListener):
    """Counts connections, disconnections, messages, errors and heart-beats."""

    def __init__(self) -> None:
        #: ERROR frames received.
        self.errors = 0
        #: Sockets opened (``on_connecting`` calls): 2 after one reconnect.
        self.connections = 0
        #: ``on_disconnected`` calls.
        self.disconnects = 0
        #: MESSAGE frames received.
        self.messages = 0
        #: Frames sent (``on_send`` calls).
        self.messages_sent = 0
        #: Heart-beat deadlines missed by the broker.
        self.heartbeat_timeouts = 0
        #: Heart-beats received.
        self.heartbeat_count = 0

    def on_disconnected(self) -> None:
        self.disconnects += 1

    def on_error(self, frame: Frame) -> None:
        self.errors += 1

    def on_connecting(self, host_and_port: tuple[str, int]) -> None:
        self.connections += 1

    def on_message(self, frame: Frame) -> None:
        self.messages += 1

    def on_send(self, frame: Frame) -> None:
        self.messages_sent += 1

    def on_heartbeat_timeout(self) -> None:
        self.heartbeat_timeouts += 1

    def on_heartbeat(self) -> None:
        self.heartbeat_count += 1

    def __str__(self) -> str:
        return (
            f"Connections: {self.connections}\nDisconnects: {self.disconnects}\n"
            f"Messages sent: {self.messages_sent}\nMessages received: {self.messages}\n"
            f"Heartbeats received: {self.heartbeat_count}\nErrors: {self.errors}"
        )


class PrintingListener(ConnectionListener):
    """Prints every callback (or logs it at INFO with ``print_to_log=True``)."""

    def __init__(self, print_to_log: bool = False) -> None:
        #: Log at INFO instead of printing.
        self.print_to_log = print_to_log

    def _print(self, text: str, *args: Any) -> None:
        if self.print_to_log:
            log.info(text, *args)
        else:
            print(text % args)

    def on_connecting(self, host_and_port: tuple[str, int]) -> None:
        self._print("on_connecting %s %s", *host_and_port)

    def on_connected(self, frame: Frame) -> None:
        self._print("on_connected %s %s", frame.headers, frame.body)

    def on_disconnected(self) -> None:
        self._print("on_disconnected")

    def on_heartbeat_timeout(self) -> None:
        self._print("on_heartbeat_timeout")

    def on_before_message(self, frame: Frame) -> None:
        self._print("on_before_message %s %s", frame.headers, frame.body)

    def on_message(self, frame: Frame) -> None:
        self._print("on_message %s %s", frame.headers, frame.body)

    def on_receipt(self, frame: Frame) -> None:
        self._print("on_receipt %s %s", frame.headers, frame.body)

    def on_error(self, frame: Frame) -> None:
        self._print("on_error %s %s", frame.headers, frame.body)

    def on_send(self, frame: Frame) -> None:
        self._print("on_send %s %s %s", frame.cmd, clean_headers(frame.headers), frame.body)

    def on_heartbeat(self) -> None:
        self._print("on_heartbeat")


class TestListener(StatsListener, WaitingListener, PrintingListener):
    """Counts, waits and prints at once; keeps every message's ``(headers, body)``."""

    __test__ = False  # not a pytest test class, whatever its name

    def __init__(self, receipt: str | None = None, print_to_log: bool = False) -> None:
        StatsListener.__init__(self)
        PrintingListener.__init__(self, print_to_log)
        WaitingListener.__init__(self, receipt)
        #: Every message's ``(headers, body)``, in order.
        self.message_list: list[tuple[dict[str, Any], Any]] = []
        #: Notified on each message.
        self.message_condition = threading.Condition()
        #: A message arrived that was not waited for yet.
        self.message_received = False
        #: Notified on each heart-beat.
        self.heartbeat_condition = threading.Condition()
        #: A heart-beat arrived that was not waited for yet.
        self.heartbeat_received = False
        #: When the listener was made (``YYYYmmddHHMMSS``), for unique names.
        self.timestamp = time.strftime("%Y%m%d%H%M%S")

    def wait_for_message(self, timeout: float | None = None) -> bool:
        """Wait for a message not waited for yet; False if ``timeout`` passed first."""
        with self.message_condition:
            got = self.message_condition.wait_for(lambda: self.message_received, timeout)
            self.message_received = False
            return got

    def get_latest_message(self) -> tuple[dict[str, Any], Any]:
        """The last message's ``(headers, body)``."""
        return self.message_list[-1]

    def wait_for_heartbeat(self, timeout: float | None = None) -> bool:
        """Wait for a heart-beat not waited for yet; False if ``timeout`` passed first."""
        with self.heartbeat_condition:
            got = self.heartbeat_condition.wait_for(lambda: self.heartbeat_received, timeout)
            self.heartbeat_received = False
            return got

    def on_connecting(self, host_and_port: tuple[str, int]) -> None:
        StatsListener.on_connecting(self, host_and_port)
        PrintingListener.on_connecting(self, host_and_port)

    def on_connected(self, frame: Frame) -> None:
        PrintingListener.on_connected(self, frame)

    def on_disconnected(self) -> None:
        StatsListener.on_disconnected(self)
        PrintingListener.on_disconnected(self)
        WaitingListener.on_disconnected(self)

    def on_heartbeat_timeout(self) -> None:
        StatsListener.on_heartbeat_timeout(self)
        PrintingListener.on_heartbeat_timeout(self)

    def on_before_message(self, frame: Frame) -> None:
        PrintingListener.on_before_message(self, frame)

    def on_message(self, frame: Frame) -> None:
        StatsListener.on_message(self, frame)
        PrintingListener.on_message(self, frame)
        self.message_list.append((frame.headers, frame.body))
        with self.message_condition:
            self.message_received = True
            self.message_condition.notify_all()

    def on_receipt(self, frame: Frame) -> None:
        PrintingListener.on_receipt(self, frame)
        WaitingListener.on_receipt(self, frame)

    def on_error(self, frame: Frame) -> None:
        StatsListener.on_error(self, frame)
        PrintingListener.on_error(self, frame)

    def on_send(self, frame: Frame) -> None:
        StatsListener.on_send(self, frame)
        PrintingListener.on_send(self, frame)

    def on_heartbeat(self) -> None:
        StatsListener.on_heartbeat(self)
        PrintingListener.on_heartbeat(self)
        with self.heartbeat_condition:
            self.heartbeat_received = True
            self.heartbeat_condition.notify_all()


class HeartbeatListener(ConnectionListener):
    """Heart-beats kept by a listener, as stomp.py's connections do it.

    The layer's connections keep heart-beats themselves (a program passes
    ``heartbeats=`` and needs no listener); this class is for a program that
    drives a transport of its own with it.  On ``on_connected`` it negotiates
    (``calculate_heartbeats`` of the CONNECTED frame's ``heart-beat`` and
    ``heartbeats``) and, unless both are 0, starts a thread that sends a
    heart-beat (``transport.transmit(Frame(None))``) when nothing was sent for the
    send interval, and that, when nothing was received for the receive interval
    times ``heart_beat_receive_scale``, tells the transport's listeners
    (``on_heartbeat_timeout``) and drops the socket.  Every frame received and
    every heart-beat moves ``received_heartbeat`` on; ``on_disconnected`` ends
    the thread.
    """

    def __init__(
        self, transport: Any, heartbeats: tuple[int, int], heart_beat_receive_scale: float = 1.5
    ) -> None:
        #: The connection's transport (``is_connected``, ``transmit``, ``notify``, ...).
        self.transport = transport
        #: What was asked, then (after ``on_connected``) what was negotiated, in ms.
        self.heartbeats = heartbeats
        #: How much longer than the receive interval silence is allowed.
        self.heart_beat_receive_scale = heart_beat_receive_scale
        #: ``time.monotonic()`` of the last frame received; None before ``on_connected``.
        self.received_heartbeat: float | None = None
        #: When the next heart-beat is due (monotonic); None while none is sent.
        self.next_outbound_heartbeat: float | None = None
        #: True while the heart-beat thread should run.
        self.running = False
        #: The heart-beat thread, once started.
        self.heartbeat_thread: Any = None
        #: Set by ``on_disconnected`` to end the thread at once.
        self.heartbeat_terminate_event = threading.Event()
        #: True between ``on_disconnecting`` and the next ``on_connected``.
        self.disconnecting = False
        #: The negotiated send interval in seconds (0: none sent).
        self.send_sleep = 0.0
        #: The negotiated receive interval in seconds, scaled (0: none watched).
        self.receive_sleep = 0.0

    def on_connected(self, frame: Frame) -> None:
        self.disconnecting = False
        offered = frame.headers.get(HDR_HEARTBEAT)
        if offered is None:
            return
        self.heartbeats = calculate_heartbeats(
            str(offered).replace(" ", "").split(","), self.heartbeats
        )
        if self.heartbeats == (0, 0):
            return
        self.send_sleep = self.heartbeats[0] / 1000
        self.receive_sleep = self.heartbeats[1] / 1000 * self.heart_beat_receive_scale
        # The first heart-beat gets a whole interval of grace on top.
        self.received_heartbeat = time.monotonic() + self.receive_sleep
        self.running = True
        self.heartbeat_terminate_event.clear()
        if self.heartbeat_thread is None:
            self.heartbeat_thread = default_create_thread(self._loop)

    def on_disconnecting(self) -> None:
        self.disconnecting = True

    def on_disconnected(self) -> None:
        self.running = False
        self.heartbeat_terminate_event.set()

    def on_message(self, frame: Frame) -> None:
        self._received()

    def on_receipt(self, frame: Frame) -> None:
        self._received()

    def on_error(self, frame: Frame) -> None:
        self._received()

    def on_heartbeat(self) -> None:
        self._received()

    def on_send(self, frame: Frame) -> None:
        if frame.cmd in (CMD_CONNECT, CMD_STOMP) and self.heartbeats != (0, 0):
            frame.headers[HDR_HEARTBEAT] = "{},{}".format(*self.heartbeats)
        if self.next_outbound_heartbeat is not None:
            self.next_outbound_heartbeat = time.monotonic() + self.send_sleep

    def _received(self) -> None:
        if self.received_heartbeat is not None:
            # max(): the first interval's grace is kept until it has passed.
            self.received_heartbeat = max(self.received_heartbeat, time.monotonic())

    def _loop(self) -> None:
        if self.send_sleep:
            self.next_outbound_heartbeat = time.monotonic() + self.send_sleep
        try:
            while self.running:
                if self.heartbeat_terminate_event.wait(self._until_next_event()):
                    break
                self._tick(time.monotonic())
        finally:
            self.heartbeat_thread = None

    def _until_next_event(self) -> float:
        now = time.monotonic()
        waits = []
        if self.next_outbound_heartbeat is not None:
            waits.append(self.next_outbound_heartbeat - now)
        if self.receive_sleep and self.received_heartbeat is not None:
            waits.append(self.received_heartbeat + self.receive_sleep - now)
        # Never a busy loop: at least 10 ms, at most a second between looks.
        return min(max(min(waits, default=1.0), 0.01), 1.0)

    def _tick(self, now: float) -> None:
        if self.disconnecting or not self.transport.is_connected():
            return
        due = self.next_outbound_heartbeat
        if self.send_sleep and due is not None and now >= due:
            try:
                self.transport.transmit(Frame(None, {}, None))
            except NotConnectedException:
                log.debug("heart-beat not sent: not connected")
            self.next_outbound_heartbeat = now + self.send_sleep
        received = self.received_heartbeat
        if self.receive_sleep and received is not None and now > received + self.receive_sleep:
            log.debug("no heart-beat received for %.1f s", now - received)
            self.received_heartbeat = now  # one time-out per silent interval
            self.transport.notify("heartbeat_timeout")
            self.transport.disconnect_socket()
