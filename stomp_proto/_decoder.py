"""FrameDecoder: bytes in, frames and heart-beats out, one at a time.

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
"""

from __future__ import annotations

import io
import re

from ._errors import ErrorKind, LocalProtocolError, RemoteProtocolError
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
from ._limits import DEFAULT_LIMITS, Limits

__all__ = ["FrameDecoder"]

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

# 1.1 §Value Encoding / 1.2 §Value Encoding: the escape sequences each version defines.
_UNESCAPES_11 = {"\\n": "\n", "\\c": ":", "\\\\": "\\"}
_UNESCAPES_12 = {**_UNESCAPES_11, "\\r": "\r"}
# A backslash and the character after it (or the end of the text, for a lone one).
_ESCAPE = re.compile(r"\\(?:.|\Z)", re.DOTALL)
# 1.2's end of head: an empty line, ended by LF or CR LF.
_BLANK_LINE_12 = re.compile(rb"\n\r?\n")
# Lenient mode's end of head: a line holding nothing but blanks (and a CR).
_LENIENT_BLANK_LINE = re.compile(rb"\n[ \t\r]*\n")


def _error(kind: ErrorKind, message: str) -> RemoteProtocolError:
    return RemoteProtocolError(kind, message)


def _too_large(limits: Limits, limit: str, what: str) -> RemoteProtocolError:
    """A TOO_LARGE error that names the Limits field crossed, in ``limit`` and the message."""
    bound = getattr(limits, limit)
    return RemoteProtocolError(
        ErrorKind.TOO_LARGE, f"{what}: exceeds the limit Limits.{limit} = {bound}", limit=limit
    )


def _body_limit(limits: Limits, head_size: int) -> tuple[int, str]:
    """The most body bytes a frame with this head may have, and the limit that sets it."""
    room = limits.max_frame_size - head_size
    if limits.max_body_size <= room:
        return limits.max_body_size, "max_body_size"
    return room, "max_frame_size"


def _head_limit(limits: Limits) -> str:
    """The limit that bounds a head: the smaller of the head and frame sizes."""
    return "max_head_size" if limits.max_head_size <= limits.max_frame_size else "max_frame_size"


def _unescape_flat(flat: str, cr: bool) -> str | None:
    """Undo the escapes of a whole head at once; ``None`` if that cannot be done here.

    ``flat`` holds every name and value, NUL-separated.  Escaped backslashes
    are parked on a U+0001 placeholder first, so that every backslash left
    must begin one of the other escapes; a backslash still there afterwards
    is an undefined escape, for the general path to report (or keep).
    """
    parked = "\\\\" in flat
    if parked:
        if "\x01" in flat:
            return None
        flat = flat.replace("\\\\", "\x01")
    flat = flat.replace("\\n", "\n").replace("\\c", ":")
    if cr:
        flat = flat.replace("\\r", "\r")
    if "\\" in flat:
        return None
    return flat.replace("\x01", "\\") if parked else flat


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
    :class:`LocalProtocolError`.
    """

    __slots__ = (
        "_big",
        "_body_start",
        "_buf",
        "_command",
        "_commands",
        "_content_length",
        "_crlf",
        "_eof",
        "_error",
        "_full_at",
        "_handshake",
        "_head_lines",
        "_headers",
        "_limits",
        "_line_start",
        "_need",
        "_pos",
        "_scan",
        "_strict",
        "_unescapes",
        "_verbatim",
        "_version",
    )

    def __init__(
        self, version: Version = "1.2", *, strict: bool = True, limits: Limits | None = None
    ) -> None:
        self._buf = bytearray()
        self._pos = 0
        # The large body being received, and how many of its bytes are missing.
        self._big: io.BytesIO | None = None
        self._need = 0
        # The value of _need at which the large body's reservation is full.
        self._full_at = 0
        self._eof = False
        self._error: RemoteProtocolError | None = None
        self._strict = strict
        self._verbatim = strict
        self._limits = limits if limits is not None else DEFAULT_LIMITS
        self._version: Version = "1.2"
        self._crlf = True
        self._unescapes: dict[str, str] | None = _UNESCAPES_12
        self._commands = COMMANDS
        self._reset_head()
        self.version = version

    # -- configuration -------------------------------------------------------

    @property
    def version(self) -> Version:
        """The protocol version whose wire rules apply to frames not yet returned."""
        return self._version

    @version.setter
    def version(self, version: Version) -> None:
        if version not in VERSIONS:
            raise LocalProtocolError(ErrorKind.BAD_VERSION, f"unknown STOMP version {version!r}")
        self._version = version
        self._handshake = False
        # 1.2 §STOMP Frames: EOL is an optional CR and a LF; before 1.2 a CR is data.
        self._crlf = version == "1.2" or not self._strict
        self._unescapes = {"1.0": None, "1.1": _UNESCAPES_11, "1.2": _UNESCAPES_12}[version]
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

    def _use_handshake_rules(self) -> None:
        # For connections, before a version is agreed: CRLF is accepted as 1.2
        # allows, and only a STOMP frame is unescaped (1.2 rules: its senders
        # speak 1.1 or later).  CONNECT and CONNECTED never are, and an ERROR
        # sent in reply to a CONNECT follows no agreed version.
        self.version = "1.2"
        self._handshake = True

    def _keep_text(self) -> None:
        # For a lenient server (ServerConnection(strict=False)): the line
        # endings, bodies and content-length blanks of lenient mode, but
        # commands and header values exactly as sent.  No client sends
        # lower-case commands on purpose (RabbitMQ and ActiveMQ refuse them),
        # and a value's blanks may be the application's data (1.2 §Value
        # Encoding; RabbitMQ keeps them), which a broker must pass on untouched.
        self._verbatim = True

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
        """Add bytes received from the peer; ``None`` means the stream has ended."""
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

    def _compact(self) -> None:
        # Dropping a prefix of a bytearray only moves its start in CPython; all
        # saved offsets shift with it.
        pos = self._pos
        del self._buf[:pos]
        self._pos = 0
        self._scan -= pos
        self._line_start -= pos
        self._body_start -= pos

    # -- output --------------------------------------------------------------

    def __iter__(self) -> FrameDecoder:
        return self

    def __next__(self) -> Frame | HeartBeat:
        item = self.next_frame()
        if item is None:
            raise StopIteration
        return item

    def next_frame(self) -> Frame | HeartBeat | None:
        """Parse and return the next frame or heart-beat; ``None`` if more data is needed."""
        if self._need and not self._eof:
            # A large body is still arriving: the one question asked per read.
            return None
        if self._error is not None:
            raise self._error
        try:
            if self._command is None:
                return self._next_head()
            return self._next_body()
        except RemoteProtocolError as exc:
            self._error = exc
            raise

    def _check_truncated(self) -> None:
        """Called when more data is needed: at end of stream that is an error."""
        if self._eof and self._pos < len(self._buf):
            raise _error(ErrorKind.TRUNCATED, "stream ended inside a frame")

    def _reset_head(self) -> None:
        self._command: str | None = None
        self._headers: tuple[tuple[str, str], ...] = ()
        self._content_length = -1
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
            # The draft strips trailing blanks, so a line of blanks is the blank line.
            blank = _LENIENT_BLANK_LINE.search(buf, max(pos, self._line_start - 1), stop)
            head_end, body_start = (blank.start(), blank.end()) if blank else (-1, -1)
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
        except RemoteProtocolError:
            # Fed in pieces, the lines of this head would have been checked one
            # by one as they completed, and the first bad line reported: so
            # that the same error comes out however the bytes were split, that
            # check runs first, over the lines not checked yet.
            self._check_lines(head_end + 1)
            raise

    def _whole_head(
        self, buf: bytearray, pos: int, end: int, head_end: int, body_start: int
    ) -> Frame | HeartBeat | None:
        limits = self._limits
        try:
            text = buf[pos:head_end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _error(ErrorKind.BAD_ENCODING, f"frame head is not UTF-8: {exc.reason}") from None
        if self._crlf and "\r" in text:
            text = self._strip_crlf(text)
        command, _, block = text.partition("\n")
        strict = self._strict
        if strict:
            if command not in self._commands:
                raise _error(ErrorKind.BAD_COMMAND, f"unknown command {command[:40]!r}")
        else:
            if text.count("\n") > limits.max_headers:
                # Counted before blank lines ahead of the command are skipped, as
                # _check_lines counts them.
                raise _too_large(limits, "max_headers", f"more than {limits.max_headers} headers")
            command, block = self._lenient_command(command, block, self._verbatim)
            if self._verbatim and command not in COMMANDS:
                # The lenient server reads commands as sent, and no STOMP
                # command is unknown to it: refused at the head, as strict mode
                # does, not at a NUL that an HTTP request (a WebSocket client
                # at the plain port) never sends.  RabbitMQ and ActiveMQ refuse
                # unknown commands too (docs/interop.rst).
                raise _error(ErrorKind.BAD_COMMAND, f"unknown command {command[:40]!r}")

        headers: tuple[tuple[str, str], ...] = ()
        length = -1
        if block:
            lines = block.split("\n")
            count = len(lines)
            if count > limits.max_headers:
                raise _too_large(limits, "max_headers", f"more than {limits.max_headers} headers")
            unescapes = self._unescapes
            if unescapes is not None and not (
                "\\" in block
                and (command == "STOMP" if self._handshake else command not in UNESCAPED_COMMANDS)
            ):
                unescapes = None
            # Fast path (strict mode, and the lenient server mode, which keeps
            # values verbatim too): one colon on every line, and no line
            # starts with it.  Then names and values are the pieces between
            # colons and line ends, in order, and the whole head is split and
            # unescaped at once, with NUL (absent from the head) between pieces.
            verbatim = self._verbatim
            if verbatim and block.count(":") == count and block[0] != ":" and "\n:" not in block:
                # As many colons as lines: one each, unless a line has none.
                for line in lines:
                    if ":" not in line:
                        break
                else:
                    flat = block.replace(":", "\0").replace("\n", "\0")
                    plain = flat if unescapes is None else _unescape_flat(flat, "\\r" in unescapes)
                    if plain is not None:
                        pieces = iter(plain.split("\0"))
                        headers = tuple(zip(pieces, pieces, strict=True))
            if not headers:
                headers = self._split_headers(lines, unescapes)
            # The first line that starts with "content-length:" is the header
            # (1.2 §Repeated Header Entries: the first wins; its name has
            # nothing to escape).  A plain small value is read here; anything
            # else (blanks, a value over a limit, a body where none may be)
            # goes to _content_length_of, which reports it.  Searched from the
            # line before the headers: in lenient mode blank lines before the
            # command make the text longer than command and block.
            at = -1
            if verbatim:
                lines_text = text if strict else "\n" + block
                at = lines_text.find("\ncontent-length:")
            if at >= 0:
                at += 16
                line_end = lines_text.find("\n", at)
                value = lines_text[at:line_end] if line_end >= 0 else lines_text[at:]
                if value.isdigit() and value.isascii() and len(value) < 16:
                    length = int(value)
                    head_size = body_start - pos
                    body_limit = min(limits.max_body_size, limits.max_frame_size - head_size)
                    if length > body_limit or (
                        length and command not in BODY_COMMANDS and self._version != "1.0"
                    ):
                        length = self._content_length_of(block, pos, body_start, command)
                else:
                    length = self._content_length_of(block, pos, body_start, command)
            elif not verbatim and "content-length" in block:
                length = self._content_length_of(block, pos, body_start, command)
            if 0 <= length < _LARGE_BODY:
                # A whole small frame: return it without going through _next_body.
                nul = body_start + length
                if nul < end and not buf[nul]:
                    self._pos = self._body_start = self._scan = self._line_start = nul + 1
                    self._head_lines = 0
                    return _new_frame(Frame, (command, headers, bytes(buf[body_start:nul])))
            elif length < 0:
                # No content-length: the body ends at the first NUL, if it is in
                # and within the body limit (otherwise _next_body says why not).
                head_size = body_start - pos
                body_end = body_start + min(limits.max_body_size, limits.max_frame_size - head_size)
                nul = buf.find(b"\0", body_start, body_end + 1 if body_end < end else end)
                if nul == body_start or (
                    nul > body_start
                    and (command in BODY_COMMANDS or not strict or self._version == "1.0")
                ):
                    self._pos = self._body_start = self._scan = self._line_start = nul + 1
                    self._head_lines = 0
                    return _new_frame(Frame, (command, headers, bytes(buf[body_start:nul])))

        self._command = command
        self._headers = headers
        self._content_length = length
        self._body_start = self._scan = body_start
        return self._next_body()

    def _split_headers(
        self, lines: list[str], unescapes: dict[str, str] | None
    ) -> tuple[tuple[str, str], ...]:
        """The general case: raw colons in values, lenient mode, bad lines and escapes."""
        # A header splits at its first colon; a raw ':' after it stays in
        # the value, in both modes (brokers send such values; nothing is lost).
        parts = [line.partition(":") for line in lines]
        if self._verbatim:
            pairs = [(name, value) for name, colon, value in parts if colon and name]
        else:
            pairs = [
                (name, value.rstrip(" \t\r").lstrip(" "))
                for name, colon, value in parts
                if colon and name
            ]
        if len(pairs) != len(parts):
            raise self._bad_header_line(lines)
        if unescapes is not None:
            pairs = self._unescape_pairs(pairs, unescapes)
        return tuple(pairs)

    def _check_partial_head(self, end: int, window: int) -> None:
        """Apply the head limits to a head whose blank line has not arrived yet."""
        limits = self._limits
        buf = self._buf
        nul = buf.find(b"\0", max(self._pos, self._scan - 1), min(end, window))
        if nul >= 0:
            raise self._refuse_nul(nul)
        if end >= window:
            # The lines completed inside the window come first: fed in pieces,
            # they would have been checked before the window filled up.
            self._check_lines(window)
            size = window - self._pos
            raise _too_large(limits, _head_limit(limits), f"frame head longer than {size} bytes")
        self._check_lines(end)
        # The line still growing; a trailing CR may be the start of a CRLF.
        length = end - self._line_start
        if self._crlf and length and buf[end - 1] == _CR:
            length -= 1
        if length > limits.max_line_length:
            raise _too_large(
                limits, "max_line_length", f"line longer than {limits.max_line_length} bytes"
            )
        self._scan = end
        self._check_truncated()

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
                    raise self._bad_header_line(
                        [buf[start : start + length].decode("utf-8", "replace")]
                    )
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
            raise _error(ErrorKind.BAD_ENCODING, f"command is not UTF-8: {exc.reason}") from None
        if command not in self._commands:
            raise _error(ErrorKind.BAD_COMMAND, f"unknown command {command[:40]!r}")

    def _refuse_nul(self, nul: int) -> RemoteProtocolError:
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
            return _error(ErrorKind.BAD_COMMAND, "NUL in the command line")
        return _error(ErrorKind.BAD_HEADER, "NUL in a header line")

    def _strip_crlf(self, text: str) -> str:
        # CRLF line endings (1.2, or any version in lenient mode).  The last
        # header line keeps its CR (see _next_head); a CR anywhere else is data
        # that 1.2 says must be escaped.
        text = text.replace("\r\n", "\n")
        if text[-1] == "\r":
            text = text[:-1]
        if self._strict and "\r" in text:
            raise _error(ErrorKind.BAD_HEADER, "carriage return inside a header line")
        return text

    @staticmethod
    def _lenient_command(command: str, block: str, verbatim: bool) -> tuple[str, str]:
        # The early draft: commands are case-insensitive and trailing blanks are
        # stripped, so a line of blanks before the command is an empty line.
        # Verbatim (a lenient server) skips the lines of blanks only.
        line = command
        while not line.rstrip(" \t\r") and block:
            line, _, block = block.partition("\n")
        command = line if verbatim else line.rstrip(" \t\r").upper()
        if not command.strip(" \t\r") or "\0" in command:
            raise _error(ErrorKind.BAD_COMMAND, f"bad command line {command[:40]!r}")
        return command, block

    @staticmethod
    def _bad_header_line(lines: list[str]) -> RemoteProtocolError:
        for line in lines:
            name, colon, _ = line.partition(":")
            if not (colon and name):
                return _error(ErrorKind.BAD_HEADER, f"bad header line {line[:40]!r}")
        raise AssertionError("no bad header line")  # pragma: no cover

    def _unescape_pairs(
        self, pairs: list[tuple[str, str]], unescapes: dict[str, str]
    ) -> list[tuple[str, str]]:
        unescape = self._unescape
        return [
            (name, value)
            if "\\" not in name and "\\" not in value
            else (unescape(name, unescapes), unescape(value, unescapes))
            for name, value in pairs
        ]

    def _unescape(self, text: str, unescapes: dict[str, str]) -> str:
        if "\\" not in text:
            return text
        if "\0" not in text:
            # Fast path: escaped backslashes become a NUL placeholder, so that
            # every backslash left must begin one of the other escapes.
            plain = text.replace("\\\\", "\0")
            for sequence, replacement in unescapes.items():
                plain = plain.replace(sequence, replacement)
            if "\\" not in plain:
                return plain.replace("\0", "\\")
        # An undefined escape (an error, or kept as-is in lenient mode), or a
        # NUL that would clash with the placeholder: go sequence by sequence.
        strict = self._strict

        def replace(match: re.Match[str]) -> str:
            sequence = match.group()
            replacement = unescapes.get(sequence)
            if replacement is not None:
                return replacement
            if strict:
                raise _error(ErrorKind.BAD_ESCAPE, f"undefined escape sequence {sequence!r}")
            return sequence

        return _ESCAPE.sub(replace, text)

    def _content_length_of(self, block: str, pos: int, body_start: int, command: str) -> int:
        # 1.2 §Repeated Header Entries: the first content-length wins.  Its name
        # has nothing to escape, so the first line that starts with it is that
        # header, and its value is read straight from the head text.
        at = block.find("content-length:")
        while at > 0 and block[at - 1] != "\n":
            at = block.find("content-length:", at + 1)
        if at < 0:
            return -1
        line_end = block.find("\n", at)
        value = block[at + 15 :] if line_end < 0 else block[at + 15 : line_end]
        if not self._strict:
            value = value.strip(" \t\r")
        if not (value.isascii() and value.isdigit()):
            raise _error(ErrorKind.BAD_CONTENT_LENGTH, f"content-length {value[:40]!r}")
        body_limit, limit = _body_limit(self._limits, body_start - pos)
        # int() refuses very long digit strings, so they are refused first.
        digits = value.lstrip("0")
        if len(digits) > 20 or int(value) > body_limit:
            raise _too_large(
                self._limits,
                limit,
                f"content-length {value[:40]}, room for {body_limit} bytes",
            )
        length = int(value)
        if length:
            self._check_body_allowed(command)
        return length

    def _check_body_allowed(self, command: str) -> None:
        # 1.1 §Value Encoding and 1.2 §Body; 1.0 sets no such rule.
        if self._strict and command not in BODY_COMMANDS and self._version != "1.0":
            raise _error(ErrorKind.UNEXPECTED_BODY, f"{command} frame must not have a body")

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
                self._check_truncated()
                return None
            if buf[nul]:
                raise _error(
                    ErrorKind.MISSING_NUL, f"no NUL after the {length}-byte body of content-length"
                )
        else:
            body_limit, limit = _body_limit(self._limits, start - self._pos)
            stop = min(end, start + body_limit + 1)
            nul = buf.find(b"\0", self._scan, stop)
            if nul < 0:
                if end > start:
                    self._check_body_allowed(command)
                if end > start + body_limit:
                    raise _too_large(self._limits, limit, f"body longer than {body_limit} bytes")
                self._scan = end
                self._check_truncated()
                return None
            if nul > start:
                self._check_body_allowed(command)
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
        # The reservation is passed to BytesIO as its only reference, so BytesIO
        # writes into it in place, and getvalue() returns that very object once
        # it is full (it ends exactly ``length`` long).  The head stays in the
        # buffer, for a version change.
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

    def _grow_large_body(self, big: io.BytesIO, left: int) -> None:
        """Grow the reservation to hold all but ``left`` bytes of the body.

        It grows _GROWTH-fold at least, and never past the declared length.
        """
        length = self._content_length
        size = min(length, max(_GROWTH * (length - self._full_at), length - left))
        # Writing the last byte makes BytesIO resize its bytes object to the new
        # size (a realloc: in place, or a page remap for large blocks).
        big.seek(size - 1)
        big.write(b"\0")
        big.seek(length - self._need)
        self._full_at = length - size

    def _end_large_body(self, big: io.BytesIO) -> Frame | None:
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
            raise _error(
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
