# The native twin of _events.py (see _events_native.pyx): what other twins cimport.

cdef class EventKind:
    cdef object cls
    cdef tuple typed          # header names held in fields, in the order of the fields
    cdef tuple typed_slots    # their slot descriptors
    cdef object headers_slot, body_slot, content_length_slot
    cdef tuple defaults       # (descriptor, value) of every other field
    cdef tuple not_empty      # indices in `typed` of the fields that must not be ""
    # Where the headers that decide a frame's validity are in `typed` (-1: not held).
    cdef Py_ssize_t destination, message_id, subscription, ack, id, receipt_id
    cdef Py_ssize_t version, heartbeat


# The EventKind of an event class, or None.
cdef EventKind kind_of(object cls)
# The event of a Frame as `kind` reads it, or None; `out` receives the typed values.
cdef object build_event(EventKind kind, object cls, object frame, object version, list out)
