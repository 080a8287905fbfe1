"""The errors every client raises, besides the protocol errors of the core.

A leaf: it imports nothing of the clients, so that every module of theirs (and
the Spark source's) can name these errors without importing a client.
"""

from __future__ import annotations

import os

from .._events import Error
from .._public import present_as

__all__ = [
    "BrokerError",
    "ClientError",
    "ConnectionLost",
    "HeartBeatLost",
    "ReconnectExhausted",
    "connect_timed_out",
    "message_timed_out",
    "reason",
    "timed_out",
]


class ClientError(Exception):
    """Base class of the errors the client adapters raise (besides protocol errors)."""


class BrokerError(ClientError):
    """The broker sent an ERROR frame; it closes the connection after it.

    ``error`` is the :class:`~stomp_proto.Error` event: ``message`` is the
    broker's short text, ``body`` its details.
    """

    def __init__(self, error: Error) -> None:
        #: The :class:`~stomp_proto.Error` event the broker sent.
        self.error = error
        detail = error.body.decode("utf-8", "replace").strip()
        text = error.message or "ERROR frame without a message"
        super().__init__(f"{text}: {detail}" if detail and detail != text else text)

    @property
    def message(self) -> str | None:
        """The ERROR frame's ``message`` header."""
        return self.error.message


class ConnectionLost(ClientError):
    """The connection ended: the peer closed it, the network failed, or it was never made."""


def reason(exc: BaseException, timeout: float | None = None) -> str:
    """What went wrong, in words, never empty (an asyncio timeout has no text of its own).

    A system error reads the same whichever client met it: asyncio says "Connect
    call failed (address)", trio "all attempts to connect ... failed" around the
    real error, a socket "Connection refused"; each becomes ``[Errno 111]
    Connection refused``, the system's own words for the error number.
    """
    system = _system_error(exc)
    if system is not None:
        return system
    text = str(exc)
    if text:
        return text
    if isinstance(exc, TimeoutError):
        return "timed out" if timeout is None else f"timed out after {timeout:.3g} s"
    return type(exc).__name__


def timed_out(what: str, seconds: float | None, detail: str = "") -> TimeoutError:
    """The TimeoutError of a wait for ``what`` that lasted ``seconds``; ``detail``, if
    any, follows in brackets (what the attempt waited for, what the client does next).

    Every TimeoutError the three clients raise is made here, so that each says
    what timed out and after how long, in the same words whichever client.
    """
    waited = "" if seconds is None else f" after {seconds:.3g} s"
    return TimeoutError(f"{what} timed out{waited}{f' ({detail})' if detail else ''}")


def connect_timed_out(seconds: float | None, *, opened: bool) -> TimeoutError:
    """A connect attempt to one address outlasted its bound; ``opened``: the
    connection was made (TCP, TLS, WebSocket) and CONNECTED was awaited."""
    stage = "waiting for CONNECTED" if opened else "opening the connection"
    return timed_out("the connect attempt", seconds, stage)


def message_timed_out(destination: str, seconds: float | None) -> TimeoutError:
    """``subscription.get(timeout)`` found no message on ``destination`` in time."""
    return timed_out(f"the wait for a message on {destination}", seconds)


def _system_error(exc: BaseException) -> str | None:
    """``[Errno N] text`` of the system error at the bottom of ``exc``, else None."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        seen += 1
        if isinstance(current, BaseExceptionGroup) and len(current.exceptions) == 1:
            current = current.exceptions[0]
            continue
        if isinstance(current, OSError) and isinstance(current.errno, int):
            # A negative number is a resolver's (socket.gaierror): its own text.
            words = os.strerror(current.errno) if current.errno > 0 else current.strerror
            return f"[Errno {current.errno}] {words}"
        if not isinstance(current, OSError):
            return None
        current = current.__cause__ or current.__context__
    return None


class HeartBeatLost(ConnectionLost):
    """Nothing arrived from the broker within the negotiated heart-beat deadline."""


class ReconnectExhausted(ConnectionLost):
    """The client gave up: every reconnect attempt of its :class:`~stomp_proto.Backoff`
    failed (``attempts`` were used up).  The client is over; make a new one.

    A transient loss is a plain :class:`ConnectionLost`, raised while the client
    still reconnects; this one comes once the schedule is spent, and after it
    every call raises it again.
    """

    def __init__(self, attempts: int, reasons: tuple[tuple[tuple[str, int], str], ...]) -> None:
        #: How many reconnect attempts were made.
        self.attempts = attempts
        #: Each broker address tried, with the reason its last attempt failed.
        self.reasons = reasons
        tried = "; ".join(f"{host}:{port}: {why}" for (host, port), why in reasons)
        super().__init__(f"gave up reconnecting after {attempts} attempts: {tried}")


# Tracebacks and reprs say stomp_proto.ConnectionLost..., the names users import, though
# the top level loads this module only on first use.
present_as(
    "stomp_proto", BrokerError, ClientError, ConnectionLost, HeartBeatLost, ReconnectExhausted
)
