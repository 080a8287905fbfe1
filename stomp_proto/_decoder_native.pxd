# The native twin of _decoder.py (see _decoder_native.pyx): what other twins cimport.

cimport cython


@cython.final
cdef class HeadScanner:
    cdef bint lenient, crlf, unescaping, unescaping_cr, handshake
    cdef frozenset commands, bodiless
    # The limits, each clamped to HUGE (_clamp); ``clamped``: the body's or the frame's was.
    cdef Py_ssize_t max_line_length, max_headers, max_head, max_frame_size, max_body_size
    cdef object limits
    cdef bint clamped
    # The decoder's slots, read and written through their descriptors.
    cdef object s_buf, s_pos, s_scan, s_line_start, s_body_start, s_head_lines
    cdef object s_command, s_headers, s_content_length, s_body_limit
    cdef object s_need, s_big, s_full_at, s_eof, s_error, s_reading, s_blank_lf
    # Where the buffer is cut once the scan lets go of it (a large body moved out), or -1.
    cdef Py_ssize_t trim
    # The headers of the previous frame read (None before the first): their objects
    # are taken again where a frame repeats their text.
    cdef object previous

    # FrameDecoder.next_frame's fast path: the frame or heart-beat, None (more data
    # needed), or NotImplemented (the pure code takes over, on the same state).
    cdef object scan(self, object decoder)
    cdef object next_item(self, object decoder, const unsigned char *data, Py_ssize_t end)
    cdef object frame_at(
        self, object decoder, const unsigned char *data, Py_ssize_t end, Py_ssize_t pos,
        Py_ssize_t scan,
    )
    cdef object more(self, object decoder)
    cdef object exact_body_limit(self, Py_ssize_t head_size)
    cdef object previous_text(
        self, Py_ssize_t index, Py_ssize_t part, const unsigned char *data, Py_ssize_t size
    )
    cdef object partial_head(
        self, object decoder, const unsigned char *data, Py_ssize_t end, Py_ssize_t pos,
        Py_ssize_t scan, Py_ssize_t window, object blank_lf,
    )
    cdef object waiting_body(self, object decoder, const unsigned char *data, Py_ssize_t end)
    cdef object take_body(
        self, object decoder, const unsigned char *data, Py_ssize_t end, object command,
        object headers, Py_ssize_t start, Py_ssize_t length, Py_ssize_t body_limit,
        Py_ssize_t scan, bint held,
    )
    cdef void start_large_body(
        self, object decoder, const unsigned char *data, Py_ssize_t start, Py_ssize_t end,
        Py_ssize_t length,
    ) except *
    cdef void consumed(self, object decoder, Py_ssize_t at) except *
    cdef void body_taken(self, object decoder, Py_ssize_t at) except *
    cdef void beat(self, object decoder, Py_ssize_t at) except *
