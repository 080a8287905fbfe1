"""FrameDecoder: bytes in, frames and heart-beats out, one at a time.

This module finds frames in the byte stream and applies the limits; what a
head's text holds (header lines, escapes, content-length) is read by the
plain functions of ``_headers.py``.

How the buffer is read, and why it stays linear:

* Received bytes are appended to one ``bytearray``; ``_pos`` marks the start of
  what has not been returned yet.  Consumed bytes are dropped from the front
  in ``receive_data`` (CPython makes that cheap), so the buffer holds at most
  one partial frame plus whatever has not been asked for.
* Parsing is lazy: ``next_frame()`` parses one frame.  A caller that changes
  ``version`` after a CONNECTED frame therefore gets the new rules for every
  later frame, even those already buffered.
* Every search resumes where the previous one stopped (``_scan``, and the
  body-NUL search offset), so bytes arriving one at a time are looked at a
  bounded number of times: 20,000 frames in one chunk and a 1 MiB body fed
  byte by byte both cost time proportional to their size.
* Limits are checked while the head or body is still incomplete, on what has
  arrived so far, so a peer cannot make the decoder buffer more than the limits
  allow, however it splits its bytes.
* A body whose ``content-length`` is known, once ``_LARGE_BODY`` bytes of it
  have arrived and more are missing, leaves the buffer: ``receive_data``
  writes each read straight into a ``bytes`` object (held by an
  ``io.BytesIO``) that becomes the frame's body without another copy.  That
  object is a reservation that grows with what arrives - up to ``_GROWTH``
  times the bytes received, never more than the declared length - so a peer
  that declares 64 MiB and sends 1 KiB costs 1 KiB, not 64 MiB.  It grows by
  ``realloc`` (seek past the end and write), which extends in place or remaps
  pages for large blocks, so every body byte is still copied about once, and
  the decoder holds one copy of the body, not the buffer plus a copy of it.
  The native twin takes this route with a reservation of its own
  (``BodyReservation``: no zero fill, and it grows itself), as soon as the head is
  read; the rest of the route - the writes, the end, the errors - is this code's.
"""

from __future__ import annotations

import io
import re
from typing import Protocol

from ._build import native
from ._checks import check_bool, check_data, check_limits, wrong_type
from ._errors import ErrorKind, LocalProtocolError, RemoteProtocolError, as_remote
from ._events import HEARTBEAT, HeartBeat
from ._frame import (
    BODY_COMMANDS,
    COMMANDS,
    COMMANDS_BY_VERSION,
    UNESCAPED_COMMANDS,
    VERSIONS,
    Frame,
    Version,
)
from ._headers import TOO_LONG, content_length, header_fields, header_pairs, unescape
from ._limits import DEFAULT_LIMITS, Limits

__all__ = ["FrameDecoder"]

# The native twin (stomp_proto/_decoder_native.pyx), or None: the pure build.
_native = native("_decoder_native")

# Frame(...) without the Python-level __new__ of NamedTuple: a C call on the hot path.
_new_frame = tuple.__new__

_LF = 10
_CR = 13

# Bodies of at least this many bytes (with a content-length) that are still
# arriving take the one-copy route (see the module docstring).  Below it, the
# buffer and one slice copy are cheaper than a BytesIO per frame.
_LARGE_BODY = 64 * 1024
# How a large body's reservation grows: to this many times what it holds (never
# past the declared length).  4 keeps the copies made by growing under a third
# of the body, and memory within 4x what the peer sent.
_GROWTH = 4

# 1.1 §Body, 1.2 §Body: the frames that must not carry a body.  1.0 sets no such rule.
_BODILESS_COMMANDS = COMMANDS - BODY_COMMANDS
# 1.2's end of head: an empty line, ended by LF or CR LF.
_BLANK_LINE_12 = re.compile(rb"\n\r?\n")
# Lenient mode's end of head: a line holding nothing but blanks (and a CR).
_LENIENT_BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")
_BLANKS = re.compile(rb"[ \t\r]*")


class _Reservation(Protocol):
    """Where a large body is written as it arrives: an ``io.BytesIO`` here, or the
    native twin's ``BodyReservation`` (which grows itself: its ``_full_at`` is 0)."""

    def write(self, data: bytes | bytearray | memoryview, /) -> int: ...

    def getvalue(self) -> bytes: ...

    def getbuffer(self) -> memoryview: ...


def _too_large(limits: Limits, limit: str, what: str) -> LocalProtocolError:
    """A TOO_LARGE error that names the Limits field crossed, in ``limit`` and the message."""
    bound = getattr(limits, limit)
    return LocalProtocolError(
        ErrorKind.TOO_LARGE, f"{what}: exceeds the limit Limits.{limit} = {bound}", limit=limit
    )


def _body_limit_name(limits: Limits, body_limit: int) -> str:
    """The limit that sets a frame's body limit (see FrameDecoder._whole_head)."""
    return "max_body_size" if body_limit == limits.max_body_size else "max_frame_size"


def _unexpected_body(command: str) -> LocalProtocolError:
    # 1.1 §Body, 1.2 §Body (see _BODILESS_COMMANDS).
    return LocalProtocolError(ErrorKind.UNEXPECTED_BODY, f"{command} frame must not have a body")


def _head_limit(limits: Limits) -> str:
    """The limit that bounds a head: the smaller of the head and frame sizes."""
    return "max_head_size" if limits.max_head_size <= limits.max_frame_size else "max_frame_size"


class FrameDecoder:
    """Incremental STOMP frame decoder; performs no I/O.

    Feed bytes with :meth:`receive_data` (``None`` for end of stream) and take
    frames with :meth:`next_frame`, which returns a :class:`Frame`, a
    :class:`HeartBeat` for each end-of-line between frames, or ``None`` when it
    needs more data.  The same bytes give the same results however they are
    split into chunks.

    ``version`` selects the wire rules (escapes; CRLF line endings from 1.2)
    and may be changed at any time, e.g. after version negotiation: it applies
    to every frame not yet returned.  ``strict=False`` accepts what old and
    sloppy peers send (see :doc:`/conformance`).

    Any problem in the input raises :class:`RemoteProtocolError`; frames
    returned before it stay valid.  After an error the decoder is finished:
    ``next_frame`` raises the same error again and ``receive_data`` raises
    :class:`LocalProtocolError`.  So does a call to ``receive_data``,
    ``next_frame`` or the ``version`` setter made while ``next_frame`` or
    ``receive_data`` runs (by a finalizer that a garbage collection runs then):
    it changes nothing, the frame being read is returned whole, and the data
    being taken in is taken once.
    """

    __slots__ = (
        "_big",
        "_blank_lf",
        "_bodiless",
        "_body_limit",
        "_body_start",
        "_buf",
        "_command",
        "_commands",
        "_content_length",
        "_crlf",
        "_eof",
        "_error",
        "_fast",
        "_full_at",
        "_handshake",
        "_head_lines",
        "_headers",
        "_limits",
        "_line_start",
        "_need",
        "_pos",
        "_reading",
        "_scan",
        "_strict",
        "_unescaping",
        "_unescaping_cr",
        "_verbatim",
        "_version",
    )

    def __init__(
        self, version: Version = "1.2", *, strict: bool = True, limits: Limits | None = None
    ) -> None:
        check_bool("FrameDecoder(strict=...)", strict)
        check_limits("FrameDecoder(limits=...)", limits)
        self._buf = bytearray()
        self._pos = 0
        # The large body being received, and how many of its bytes are missing.
        self._big: _Reservation | None = None
        self._need = 0
        # The value of _need at which the large body's reservation is full (0: it
        # grows itself, or is as long as the body).
        self._full_at = 0
        self._eof = False
        self._error: RemoteProtocolError | None = None
        self._strict = strict
        self._verbatim = strict
        self._limits = limits if limits is not None else DEFAULT_LIMITS
        self._version: Version = "1.2"
        self._crlf = True
        self._unescaping = True
        self._unescaping_cr = True
        self._bodiless = _BODILESS_COMMANDS
        self._commands = COMMANDS
        self._fast: object | None = None
        # The name of the call under way, next_frame or receive_data, or "" (see
        # _reentered).
        self._reading = ""
        # Lenient mode: the LF before a line that holds only blanks up to _scan
        # (a blank line may end there); stale when not _line_start - 1.
        self._blank_lf = -1
        self._reset_head()
        self.version = version

    # -- configuration -------------------------------------------------------

    @property
    def version(self) -> Version:
        """The protocol version whose wire rules apply to frames not yet returned."""
        return self._version

    @version.setter
    def version(self, version: Version) -> None:
        if self._reading:
            raise self._reentered("the version setter")
        if not isinstance(version, str):
            raise wrong_type("FrameDecoder version", "'1.0', '1.1' or '1.2'", version)
        if version not in VERSIONS:
            raise LocalProtocolError(ErrorKind.BAD_VERSION, f"unknown STOMP version {version!r}")
        self._version = version
        self._handshake = False
        # 1.2 §STOMP Frames: EOL is an optional CR and a LF; before 1.2 a CR is data.
        self._crlf = version == "1.2" or not self._strict
        # 1.1 §Value Encoding: escapes from 1.1; 1.2 adds "\\r" (backslash, r).
        self._unescaping = version != "1.0"
        self._unescaping_cr = version == "1.2"
        self._bodiless = _BODILESS_COMMANDS if self._strict and version != "1.0" else frozenset()
        self._commands = COMMANDS_BY_VERSION[version]
        # Whatever was searched or parsed under the old rules is done again,
        # so a large body received so far goes back into the buffer after its head.
        big = self._big
        if big is not None:
            received = self._content_length - self._need
            with big.getbuffer() as view:
                self._buf[self._body_start : self._body_start] = view[:received]
            self._big = None
            self._need = 0
        self._reset_head()
        self._use_native()

    def _use_native(self) -> None:
        # The native scanner holds the rules in force; it knows strict mode, and
        # lenient mode with verbatim text (the lenient server's).
        known = _native is not None and (self._strict or self._verbatim)
        self._fast = _native.HeadScanner(self) if known else None  # type: ignore[union-attr]

    def _use_handshake_rules(self) -> None:
        # For connections, before a version is agreed: CRLF is accepted as 1.2
        # allows, and only a STOMP frame is unescaped (1.2 rules: its senders
        # speak 1.1 or later).  CONNECT and CONNECTED never are, and an ERROR
        # sent in reply to a CONNECT follows no agreed version.
        self.version = "1.2"
        self._handshake = True
        self._use_native()

    def _keep_text(self) -> None:
        # For a lenient server (ServerConnection(strict=False)): the line
        # endings, bodies and content-length blanks of lenient mode, but
        # commands and header values exactly as sent.  No client sends
        # lower-case commands on purpose (RabbitMQ and ActiveMQ refuse them),
        # and a value's blanks may be the application's data (1.2 §Value
        # Encoding; RabbitMQ keeps them), which a broker must pass on untouched.
        self._verbatim = True
        self._use_native()

    @property
    def strict(self) -> bool:
        """Whether the specs are followed to the letter (the default)."""
        return self._strict

    @property
    def limits(self) -> Limits:
        """The size limits in force."""
        return self._limits

    @property
    def buffered(self) -> int:
        """How many received bytes are held, not yet returned as frames."""
        held = len(self._buf) - self._pos
        if self._big is not None:
            held += self._content_length - self._need
        return held

    # -- input ---------------------------------------------------------------

    def receive_data(self, data: bytes | bytearray | memoryview | None) -> None:
        """Add ``data``, bytes received from the peer; ``None`` means the stream has ended."""
        if self._reading:
            raise self._reentered("receive_data")
        if type(data) is not bytes:  # (what a socket gives: no call for it)
            check_data(data)
        # Python code can run below (a finalizer, when an allocation starts a
        # collection; a bytes-like subclass's __len__): a call it made to this
        # decoder would act on the state this call is changing - a large body
        # written twice past its declared length - so it is refused.
        self._reading = "receive_data"
        try:
            need = self._need
            if need and data is not None and not self._eof:
                # A large body is arriving (no error is possible before its end):
                # its bytes go straight into it.
                big = self._big
                assert big is not None
                size = len(data) if type(data) is not memoryview else data.nbytes
                if size <= need:
                    left = need - size
                    if left < self._full_at:
                        self._grow_large_body(big, left)
                    big.write(data)
                    self._need = left
                    return
                if self._full_at:
                    self._grow_large_body(big, 0)
                view = memoryview(data).cast("B")
                big.write(view[:need])
                self._need = 0
                data = view[need:]
            if self._error is not None:
                raise LocalProtocolError(
                    ErrorKind.BAD_STATE,
                    f"decoder failed earlier ({self._error}); it takes no more data",
                )
            if self._eof:
                raise LocalProtocolError(ErrorKind.BAD_STATE, "data received after end of stream")
            if data is None:
                self._eof = True
                return
            if self._pos:
                self._compact()
            self._buf += data
        finally:
            self._reading = ""

    def _compact(self) -> None:
        # Dropping a prefix of a bytearray only moves its start in CPython; all
        # saved offsets shift with it.
        pos = self._pos
        del self._buf[:pos]
        self._pos = 0
        self._scan -= pos
        self._line_start -= pos
        self._body_start -= pos
        self._blank_lf -= pos

    # -- output --------------------------------------------------------------

    def __iter__(self) -> FrameDecoder:
        """``for item in decoder``: every frame and heart-beat complete so far."""
        return self

    def __next__(self) -> Frame | HeartBeat:
        item = self.next_frame()
        if item is None:
            raise StopIteration
        return item

    def next_frame(self) -> Frame | HeartBeat | None:
        """Parse and return the next frame or heart-beat; ``None`` if more data is needed."""
        if self._need and not self._eof and not self._reading:
            # A large body is still arriving: the one question asked per read.
            return None
        fast = self._fast
        if fast is not None:
            # The accelerated build: frames, heart-beats and "more data needed"
            # come from native code, which resumes as this code does; anything
            # else (an error, a limit, a large body) is NotImplemented there and
            # left to the code below, on the same state.
            item: Frame | HeartBeat | None = fast.next_frame(self)  # type: ignore[attr-defined]
            if item is not NotImplemented:
                return item
        if self._error is not None:
            raise self._error
        if self._reading:
            raise self._reentered("next_frame")
        self._reading = "next_frame"
        try:
            if self._command is None:
                return self._next_head()
            return self._next_body()
        except LocalProtocolError as exc:
            # Every check raises LocalProtocolError, as in the rest of the core
            # (and in _headers.py); this is the one place where it becomes the
            # peer's error.
            self._error = as_remote(exc)
            raise self._error from None
        finally:
            self._reading = ""

    def _reentered(self, what: str) -> LocalProtocolError:
        """The error for a call made while next_frame or receive_data runs.

        Reading a frame allocates objects, and an allocation can start a garbage
        collection that runs finalizers (``__del__``, weakref callbacks): one
        that fed this decoder then would move the buffer under the offsets being
        read (and under the native scanner's pointer), or, during receive_data,
        write a large body's bytes past its declared length.  Such a call is
        refused, and changes nothing: the frame being read is returned whole,
        the data being taken in is taken once.
        """
        running = self._reading
        doing = "reading a frame" if running == "next_frame" else "taking in data"
        return LocalProtocolError(
            ErrorKind.BAD_STATE,
            f"{what} called while the decoder is {doing} (from a finalizer or a callback "
            f"run during {running}); call it once {running} has returned",
        )

    def _check_truncated(self) -> None:
        """Called when more data is needed: at end of stream that is an error."""
        if self._eof and self._pos < len(self._buf):
            raise LocalProtocolError(ErrorKind.TRUNCATED, "stream ended inside a frame")

    def _reset_head(self) -> None:
        self._command: str | None = None
        self._headers: tuple[tuple[str, str], ...] = ()
        self._content_length = -1
        self._body_limit = 0
        self._body_start = self._scan = self._line_start = self._pos
        self._head_lines = 0

    def _next_head(self) -> Frame | HeartBeat | None:
        # The hot path: everything a well-formed frame needs is inline here;
        # rare cases (limits, CR, lenient mode, escapes) go to helpers.
        buf = self._buf
        pos = self._pos
        end = len(buf)
        if pos >= end:
            self._check_truncated()
            return None
        # Heart-beats and the EOLs after a frame's NUL: one event per EOL.
        first = buf[pos]
        if first == _LF:
            self._pos = self._scan = self._line_start = pos + 1
            return HEARTBEAT
        if first == _CR and self._crlf:
            if pos + 1 >= end:
                self._check_truncated()
                return None
            if buf[pos + 1] == _LF:
                self._pos = self._scan = self._line_start = pos + 2
                return HEARTBEAT

        # The head ends at a blank line: LF LF, or from 1.2 also LF CR LF (a
        # CRLF before the blank line leaves its CR at the end of the head).  The
        # head, blank line included, must fit in max_head_size bytes: only that
        # window is searched, whole or in pieces alike.
        limits = self._limits
        window = pos + min(limits.max_head_size, limits.max_frame_size)
        stop = end if end < window else window
        start = self._scan - 2 if self._scan - 2 > pos else pos
        if not self._crlf:
            head_end = buf.find(b"\n\n", start, stop)
            body_start = head_end + 2
        elif self._strict:
            # The first LF LF or LF CR LF, in one search.
            blank = _BLANK_LINE_12.search(buf, start, stop)
            head_end, body_start = (blank.start(), blank.end()) if blank else (-1, -1)
        else:
            # The draft strips trailing blanks, so a line of blanks is the blank
            # line.  Resumed at _scan, as the other searches are; a line of
            # blanks that was still growing there is followed where it stopped.
            scan = self._scan
            growing_blanks = self._blank_lf == self._line_start - 1 >= pos
            if growing_blanks:
                head_end, body_start = self._end_of_blank_line(buf, stop)
            else:
                blank = _LENIENT_BLANK_LINE.search(buf, scan, stop)
                head_end, body_start = (blank.start(), blank.end()) if blank else (-1, -1)
            if head_end < 0:
                lf = buf.rfind(b"\n", scan, stop)
                if lf >= 0 or growing_blanks:
                    self._note_blank_line(buf, lf, stop)
        if head_end < 0:
            self._check_partial_head(end, window)
            return None
        # A NUL ends the frame for the peer: inside a head, it is refused
        # whether or not a blank line follows (see _refuse_nul).
        nul = buf.find(b"\0", pos, head_end)
        if nul >= 0:
            raise self._refuse_nul(nul)
        if head_end - pos > limits.max_line_length:
            # A long head may hold a long line: check lines in order, as for
            # partial heads (one more LF ends the last line).
            self._check_lines(head_end + 1)
        try:
            return self._whole_head(buf, pos, end, head_end, body_start)
        except LocalProtocolError:
            # Fed in pieces, the lines of this head would have been checked one
            # by one as they completed, and the first bad line reported: so
            # that the same error comes out however the bytes were split, that
            # check runs first, over the lines not checked yet.
            self._check_lines(head_end + 1)
            raise

    def _end_of_blank_line(self, buf: bytearray, stop: int) -> tuple[int, int]:
        """Lenient mode, the line growing at _scan being blanks so far: where the
        head ends and its body starts, or ``(-1, -1)``."""
        scan = self._scan
        run_end = _BLANKS.match(buf, scan, stop).end()  # type: ignore[union-attr]
        if run_end < stop and buf[run_end] == _LF:
            return self._blank_lf, run_end + 1
        # A byte that is not a blank: the next blank line starts at a later LF.
        blank = _LENIENT_BLANK_LINE.search(buf, run_end, stop)
        return (blank.start(), blank.end()) if blank else (-1, -1)

    def _note_blank_line(self, buf: bytearray, lf: int, stop: int) -> None:
        """Lenient mode, no blank line before ``stop``: note whether the last line,
        still growing, holds only blanks - a blank line in the making.

        ``lf`` is the last LF after _scan; -1 when there is none and the line
        growing at _scan was blanks so far (otherwise nothing changes).
        """
        if lf < 0:
            lf = self._blank_lf  # the same line: still blanks only if what came is
            start = self._scan
        else:
            start = lf + 1
        ends = _BLANKS.match(buf, start, stop).end() == stop  # type: ignore[union-attr]
        self._blank_lf = lf if ends else -1

    def _whole_head(
        self, buf: bytearray, pos: int, end: int, head_end: int, body_start: int
    ) -> Frame | HeartBeat | None:
        """Parse the head in ``buf[pos:head_end]``; return the frame if its body is in too."""
        limits = self._limits
        try:
            text = buf[pos:head_end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LocalProtocolError(
                ErrorKind.BAD_ENCODING, f"frame head is not UTF-8: {exc.reason}"
            ) from None
        if self._crlf and "\r" in text:
            text = self._strip_crlf(text)
        command, _, block = text.partition("\n")
        if self._strict:
            if command not in self._commands:
                raise LocalProtocolError(ErrorKind.BAD_COMMAND, f"unknown command {command[:40]!r}")
        else:
            command, block = self._lenient_command(text, command, block)

        # The most body bytes this frame may have: what max_body_size allows,
        # or what max_frame_size leaves after the head, whichever is less.
        room = limits.max_frame_size - (body_start - pos)
        body_limit = limits.max_body_size if limits.max_body_size <= room else room
        headers: tuple[tuple[str, str], ...] = ()
        length = -1
        if block:
            lines = block.split("\n")
            if len(lines) > limits.max_headers:
                raise _too_large(limits, "max_headers", f"more than {limits.max_headers} headers")
            fields = header_fields(block, lines, self._verbatim)
            if (
                self._unescaping
                and "\\" in block
                and (command == "STOMP" if self._handshake else command not in UNESCAPED_COMMANDS)
            ):
                fields = unescape(fields, self._unescaping_cr, self._strict)
            headers = header_pairs(fields)
            length = content_length(block, self._strict)
            if length > body_limit:
                declared = length if length < TOO_LONG else f"of at least {TOO_LONG}"
                raise _too_large(
                    limits,
                    _body_limit_name(limits, body_limit),
                    f"content-length {declared}, room for {body_limit}",
                )
            if length > 0 and command in self._bodiless:
                raise _unexpected_body(command)

        # A whole small frame is returned here, without going through _next_body.
        if 0 <= length < _LARGE_BODY:
            nul = body_start + length
            if nul >= end or buf[nul]:
                nul = -1
        elif length < 0:
            # No content-length: the body ends at the first NUL, if it is in
            # and within the body limit (otherwise _next_body says why not).
            body_end = body_start + body_limit
            nul = buf.find(b"\0", body_start, body_end + 1 if body_end < end else end)
            if nul > body_start and command in self._bodiless:
                nul = -1
        else:
            nul = -1
        if nul >= 0:
            self._pos = self._body_start = self._scan = self._line_start = nul + 1
            self._head_lines = 0
            return _new_frame(Frame, (command, headers, bytes(buf[body_start:nul])))

        self._command = command
        self._headers = headers
        self._content_length = length
        self._body_limit = body_limit
        self._body_start = self._scan = body_start
        return self._next_body()

    def _check_partial_head(self, end: int, window: int) -> None:
        """Apply the head limits to a head whose blank line has not arrived yet."""
        limits = self._limits
        buf = self._buf
        nul = buf.find(b"\0", max(self._pos, self._scan - 1), min(end, window))
        if nul >= 0:
            raise self._refuse_nul(nul)
        if end >= window:
            # What fed in pieces would have been checked before the window
            # filled up comes first: the lines completed inside it, then the
            # line still growing as it stood one byte before the window's end.
            self._check_lines(window)
            start = self._line_start
            last = window - 1
            blanks = not self._strict and self._pos < start <= last
            if blanks:
                blanks = _BLANKS.match(buf, start, last).end() == last  # type: ignore[union-attr]
            self._check_growing_line(last, blanks)
            size = window - self._pos
            raise _too_large(limits, _head_limit(limits), f"frame head longer than {size} bytes")
        self._check_lines(end)
        if end - self._line_start > limits.max_line_length:
            # (_blank_lf was brought up to date for ``end`` by the search.)
            blanks = not self._strict and self._blank_lf == self._line_start - 1 >= self._pos
            self._check_growing_line(end, blanks)
        self._scan = end
        self._check_truncated()

    def _check_growing_line(self, end: int, blanks: bool) -> None:
        """Apply max_line_length to the line that has no LF before ``end`` yet.

        ``blanks``: it is lenient mode's blank line in the making (only blanks,
        after an LF), exempt as no command or header line: once its LF comes it
        ends the head, as the native scanner and a whole head read it.
        """
        # A trailing CR may be the start of a CRLF.
        length = end - self._line_start
        if self._crlf and length > 0 and self._buf[end - 1] == _CR:
            length -= 1
        limits = self._limits
        if length > limits.max_line_length and not blanks:
            raise _too_large(
                limits, "max_line_length", f"line longer than {limits.max_line_length} bytes"
            )

    def _check_lines(self, end: int) -> None:
        """Check the head lines completed before ``end`` and not checked yet, in order.

        Partial heads and long complete heads both go through here, so the
        first problem found is the same however the bytes were split.
        """
        buf = self._buf
        limits = self._limits
        start = self._line_start
        # The growing line has no LF before _scan; lines before _line_start are done.
        lf = buf.find(b"\n", max(self._scan, start), end)
        while lf >= 0:
            length = lf - start
            if self._crlf and length and buf[lf - 1] == _CR:
                length -= 1
            if length > limits.max_line_length:
                raise _too_large(
                    limits, "max_line_length", f"line longer than {limits.max_line_length} bytes"
                )
            if self._strict:
                if start == self._pos:
                    self._check_command_line(start, start + length)
                elif buf.find(b":", start, start + length) <= start:
                    # 1.0-1.2 §Augmented BNF: header = name ":" value, name at
                    # least one octet.  Before 1.2 only LF ends a line, so a
                    # line holding just a CR is such a line, without a colon.
                    line = buf[start : start + length].decode("utf-8", "replace")
                    raise LocalProtocolError(ErrorKind.BAD_HEADER, f"bad header line {line[:40]!r}")
            self._head_lines += 1
            # Complete lines: the command line and the header lines.
            if self._head_lines > limits.max_headers + 1:
                raise _too_large(limits, "max_headers", f"more than {limits.max_headers} headers")
            start = lf + 1
            lf = buf.find(b"\n", start, end)
        self._line_start = start

    def _check_command_line(self, start: int, end: int) -> None:
        try:
            command = self._buf[start:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise LocalProtocolError(
                ErrorKind.BAD_ENCODING, f"command is not UTF-8: {exc.reason}"
            ) from None
        if command not in self._commands:
            raise LocalProtocolError(ErrorKind.BAD_COMMAND, f"unknown command {command[:40]!r}")

    def _refuse_nul(self, nul: int) -> LocalProtocolError:
        """The error for a NUL at ``nul``, inside a head that has no blank line before it.

        The grammar allows a NUL in a header value, but peers that end a frame
        at the first NUL would then see other frames than we do (and no
        encoder writes one: ours refuses).  It is reported as soon as it
        arrives - never waiting for a blank line that a peer which has ended its
        frame will not send - after the lines completed before it, so that the
        outcome does not depend on how the bytes were split.
        """
        self._check_lines(nul)
        start = self._line_start
        length = nul - start
        if self._crlf and length and self._buf[nul - 1] == _CR:
            length -= 1
        limits = self._limits
        if length > limits.max_line_length:
            return _too_large(
                limits, "max_line_length", f"line longer than {limits.max_line_length} bytes"
            )
        if start == self._pos:
            return LocalProtocolError(ErrorKind.BAD_COMMAND, "NUL in the command line")
        return LocalProtocolError(ErrorKind.BAD_HEADER, "NUL in a header line")

    def _strip_crlf(self, text: str) -> str:
        # CRLF line endings (1.2, or any version in lenient mode).  The last
        # header line keeps its CR (see _next_head); a CR anywhere else is data
        # that 1.2 says must be escaped.
        text = text.replace("\r\n", "\n")
        if text[-1] == "\r":
            text = text[:-1]
        if self._strict and "\r" in text:
            raise LocalProtocolError(ErrorKind.BAD_HEADER, "carriage return inside a header line")
        return text

    def _lenient_command(self, text: str, command: str, block: str) -> tuple[str, str]:
        """The command and the header block of a lenient head (``text``, split at its first LF)."""
        limits = self._limits
        if text.count("\n") > limits.max_headers:
            # Counted before blank lines ahead of the command are skipped, as
            # _check_lines counts them.
            raise _too_large(limits, "max_headers", f"more than {limits.max_headers} headers")
        # The early draft: commands are case-insensitive and trailing blanks are
        # stripped, so a line of blanks before the command is an empty line.
        # Verbatim (a lenient server) skips the lines of blanks only.
        line = command
        while not line.rstrip(" \t\r") and block:
            line, _, block = block.partition("\n")
        command = line if self._verbatim else line.rstrip(" \t\r").upper()
        if not command.strip(" \t\r"):
            raise LocalProtocolError(ErrorKind.BAD_COMMAND, f"bad command line {command[:40]!r}")
        if self._verbatim and command not in COMMANDS:
            # The lenient server reads commands as sent, and no STOMP command
            # is unknown to it: refused at the head, as strict mode does, not
            # at a NUL that an HTTP request (a WebSocket client at the plain
            # port) never sends.  RabbitMQ and ActiveMQ refuse unknown
            # commands too (docs/interop.rst).
            raise LocalProtocolError(ErrorKind.BAD_COMMAND, f"unknown command {command[:40]!r}")
        return command, block

    def _next_body(self) -> Frame | None:
        buf = self._buf
        start = self._body_start
        end = len(buf)
        length = self._content_length
        command = self._command
        assert command is not None
        if length >= 0:
            big = self._big
            if big is not None:
                return self._end_large_body(big)
            nul = start + length
            if nul >= end:
                if nul > end and end - start >= _LARGE_BODY:
                    self._start_large_body(start, end, length)
                if self._eof:  # (a call less per read while the body arrives)
                    self._check_truncated()
                return None
            if buf[nul]:
                raise LocalProtocolError(
                    ErrorKind.MISSING_NUL, f"no NUL after the {length}-byte body of content-length"
                )
        else:
            # A first body byte that is not the NUL: the body is not empty.
            if end > start and buf[start] and command in self._bodiless:
                raise _unexpected_body(command)
            body_limit = self._body_limit
            stop = min(end, start + body_limit + 1)
            nul = buf.find(b"\0", self._scan, stop)
            if nul < 0:
                if end > start + body_limit:
                    raise _too_large(
                        self._limits,
                        _body_limit_name(self._limits, body_limit),
                        f"body longer than {body_limit} bytes",
                    )
                self._scan = end
                if self._eof:
                    self._check_truncated()
                return None
        if nul - start < 65536:
            body = bytes(buf[start:nul])
        else:
            # One copy only, for large bodies.
            with memoryview(buf) as view:
                body = view[start:nul].tobytes()
        frame = _new_frame(Frame, (command, self._headers, body))
        self._pos = nul + 1
        self._reset_head()
        return frame

    def _start_large_body(self, start: int, end: int, length: int) -> None:
        # The one-copy route rests on a CPython detail of io.BytesIO (bytesio.c):
        # a BytesIO made from a bytes object shares it, and copies it before its
        # first write only if anything else holds a reference to it as well
        # (reference count > 1, "SHARED_BUF").  So the reservation is made
        # inside the call, with no name bound to it: BytesIO holds the only
        # reference, writes into it in place, grows it in place (_PyBytes_Resize
        # needs a count of 1 too), and getvalue() returns that very object once
        # it is full - it ends exactly ``length`` long.  Keeping a reference
        # here, or a getbuffer() view beyond the version setter's, would make
        # every large body cost a second copy, silently.  On other Pythons the
        # route is still correct; only the number of copies may differ.  The
        # head stays in the buffer, for a version change.
        received = end - start
        size = min(length, _GROWTH * received)
        big = io.BytesIO(bytes(size))
        buf = self._buf
        with memoryview(buf) as view:
            big.write(view[start:end])
        del buf[start:]
        self._big = big
        self._need = length - received
        self._full_at = length - size

    def _grow_large_body(self, big: _Reservation, left: int) -> None:
        """Grow the reservation to hold all but ``left`` bytes of the body.

        It grows _GROWTH-fold at least, and never past the declared length.
        """
        assert isinstance(big, io.BytesIO)  # the native reservation grows itself
        length = self._content_length
        size = min(length, max(_GROWTH * (length - self._full_at), length - left))
        # Writing the last byte makes BytesIO resize its bytes object to the new
        # size (a realloc: in place, or a page remap for large blocks).
        big.seek(size - 1)
        big.write(b"\0")
        big.seek(length - self._need)
        self._full_at = length - size

    def _end_large_body(self, big: _Reservation) -> Frame | None:
        # The bytes after the body start where the body would be in the buffer.
        if self._need:
            self._check_truncated()
            return None
        buf = self._buf
        nul = self._body_start
        if nul >= len(buf):
            self._check_truncated()
            return None
        if buf[nul]:
            raise LocalProtocolError(
                ErrorKind.MISSING_NUL,
                f"no NUL after the {self._content_length}-byte body of content-length",
            )
        body = big.getvalue()
        self._big = None
        command = self._command
        assert command is not None
        frame = _new_frame(Frame, (command, self._headers, body))
        self._pos = nul + 1
        self._reset_head()
        return frame
