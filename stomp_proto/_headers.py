"""The text of a frame head: header lines, escapes and content-length.

Plain functions of ``str``, the way h11 keeps its header rules in ``_headers.py``
and ``_abnf.py``: the decoder finds where a head ends and which limits apply,
and these say what the head holds.  They raise :class:`LocalProtocolError`, as
every check inside does; the decoder reports what a peer sent as
:class:`RemoteProtocolError`, converted once, in ``FrameDecoder.next_frame``.

Names and values travel as one string, *fields*: every name and value of the
head in wire order, separated by NUL.  A head cannot hold a NUL (the decoder
refuses it before the head is parsed), so the separator is unambiguous, and
escapes are undone over all fields at once.
"""

from __future__ import annotations

from itertools import chain

from ._errors import ErrorKind, LocalProtocolError

__all__ = ["TOO_LONG", "content_length", "header_fields", "header_pairs", "unescape"]

_PREFIX = "content-length:"
# Where unescape() parks escaped backslashes: a control character that no
# STOMP client or broker writes in a header.
_PARKED = "\x01"

# int() refuses digit strings past a few thousand digits (sys.int_info's
# default_max_str_digits); a content-length of more significant digits than
# this is past every limit anyway, and reads as TOO_LONG.  Leading zeros are
# dropped before int() sees them, however many there are.
_MOST_DIGITS = 20
TOO_LONG: int = 10**_MOST_DIGITS


def header_fields(block: str, lines: list[str], verbatim: bool) -> str:
    """The names and values of the header lines ``lines`` (``block`` split at LF), as fields.

    A line splits at its first colon; a raw ':' after it stays in the value
    (brokers send such values, and nothing is lost).  1.0-1.2 §Augmented BNF:
    ``header = header-name ":" header-value``, the name at least one octet; a
    line without a colon, or with an empty name, is refused.

    ``verbatim`` keeps values exactly as sent (strict mode, and the lenient
    server); otherwise (lenient mode) trailing blanks and leading spaces of
    values are dropped, as the early draft's peers expect.
    """
    if verbatim and block.count(":") == len(lines) and block[0] != ":" and "\n:" not in block:
        # The common case: as many colons as lines, none at the start of a line.
        # If every line has one, each colon and LF is a field boundary.
        for line in lines:
            if ":" not in line:
                break
        else:
            return block.replace(":", "\0").replace("\n", "\0")
    # Raw colons in values, lenient mode, or a bad line.
    parts = [line.partition(":") for line in lines]
    if verbatim:
        pairs = [(name, value) for name, colon, value in parts if colon and name]
    else:
        pairs = [
            (name, value.rstrip(" \t\r").lstrip(" "))
            for name, colon, value in parts
            if colon and name
        ]
    if len(pairs) != len(lines):
        bad = next(
            line
            for line, (name, colon, _) in zip(lines, parts, strict=True)
            if not (colon and name)
        )
        raise LocalProtocolError(ErrorKind.BAD_HEADER, f"bad header line {bad[:40]!r}")
    return "\0".join(chain.from_iterable(pairs))


def header_pairs(fields: str) -> tuple[tuple[str, str], ...]:
    """The ``(name, value)`` pairs of ``fields``."""
    pieces = iter(fields.split("\0"))
    return tuple(zip(pieces, pieces, strict=True))


def unescape(text: str, cr: bool, strict: bool) -> str:
    """``text`` with its escape sequences undone: 1.1 §Value Encoding, and ``\\r`` if ``cr`` (1.2).

    The text is read left to right, so in a run of backslashes each two are
    one escaped backslash.  Those are parked on a placeholder first; then
    every backslash left begins its own sequence, which is replaced on its
    own, and no replacement makes a new one.  A backslash still there
    afterwards begins an undefined sequence: an error in strict mode (1.2:
    "MUST be treated as a fatal protocol error"), kept as sent otherwise.

    In the rare text that holds the placeholder itself, splitting at the
    escaped backslashes does the same work, piece by piece.
    """
    parked = "\\\\" in text
    if parked:
        if _PARKED in text:
            return "\\".join([unescape(piece, cr, strict) for piece in text.split("\\\\")])
        text = text.replace("\\\\", _PARKED)
    text = text.replace("\\n", "\n").replace("\\c", ":")
    if cr:
        text = text.replace("\\r", "\r")
    if strict and "\\" in text:
        at = text.index("\\")
        # A backslash that ends a name or value is followed by the fields' NUL
        # separator, or by nothing: it is alone.
        sequence = text[at : at + 2].rstrip("\0")
        raise LocalProtocolError(ErrorKind.BAD_ESCAPE, f"undefined escape sequence {sequence!r}")
    return text.replace(_PARKED, "\\") if parked else text


def content_length(block: str, strict: bool) -> int:
    """The octet count of the head's content-length header (1.2 §Header content-length); -1 if none.

    1.2 §Repeated Header Entries: the first entry wins.  Its name has nothing
    to escape, so the first line that starts with ``content-length:`` is that
    header, and its value is read from the head text.  Decimal digits only;
    lenient mode ignores blanks around them.  A value of more than 20
    significant digits, past every limit, reads as :data:`TOO_LONG`.
    """
    at = block.find(_PREFIX)
    while at > 0 and block[at - 1] != "\n":
        at = block.find(_PREFIX, at + 1)
    if at < 0:
        return -1
    start = at + len(_PREFIX)
    end = block.find("\n", start)
    value = block[start:] if end < 0 else block[start:end]
    if not strict:
        value = value.strip(" \t\r")
    if not (value.isdigit() and value.isascii()):
        raise LocalProtocolError(ErrorKind.BAD_CONTENT_LENGTH, f"content-length {value[:40]!r}")
    if len(value) > _MOST_DIGITS:
        value = value.lstrip("0") or "0"
        if len(value) > _MOST_DIGITS:
            return TOO_LONG
    return int(value)
