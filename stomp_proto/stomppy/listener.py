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
from .utils import Frame, clean_headers

__all__ = [
    "ConnectionListener",
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
