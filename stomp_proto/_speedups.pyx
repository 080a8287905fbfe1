# cython: language_level=3, boundscheck=True, wraparound=True, initializedcheck=True
# cython: cdivision=False, infer_types=False
"""The native fast path of the receive and send paths (Cython, compiled to C).

The pure-Python modules stay the reference: each function here either gives
exactly what the pure code gives for its input, or returns ``None`` ("not
mine") and changes nothing, and the caller then runs the pure code on the
same state.  So every error, limit and message comes from the pure code, and
the native code only has to recognise the common, well-formed case and build
the same objects faster:

* :class:`HeadScanner` - one complete frame, or heart-beat, at the front of a
  strict ``FrameDecoder``'s buffer: the blank line, the head's lines, escapes,
  content-length and the body, into a :class:`Frame`.
* :func:`event_from_frame` - the ``Message``, ``Receipt``, ``Error`` and
  ``Connected`` events of a frame, built without the dataclass ``__init__``
  (the same classes, every slot set, as ``evolve`` does).
* :func:`encode` - the bytes of a frame under the escaping rules of a version.

Bounds: the buffer is read through a ``const unsigned char *`` and its length;
every index used is checked against that length right where it is read (the
``_at`` helper, and loops bounded by ``end``), since the input is hostile.  The
scan allocates, and an allocation can run Python code (a garbage collection's
finalizers): so the scan holds a buffer export of the bytearray, which makes
any resize raise BufferError instead of moving the memory, and sets the
decoder's ``_reading`` flag, which makes ``receive_data`` refuse re-entry with
the pure decoder's LocalProtocolError.  Time
and memory: every search starts where the pure decoder's would (its ``_scan``),
so a head arriving byte by byte is still read a bounded number of times.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.object cimport PyObject
from cpython.ref cimport Py_INCREF
from cpython.tuple cimport PyTuple_New, PyTuple_SET_ITEM
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp, memcpy

import dataclasses

from ._events import (
    HEARTBEAT,
    Ack,
    Connected,
    Error,
    HeartBeat,
    Message,
    Nack,
    Receipt,
    Send,
    parse_heartbeat,
)
from ._frame import BODY_COMMANDS, COMMANDS, UNESCAPED_COMMANDS, VERSIONS, Frame

cdef extern from *:
    """
    /* Read and write a slot through its member descriptor, as object.__setattr__
       would, without the class's own __setattr__ (frozen dataclasses refuse). */
    static PyObject *stomp_slot_get(PyObject *descr, PyObject *obj) {
        return Py_TYPE(descr)->tp_descr_get(descr, obj, (PyObject *)Py_TYPE(obj));
    }
    static int stomp_slot_set(PyObject *descr, PyObject *obj, PyObject *value) {
        return Py_TYPE(descr)->tp_descr_set(descr, obj, value);
    }
    /* object.__new__(cls) for a class with neither __new__ nor __init__ of its own
       to run: the allocation, every slot NULL until set. */
    static PyObject *stomp_alloc(PyObject *cls) {
        PyTypeObject *type = (PyTypeObject *)cls;
        return type->tp_alloc(type, 0);
    }
    /* A tuple subclass's instance (Frame) of ``size`` items, all NULL until set. */
    static PyObject *stomp_alloc_items(PyObject *cls, Py_ssize_t size) {
        PyTypeObject *type = (PyTypeObject *)cls;
        return type->tp_alloc(type, size);
    }
    /* A tuple of two str (a header) cannot be part of a reference cycle: the
       collector need not look at it (it would untrack it itself, later). */
    static PyObject *stomp_pair(PyObject *name, PyObject *value) {
        PyObject *pair = PyTuple_New(2);
        if (pair == NULL) return NULL;
        Py_INCREF(name);
        PyTuple_SET_ITEM(pair, 0, name);
        Py_INCREF(value);
        PyTuple_SET_ITEM(pair, 1, value);
        PyObject_GC_UnTrack(pair);
        return pair;
    }
    /* For containers that can hold no reference cycle (see the callers). */
    static void stomp_untrack(PyObject *obj) {
        PyObject_GC_UnTrack(obj);
    }
    static const char *stomp_utf8(PyObject *text, Py_ssize_t *size) {
        return PyUnicode_AsUTF8AndSize(text, size);
    }
    """
    object stomp_slot_get(object descr, object obj)
    int stomp_slot_set(object descr, object obj, object value) except -1
    object stomp_alloc(object cls)
    object stomp_alloc_items(object cls, Py_ssize_t size)
    object stomp_pair(object name, object value)
    void stomp_untrack(object obj)
    const char *stomp_utf8(object text, Py_ssize_t *size) except NULL

cdef extern from "Python.h":
    bint PyUnicode_CheckExact(object)
    bint PyTuple_CheckExact(object)
    bint PyBytes_CheckExact(object)
    Py_ssize_t PyUnicode_GET_LENGTH(object)
    object PyUnicode_New(Py_ssize_t, Py_UCS4)
    void *PyUnicode_DATA(object)
    Py_ssize_t PyTuple_GET_SIZE(object)
    PyObject *PyTuple_GET_ITEM(object, Py_ssize_t)

cdef enum:
    LF = 10
    CR = 13
    COLON = 58
    BACKSLASH = 92

#: Frames whose content-length is this or more take the pure decoder's
#: one-copy route for large bodies (_decoder._LARGE_BODY).
cdef Py_ssize_t LARGE_BODY = 64 * 1024
#: Limits past this are as good as unlimited here (and keep the sums below in range).
cdef Py_ssize_t HUGE = (<Py_ssize_t>1) << 60
#: More digits than this in a content-length: left to the pure code (it reads TOO_LONG).
cdef Py_ssize_t MOST_DIGITS = 18

#: Module constants, held in C variables (a global's name is looked up on each use).
cdef frozenset UNESCAPED = UNESCAPED_COMMANDS
cdef object FRAME = Frame
cdef object BEAT = HEARTBEAT
cdef object BEAT_TYPE = HeartBeat


cdef object _new_frame(object command, object headers, object body):
    """``Frame(command, headers, body)``, without NamedTuple's Python-level __new__."""
    frame = stomp_alloc_items(FRAME, 3)
    Py_INCREF(command)
    PyTuple_SET_ITEM(frame, 0, command)
    Py_INCREF(headers)
    PyTuple_SET_ITEM(frame, 1, headers)
    Py_INCREF(body)
    PyTuple_SET_ITEM(frame, 2, body)
    return frame


cdef inline Py_ssize_t _clamp(object value):
    return <Py_ssize_t>value if value < HUGE else HUGE


cdef inline int _at(const unsigned char *data, Py_ssize_t size, Py_ssize_t i) except -2:
    """``data[i]``, checked: -1 past either end (the callers treat it as "not there")."""
    if 0 <= i < size:
        return data[i]
    return -1


# -- the names the decoder and the events share --------------------------------

#: The commands, and the header names that most frames hold, as the str objects
#: the decoder returns for them: one object per name, so the event builders
#: compare pointers first.
cdef tuple COMMAND_NAMES = (
    "CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT",
    "ACK", "NACK", "DISCONNECT", "CONNECTED", "MESSAGE", "RECEIPT", "ERROR",
)
cdef tuple HEADER_NAMES = (
    "destination", "message-id", "subscription", "ack", "content-type", "content-length",
    "receipt-id", "receipt", "id", "message", "version", "heart-beat", "session", "server",
    "transaction", "persistent", "priority", "expires", "timestamp", "redelivered",
    "reply-to", "correlation-id", "type",
)
cdef enum:
    MOST_NAMES = 32


cdef struct _Names:
    # The UTF-8 of each name (the str objects above keep it alive) and its length.
    Py_ssize_t count
    const char *text[MOST_NAMES]
    Py_ssize_t size[MOST_NAMES]


cdef _Names COMMANDS_TABLE
cdef _Names HEADERS_TABLE


cdef int _fill(_Names *table, tuple names) except -1:
    cdef Py_ssize_t i, size
    if len(names) > MOST_NAMES:
        raise ValueError("too many names for the table")
    table.count = len(names)
    for i in range(len(names)):
        table.text[i] = stomp_utf8(names[i], &size)
        table.size[i] = size
    return 0


_fill(&COMMANDS_TABLE, COMMAND_NAMES)
_fill(&HEADERS_TABLE, HEADER_NAMES)


cdef object _known(_Names *table, tuple names, const unsigned char *data, Py_ssize_t size):
    """The str of ``names`` whose bytes are ``data[:size]``, or None."""
    cdef Py_ssize_t i
    for i in range(table.count):
        if table.size[i] == size and memcmp(table.text[i], data, size) == 0:
            return names[i]
    return None


cdef object _text(const unsigned char *data, Py_ssize_t size):
    """``data[:size]`` as str; None when it is not UTF-8 (the pure code raises)."""
    cdef Py_ssize_t i
    for i in range(size):
        if data[i] >= 0x80:
            break
    else:
        # ASCII, as header text nearly always is: one allocation and a copy.
        text = PyUnicode_New(size, 127)
        memcpy(PyUnicode_DATA(text), data, size)
        return text
    try:
        return PyUnicode_DecodeUTF8(<const char *>data, size, NULL)
    except UnicodeDecodeError:
        return None


cdef object _unescape(const unsigned char *data, Py_ssize_t size, bint cr):
    """1.1 §Value Encoding (and 1.2's ``\\r`` if ``cr``) undone, as str; None on an
    undefined sequence or bad UTF-8 (the pure code raises).

    Read left to right, each backslash with the octet after it: the same result
    as _headers.unescape, which parks escaped backslashes first.
    """
    cdef bytearray out = bytearray(size)
    cdef unsigned char *target = <unsigned char *>PyByteArray_AS_STRING(out)
    cdef Py_ssize_t i = 0, n = 0
    cdef int c
    while i < size:
        c = data[i]
        if c == BACKSLASH:
            c = _at(data, size, i + 1)
            if c == BACKSLASH:
                c = BACKSLASH
            elif c == 110:  # n
                c = LF
            elif c == 99:  # c
                c = COLON
            elif c == 114 and cr:  # r
                c = CR
            else:
                return None
            i += 2
        else:
            i += 1
        if n >= size:
            return None
        target[n] = <unsigned char>c
        n += 1
    return _text(target, n)


# -- the decoder ---------------------------------------------------------------

cdef class HeadScanner:
    """The fast path of one ``FrameDecoder`` under its current rules.

    The decoder makes one whenever its rules change (version, handshake,
    verbatim text) and calls :meth:`next_frame` before its own ``next_frame``
    work; a result of ``None`` hands the same state to the pure code.  It knows
    strict mode, and the lenient mode that keeps text verbatim (the lenient
    server's, which the embedded broker runs); the decoder makes none for the
    lenient client, which rewrites commands and values.
    """

    cdef object decoder
    cdef bint lenient, crlf, unescaping, unescaping_cr, handshake
    cdef frozenset commands, bodiless
    cdef Py_ssize_t max_line_length, max_headers, max_head, max_frame_size, max_body_size
    # The decoder's slots, read and written through their descriptors.
    cdef object s_buf, s_pos, s_scan, s_line_start, s_body_start, s_head_lines
    cdef object s_command, s_need, s_error, s_reading

    def __init__(self, decoder):
        cls = type(decoder)
        limits = decoder._limits
        self.lenient = not decoder._strict
        if self.lenient and not decoder._verbatim:
            raise ValueError("the native scanner keeps lenient text verbatim only")
        self.crlf = decoder._crlf
        self.unescaping = decoder._unescaping
        self.unescaping_cr = decoder._unescaping_cr
        self.handshake = decoder._handshake
        # Lenient mode knows every command whatever the version (_lenient_command).
        self.commands = COMMANDS if self.lenient else decoder._commands
        self.bodiless = frozenset(decoder._bodiless)
        self.max_line_length = _clamp(limits.max_line_length)
        self.max_headers = _clamp(limits.max_headers)
        self.max_head = min(_clamp(limits.max_head_size), _clamp(limits.max_frame_size))
        self.max_frame_size = _clamp(limits.max_frame_size)
        self.max_body_size = _clamp(limits.max_body_size)
        self.s_buf = cls._buf
        self.s_pos = cls._pos
        self.s_scan = cls._scan
        self.s_line_start = cls._line_start
        self.s_body_start = cls._body_start
        self.s_head_lines = cls._head_lines
        self.s_command = cls._command
        self.s_need = cls._need
        self.s_error = cls._error
        self.s_reading = cls._reading

    cdef inline void _consumed(self, object decoder, Py_ssize_t at) except *:
        mark = at  # one int object for the four marks
        stomp_slot_set(self.s_pos, decoder, mark)
        stomp_slot_set(self.s_scan, decoder, mark)
        stomp_slot_set(self.s_line_start, decoder, mark)
        stomp_slot_set(self.s_body_start, decoder, mark)
        stomp_slot_set(self.s_head_lines, decoder, 0)

    cdef inline void _beat(self, object decoder, Py_ssize_t at) except *:
        # As the pure decoder does for a heart-beat: the head's other marks stay.
        mark = at
        stomp_slot_set(self.s_pos, decoder, mark)
        stomp_slot_set(self.s_scan, decoder, mark)
        stomp_slot_set(self.s_line_start, decoder, mark)

    def next_frame(self, decoder):
        """The next frame or heart-beat, or None: the pure code takes over from here."""
        if (
            stomp_slot_get(self.s_command, decoder) is not None
            or stomp_slot_get(self.s_need, decoder)
            or stomp_slot_get(self.s_error, decoder) is not None
            or stomp_slot_get(self.s_reading, decoder)
        ):
            return None
        cdef bytearray buf = stomp_slot_get(self.s_buf, decoder)
        cdef Py_buffer view
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        stomp_slot_set(self.s_reading, decoder, True)
        try:
            return self._next(decoder, <const unsigned char *>view.buf, view.len)
        finally:
            stomp_slot_set(self.s_reading, decoder, False)
            PyBuffer_Release(&view)

    cdef object _next(self, object decoder, const unsigned char *data, Py_ssize_t end):
        cdef Py_ssize_t pos = stomp_slot_get(self.s_pos, decoder)
        cdef Py_ssize_t scan
        if self.lenient:
            # Where the pure decoder resumes its lenient search (_next_head).
            scan = <Py_ssize_t>stomp_slot_get(self.s_line_start, decoder) + 1
        else:
            scan = stomp_slot_get(self.s_scan, decoder)
        cdef int first = _at(data, end, pos)
        if first < 0:
            return None
        if first == LF:
            self._beat(decoder, pos + 1)
            return BEAT
        if first == CR and self.crlf:
            if _at(data, end, pos + 1) == LF:
                self._beat(decoder, pos + 2)
                return BEAT
            return None
        return self._frame(decoder, data, end, pos, scan)

    cdef object _frame(
        self, object decoder, const unsigned char *data, Py_ssize_t end, Py_ssize_t pos,
        Py_ssize_t scan,
    ):
        # The blank line, searched where the pure decoder would search it: LF LF,
        # or LF CR LF under CRLF rules; in lenient mode a line of blanks.
        cdef Py_ssize_t stop = min(end, pos + self.max_head)
        cdef Py_ssize_t i = scan - 2 if scan - 2 > pos else pos
        cdef Py_ssize_t head_end = -1, body_start = -1, j
        cdef const unsigned char *found
        cdef int after
        while i < stop:
            found = <const unsigned char *>memchr(data + i, LF, stop - i)
            if found == NULL:
                break
            i = found - data
            if self.lenient:
                j = i + 1
                after = _at(data, stop, j)
                while after == 32 or after == 9 or after == CR:
                    j += 1
                    after = _at(data, stop, j)
                if after == LF:
                    head_end, body_start = i, j + 1
                    break
            elif _at(data, stop, i + 1) == LF:
                head_end, body_start = i, i + 2
                break
            elif self.crlf and _at(data, stop, i + 1) == CR and _at(data, stop, i + 2) == LF:
                head_end, body_start = i, i + 3
                break
            i += 1
        if head_end < 0 or head_end - pos > self.max_line_length:
            # Incomplete, past a limit, or a long line to check in order: the pure code.
            return None
        if memchr(data + pos, 0, head_end - pos) != NULL:
            return None

        # The command line.
        cdef const unsigned char *lf = <const unsigned char *>memchr(data + pos, LF, head_end - pos)
        cdef Py_ssize_t line_end = head_end if lf == NULL else lf - data
        cdef Py_ssize_t text_end = line_end
        if self.crlf and text_end > pos and data[text_end - 1] == CR:
            text_end -= 1
        command = _known(&COMMANDS_TABLE, COMMAND_NAMES, data + pos, text_end - pos)
        if command is None or command not in self.commands:
            return None

        cdef Py_ssize_t room = self.max_frame_size - (body_start - pos)
        cdef Py_ssize_t body_limit = self.max_body_size if self.max_body_size <= room else room
        cdef bint unescape = self.unescaping and (
            command == "STOMP" if self.handshake else command not in UNESCAPED
        )
        cdef Py_ssize_t length = -1, count = 0, start, colon, value_end, k, d, digits
        cdef list pairs = []
        cdef const unsigned char *at
        cdef bint escaped
        cdef int c
        while line_end < head_end:
            start = line_end + 1
            lf = <const unsigned char *>memchr(data + start, LF, head_end - start)
            line_end = head_end if lf == NULL else lf - data
            text_end = line_end
            if self.crlf and text_end > start and data[text_end - 1] == CR:
                text_end -= 1
            if not self.lenient and self.crlf and memchr(data + start, CR, text_end - start) != NULL:
                return None  # a CR inside a line (1.2 wants it escaped)
            at = <const unsigned char *>memchr(data + start, COLON, text_end - start)
            if at == NULL or at == data + start:
                return None  # no colon, or an empty name
            colon = at - data
            count += 1
            if count > self.max_headers:
                return None
            escaped = unescape and memchr(data + start, BACKSLASH, text_end - start) != NULL
            if escaped:
                name = _unescape(data + start, colon - start, self.unescaping_cr)
                value = _unescape(data + colon + 1, text_end - colon - 1, self.unescaping_cr)
            else:
                name = _known(&HEADERS_TABLE, HEADER_NAMES, data + start, colon - start)
                if name is None:
                    name = _text(data + start, colon - start)
                value = _text(data + colon + 1, text_end - colon - 1)
            if name is None or value is None:
                return None
            if length < 0 and colon - start == 14 and (
                memcmp(data + start, b"content-length", 14) == 0
            ):
                # The first content-length, read from the raw line: digits only
                # (lenient mode: between blanks).
                k = colon + 1
                value_end = text_end
                if self.lenient:
                    while k < value_end and (data[k] == 32 or data[k] == 9 or data[k] == CR):
                        k += 1
                    while value_end > k and (
                        data[value_end - 1] == 32 or data[value_end - 1] == 9
                        or data[value_end - 1] == CR
                    ):
                        value_end -= 1
                digits = value_end - k
                if digits < 1 or digits > MOST_DIGITS:
                    return None
                length = 0
                for d in range(k, value_end):
                    c = data[d]
                    if c < 48 or c > 57:
                        return None
                    length = length * 10 + (c - 48)
            pairs.append(stomp_pair(name, value))
        if length > body_limit or (length > 0 and command in self.bodiless):
            return None

        cdef Py_ssize_t nul
        if length >= LARGE_BODY:
            return None
        if length >= 0:
            nul = body_start + length
            if _at(data, end, nul) != 0:
                return None
        else:
            stop = min(end, body_start + body_limit + 1)
            if body_start >= stop:
                return None
            found = <const unsigned char *>memchr(data + body_start, 0, stop - body_start)
            if found == NULL:
                return None
            nul = found - data
            if nul > body_start and command in self.bodiless:
                return None
        body = PyBytes_FromStringAndSize(<const char *>data + body_start, nul - body_start)
        headers = tuple(pairs)
        frame = _new_frame(command, headers, body)
        # Immutable all the way down (str, bytes, tuples of them): no cycle can
        # pass through them, so the collector need not visit them.
        stomp_untrack(headers)
        stomp_untrack(frame)
        self._consumed(decoder, nul + 1)
        return frame


# -- events --------------------------------------------------------------------

cdef class _EventKind:
    """How to build one event class from a frame: its typed headers and slots."""

    cdef object cls
    cdef tuple typed          # header names held in fields, in the order of `fields`
    cdef tuple typed_slots    # their slot descriptors
    cdef object headers_slot, body_slot, content_length_slot
    cdef tuple defaults       # (descriptor, value) of every other field
    cdef tuple not_empty      # indices in `typed` of the fields that must not be ""

    def __init__(self, cls, typed, typed_fields, extra_defaults):
        self.cls = cls
        self.typed = tuple(typed)
        self.typed_slots = tuple(getattr(cls, name) for name in typed_fields)
        names = [f.name for f in dataclasses.fields(cls)]
        # FrameEvent.__post_init__ refuses these empty; a field it names that is
        # not read from a header here would need a check of its own.
        self.not_empty = tuple(typed_fields.index(name) for name in cls._not_empty)
        self.headers_slot = getattr(cls, "headers")
        self.body_slot = getattr(cls, "body") if "body" in names else None
        self.content_length_slot = (
            getattr(cls, "content_length") if "content_length" in names else None
        )
        set_here = set(typed_fields) | {"headers", "body", "content_length"}
        defaults = []
        for field in dataclasses.fields(cls):
            if field.name in set_here:
                continue
            value = extra_defaults[field.name] if field.name in extra_defaults else field.default
            if value is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{field.name} has no default to build it with")
            defaults.append((getattr(cls, field.name), value))
        self.defaults = tuple(defaults)


cdef dict KINDS = {
    Message: _EventKind(
        Message,
        ("destination", "message-id", "subscription", "ack", "content-type"),
        ("destination", "message_id", "subscription", "ack", "content_type"),
        {},
    ),
    Receipt: _EventKind(Receipt, ("receipt-id",), ("receipt_id",), {}),
    Error: _EventKind(
        Error, ("message", "receipt-id", "content-type"),
        ("message", "receipt_id", "content_type"), {},
    ),
    Connected: _EventKind(
        Connected, ("version", "heart-beat", "session", "server"),
        ("version", "heartbeat", "session", "server"), {},
    ),
    Send: _EventKind(
        Send, ("destination", "content-type", "transaction", "receipt"),
        ("destination", "content_type", "transaction", "receipt"), {},
    ),
}
for _settlement in (Ack, Nack):
    KINDS[_settlement] = _EventKind(
        _settlement, ("id", "message-id", "subscription", "transaction", "receipt"),
        ("id", "message_id", "subscription", "transaction", "receipt"), {},
    )


cdef inline bint _same(object name, object known):
    return name is known or (
        PyUnicode_GET_LENGTH(name) == PyUnicode_GET_LENGTH(known) and name == known
    )


def event_from_frame(cls, frame, version):
    """``cls.from_frame(frame, version)`` for MESSAGE, RECEIPT, ERROR, CONNECTED, SEND,
    ACK and NACK frames that carry what the version requires; None for anything else."""
    cdef _EventKind kind = KINDS.get(cls)
    if kind is None or type(frame) is not FRAME:
        return None
    return _event(kind, cls, frame, version, None)


cdef object _event(_EventKind kind, object cls, object frame, object version, list out):
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
    # What __post_init__ refuses, then what each class's _from_frame requires.
    for j in kind.not_empty:
        if values[j] == "":
            return None
    if cls is Message:
        # destination and message-id always; subscription from 1.1.
        if values[0] is None or values[1] is None:
            return None
        if values[2] is None and version != "1.0":
            return None
    elif cls is Send:
        if values[0] is None:
            return None
    elif cls is Ack or cls is Nack:
        # id in 1.2; message-id before, and subscription in 1.1.
        if version == "1.2":
            if values[0] is None:
                return None
        elif values[1] is None or (version == "1.1" and values[2] is None):
            return None
    elif cls is Receipt:
        if values[0] is None:
            return None
    elif cls is Connected:
        chosen = values[0] or "1.0"
        if chosen not in VERSIONS:
            return None  # the pure code reads (and may strip, or refuse) it
        values[0] = VERSIONS[VERSIONS.index(chosen)]
        try:
            values[1] = parse_heartbeat(values[1])
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


# -- the encoder ---------------------------------------------------------------

cdef inline bint _escapable(const unsigned char *text, Py_ssize_t size) noexcept:
    cdef Py_ssize_t i
    cdef unsigned char c
    for i in range(size):
        c = text[i]
        if c == BACKSLASH or c == LF or c == COLON or c == CR:
            return True
    return False


cdef Py_ssize_t _put(
    bytearray out, Py_ssize_t n, const unsigned char *text, Py_ssize_t size, int escape
) except -1:
    """Append ``text`` to ``out`` at ``n`` (escaped: 0 none, 11 or 12); the new length."""
    cdef Py_ssize_t i, need = n + (2 * size if escape else size)
    cdef unsigned char c
    cdef unsigned char *target
    if need > PyByteArray_GET_SIZE(out):
        out.extend(bytes(need - PyByteArray_GET_SIZE(out) + 64))
    target = <unsigned char *>PyByteArray_AS_STRING(out)
    if not escape or not _escapable(text, size):
        memcpy(target + n, text, size)
        return n + size
    for i in range(size):
        c = text[i]
        if c == BACKSLASH:
            target[n] = BACKSLASH
            target[n + 1] = BACKSLASH
            n += 2
        elif c == LF:
            target[n] = BACKSLASH
            target[n + 1] = 110
            n += 2
        elif c == COLON:
            target[n] = BACKSLASH
            target[n + 1] = 99
            n += 2
        elif c == CR and escape == 12:
            target[n] = BACKSLASH
            target[n + 1] = 114
            n += 2
        else:
            target[n] = c
            n += 1
    return n


def encode(frame, str version, frozenset commands, frozenset bodies, bint content_length):
    """``FrameEncoder(version).encode(frame, content_length=...)`` for a frame that
    needs no refusal; None for anything the pure encoder must judge."""
    if type(frame) is not FRAME:
        return None
    command = (<tuple>frame)[0]
    headers = (<tuple>frame)[1]
    body = (<tuple>frame)[2]
    if not PyUnicode_CheckExact(command) or not PyTuple_CheckExact(headers):
        return None
    if not PyBytes_CheckExact(body) or command not in commands:
        return None
    cdef Py_ssize_t body_size = PyBytes_GET_SIZE(body)
    if body_size and command not in bodies:
        return None
    if not content_length and memchr(PyBytes_AS_STRING(body), 0, body_size) != NULL:
        return None
    cdef bint unescaped = command in UNESCAPED or version == "1.0"
    cdef int escape = 0 if unescaped else (12 if version == "1.2" else 11)
    # A raw CR is an ordinary octet before 1.2, except in CONNECT and CONNECTED.
    cdef bint raw_cr = version != "1.2" and command not in UNESCAPED
    cdef bytearray out = bytearray(256)
    cdef bytes digits
    cdef Py_ssize_t n = 0, size, value_size, i
    cdef const unsigned char *text
    cdef const unsigned char *value_text
    text = <const unsigned char *>stomp_utf8(command, &size)
    n = _put(out, n, text, size, 0)
    n = _put(out, n, <const unsigned char *>b"\n", 1, 0)
    for i in range(PyTuple_GET_SIZE(headers)):
        pair = <object>PyTuple_GET_ITEM(headers, i)
        if type(pair) is not tuple or PyTuple_GET_SIZE(pair) != 2:
            return None
        name = <object>PyTuple_GET_ITEM(pair, 0)
        value = <object>PyTuple_GET_ITEM(pair, 1)
        if not PyUnicode_CheckExact(name) or not PyUnicode_CheckExact(value):
            return None
        try:
            text = <const unsigned char *>stomp_utf8(name, &size)
            value_text = <const unsigned char *>stomp_utf8(value, &value_size)
        except UnicodeEncodeError:
            return None
        if size == 0 or memchr(text, 0, size) != NULL or memchr(value_text, 0, value_size) != NULL:
            return None
        if size == 14 and memcmp(text, b"content-length", 14) == 0:
            continue  # recomputed from the body below, or left out
        if unescaped and (
            memchr(text, COLON, size) != NULL
            or memchr(text, LF, size) != NULL
            or memchr(value_text, LF, value_size) != NULL
            or (not raw_cr and (
                memchr(text, CR, size) != NULL or memchr(value_text, CR, value_size) != NULL
            ))
        ):
            return None
        n = _put(out, n, text, size, escape)
        n = _put(out, n, <const unsigned char *>b":", 1, 0)
        n = _put(out, n, value_text, value_size, escape)
        n = _put(out, n, <const unsigned char *>b"\n", 1, 0)
    if body_size and content_length:
        digits = str(body_size).encode()
        n = _put(out, n, <const unsigned char *>b"content-length:", 15, 0)
        n = _put(out, n, <const unsigned char *>PyBytes_AS_STRING(digits), len(digits), 0)
        n = _put(out, n, <const unsigned char *>b"\n", 1, 0)
    n = _put(out, n, <const unsigned char *>b"\n", 1, 0)
    n = _put(out, n, <const unsigned char *>PyBytes_AS_STRING(body), body_size, 0)
    n = _put(out, n, <const unsigned char *>b"\0", 1, 0)
    return PyBytes_FromStringAndSize(PyByteArray_AS_STRING(out), n)


# -- the client's per-message steps ----------------------------------------------

cdef object CLIENT_CONNECTION = None
cdef object CONNECTED_STATE = None
cdef object MESSAGE_STATE = None   # where a MESSAGE received when CONNECTED leads
cdef object ACK_STATE = None       # where an ACK sent when CONNECTED leads
cdef object NACK_STATE = None
cdef object SEND_STATE = None      # where a SEND sent when CONNECTED leads
cdef _EventKind MESSAGE_KIND = KINDS[Message]
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
    if SEND_STATE is None or conn._state is not CONNECTED_STATE or event.receipt is not None:
        return None
    # Fields of the exact types the pure send's checks (_checks.check_event) accept
    # without a word; anything else is theirs to refuse, with their message.
    transaction = event.transaction
    content_length = event.content_length
    if type(content_length) is not bool or not PyUnicode_CheckExact(event.destination):
        return None
    if transaction is not None and (
        not PyUnicode_CheckExact(transaction) or transaction not in conn._transactions
    ):
        return None
    headers = event.headers
    if not PyTuple_CheckExact(headers):
        return None
    # Send._to_frame: the typed headers first, the unset ones left out, then the rest.
    typed = [stomp_pair("destination", event.destination)]
    content_type = event.content_type
    if content_type is not None:
        typed.append(stomp_pair("content-type", content_type))
    if transaction is not None:
        typed.append(stomp_pair("transaction", transaction))
    frame = _new_frame("SEND", tuple(typed) + <tuple>headers, event.body)
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
    cdef HeadScanner fast = decoder._fast
    if fast is None:
        return None
    item = fast.next_frame(decoder)
    if item is None or type(item) is BEAT_TYPE:
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
    event = _event(MESSAGE_KIND, Message, item, version, values)
    if event is None:
        return conn._event_of(item)
    # Every field is a str, bytes, bool, None or a tuple of str pairs (the frame
    # came from the scanner): no cycle can pass through it.
    stomp_untrack(event)
    # values: destination, message-id, subscription, ack, content-type
    subscription = values[2]
    key = subscription if subscription is not None else values[0]
    cdef dict subscriptions = conn._subscriptions
    subscribe = subscriptions.get(key)
    if subscribe is None:
        return conn._event_of(item)
    cdef dict by_subscription
    cdef dict pending
    if subscribe.ack != "auto":
        ident = values[3] if version == "1.2" else values[1]
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
    frame = _new_frame("ACK" if ack else "NACK", (stomp_pair("id", ident),), b"")
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
