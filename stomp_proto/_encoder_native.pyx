# cython: language_level=3, boundscheck=True, wraparound=True, initializedcheck=True
# cython: cdivision=False, infer_types=False
"""The native twin of ``_encoder.py``: the bytes of a frame, for ``FrameEncoder.encode``.

:func:`encode` writes a frame under the escaping rules of a version when the
frame needs no refusal, and gives ``None`` for anything the pure encoder must
judge (it then writes the frame, or raises, itself).  It reads only its
arguments: no private attribute of a pure class.
"""

from cpython.bytearray cimport PyByteArray_AS_STRING, PyByteArray_GET_SIZE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from libc.string cimport memchr, memcmp, memcpy

from ._native_shared cimport (
    BACKSLASH, COLON, CR, LF, PyBytes_CheckExact, PyTuple_CheckExact, PyTuple_GET_ITEM,
    PyTuple_GET_SIZE, PyUnicode_CheckExact, stomp_utf8,
)

from ._frame import UNESCAPED_COMMANDS, Frame

#: The private attributes of the pure classes that this module reads or writes
#: (tests/test_native_touches.py checks that each exists on the pure build).
TOUCHES = {}

cdef object FRAME = Frame
cdef frozenset UNESCAPED = UNESCAPED_COMMANDS


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


cpdef object encode(
    object frame, str version, frozenset commands, frozenset bodies, bint content_length
):
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
    # The body is copied once, straight into the bytes returned: through the
    # head's buffer it would be copied twice more, and that buffer grown for it.
    data = PyBytes_FromStringAndSize(NULL, n + body_size + 1)
    cdef char *target = PyBytes_AS_STRING(data)
    memcpy(target, PyByteArray_AS_STRING(out), n)
    memcpy(target + n, PyBytes_AS_STRING(body), body_size)
    target[n + body_size] = 0
    return data
