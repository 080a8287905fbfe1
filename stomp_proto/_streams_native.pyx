# cython: language_level=3, boundscheck=True, wraparound=True, initializedcheck=True
# cython: cdivision=False, infer_types=False
"""The native twin of a ``stomp-streams`` read task's steps for each message.

Two loops of the Spark package run once per row of a range read, and here in C:
``spark/_streams/_messages.py``'s :func:`collect_messages` (frames from the
decoder, sorted into the range's messages) and the loop of
``spark/_schema.py``'s ``StreamRows.add`` (those messages appended to the
batch's columns).  Each does exactly what the pure code does; ``add_rows``
leaves to it the rows from the first whose header layout repeats a name.  The
twin sits at the top of the package with the others (the build makes them all
or none) and imports nothing from the Spark package: the callers hand it what
it needs.
"""

from ._decoder_native cimport HeadScanner
from ._native_shared cimport stomp_pair

from ._frame import Frame

#: The private attributes of the pure classes that this module reads or writes
#: (tests/test_native_touches.py checks that each exists on the pure build).
TOUCHES = {
    "FrameDecoder": ("_fast",),
}

cdef object FRAME = Frame
#: The names compared with a frame's, as the pure code compares them (str ==).
cdef str MESSAGE = "MESSAGE"
cdef str OFFSET_HEADER = "x-stream-offset"
#: _messages.stream_offset, for a MESSAGE without the header (it raises the error).
cdef object PURE_OFFSET = None


def use_pure_offset(stream_offset):
    """Called by spark/_streams/_messages.py once it has defined stream_offset (this
    module imports nothing of the Spark package)."""
    global PURE_OFFSET
    PURE_OFFSET = stream_offset


cdef object next_frame(object decoder, object fast):
    """``decoder.next_frame()``, asking its native scanner first (as next_frame does)."""
    if fast is not None:
        item = (<HeadScanner>fast).scan(decoder)
        if item is not NotImplemented:
            return item
    return decoder.next_frame()


cdef object stream_offset(tuple headers, object stream):
    """_messages.stream_offset for the common case: the last header, or the first of
    the name; else the pure function, which raises the same error."""
    cdef Py_ssize_t i, count = len(headers)
    cdef tuple pair
    if count:
        pair = <tuple?>headers[count - 1]
        if pair[0] == OFFSET_HEADER:
            return int(pair[1])
    for i in range(count):
        pair = <tuple?>headers[i]
        if pair[0] == OFFSET_HEADER:
            return int(pair[1])
    return PURE_OFFSET(headers, stream)


def collect_messages(decoder, cursor, list got, stream):
    """_messages.collect_messages: the same frames decoded, counted and kept.

    The cursor's ``take`` runs here for a message after the range's first (it
    has a ``last``) at or past its start: what ``RangeCursor.take`` does then,
    without a Python call per row.  The first message, and any before the start,
    go through ``take`` itself (its data-loss check and its refusal).
    """
    cdef Py_ssize_t seen = 0
    cdef tuple headers
    last = None
    take = cursor.take
    start, end = cursor.start, cursor.end
    final = end - 1
    fast = decoder._fast
    if fast is not None and not isinstance(fast, HeadScanner):
        fast = None
    while True:
        frame = next_frame(decoder, fast)
        if frame is None:
            return seen, last, None
        if not isinstance(frame, FRAME):
            continue  # a heart-beat
        if frame[0] != MESSAGE:
            return seen, last, frame
        if cursor.done:
            continue
        headers = frame[1]
        offset = stream_offset(headers, stream)
        if cursor.last is not None and offset >= start:
            cursor.seen += 1
            cursor.last = offset
            if offset >= final:
                cursor.done = True
            kept = offset < end
        else:
            kept = take(offset)
        if kept:
            # An int and a frame (immutable all the way down): no cycle can pass
            # through the pair, so the collector need not track it.
            got.append(stomp_pair(offset, frame))
        last = frame
        seen += 1


# The fields of StreamRows' _Layout (a NamedTuple) that the loop below reads.
cdef enum:
    KEPT_NAMES = 0
    REPEATS = 5
    NAMES = 6
    KEPT = 7
    KEY = 8
    ROW_ID = 9
    STAMP = 10


cdef bint same_names(tuple headers, tuple names) except -1:
    """Whether the headers' names are ``names``, in order."""
    cdef Py_ssize_t i, count = len(headers)
    if count != len(names):
        return False
    for i in range(count):
        name = (<tuple?>headers[i])[0]
        if name is not names[i] and name != names[i]:
            return False
    return True


cdef tuple names_of(tuple headers):
    cdef Py_ssize_t i, count = len(headers)
    cdef list names = [None] * count
    for i in range(count):
        names[i] = (<tuple?>headers[i])[0]
    return tuple(names)


cdef inline object value_at(tuple headers, Py_ssize_t index):
    """The value of header ``index``; None for -1 (no such header)."""
    if index < 0:
        return None
    return (<tuple?>headers[index])[1]


def add_rows(
    messages, dict layouts, layout_of, list offsets, list bodies, list keys, list row_ids,
    list stamps, list names, list values, list ends, Py_ssize_t size,
):
    """StreamRows.add's loop, while no row repeats a header name: how many of
    ``messages`` it appended, and the ``headers`` column's new size.

    A layout's fields are read once, where the layout changes (a broker sends
    one, message after message), into C variables."""
    # (The layout's fields are set from the first message on: -1, no such header, before.)
    cdef Py_ssize_t done = 0, j, key = -1, row_id = -1, stamp = -1, width = 0
    cdef tuple headers, kept = (), kept_names = (), layout_names = None
    layout = None  # a _Layout: a tuple subclass
    for offset, frame in messages:
        headers = <tuple?>frame[1]
        if layout_names is None or not same_names(headers, layout_names):
            found = names_of(headers)
            layout = layouts.get(found)
            if layout is None:
                layout = layout_of(found)
            if layout[REPEATS] is not None:
                return done, size
            layout_names = <tuple?>layout[NAMES]
            kept = <tuple?>layout[KEPT]
            kept_names = <tuple?>layout[KEPT_NAMES]
            width = len(kept)
            key, row_id, stamp = layout[KEY], layout[ROW_ID], layout[STAMP]
        names.extend(kept_names)
        for j in kept:
            values.append((<tuple?>headers[j])[1])
        size += width
        ends.append(size)
        keys.append(value_at(headers, key))
        row_ids.append(value_at(headers, row_id))
        stamps.append(value_at(headers, stamp))
        offsets.append(offset)
        bodies.append(frame[2])
        done += 1
    return done, size
