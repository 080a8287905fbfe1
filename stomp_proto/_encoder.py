"""FrameEncoder: frames in, bytes out, under one version's escaping rules.

Encoding is a producer's hot path.  Escaped frames (1.1 and 1.2, all but
CONNECT and CONNECTED) join every name and value into one string, with
placeholders that escaping leaves alone, check it once, escape it in one pass
and turn the placeholders into ':' and LF; the unescaped ones are checked once
over the whole head when nothing needs refusing.  Only frames that need it
(a NUL, an empty name, a content-length to replace, text that cannot be sent
unescaped) take the per-header route.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain

from ._build import native
from ._checks import wrong_type
from ._errors import ErrorKind, LocalProtocolError
from ._events import HeartBeat
from ._frame import (
    BODY_COMMANDS,
    COMMANDS_BY_VERSION,
    UNESCAPED_COMMANDS,
    VERSIONS,
    Frame,
    Version,
    check_fields,
)

__all__ = ["FrameEncoder", "unescaped_header_fault"]

# The native twin (stomp_proto/_encoder_native.pyx), or None: the pure build.
_native = native("_encoder_native")


# 1.1 §Value Encoding escapes '\\', LF and ':'; 1.2 adds CR.  A 1.1 value may
# hold a raw CR (its grammar excludes only LF and ':').  Backslashes go first,
# so that the backslashes the other escapes add are not doubled.
def _escape_11(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c")


def _escape_12(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace(":", "\\c").replace("\r", "\\r")


_ESCAPES: dict[Version, Callable[[str], str] | None] = {
    "1.0": None,
    "1.1": _escape_11,
    "1.2": _escape_12,
}


def _not_str(headers: tuple[tuple[str, str], ...]) -> TypeError:
    """The TypeError for headers that are not all pairs of str."""
    for pair in headers:
        if type(pair) is not tuple or len(pair) != 2:
            return wrong_type("each header", "a (name, value) pair", pair)
        name, value = pair
        if not isinstance(name, str) or not isinstance(value, str):
            return wrong_type(
                f"header {name!r}", "a str name with a str value", value, "convert it with str()"
            )
    return TypeError("header names and values must be str")  # pragma: no cover


def _refuse(kind: ErrorKind, message: str) -> LocalProtocolError:
    return LocalProtocolError(kind, message)


def unescaped_header_fault(name: str, value: str, *, raw_cr: bool) -> str | None:
    """Why a header cannot be written without escapes, or None if it can.

    LF ends a line and a ':' in a name would move the split point.  A CR is
    an ordinary octet before 1.2 (``raw_cr``: the 1.0 and 1.1 grammars end
    lines with LF only, and a 1.0 MESSAGE may carry one in the message-id an
    ACK must echo); in 1.2 it may begin a CRLF, and so it may for whoever
    reads a CONNECT or CONNECTED frame, before a version is agreed.  The
    broker asks the same question of headers bound for a 1.0 subscriber.
    """
    breaks = "\n" if raw_cr else "\n\r"
    if ":" in name or any(b in name for b in breaks):
        return f"header name {name!r} cannot be sent unescaped"
    if any(b in value for b in breaks):
        return f"value of {name!r} has a line break and cannot be sent unescaped"
    return None


class FrameEncoder:
    """Turns :class:`Frame` values into the bytes of one STOMP version.

    Header names and values are escaped as ``version`` requires, except in
    CONNECT and CONNECTED, whose headers a 1.0 peer must be able to read.  The
    STOMP frame is escaped: only servers of 1.1 and later accept it, and they
    unescape it (1.2 §Value Encoding).  A
    ``content-length`` header is written for every non-empty body; the
    encoder computes it and drops any ``content-length`` the frame carries.
    Pass ``content_length=False`` to omit it for one frame - ActiveMQ, for
    instance, delivers a frame without it as a JMS TextMessage.

    Anything that cannot be sent as given raises :class:`LocalProtocolError`.
    """

    __slots__ = ("_bodies", "_commands", "_escape", "_version")

    def __init__(self, version: Version = "1.2") -> None:
        self._version: Version = "1.2"
        self._escape: Callable[[str], str] | None = _escape_12
        self._commands = COMMANDS_BY_VERSION["1.2"]
        self._bodies = BODY_COMMANDS
        self.version = version

    @property
    def version(self) -> Version:
        """The protocol version whose escaping rules are applied."""
        return self._version

    @version.setter
    def version(self, version: Version) -> None:
        if not isinstance(version, str):
            raise wrong_type("FrameEncoder version", "'1.0', '1.1' or '1.2'", version)
        if version not in VERSIONS:
            raise _refuse(ErrorKind.BAD_VERSION, f"unknown STOMP version {version!r}")
        self._version = version
        self._escape = _ESCAPES[version]
        self._commands = COMMANDS_BY_VERSION[version]
        # 1.0 §SUBSCRIBE: "The body of the SUBSCRIBE command is ignored" - so it
        # may have one.  From 1.1 only SEND, MESSAGE and ERROR do (§Body).
        self._bodies = BODY_COMMANDS | {"SUBSCRIBE"} if version == "1.0" else BODY_COMMANDS

    def encode(self, frame: Frame | HeartBeat, *, content_length: bool = True) -> bytes:
        """The wire bytes of ``frame`` (a heart-beat is a single LF).

        With ``content_length`` (the default) a frame whose body is not empty
        gets a ``content-length`` header with the body's real length, whatever
        the frame's own headers say; ``content_length=False`` writes none, which
        a body holding a NUL byte does not allow.
        """
        if _native is not None:
            # The accelerated build encodes a frame that needs no refusal; the
            # code below judges the rest (and is the reference for both).
            data: bytes | None = _native.encode(
                frame, self._version, self._commands, self._bodies, content_length
            )
            if data is not None:
                return data
        if isinstance(frame, HeartBeat):
            return b"\n"
        if type(frame) is not Frame and not isinstance(frame, tuple):
            raise wrong_type("encode() frame", "a Frame or HeartBeat", frame)
        command, headers, body = frame
        # Frame() checks these, but a plain tuple or frame._replace() does not
        # (the common case tested inline: a call per frame costs 5% here).
        if (
            type(headers) is not tuple
            or type(body) is not bytes
            or (headers and type(headers[0]) is not tuple)
        ):
            check_fields(headers, body)
        if command not in self._commands:
            if not isinstance(command, str):
                raise wrong_type("Frame command", "a str such as 'SEND'", command)
            raise _refuse(
                ErrorKind.BAD_COMMAND, f"unknown command {command!r} in STOMP {self._version}"
            )
        if body and command not in self._bodies:
            raise _refuse(
                ErrorKind.UNEXPECTED_BODY,
                f"{command} frame must not have a body in STOMP {self._version}",
            )
        if not content_length and 0 in body:
            raise _refuse(
                ErrorKind.BAD_CONTENT_LENGTH, "a body containing NUL needs a content-length header"
            )
        escape = self._escape
        count = len(headers)
        if count and escape is not None and command not in UNESCAPED_COMMANDS:
            # NUL between a name and its value, U+0001 between headers: escaping
            # changes neither.  Exactly one of each per header means the text
            # holds neither (and every header is a pair); an empty name shows
            # as a NUL at the start of a header.
            try:
                joined = "\x01".join(map("\0".join, headers))
            except TypeError:
                raise _not_str(headers) from None
            if (
                joined.count("\0") == count
                and joined.count("\x01") == count - 1
                and joined[0] != "\0"
                and "\x01\0" not in joined
                and "content-length\0" not in joined
            ):
                text = escape(joined).replace("\0", ":").replace("\x01", "\n") + "\n"
            else:
                text = "".join([line + "\n" for line in self._encode_headers(command, headers)])
        else:
            try:
                lines = [name + ":" + value for name, value in headers]
                head = "\n".join(lines)
            except (TypeError, ValueError):  # (ValueError: a "pair" of one or three)
                raise _not_str(headers) from None
            # Fast path: exactly one colon and no line break per line, no empty
            # name, nothing to escape or refuse, and no content-length to replace.
            if count and (
                head.count(":") != count
                or head.count("\n") != count - 1
                or "\\" in head
                or "\r" in head
                or "\0" in head
                or head[0] == ":"
                or "\n:" in head
                or "content-length:" in head
            ):
                lines = self._encode_headers(command, headers)
            text = "".join([line + "\n" for line in lines])
        if body and content_length:
            text += "content-length:" + str(len(body)) + "\n"
        try:
            encoded = (command + "\n" + text + "\n").encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _refuse(
                ErrorKind.BAD_ENCODING, f"header text is not encodable: {exc.reason}"
            ) from None
        return b"".join((encoded, body, b"\0")) if body else encoded + b"\0"

    def _encode_headers(self, command: str, headers: tuple[tuple[str, str], ...]) -> list[str]:
        # content-length is recomputed from the body, or omitted on request.
        try:
            pairs = [(name, value) for name, value in headers if name != "content-length"]
        except ValueError:  # a "pair" of one or three (a str of other than 2 letters)
            raise _not_str(headers) from None
        if not pairs:
            return []
        # Every name and value in one string, NUL-separated: NUL may not appear
        # in a header, so it can carry the structure through the escaping.
        flat = "\0".join(chain.from_iterable(pairs))
        if flat.count("\0") != 2 * len(pairs) - 1:
            name = next(n for n, v in pairs if "\0" in n or "\0" in v)
            raise _refuse(ErrorKind.BAD_HEADER, f"NUL in header {name!r}")
        if "" in dict(pairs):
            raise _refuse(ErrorKind.BAD_HEADER, "empty header name")
        escape = None if command in UNESCAPED_COMMANDS else self._escape
        if escape is not None:
            parts = iter(escape(flat).split("\0"))
            return [name + ":" + value for name, value in zip(parts, parts, strict=True)]
        # Unescaped headers (1.0, CONNECT, CONNECTED): see unescaped_header_fault.
        raw_cr = self._version != "1.2" and command not in UNESCAPED_COMMANDS
        for name, value in pairs:
            fault = unescaped_header_fault(name, value, raw_cr=raw_cr)
            if fault is not None:
                raise _refuse(ErrorKind.BAD_HEADER, fault)
        return [name + ":" + value for name, value in pairs]
