# cython: language_level=3, boundscheck=True, wraparound=True, initializedcheck=True
# cython: cdivision=False, infer_types=False
"""The native twin of ``_decoder.py``: the fast path of ``FrameDecoder.next_frame``.

The pure decoder stays the reference: :class:`HeadScanner` either gives
exactly what the pure code gives for the same state - a frame, a heart-beat,
or ``None`` while more data is needed, with the same state left behind - or
``NotImplemented`` ("not mine"), and the decoder then runs its own code on the
same state.  So every error, limit and message comes from the pure code, and
this module only has to recognise the common, well-formed case, keep the
decoder's marks as the pure code keeps them, and build the same objects faster.

Bounds: the buffer is read through a ``const unsigned char *`` and its length;
every index used is checked against that length right where it is read (the
``byte_at`` helper, and loops bounded by ``end``), since the input is hostile.  The
scan allocates, and an allocation can run Python code (a garbage collection's
finalizers): so the scan holds a buffer export of the bytearray, which makes
any resize raise BufferError instead of moving the memory, and sets the
decoder's ``_reading`` mark, which makes ``receive_data`` refuse re-entry with
the pure decoder's LocalProtocolError.  Time and memory: every search starts
where the pure decoder's would (its ``_scan``), and the lines of a partial head
are checked once each, as they complete, so a head or body arriving byte by
byte is still read a bounded number of times; a body waits in the buffer until
its NUL is in and is then copied once.
"""

cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_GetBuffer
from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_Resize
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, _PyBytes_Resize
from cpython.exc cimport PyErr_Clear
from cpython.long cimport PyLong_AsLongLongAndOverflow
from cpython.object cimport PyObject
from cpython.pyport cimport PY_SSIZE_T_MAX
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport memchr, memcmp, memcpy

from ._native_shared cimport (
    BACKSLASH, COLON, CR, LF, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_IS_COMPACT_ASCII,
    PyUnicode_New, byte_at, new_frame, stomp_pair,
    stomp_slot_get, stomp_slot_set, stomp_untrack, stomp_utf8,
)

from ._events import HEARTBEAT
from ._frame import COMMANDS, UNESCAPED_COMMANDS, Frame

#: The private attributes of the pure classes that this module reads or writes
#: (tests/test_native_touches.py checks that each exists on the pure build).
TOUCHES = {
    "FrameDecoder": (
        "_big", "_blank_lf", "_bodiless", "_body_limit", "_body_start", "_buf", "_command",
        "_commands", "_content_length", "_crlf", "_eof", "_error", "_full_at", "_handshake",
        "_head_lines", "_headers", "_limits", "_line_start", "_need", "_pos", "_reading",
        "_scan", "_strict", "_unescaping", "_unescaping_cr", "_verbatim",
    ),
}

#: Frames whose content-length is this or more, and whose body is still
#: arriving, take the one-copy route for large bodies (_decoder._LARGE_BODY).
cdef Py_ssize_t LARGE_BODY = 64 * 1024
#: How a large body's reservation grows (_decoder._GROWTH).
cdef Py_ssize_t GROWTH = 4
#: Limits past this are as good as unlimited here (no buffer gets near it), and keep
#: the sums below in range: what a user's Limits and the pure code's marks hold is
#: clamped to it where it enters C (_clamp).
cdef Py_ssize_t HUGE = PY_SSIZE_T_MAX >> 3
#: More digits than this in a content-length: left to the pure code (it reads TOO_LONG).
cdef Py_ssize_t MOST_DIGITS = 18

#: Module constants, held in C variables (a global's name is looked up on each use).
cdef frozenset UNESCAPED = UNESCAPED_COMMANDS
cdef object FRAME = Frame
cdef object BEAT = HEARTBEAT
#: What the decoder's ``_reading`` holds while the scan runs, and after it (the pure
#: decoder's names: its re-entry error names the call under way).
cdef str NEXT_FRAME = "next_frame"
cdef str NOT_READING = ""


#: The bytes that the scanner's searches of a head have spanned, in this process: the
#: work of reading heads, counted rather than timed (tests/test_decoder_linear.py).
cdef Py_ssize_t SEARCHED = 0


def bytes_searched():
    """How many bytes the searches of heads have spanned so far (see SEARCHED)."""
    return SEARCHED


cdef inline Py_ssize_t _past_blanks(const unsigned char *data, Py_ssize_t stop, Py_ssize_t i):
    """The first index from ``i`` on whose byte is no blank (space, tab, CR), or ``stop``."""
    while i < stop and (data[i] == 32 or data[i] == 9 or data[i] == CR):
        i += 1
    return i


cdef inline Py_ssize_t _clamp(object value) except? -1:
    """``value``, a Python int, as a C one: HUGE where it is larger.

    Limits have no upper bound (``Limits(max_body_size=2**64)`` is valid), and the
    pure code's marks derived from them (``_body_limit``, ``_content_length``) can be
    as large, so each crosses into C through here, never by a bare conversion."""
    cdef int overflow = 0
    cdef long long n = PyLong_AsLongLongAndOverflow(value, &overflow)
    if overflow > 0 or n > HUGE:
        return HUGE
    return <Py_ssize_t>n


# -- the names of commands and headers -------------------------------------------

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
#: The same objects, for the events' twin (it compares names by pointer first).
KNOWN_HEADERS = HEADER_NAMES

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
            c = byte_at(data, size, i + 1)
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



# -- large bodies --------------------------------------------------------------

cdef extern from "Python.h":
    # A new bytes object, uninitialised, as a reference of its own (NULL on failure).
    PyObject *reserve_bytes "PyBytes_FromStringAndSize"(const char *data, Py_ssize_t size)


@cython.final
cdef class BodyReservation:
    """A large body as it arrives, written into the bytes object that becomes its frame's.

    The twin of the io.BytesIO of the pure decoder's one-copy route (its
    ``_start_large_body``), with the three calls the decoder makes on it: ``write``
    (``receive_data``), ``getvalue`` (the frame) and ``getbuffer`` (the version setter).
    It grows as the pure route does - to GROWTH times its size, never past the
    declared length - so memory still follows the bytes received; but it is
    reserved without being zero-filled, and it grows itself as writes need (the
    decoder's ``_full_at`` is 0 for it: no ``_grow_large_body`` calls).  It holds the
    only reference to its bytes object until ``getvalue`` hands it over, since
    ``_PyBytes_Resize`` may only resize an object nothing else refers to.
    """

    cdef PyObject *body  # owned; NULL until its first byte
    cdef Py_ssize_t size, held, length
    cdef bint lost  # handed over by getvalue, or freed by a failed resize

    def __cinit__(self, Py_ssize_t length):
        self.length = length

    def __dealloc__(self):
        Py_XDECREF(self.body)

    cdef int reserve(self, Py_ssize_t size) except -1:
        """Room for ``size`` bytes (at least those held), uninitialised past them."""
        if self.body == NULL:
            # The first reservation is made at the declared length and cut down at
            # once: what is cut off is free memory right behind it, so that growing
            # it later most often extends it in place (realloc) instead of moving
            # what it holds - a copy of a quarter of the body or more.  Nothing of
            # the declared length is touched, and what stays allocated follows the
            # growth rule.  Where that much cannot be had, the small one will do.
            self.size = self.length
            self.body = reserve_bytes(NULL, self.size)
            if self.body == NULL:
                PyErr_Clear()
                self.size = size
                self.body = reserve_bytes(NULL, self.size)
                if self.body == NULL:
                    raise MemoryError()
        if size != self.size:
            try:
                _PyBytes_Resize(&self.body, size)
            except MemoryError:
                self.lost = True  # _PyBytes_Resize freed it
                raise
            self.size = size
        return 0

    cdef int take(self, const unsigned char *data, Py_ssize_t size) except -1:
        """Append ``data[:size]``, growing the reservation if it must."""
        cdef Py_ssize_t end = self.held + size
        cdef Py_ssize_t grown
        if self.lost:
            raise ValueError("the body's reservation is gone")
        if end > self.length:
            raise ValueError("more bytes than the declared length")
        if end > self.size:
            grown = GROWTH * self.size
            if grown < end:
                grown = end
            self.reserve(grown if grown < self.length else self.length)
        memcpy(PyBytes_AS_STRING(<object>self.body) + self.held, data, size)
        self.held = end
        return 0

    def write(self, data):
        """Append the bytes of ``data`` (bytes-like); returns how many."""
        cdef Py_buffer view
        PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
        try:
            self.take(<const unsigned char *>view.buf, view.len)
            return view.len
        finally:
            PyBuffer_Release(&view)

    def getvalue(self):
        """The whole body: the reserved bytes object itself, handed over (no copy)."""
        if self.lost or self.held != self.length:
            raise ValueError("the body is not whole")
        body = <object>self.body
        Py_DECREF(body)  # the reservation's reference, now the caller's
        self.body = NULL
        self.lost = True
        return body

    def getbuffer(self):
        """The bytes held so far, as a read-only view."""
        if self.body == NULL:
            return memoryview(b"")
        return memoryview(<object>self.body)[: self.held]


# -- the scanner ---------------------------------------------------------------

@cython.final
cdef class HeadScanner:
    """The fast path of one ``FrameDecoder`` under its current rules.

    The decoder makes one whenever its rules change (version, handshake,
    verbatim text) and asks :meth:`next_frame` before its own ``next_frame``
    code.  The answer is what the pure code would answer - a frame, a
    heart-beat, or None while more data is needed, with the decoder's state
    moved on exactly as the pure code moves it - or ``NotImplemented``: the
    pure code takes over, on the same state (every error and limit, the large
    bodies, the rare cases).  It resumes as the pure ``_scan`` does: a head
    arriving in pieces is checked line by line as its lines complete (in
    lenient mode each line is measured and counted, and a line of blanks still
    growing is noted in ``_blank_lf``, as the pure code does), and once a head is
    read its frame waits in the decoder's state (``_command``, ``_headers``,
    ``_content_length`` ...) until the body is in, which is then copied once.

    It knows strict mode, and the lenient mode that keeps text verbatim (the
    lenient server's, which the embedded broker runs); the decoder makes none
    for the lenient client, which rewrites commands and values.
    """

    # Its fields and methods are declared in _decoder_native.pxd.

    def __init__(self, decoder):
        cls = type(decoder)
        limits = decoder._limits
        self.limits = limits
        self.clamped = (
            _clamp(limits.max_body_size) == HUGE or _clamp(limits.max_frame_size) == HUGE
        )
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
        self.s_headers = cls._headers
        self.s_content_length = cls._content_length
        self.s_body_limit = cls._body_limit
        self.s_need = cls._need
        self.s_big = cls._big
        self.s_full_at = cls._full_at
        self.s_blank_lf = cls._blank_lf
        self.trim = -1
        self.s_eof = cls._eof
        self.s_error = cls._error
        self.s_reading = cls._reading

    cdef void start_large_body(
        self, object decoder, const unsigned char *data, Py_ssize_t start, Py_ssize_t end,
        Py_ssize_t length,
    ) except *:
        """The pure _start_large_body's state, with the native reservation: the body
        received so far moves into it, and the reads to come are written into it by
        ``receive_data``.  Done as soon as the head is read (a reservation costs
        no zero fill here): the first bytes are copied twice at most once."""
        cdef Py_ssize_t received = end - start
        cdef BodyReservation big = BodyReservation(length)
        if received:
            big.take(data + start, received)  # a reservation of that size, for now
        stomp_slot_set(self.s_big, decoder, big)
        stomp_slot_set(self.s_need, decoder, length - received)
        stomp_slot_set(self.s_full_at, decoder, 0)
        self.trim = start

    cdef void consumed(self, object decoder, Py_ssize_t at) except *:
        # A frame whose head and body came in one call: the head's marks move on
        # (its _command and the like were never set).
        mark = at  # one int object for the four marks
        stomp_slot_set(self.s_pos, decoder, mark)
        stomp_slot_set(self.s_scan, decoder, mark)
        stomp_slot_set(self.s_line_start, decoder, mark)
        stomp_slot_set(self.s_body_start, decoder, mark)
        stomp_slot_set(self.s_head_lines, decoder, 0)

    cdef void body_taken(self, object decoder, Py_ssize_t at) except *:
        # A frame whose head waited for its body: as the pure _reset_head.
        self.consumed(decoder, at)
        stomp_slot_set(self.s_command, decoder, None)
        stomp_slot_set(self.s_headers, decoder, ())
        stomp_slot_set(self.s_content_length, decoder, -1)
        stomp_slot_set(self.s_body_limit, decoder, 0)

    cdef void beat(self, object decoder, Py_ssize_t at) except *:
        # As the pure decoder does for a heart-beat: the head's other marks stay.
        mark = at
        stomp_slot_set(self.s_pos, decoder, mark)
        stomp_slot_set(self.s_scan, decoder, mark)
        stomp_slot_set(self.s_line_start, decoder, mark)

    def next_frame(self, decoder):
        """The next frame or heart-beat, None for "more data needed", or
        NotImplemented: the pure code takes over from here."""
        return self.scan(decoder)

    cdef object scan(self, object decoder):
        if (
            stomp_slot_get(self.s_error, decoder) is not None
            or stomp_slot_get(self.s_reading, decoder)
        ):
            return NotImplemented
        if stomp_slot_get(self.s_need, decoder):
            # A large body is arriving in its own object; only its end (or the
            # stream's) is the pure code's.
            return NotImplemented if stomp_slot_get(self.s_eof, decoder) else None
        cdef bytearray buf = stomp_slot_get(self.s_buf, decoder)
        cdef Py_buffer view
        PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
        stomp_slot_set(self.s_reading, decoder, NEXT_FRAME)
        try:
            if stomp_slot_get(self.s_command, decoder) is None:
                return self.next_item(decoder, <const unsigned char *>view.buf, view.len)
            return self.waiting_body(decoder, <const unsigned char *>view.buf, view.len)
        finally:
            PyBuffer_Release(&view)
            if self.trim >= 0:
                # A large body left the buffer for its reservation (start_large_body):
                # its bytes go once the buffer may be resized again.
                PyByteArray_Resize(buf, self.trim)
                self.trim = -1
            stomp_slot_set(self.s_reading, decoder, NOT_READING)

    cdef object next_item(self, object decoder, const unsigned char *data, Py_ssize_t end):
        cdef Py_ssize_t pos = stomp_slot_get(self.s_pos, decoder)
        cdef Py_ssize_t scan = stomp_slot_get(self.s_scan, decoder)
        cdef int first = byte_at(data, end, pos)
        if first < 0:
            return self.more(decoder)
        if first == LF:
            self.beat(decoder, pos + 1)
            return BEAT
        if first == CR and self.crlf:
            second = byte_at(data, end, pos + 1)
            if second < 0:
                return self.more(decoder)
            if second == LF:
                self.beat(decoder, pos + 2)
                return BEAT
        return self.frame_at(decoder, data, end, pos, scan)

    cdef object more(self, object decoder):
        """None, "more data needed"; at the end of the stream the pure code says why not."""
        return NotImplemented if stomp_slot_get(self.s_eof, decoder) else None

    cdef object frame_at(
        self, object decoder, const unsigned char *data, Py_ssize_t end, Py_ssize_t pos,
        Py_ssize_t scan,
    ):
        # The blank line, searched where the pure decoder would search it: LF LF,
        # or LF CR LF under CRLF rules; in lenient mode a line of blanks.
        cdef Py_ssize_t window = pos + self.max_head
        cdef Py_ssize_t stop = min(end, window)
        cdef Py_ssize_t i = scan - 2 if scan - 2 > pos else pos
        cdef Py_ssize_t first = i, head_end = -1, body_start = -1, j, blank_lf = -1
        cdef Py_ssize_t last_lf = -1  # the last LF searched past (lenient mode)
        cdef bint growing = False  # a line of blanks was growing at _scan (lenient mode)
        cdef const unsigned char *found
        global SEARCHED
        if self.lenient:
            # From _scan on, as the pure _next_head: a line of blanks still growing
            # there (its LF noted in _blank_lf) is followed from where it stopped,
            # so that a head trickling in is read once, not once per read.
            i = first = scan
            blank_lf = stomp_slot_get(self.s_blank_lf, decoder)
            growing = blank_lf == <Py_ssize_t>stomp_slot_get(self.s_line_start, decoder) - 1 >= pos
            if growing:
                i = _past_blanks(data, stop, i)
                if byte_at(data, stop, i) == LF:
                    head_end, body_start = blank_lf, i + 1
        while head_end < 0 and i < stop:
            found = <const unsigned char *>memchr(data + i, LF, stop - i)
            if found == NULL:
                break
            i = found - data
            if self.lenient:
                last_lf = i
                j = _past_blanks(data, stop, i + 1)
                if byte_at(data, stop, j) == LF:
                    head_end, body_start = i, j + 1
                    break
            elif byte_at(data, stop, i + 1) == LF:
                head_end, body_start = i, i + 2
                break
            elif (
                self.crlf and byte_at(data, stop, i + 1) == CR and byte_at(data, stop, i + 2) == LF
            ):
                head_end, body_start = i, i + 3
                break
            i += 1
        SEARCHED += (body_start if head_end >= 0 else stop) - first
        if head_end < 0:
            if not self.lenient:
                return self.partial_head(decoder, data, end, pos, scan, window, None)
            # The pure _note_blank_line: whether the last line, still growing, holds
            # only blanks so far - a blank line in the making, whose LF _blank_lf
            # keeps (-1: it is not); unchanged where no LF came and none was growing.
            # Every LF after _scan was searched past above: the last is the rfind's.
            if last_lf < 0 and not growing:
                return self.partial_head(decoder, data, end, pos, scan, window, None)
            j = scan if last_lf < 0 else last_lf + 1
            SEARCHED += stop - j
            if last_lf < 0:
                last_lf = blank_lf
            return self.partial_head(
                decoder, data, end, pos, scan, window,
                last_lf if _past_blanks(data, stop, j) == stop else -1,
            )
        if head_end - pos > self.max_line_length:
            # A long head may hold a long line, to check in order: the pure code.
            return NotImplemented
        if memchr(data + pos, 0, head_end - pos) != NULL:
            return NotImplemented

        # The command line.
        cdef const unsigned char *lf = <const unsigned char *>memchr(data + pos, LF, head_end - pos)
        cdef Py_ssize_t line_end = head_end if lf == NULL else lf - data
        cdef Py_ssize_t text_end = line_end
        if self.crlf and text_end > pos and data[text_end - 1] == CR:
            text_end -= 1
        command = _known(&COMMANDS_TABLE, COMMAND_NAMES, data + pos, text_end - pos)
        if command is None or command not in self.commands:
            return NotImplemented

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
            if (
                not self.lenient and self.crlf
                and memchr(data + start, CR, text_end - start) != NULL
            ):
                return NotImplemented  # a CR inside a line (1.2 wants it escaped)
            at = <const unsigned char *>memchr(data + start, COLON, text_end - start)
            if at == NULL or at == data + start:
                return NotImplemented  # no colon, or an empty name
            colon = at - data
            count += 1
            if count > self.max_headers:
                return NotImplemented
            escaped = unescape and memchr(data + start, BACKSLASH, text_end - start) != NULL
            pair = None
            if escaped:
                name = _unescape(data + start, colon - start, self.unescaping_cr)
                value = _unescape(data + colon + 1, text_end - colon - 1, self.unescaping_cr)
            else:
                # A broker sends the same header names, and many of the same values,
                # frame after frame: the previous frame's objects are taken again
                # where their text is the same, at the same place.
                name = self.previous_text(count - 1, 0, data + start, colon - start)
                value = self.previous_text(count - 1, 1, data + colon + 1, text_end - colon - 1)
                if name is not None and value is not None:
                    pair = (<tuple>self.previous)[count - 1]
                if name is None:
                    name = _known(&HEADERS_TABLE, HEADER_NAMES, data + start, colon - start)
                if name is None:
                    name = _text(data + start, colon - start)
                if value is None:
                    value = _text(data + colon + 1, text_end - colon - 1)
            if name is None or value is None:
                return NotImplemented
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
                    return NotImplemented
                length = 0
                for d in range(k, value_end):
                    c = data[d]
                    if c < 48 or c > 57:
                        return NotImplemented
                    length = length * 10 + (c - 48)
            pairs.append(stomp_pair(name, value) if pair is None else pair)
        if length > body_limit or (length > 0 and command in self.bodiless):
            return NotImplemented

        if length > body_limit or (length > 0 and command in self.bodiless):
            return NotImplemented
        headers = tuple(pairs)
        # Immutable all the way down (str, and tuples of str): no cycle can pass
        # through it, so the collector need not visit it.
        stomp_untrack(headers)
        self.previous = headers
        return self.take_body(
            decoder, data, end, command, headers, body_start, length, body_limit, body_start, False
        )

    cdef object exact_body_limit(self, Py_ssize_t head_size):
        """The pure _whole_head's body limit for a head of ``head_size`` bytes, as a
        Python int, from the limits unclamped."""
        room = self.limits.max_frame_size - head_size
        body = self.limits.max_body_size
        return body if body <= room else room

    cdef object previous_text(
        self, Py_ssize_t index, Py_ssize_t part, const unsigned char *data, Py_ssize_t size
    ):
        """The name (``part`` 0) or value (1) of header ``index`` of the previous frame
        read, if it is ASCII text and its bytes are ``data[:size]``; else None."""
        if self.previous is None or index >= len(self.previous):
            return None
        text = (<tuple>(<tuple>self.previous)[index])[part]
        if (
            not PyUnicode_IS_COMPACT_ASCII(text)
            or PyUnicode_GET_LENGTH(text) != size
            or memcmp(PyUnicode_DATA(text), data, size) != 0
        ):
            return None
        return text

    cdef object partial_head(
        self, object decoder, const unsigned char *data, Py_ssize_t end, Py_ssize_t pos,
        Py_ssize_t scan, Py_ssize_t window, object blank_lf,
    ):
        """The pure _check_partial_head, for a head whose blank line has not arrived:
        None with the marks moved on, or NotImplemented where it would raise (it then
        raises, on the same state).  ``blank_lf``: lenient mode's new ``_blank_lf``,
        written with the other marks (None: it stays as it is); in lenient mode the
        lines are only measured and counted, as the pure _check_lines does."""
        if stomp_slot_get(self.s_eof, decoder):
            return NotImplemented
        cdef Py_ssize_t stop = min(end, window)
        cdef Py_ssize_t i = scan - 1 if scan - 1 > pos else pos
        global SEARCHED
        if i < stop:
            SEARCHED += stop - i
            if memchr(data + i, 0, stop - i) != NULL:
                return NotImplemented  # a NUL in the head
        if end >= window:
            return NotImplemented  # past the head's limit
        # The lines completed since the last call (_check_lines), then the growing one.
        cdef Py_ssize_t start = stomp_slot_get(self.s_line_start, decoder)
        cdef Py_ssize_t lines = stomp_slot_get(self.s_head_lines, decoder)
        cdef Py_ssize_t length, lf_at
        cdef const unsigned char *lf
        cdef const unsigned char *colon
        i = scan if scan > start else start
        SEARCHED += end - i
        while i < end:
            lf = <const unsigned char *>memchr(data + i, LF, end - i)
            if lf == NULL:
                break
            lf_at = lf - data
            length = lf_at - start
            if self.crlf and length and data[lf_at - 1] == CR:
                length -= 1
            if length > self.max_line_length:
                return NotImplemented
            if self.lenient:
                pass  # (a lenient head's command and lines are read once it is whole)
            elif start == pos:
                command = _known(&COMMANDS_TABLE, COMMAND_NAMES, data + start, length)
                if command is None or command not in self.commands:
                    return NotImplemented
            else:
                colon = <const unsigned char *>memchr(data + start, COLON, length)
                if colon == NULL or colon == data + start:
                    return NotImplemented  # no colon, or an empty name
            lines += 1
            if lines > self.max_headers + 1:
                return NotImplemented
            start = lf_at + 1
            i = start
        length = end - start
        if self.crlf and length and data[end - 1] == CR:
            length -= 1
        if length > self.max_line_length:
            # (In lenient mode a line of blanks is exempt: the pure code's case.)
            return NotImplemented
        if blank_lf is not None:
            stomp_slot_set(self.s_blank_lf, decoder, blank_lf)
        stomp_slot_set(self.s_line_start, decoder, start)
        stomp_slot_set(self.s_head_lines, decoder, lines)
        stomp_slot_set(self.s_scan, decoder, end)
        return None

    cdef object waiting_body(self, object decoder, const unsigned char *data, Py_ssize_t end):
        """The body of the frame whose head the decoder holds, if it is all in."""
        if stomp_slot_get(self.s_big, decoder) is not None:
            return NotImplemented  # a large body's end: the pure code's
        # The pure code may have read this head (a content-length of 19 digits, a
        # lenient head in pieces) under limits of any size: both marks are clamped.
        cdef Py_ssize_t length = _clamp(stomp_slot_get(self.s_content_length, decoder))
        if length == HUGE:
            return NotImplemented  # longer than any buffer: the pure code waits for it
        return self.take_body(
            decoder, data, end,
            stomp_slot_get(self.s_command, decoder),
            stomp_slot_get(self.s_headers, decoder),
            stomp_slot_get(self.s_body_start, decoder),
            length,
            _clamp(stomp_slot_get(self.s_body_limit, decoder)),
            stomp_slot_get(self.s_scan, decoder),
            True,
        )

    cdef object take_body(
        self, object decoder, const unsigned char *data, Py_ssize_t end, object command,
        object headers, Py_ssize_t start, Py_ssize_t length, Py_ssize_t body_limit,
        Py_ssize_t scan, bint held,
    ):
        """The frame once its body is in (one copy), as the pure _next_body; else the
        head waits in the decoder's state (``held``: it is there already) and the
        answer is None, or NotImplemented where the pure code raises.  A large body
        still arriving leaves the buffer for a reservation (start_large_body)."""
        cdef Py_ssize_t nul = -1, stop
        cdef const unsigned char *found = NULL
        cdef bint more = False  # the body is not all in, and nothing is wrong so far
        cdef bint large = False  # and it is a large one, with bytes still to come
        if length >= 0:
            if start + length < end:
                if data[start + length] == 0:
                    nul = start + length
            elif start + length == end or length < LARGE_BODY:
                more = True
            else:
                more = large = True
        elif not (end > start and data[start] != 0 and command in self.bodiless):
            # No content-length: the body ends at the first NUL, within the body limit.
            stop = min(end, start + body_limit + 1)
            if scan < stop:
                found = <const unsigned char *>memchr(data + scan, 0, stop - scan)
            if found != NULL:
                nul = found - data
            elif end <= start + body_limit:
                more = True
        if nul < 0:
            if not held:
                # What the pure _whole_head leaves for its _next_body.
                stomp_slot_set(self.s_command, decoder, command)
                stomp_slot_set(self.s_headers, decoder, headers)
                stomp_slot_set(self.s_content_length, decoder, length)
                if self.clamped:
                    # The pure code's exact limit, for its messages (body_limit
                    # is clamped, and as good here).
                    stomp_slot_set(self.s_body_limit, decoder, self.exact_body_limit(
                        start - <Py_ssize_t>stomp_slot_get(self.s_pos, decoder)
                    ))
                else:
                    stomp_slot_set(self.s_body_limit, decoder, body_limit)
                mark = start
                stomp_slot_set(self.s_body_start, decoder, mark)
                stomp_slot_set(self.s_scan, decoder, mark)
            if not more or stomp_slot_get(self.s_eof, decoder):
                return NotImplemented
            if large:
                self.start_large_body(decoder, data, start, end, length)
            elif length < 0:
                stomp_slot_set(self.s_scan, decoder, end)
            return None
        body = PyBytes_FromStringAndSize(<const char *>data + start, nul - start)
        frame = new_frame(FRAME, command, headers, body)
        stomp_untrack(frame)
        if held:
            self.body_taken(decoder, nul + 1)
        else:
            self.consumed(decoder, nul + 1)
        return frame
