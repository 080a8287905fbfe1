"""Shared helpers for the codec tests: feeding a decoder, chunking a stream, reading encoder output.

The suite has no ``__init__.py``: pytest puts ``tests/`` on ``sys.path``, so test modules
import this file as ``helpers``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest

from stomp_proto import (
    ErrorKind,
    Frame,
    FrameDecoder,
    HeartBeat,
    Limits,
    RemoteProtocolError,
    Version,
)

HB = HeartBeat()


@contextmanager
def pure_core() -> Iterator[None]:
    """The pure build inside this process: every native hook switched off (what a
    build without the extension module runs; on the pure build, nothing changes)."""
    from stomp_proto import _connection, _decoder, _encoder, _events

    with pytest.MonkeyPatch.context() as patch:
        for module in (_decoder, _encoder, _events, _connection):
            patch.setattr(module, "_native", None)
        patch.setattr(_connection.ClientConnection, "_fast_receive", None)
        patch.setattr(_connection.ClientConnection, "_fast_send", None)
        patch.setattr(_connection.ClientConnection, "_fast_send_parts", None)
        patch.setattr(_connection.ClientConnection, "_fast_events", None)
        yield


VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")
ESCAPING_VERSIONS: tuple[Version, ...] = ("1.1", "1.2")

#: The frames that may carry a body (1.1/1.2 §Body).
BODY_COMMANDS = frozenset({"SEND", "MESSAGE", "ERROR"})
#: Every command of STOMP 1.2 (§Augmented BNF).
ALL_COMMANDS = (
    "CONNECT", "STOMP", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT",
    "ACK", "NACK", "DISCONNECT", "CONNECTED", "MESSAGE", "RECEIPT", "ERROR",
)  # fmt: skip
NON_BODY_COMMANDS = tuple(c for c in ALL_COMMANDS if c not in BODY_COMMANDS)

Event = Frame | HeartBeat


@dataclass
class Outcome:
    """What a decoder produced for one feeding of a stream."""

    events: list[Event] = field(default_factory=list)
    error: RemoteProtocolError | None = None
    #: Bytes fed when the error surfaced (with 1-byte feeding: index of the guilty byte + 1).
    fed: int = 0
    #: True when the error only surfaced after ``receive_data(None)``.
    at_eof: bool = False

    @property
    def kind(self) -> ErrorKind | None:
        return None if self.error is None else self.error.kind

    @property
    def error_offset(self) -> int:
        """Index in the stream of the byte whose arrival made the error visible."""
        assert self.error is not None and not self.at_eof
        return self.fed - 1

    @property
    def limit(self) -> str | None:
        """The Limits field a TOO_LARGE error names."""
        return None if self.error is None else self.error.limit

    def summary(self) -> str:
        return (
            f"events={self.events!r} kind={self.kind} limit={self.limit} fed={self.fed} "
            f"at_eof={self.at_eof}"
        )


def drain(decoder: FrameDecoder, events: list[Event]) -> None:
    """Call ``next_frame`` until it returns None, appending what it returns."""
    while True:
        event = decoder.next_frame()
        if event is None:
            return
        events.append(event)


def run(
    chunks: Iterable[bytes],
    version: Version = "1.2",
    *,
    strict: bool = True,
    limits: Limits | None = None,
    eof: bool = True,
    max_buffered: int | None = None,
) -> Outcome:
    """Feed ``chunks`` one by one, draining after each, then (if ``eof``) end the stream.

    Any RemoteProtocolError is caught and recorded; anything else propagates.
    If ``max_buffered`` is given, ``decoder.buffered`` is checked against it after every drain.
    """
    decoder = FrameDecoder(version, strict=strict, limits=limits)
    out = Outcome()
    try:
        for chunk in chunks:
            decoder.receive_data(chunk)
            out.fed += len(chunk)
            drain(decoder, out.events)
            if max_buffered is not None:
                assert decoder.buffered <= max_buffered, (
                    f"buffered={decoder.buffered} > {max_buffered} after {out.fed} bytes"
                )
        if eof:
            out.at_eof = True
            decoder.receive_data(None)
            drain(decoder, out.events)
            out.at_eof = False
    except RemoteProtocolError as exc:
        out.error = exc
    return out


def whole(data: bytes) -> list[bytes]:
    return [data]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def sized(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def cut(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """Split ``data`` at the given offsets (clamped, deduplicated, any order)."""
    points = sorted({min(max(c, 0), len(data)) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in itertools.pairwise(points)]


def same_outcome(a: Outcome, b: Outcome) -> bool:
    """The same events, and the same error kind naming the same limit (or none)."""
    return a.events == b.events and a.kind == b.kind and a.limit == b.limit


def decode(
    data: bytes,
    version: Version = "1.2",
    *,
    strict: bool = True,
    limits: Limits | None = None,
    eof: bool = True,
) -> list[Event]:
    """Decode ``data`` fed whole, and again 1 byte at a time; both must agree.

    Returns the events, or raises the RemoteProtocolError the decoder raised.
    """
    one = run(whole(data), version, strict=strict, limits=limits, eof=eof)
    byte = run(bytewise(data), version, strict=strict, limits=limits, eof=eof)
    assert same_outcome(one, byte), f"whole feed: {one.summary()}\n1-byte feed: {byte.summary()}"
    if one.error is not None:
        raise one.error
    return one.events


def decode_one(data: bytes, version: Version = "1.2", *, strict: bool = True) -> Frame:
    """Decode a stream holding exactly one frame (trailing heart-beat EOLs allowed)."""
    events = decode(data, version, strict=strict)
    frames = [e for e in events if not isinstance(e, HeartBeat)]
    assert len(frames) == 1, events
    assert isinstance(frames[0], Frame)
    return frames[0]


def decode_error(
    data: bytes,
    kind: ErrorKind | Sequence[ErrorKind],
    version: Version = "1.2",
    *,
    strict: bool = True,
    limits: Limits | None = None,
    eof: bool = True,
) -> RemoteProtocolError:
    """Assert that decoding ``data`` (whole and 1-byte) fails with ``kind`` (or one of them)."""
    kinds = (kind,) if isinstance(kind, ErrorKind) else tuple(kind)
    with pytest.raises(RemoteProtocolError) as info:
        decode(data, version, strict=strict, limits=limits, eof=eof)
    assert info.value.kind in kinds, f"got {info.value!r}, expected one of {kinds}"
    return info.value


def parse_encoded(out: bytes) -> tuple[bytes, list[bytes], bytes, bytes]:
    """Split encoder output into (command, header lines, body, what follows the NUL).

    Relies only on the frame grammar: LF-terminated head, blank line, body, NUL, then EOLs.
    """
    assert isinstance(out, bytes), type(out)
    head, sep, rest = out.partition(b"\n\n")
    assert sep, f"no blank line in {out!r}"
    command, *lines = head.split(b"\n")
    nul = rest.rindex(b"\x00")
    trailer = rest[nul + 1 :]
    assert trailer.replace(b"\r\n", b"").replace(b"\n", b"") == b"", out
    return command, lines, rest[:nul], trailer


def without_content_length(frame: Frame) -> tuple[tuple[str, str], ...]:
    return tuple((k, v) for k, v in frame.headers if k != "content-length")


def names_the_argument(error: BaseException, words: str) -> bool:
    """Whether ``error``'s message has ``words`` (both builds run the checks in Python)."""
    return words in str(error)


class LogRecords(logging.Handler):
    """The records that some loggers emit at ``level`` and above while installed.

    ``ignore``: a logger whose records are not kept (one that a test expects to
    speak).  Installing lowers a logger's own level to ``level`` when it is higher,
    and restores it afterwards.
    """

    def __init__(self, *loggers: str, level: int = logging.WARNING, ignore: str = "") -> None:
        super().__init__(level)
        self.loggers = loggers
        self.ignore = ignore
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if not self.ignore or record.name != self.ignore:
            self.records.append(record)

    @contextmanager
    def installed(self) -> Iterator[LogRecords]:
        loggers = [logging.getLogger(name) for name in self.loggers]
        levels = [logger.level for logger in loggers]
        for logger in loggers:
            logger.addHandler(self)
            if logger.getEffectiveLevel() > self.level:
                logger.setLevel(self.level)
        try:
            yield self
        finally:
            for logger, level in zip(loggers, levels, strict=True):
                logger.removeHandler(self)
                logger.setLevel(level)

    def lines(self, level: int) -> list[str]:
        """The messages logged at exactly ``level``."""
        return [r.getMessage() for r in self.records if r.levelno == level]

    def messages(self) -> list[str]:
        """Every message kept, after its logger's name."""
        return [f"{r.name}: {r.getMessage()}" for r in self.records]
