"""Connection states and the declarative tables of what may happen in each.

One table per role and direction maps ``state -> {event class -> next state}``.
An event class missing from a state's row is not allowed there.  The two
transitions that depend on an event's content - a DISCONNECT without a receipt,
and the RECEIPT that answers a DISCONNECT - are the functions at the end; the
connection applies them after the table.
"""

from __future__ import annotations

import enum

from ._events import (
    Abort,
    Ack,
    Begin,
    Commit,
    Connect,
    Connected,
    Disconnect,
    Error,
    Event,
    Message,
    Nack,
    Receipt,
    Send,
    Subscribe,
    Unsubscribe,
)

__all__ = ["ConnectionState", "Transitions", "after_disconnect", "after_receipt"]


class ConnectionState(enum.Enum):
    """Where a STOMP session stands.

    ``IDLE``: nothing exchanged yet.  ``CONNECTING``: CONNECT sent (client) or
    received and awaiting the application's answer (server).  ``CONNECTED``:
    the session is open.  ``DISCONNECTING``: DISCONNECT sent or received, its
    RECEIPT pending.  ``CLOSED``: the session is over (RECEIPT of DISCONNECT,
    ERROR, end of stream, heart-beat timeout or a protocol error).
    """

    #: Nothing exchanged yet.
    IDLE = "idle"
    #: CONNECT sent (client), or received and awaiting the answer (server).
    CONNECTING = "connecting"
    #: The session is open.
    CONNECTED = "connected"
    #: DISCONNECT sent or received, its RECEIPT pending.
    DISCONNECTING = "disconnecting"
    #: The session is over.
    CLOSED = "closed"

    # Members are singletons compared by identity, so the identity hash agrees
    # with equality; Enum's own __hash__ is Python code, and the transition
    # tables are looked up by state on every frame sent and received.
    __hash__ = object.__hash__


IDLE = ConnectionState.IDLE
CONNECTING = ConnectionState.CONNECTING
CONNECTED = ConnectionState.CONNECTED
DISCONNECTING = ConnectionState.DISCONNECTING
CLOSED = ConnectionState.CLOSED

Transitions = dict[ConnectionState, dict[type[Event], ConnectionState]]

_SESSION_FRAMES: dict[type[Event], ConnectionState] = {
    cls: CONNECTED for cls in (Send, Subscribe, Unsubscribe, Ack, Nack, Begin, Commit, Abort)
}

#: What a client may send, and what sending it leads to.
CLIENT_SENDS: Transitions = {
    IDLE: {Connect: CONNECTING},
    CONNECTED: {**_SESSION_FRAMES, Disconnect: DISCONNECTING},
}

#: What a client may receive.  An ERROR ends the session (1.2 §ERROR).
CLIENT_RECEIVES: Transitions = {
    CONNECTING: {Connected: CONNECTED, Error: CLOSED},
    CONNECTED: {Message: CONNECTED, Receipt: CONNECTED, Error: CLOSED},
    DISCONNECTING: {Message: DISCONNECTING, Receipt: DISCONNECTING, Error: CLOSED},
}

#: What a server may receive: nothing but CONNECT (or STOMP) before the handshake.
SERVER_RECEIVES: Transitions = {
    IDLE: {Connect: CONNECTING},
    CONNECTED: {**_SESSION_FRAMES, Disconnect: DISCONNECTING},
}

#: What a server may send.  ERROR is allowed until the session is closed: it
#: is how a server refuses a connection or reports a bad frame.
SERVER_SENDS: Transitions = {
    IDLE: {Error: CLOSED},
    CONNECTING: {Connected: CONNECTED, Error: CLOSED},
    CONNECTED: {Message: CONNECTED, Receipt: CONNECTED, Error: CLOSED},
    DISCONNECTING: {Receipt: DISCONNECTING, Error: CLOSED},
}


def after_disconnect(table_state: ConnectionState, receipt: str | None) -> ConnectionState:
    """A DISCONNECT without a receipt ends the session at once; with one, the
    session waits for that RECEIPT (``table_state``, DISCONNECTING) (1.2 §DISCONNECT)."""
    return table_state if receipt is not None else CLOSED


def after_receipt(
    table_state: ConnectionState, receipt_id: str, disconnect_receipt: str | None
) -> ConnectionState:
    """The RECEIPT that answers the DISCONNECT ends the session; any other leaves
    ``table_state``, sent or received alike."""
    return CLOSED if receipt_id == disconnect_receipt else table_state
