"""stomp.py's frame object and the small helpers its programs use.

:class:`Frame` is what listeners receive: ``cmd``, ``headers`` (a ``dict``,
the first of repeated headers kept, as stomp.py does), ``body`` (``str`` when
the connection decodes bodies, else ``bytes``) and ``original_headers`` (the
headers as received, before an ``on_before_message`` changed them).

The helpers stomp.py's transport is made of (:func:`parse_frame`,
:func:`parse_headers`, :func:`convert_frame`, :func:`pack`) are here for the
programs that call them, on the core's codec: what they accept and make is what
the connections read and write (STOMP 1.2 escapes), and input the specification
forbids is a :class:`~stomp_proto.RemoteProtocolError`, where stomp.py lets it
through.
"""

from __future__ import annotations

import contextlib
import os as os
import re as re
import socket as socket
import threading as threading
import time as time
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._decoder import FrameDecoder
from .._encoder import FrameEncoder
from .._events import HeartBeat
from .._frame import Frame as WireFrame
from .constants import *  # noqa: F403 - stomp.py's utils gives its constants to ``import *``
from .constants import HDR_CONTENT_LENGTH, HDR_PASSCODE

# No __all__: ``from stomp.utils import *`` gives stomp.py programs (and its test
# suite) the modules and constants above as well, and they rely on it.

_MASK = "********"
# A passcode header as ``str()`` of a list of frame lines shows it (see clean_lines).
_PASSCODE_IN_TEXT = re.compile(r"passcode:\s*[^'\s\\]+")


def _localhost_names() -> list[str]:
    names = ["localhost", "127.0.0.1"]
    if os.environ.get("STOMP_SKIP_HOSTNAME_SCAN"):
        return names
    lookups: tuple[Callable[[], str], ...] = (
        lambda: socket.gethostbyname(socket.gethostname()),
        socket.gethostname,
        lambda: socket.getfqdn(socket.gethostname()),
    )
    for lookup in lookups:
        with contextlib.suppress(OSError):  # no name service: the two above still hold
            names.append(lookup())
    return names


#: The names :func:`is_localhost` takes for this machine: ``localhost``,
#: ``127.0.0.1`` and, unless the environment variable ``STOMP_SKIP_HOSTNAME_SCAN``
#: is set when the module is imported, this host's name, address and FQDN.
LOCALHOST_NAMES = _localhost_names()
#: The byte that ends a frame.
NULL = b"\x00"


class Frame:
    """A STOMP frame as a stomp.py listener sees it: ``cmd``, ``headers``, ``body``."""

    def __init__(self, cmd: str | None, headers: dict[str, Any] | None = None, body: Any = None):
        #: The command (``"MESSAGE"`` ...); None for a heart-beat.
        self.cmd = cmd
        #: The headers by name (the first of repeated ones).
        self.headers: dict[str, Any] = headers if headers is not None else {}
        #: The headers as they were made or received.
        self.original_headers: dict[str, Any] = dict(self.headers)
        #: ``str`` when the connection decodes bodies (``auto_decode``), else ``bytes``.
        self.body = body

    def __str__(self) -> str:
        return f"{{cmd={self.cmd},headers=[{clean_headers(self.headers)}],body={self.body!r}}}"

    __repr__ = __str__


#: What listeners' ``on_heartbeat`` stands for (stomp.py passes no frame).
HEARTBEAT_FRAME = Frame("heartbeat")


def decode(byte_data: bytes | None, encoding: str = "utf-8") -> str | None:
    """``byte_data`` as text (undecodable bytes replaced); None stays None."""
    if byte_data is None:
        return None
    return byte_data.decode(encoding, errors="replace")


def encode(char_data: str | bytes, encoding: str = "utf-8") -> bytes:
    """``char_data`` as bytes; TypeError for anything but ``str`` and ``bytes``."""
    if isinstance(char_data, str):
        return char_data.encode(encoding, errors="replace")
    if isinstance(char_data, bytes | bytearray | memoryview):
        return bytes(char_data)
    raise TypeError(f"a message body is a str or bytes, not {type(char_data).__name__}")


def get_uuid() -> str:
    """A fresh random identifier (receipts, transactions)."""
    return str(uuid.uuid4())


def get_errno(exc: BaseException) -> Any:
    """The ``errno`` of an OSError, else the exception's first argument."""
    errno = getattr(exc, "errno", None)
    if errno is not None:
        return errno
    return exc.args[0] if exc.args else None


def is_localhost(host_and_port: tuple[str, int]) -> int:
    """1 when the host is one of :data:`LOCALHOST_NAMES` (or ``::1``), 2 otherwise.

    A sort key: local hosts first.
    """
    host = host_and_port[0]
    return 1 if host in LOCALHOST_NAMES or host == "::1" else 2


def default_create_thread(callback: Callable[[], None]) -> threading.Thread:
    """Run ``callback`` on a new daemon thread, started, and return the thread.

    What connections use unless ``override_threading`` gives them another function.
    """
    thread = threading.Thread(target=callback, daemon=True)
    thread.start()
    return thread


def pack(pieces: Iterable[bytes] = ()) -> bytes:
    """The byte strings of ``pieces`` joined into one (the output of :func:`convert_frame`)."""
    return b"".join(pieces)


def join(chars: Iterable[bytes] = ()) -> str:
    """The byte strings of ``chars`` joined and decoded as UTF-8."""
    return b"".join(chars).decode()


def length(s: Any) -> int:
    """``len(s)``, and 0 for None."""
    return 0 if s is None else len(s)


def _wire_frame(data: bytes) -> WireFrame | None:
    """The one frame in ``data`` (NUL optional at the end); None for a heart-beat."""
    decoder = FrameDecoder("1.2")
    decoder.receive_data(data if data.endswith(NULL) else data + NULL)
    decoder.receive_data(None)  # the end: a frame cut short is the decoder's error
    while (item := decoder.next_frame()) is not None:
        if not isinstance(item, HeartBeat):
            return item
    return None


def parse_frame(frame: bytes) -> Frame:
    """The frame in ``frame``, as received (the ending NUL may be left off).

    Headers are unescaped by STOMP 1.2's rules and the first of repeated ones is
    kept; the body stays ``bytes``.  An end-of-line alone is a heart-beat:
    ``Frame("heartbeat")``.  Anything the specification does not allow (an unknown
    command, an undefined escape, a missing blank line) raises
    :class:`~stomp_proto.RemoteProtocolError`.
    """
    data = bytes(frame)
    wire = _wire_frame(data) if data.strip(b"\r\n") else None
    if wire is None:
        return Frame("heartbeat")
    headers: dict[str, Any] = {}
    for name, value in wire.headers:
        headers.setdefault(name, value)  # 1.2 "Repeated Header Entries": the first counts
    return Frame(wire.command, headers, wire.body)


def parse_headers(lines: list[str], offset: int = 0) -> dict[str, str]:
    """The headers in ``lines[offset:]`` (``name:value`` lines, escaped as in 1.2).

    The first of repeated names is kept; nothing is trimmed.  An undefined escape
    such as ``\\t`` raises :class:`~stomp_proto.RemoteProtocolError` (1.2 "Value
    Encoding" calls it a fatal protocol error).
    """
    block = "".join(f"{line}\n" for line in lines[offset:])
    wire = _wire_frame(f"MESSAGE\n{block}\n".encode())
    assert wire is not None  # a MESSAGE line always makes a frame
    headers: dict[str, str] = {}
    for name, value in wire.headers:
        headers.setdefault(name, value)
    return headers


def convert_frame(frame: Frame) -> list[bytes]:
    """``frame`` encoded for the wire (STOMP 1.2), as a list of byte strings for :func:`pack`.

    Headers go in name order; a None value leaves its header out, a tuple value
    repeats it.  A ``content-length`` header, when there is one, is set to the
    body's length and written last; the body is encoded as UTF-8 when it is ``str``.  A frame
    whose ``cmd`` is None is a heart-beat, an end-of-line.
    """
    if not frame.cmd:
        return [b"\n"]
    body = encode(frame.body) if frame.body else b""
    with_length = HDR_CONTENT_LENGTH in frame.headers
    if with_length:
        frame.headers[HDR_CONTENT_LENGTH] = len(body)
    headers: list[tuple[str, str]] = []
    for name, values in sorted(frame.headers.items()):
        if values is None or name == HDR_CONTENT_LENGTH:  # the encoder writes the length
            continue
        for value in values if isinstance(values, tuple) else (values,):
            headers.append((str(name), str(value)))
    wire = WireFrame(frame.cmd, tuple(headers), body)
    return [FrameEncoder("1.2").encode(wire, content_length=with_length)]


def merge_headers(header_maps: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """One dict of every map in ``header_maps``, later ones winning."""
    merged: dict[str, Any] = {}
    for headers in header_maps:
        if headers:
            merged.update(headers)
    return merged


def clean_headers(headers: Mapping[str, Any]) -> Mapping[str, Any]:
    """``headers`` with the passcode masked, for logs and prints."""
    if HDR_PASSCODE not in headers:
        return headers
    return {**headers, HDR_PASSCODE: _MASK}


def clean_lines(lines: Any) -> str:
    """``str(lines)`` with every ``passcode:`` value masked, for logs."""
    return _PASSCODE_IN_TEXT.sub("passcode:" + _MASK, str(lines))


def calculate_heartbeats(theirs: Iterable[str], ours: tuple[int, int]) -> tuple[int, int]:
    """The negotiated ``(send, receive)`` intervals in ms (STOMP 1.1 "Heart-beating").

    ``theirs`` is the broker's ``heart-beat`` header split at the comma: what it
    can send, then what it wants; ``ours`` is what we asked for.  Each direction is
    the larger of the two asks, or 0 when either side says 0.
    """
    their_send, their_want = (int(value) for value in theirs)
    our_send, our_want = ours
    send = max(our_send, their_want) if our_send and their_want else 0
    receive = max(our_want, their_send) if our_want and their_send else 0
    return send, receive
