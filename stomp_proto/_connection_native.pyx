# cython: language_level=3, boundscheck=True, wraparound=True, initializedcheck=True
# cython: cdivision=False, infer_types=False
"""The native twin of ``_connection.py``: a client's steps for each message.

Receiving a MESSAGE in an open session (:func:`client_next_event`,
:class:`ClientEvents`), sending a SEND (:func:`client_send`, or
:func:`client_send_parts` from its fields) and settling a
delivery (:func:`client_settle`): each does exactly what the pure
``ClientConnection`` does for the common case, bookkeeping included, or gives
``None`` and leaves the case to the pure code.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from libc.string cimport memcpy

from ._native_shared cimport (
    BACKSLASH, COLON, CR, LF, PyTuple_CheckExact, PyTuple_GET_SIZE, PyUnicode_CheckExact,
    PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_IS_COMPACT_ASCII, new_frame, stomp_pair,
    stomp_untrack,
)
from ._decoder_native cimport HeadScanner
from ._encoder_native cimport encode
from ._events_native cimport EventKind, build_event, kind_of

from ._events import Ack, HeartBeat, Message, Nack, Send
from ._frame import BODY_COMMANDS, COMMANDS, Frame

#: The private attributes of the pure classes that this module reads or writes
#: (tests/test_native_touches.py checks that each exists on the pure build).
TOUCHES = {
    "ClientConnection": (
        "_decoder", "_encoder", "_error", "_event_of", "_pending", "_queued", "_receives",
        "_sends", "_state", "_subscriptions", "_timer", "_transactions", "_version",
    ),
    "FrameDecoder": ("_fast",),
    "FrameEncoder": ("_bodies", "_commands", "_version"),
    "_PendingAcks": ("_by_subscription", "_owner"),
}

cdef object FRAME = Frame
cdef object BEAT_TYPE = HeartBeat
cdef object CLIENT_CONNECTION = None
cdef object CONNECTED_STATE = None
cdef object MESSAGE_STATE = None   # where a MESSAGE received when CONNECTED leads
cdef object ACK_STATE = None       # where an ACK sent when CONNECTED leads
cdef object NACK_STATE = None
cdef object SEND_STATE = None      # where a SEND sent when CONNECTED leads
cdef EventKind MESSAGE_KIND = kind_of(Message)
cdef frozenset COMMANDS_12 = COMMANDS
cdef frozenset BODIES_12 = BODY_COMMANDS


def use_connection_types(client_connection, connected_state):
    """Called by _connection.py once it has defined them (this module is imported
    before it, by the events): the client class and the transitions it takes here."""
    global CLIENT_CONNECTION, CONNECTED_STATE, MESSAGE_STATE, ACK_STATE, NACK_STATE, SEND_STATE
    CLIENT_CONNECTION = client_connection
    CONNECTED_STATE = connected_state
    MESSAGE_STATE = client_connection._receives.get(connected_state, {}).get(Message)
    ACK_STATE = client_connection._sends.get(connected_state, {}).get(Ack)
    NACK_STATE = client_connection._sends.get(connected_state, {}).get(Nack)
    SEND_STATE = client_connection._sends.get(connected_state, {}).get(Send)


def client_send(conn, event):
    """``ClientConnection.send(event)`` for a ``Send`` without a receipt, in an open
    session (in a transaction that is open, if any): the bytes, booked.  None for
    anything else, which the pure code then checks and sends."""
    if type(event) is not Send or type(conn) is not CLIENT_CONNECTION:
        return None
    if event.receipt is not None:
        return None
    return send_fields(
        conn, event.destination, event.body, event.content_type, event.transaction,
        event.headers, event.content_length,
    )


def client_send_parts(conn, tuple parts):
    """:func:`client_send` of ``Send(destination, body, content_type=...,
    transaction=..., headers=..., content_length=...)``, the fields given as
    ``parts`` in that order (``ClientConnection._fast_send_parts``): the same
    bytes and books, without the event.  None where client_send would give None."""
    if type(conn) is not CLIENT_CONNECTION or PyTuple_GET_SIZE(parts) != 6:
        return None
    destination, body, content_type, transaction, headers, content_length = parts
    return send_fields(conn, destination, body, content_type, transaction, headers, content_length)


cdef object send_fields(
    conn, destination, body, content_type, transaction, headers, content_length
):
    """The SEND of these fields, without a receipt, as :func:`client_send` makes it."""
    if SEND_STATE is None or conn._state is not CONNECTED_STATE:
        return None
    # Fields of the exact types the pure send's checks (_checks.check_event) accept
    # without a word; anything else is theirs to refuse, with their message.
    if type(content_length) is not bool or not PyUnicode_CheckExact(destination):
        return None
    if transaction is not None and (
        not PyUnicode_CheckExact(transaction) or transaction not in conn._transactions
    ):
        return None
    if not PyTuple_CheckExact(headers):
        return None
    # Send._to_frame: the typed headers first, the unset ones left out, then the rest.
    typed = [stomp_pair("destination", destination)]
    if content_type is not None:
        typed.append(stomp_pair("content-type", content_type))
    if transaction is not None:
        typed.append(stomp_pair("transaction", transaction))
    frame = new_frame(FRAME, "SEND", tuple(typed) + <tuple>headers, body)
    encoder = conn._encoder
    data = encode(frame, encoder._version, encoder._commands, encoder._bodies, content_length)
    if data is None:
        return None
    conn._state = SEND_STATE
    timer = conn._timer
    if timer is not None:
        timer.sent_since_check = True
    return data


def client_next_event(conn):
    """``ClientConnection.next_event`` in an open session: the MESSAGE of a known
    subscription is read and booked here; every other frame, and every message
    that needs a check to fail or a copy made, goes through ``conn._event_of``
    as in the pure build.  None when the decoder's fast path has no frame (the
    pure ``next_event`` then runs)."""
    decoder = conn._decoder
    fast = decoder._fast
    if fast is None:
        return None
    item = (<HeadScanner>fast).scan(decoder)
    if item is None or item is NotImplemented:
        return None
    if type(item) is BEAT_TYPE:
        return item
    if (
        (<tuple>item)[0] != "MESSAGE"
        or type(conn) is not CLIENT_CONNECTION
        or conn._state is not CONNECTED_STATE
        or MESSAGE_STATE is None
    ):
        return conn._event_of(item)
    version = conn._version
    cdef list values = []
    event = build_event(MESSAGE_KIND, Message, item, version, values)
    if event is None:
        return conn._event_of(item)
    # Every field is a str, bytes, bool, None or a tuple of str pairs (the frame
    # came from the scanner): no cycle can pass through it.
    stomp_untrack(event)
    subscription = values[MESSAGE_KIND.subscription]
    key = subscription if subscription is not None else values[MESSAGE_KIND.destination]
    cdef dict subscriptions = conn._subscriptions
    subscribe = subscriptions.get(key)
    if subscribe is None:
        return conn._event_of(item)
    cdef dict by_subscription
    cdef dict pending
    if subscribe.ack != "auto":
        ident = values[MESSAGE_KIND.ack if version == "1.2" else MESSAGE_KIND.message_id]
        if ident is None:
            return conn._event_of(item)
        # _PendingAcks.delivered
        books = conn._pending
        by_subscription = books._by_subscription
        pending = by_subscription.get(key)
        if pending is None:
            pending = by_subscription[key] = {}
        pending[ident] = event
        (<dict>books._owner)[ident] = key
    conn._state = MESSAGE_STATE
    return event


cdef class ClientEvents:
    """``iter(ClientConnection)``: the events available now, each from
    :func:`client_next_event` while the session is open and nothing is queued, else
    from the connection's own ``next_event`` (a subclass's always)."""

    cdef object conn

    def __init__(self, conn):
        self.conn = conn

    def __iter__(self):
        return self

    def __next__(self):
        conn = self.conn
        event = None
        if (
            type(conn) is CLIENT_CONNECTION
            and conn._state is CONNECTED_STATE
            and conn._error is None
            and not conn._queued
        ):
            event = client_next_event(conn)
        if event is None:
            event = conn.next_event()
            if event is None:
                raise StopIteration
        return event


def client_settle(conn, message, bint ack):
    """``ClientConnection.ack(message)`` (or ``nack``), with no transaction or receipt,
    in an open 1.2 session, for the very message delivered on a client-individual
    subscription: the bytes of the ACK (NACK), booked.  None for anything else,
    which the pure code then checks and sends."""
    if type(conn) is not CLIENT_CONNECTION or type(message) is not Message:
        return None
    next_state = ACK_STATE if ack else NACK_STATE
    if next_state is None or conn._state is not CONNECTED_STATE or conn._version != "1.2":
        return None
    ident = message.ack
    subscription = message.subscription
    key = subscription if subscription is not None else message.destination
    # Exact str, as the decoder makes them (a hand-made message may hold anything).
    if not PyUnicode_CheckExact(ident) or not PyUnicode_CheckExact(key):
        return None
    books = conn._pending
    cdef dict delivered = (<dict>books._by_subscription).get(key)
    if delivered is None or delivered.get(ident) is not message:
        return None
    cdef dict owner = books._owner
    subscribe = (<dict>conn._subscriptions).get(key)
    if owner.get(ident) != key or subscribe is None or subscribe.ack != "client-individual":
        return None
    # What FrameEncoder("1.2") writes for the ACK's frame (its version is the session's).
    data = plain_settle_frame(ack, ident)
    if data is None:
        frame = new_frame(FRAME, "ACK" if ack else "NACK", (stomp_pair("id", ident),), b"")
        data = encode(frame, "1.2", COMMANDS_12, BODIES_12, True)
        if data is None:
            return None
    # _PendingAcks.settle, and _note_sent
    del delivered[ident]
    del owner[ident]
    conn._state = next_state
    timer = conn._timer
    if timer is not None:
        timer.sent_since_check = True
    return data


cdef object plain_settle_frame(bint ack, str ident):
    """``ACK\\nid:<ident>\\n\\n\\0`` (``NACK``), what FrameEncoder("1.2") writes for
    that frame, made at once for an id of ASCII that needs no escape (1.2 §Value
    Encoding); None for any other id, which encode() then takes."""
    if not PyUnicode_IS_COMPACT_ASCII(ident):
        return None
    cdef Py_ssize_t size = PyUnicode_GET_LENGTH(ident)
    cdef const char *text = <const char *>PyUnicode_DATA(ident)
    cdef Py_ssize_t i
    cdef char c
    if size == 0:
        return None
    for i in range(size):
        c = text[i]
        if c == BACKSLASH or c == COLON or c == LF or c == CR or c == 0:
            return None
    cdef const char *head = b"ACK\nid:" if ack else b"NACK\nid:"
    cdef Py_ssize_t head_size = 7 if ack else 8
    data = PyBytes_FromStringAndSize(NULL, head_size + size + 3)
    cdef char *out = PyBytes_AS_STRING(data)
    memcpy(out, head, head_size)
    memcpy(out + head_size, text, size)
    memcpy(out + head_size + size, b"\n\n\0", 3)
    return data
