# cython: language_level=3, boundscheck=True, wraparound=True, initializedcheck=True
# cython: cdivision=False, infer_types=False
"""The native twin of ``_events.py``: ``FrameEvent.from_frame`` for the frequent events.

The ``Message``, ``Receipt``, ``Error``, ``Connected``, ``Send``, ``Ack`` and
``Nack`` events of a frame, built without the dataclass ``__init__``: the same
classes, every slot set, as ``dataclasses.replace`` would.  What each class
holds - its typed headers, its fields and their defaults - is read from the
class itself (its ``_typed``, ``_not_empty`` and dataclass fields); what each
requires of a frame mirrors its ``_from_frame``.  A frame that is not the
common, valid case gives ``None``, and the pure ``from_frame`` reads it.
"""

import dataclasses

from ._native_shared cimport (
    PyBytes_CheckExact, PyTuple_CheckExact, PyTuple_GET_ITEM, PyTuple_GET_SIZE,
    PyUnicode_CheckExact, PyUnicode_GET_LENGTH, stomp_alloc, stomp_slot_set,
)

from ._decoder_native import KNOWN_HEADERS
from ._events import Ack, Connected, Error, Message, Nack, Receipt, Send, parse_heartbeat
from ._frame import VERSIONS, Frame

#: The private attributes of the pure classes that this module reads or writes
#: (tests/test_native_touches.py checks that each exists on the pure build).
TOUCHES = {
    "FrameEvent": ("_not_empty", "_typed"),
}

cdef object FRAME = Frame


cdef str _field_of(str header, tuple names):
    """The field that holds a typed header: its name, with '-' as '_' or left out."""
    for name in (header.replace("-", "_"), header.replace("-", "")):
        if name in names:
            return name
    raise TypeError(f"no field holds the typed header {header!r} (fields: {names})")


cdef class EventKind:
    """How to build one event class from a frame: its typed headers and slots,
    read from the class's own declarations."""

    def __init__(self, cls):
        fields = dataclasses.fields(cls)
        names = tuple(f.name for f in fields)
        typed_fields = {_field_of(header, names): header for header in cls._typed}
        # The decoder's own str objects for the names it knows (compared by pointer).
        known = {name: name for name in KNOWN_HEADERS}
        order = [name for name in names if name in typed_fields]
        self.cls = cls
        self.typed = tuple(known.get(typed_fields[n], typed_fields[n]) for n in order)
        self.typed_slots = tuple(getattr(cls, name) for name in order)
        # FrameEvent.__post_init__ refuses these empty; a field it names that is
        # not read from a header here would need a check of its own.
        self.not_empty = tuple(order.index(name) for name in cls._not_empty)
        self.headers_slot = getattr(cls, "headers")
        self.body_slot = getattr(cls, "body") if "body" in names else None
        self.content_length_slot = (
            getattr(cls, "content_length") if "content_length" in names else None
        )
        defaults = []
        for field in fields:
            if field.name in typed_fields or field.name in ("headers", "body", "content_length"):
                continue
            if field.default is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{field.name} has no default to build it with")
            defaults.append((getattr(cls, field.name), field.default))
        self.defaults = tuple(defaults)
        where = {self.typed[i]: i for i in range(len(self.typed))}
        self.destination = where.get("destination", -1)
        self.message_id = where.get("message-id", -1)
        self.subscription = where.get("subscription", -1)
        self.ack = where.get("ack", -1)
        self.id = where.get("id", -1)
        self.receipt_id = where.get("receipt-id", -1)
        self.version = where.get("version", -1)
        self.heartbeat = where.get("heart-beat", -1)


#: The events built here (each class's _from_frame is mirrored in build_event).
cdef dict KINDS = {
    cls: EventKind(cls) for cls in (Message, Receipt, Error, Connected, Send, Ack, Nack)
}


cdef EventKind kind_of(object cls):
    return KINDS.get(cls)


cdef inline bint _same(object name, object known):
    return name is known or (
        PyUnicode_GET_LENGTH(name) == PyUnicode_GET_LENGTH(known) and name == known
    )


def event_from_frame(cls, frame, version):
    """``cls.from_frame(frame, version)`` for MESSAGE, RECEIPT, ERROR, CONNECTED, SEND,
    ACK and NACK frames that carry what the version requires; None for anything else."""
    cdef EventKind kind = kind_of(cls)
    if kind is None or type(frame) is not FRAME:
        return None
    return build_event(kind, cls, frame, version, None)


cdef object build_event(EventKind kind, object cls, object frame, object version, list out):
    """The event of ``frame`` (a Frame) as ``kind`` reads it, or None; ``out``, when
    given, receives the typed header values in ``kind.typed`` order."""
    headers = (<tuple>frame)[1]
    body = (<tuple>frame)[2]
    if not PyTuple_CheckExact(headers) or not PyBytes_CheckExact(body):
        return None
    cdef tuple typed = kind.typed
    cdef Py_ssize_t ntyped = len(typed), count = PyTuple_GET_SIZE(headers), i, j
    cdef list values = [None] * ntyped
    cdef list extra = []
    cdef bint has_length = False
    cdef bint mine
    for i in range(count):
        pair = <object>PyTuple_GET_ITEM(headers, i)
        if type(pair) is not tuple or PyTuple_GET_SIZE(pair) != 2:
            return None
        name = <object>PyTuple_GET_ITEM(pair, 0)
        if not PyUnicode_CheckExact(name):
            return None
        mine = False
        for j in range(ntyped):
            if _same(name, typed[j]):
                if values[j] is None:
                    values[j] = <object>PyTuple_GET_ITEM(pair, 1)
                mine = True
                break
        if not mine:
            if _same(name, "content-length"):
                has_length = True
            else:
                extra.append(pair)
    # What __post_init__ refuses.
    for j in kind.not_empty:
        if values[j] == "":
            return None
    # What each class's _from_frame requires.
    if cls is Message:
        # destination and message-id always; subscription from 1.1.
        if values[kind.destination] is None or values[kind.message_id] is None:
            return None
        if values[kind.subscription] is None and version != "1.0":
            return None
    elif cls is Send:
        if values[kind.destination] is None:
            return None
    elif cls is Ack or cls is Nack:
        # id in 1.2; message-id before, and subscription in 1.1.
        if version == "1.2":
            if values[kind.id] is None:
                return None
        elif values[kind.message_id] is None or (
            version == "1.1" and values[kind.subscription] is None
        ):
            return None
    elif cls is Receipt:
        if values[kind.receipt_id] is None:
            return None
    elif cls is Connected:
        chosen = values[kind.version] or "1.0"
        if chosen not in VERSIONS:
            return None  # the pure code reads (and may strip, or refuse) it
        values[kind.version] = VERSIONS[VERSIONS.index(chosen)]
        try:
            values[kind.heartbeat] = parse_heartbeat(values[kind.heartbeat])
        except Exception:
            return None
    event = stomp_alloc(cls)
    for j in range(ntyped):
        stomp_slot_set(kind.typed_slots[j], event, values[j])
    stomp_slot_set(kind.headers_slot, event, tuple(extra))
    if kind.body_slot is not None:
        stomp_slot_set(kind.body_slot, event, body)
    if kind.content_length_slot is not None:
        stomp_slot_set(kind.content_length_slot, event, has_length)
    for descr, value in kind.defaults:
        stomp_slot_set(descr, event, value)
    if out is not None:
        out.extend(values)
    return event
