"""stomp.py's frame object and the small helpers its programs use.

:class:`Frame` is what listeners receive: ``cmd``, ``headers`` (a ``dict``,
the first of repeated headers kept, as stomp.py does), ``body`` (``str`` when
the connection decodes bodies, else ``bytes``) and ``original_headers`` (the
headers as received, before an ``on_before_message`` changed them).
"""

from __future__ import annotations

import re as re
import socket as socket
import threading as threading
import time as time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from .constants import *  # noqa: F403 - stomp.py's utils gives its constants to ``import *``
from .constants import HDR_PASSCODE

# No __all__: ``from stomp.utils import *`` gives stomp.py programs (and its test
# suite) the modules and constants above as well, and they rely on it.

_MASK = "********"


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
    """1 when the host is this machine, 2 otherwise (a sort key: local hosts first)."""
    host = host_and_port[0]
    if host in ("localhost", "127.0.0.1", "::1"):
        return 1
    try:
        names = {socket.gethostname(), socket.getfqdn()}
    except OSError:  # pragma: no cover - no name service at all
        names = set()
    return 1 if host in names else 2


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
