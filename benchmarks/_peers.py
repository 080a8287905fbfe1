"""Adapters that drive each codec under benchmark through one small common interface.

Every decoder adapter turns a list of read chunks into the list of frames the library
produced (heart-beats dropped), and can normalise one of its frames into a ``Decoded``
triple so results can be checked against the expected frames.  Every encoder adapter
returns a zero-argument callable that encodes one prepared SEND frame, so the timing loop
(in ``codec.py``) is the same for everyone and holds no library-specific code.

Each adapter uses the library's own public (or, for stomp.py, documented-in-peers.md)
entry points; see ``benchmarks/README.rst`` for what each one includes.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, NamedTuple

import stomp.protocol  # type: ignore[import-untyped]
import stomp.transport  # type: ignore[import-untyped]
import stomp.utils  # type: ignore[import-untyped]
import stompest.protocol  # type: ignore[import-untyped]
import stompman
import stompman.serde

Headers = Sequence[tuple[str, str]]


class Decoded(NamedTuple):
    """A decoded frame reduced to what every library can report the same way."""

    command: str
    headers: dict[str, str]  # first entry wins, as every spec version requires
    body: bytes


def first_wins(pairs: Headers) -> dict[str, str]:
    """A header dict in which the first of repeated entries wins."""
    out: dict[str, str] = {}
    for name, value in pairs:
        out.setdefault(name, value)
    return out


class DecoderAdapter(ABC):
    """Feed a stream, chunk by chunk, to one library's parser."""

    name: ClassVar[str]

    @abstractmethod
    def decode(self, chunks: Sequence[bytes]) -> list[Any]:
        """Feed every chunk to a fresh parser; return every frame it produced, in order."""

    @abstractmethod
    def normalize(self, frame: Any) -> Decoded:
        """Reduce one frame returned by ``decode`` to a ``Decoded``."""


class EncoderAdapter(ABC):
    """Encode one SEND frame the way a user of the library would send it."""

    name: ClassVar[str]
    #: Whether the library escapes header names as well as values (1.2 rules).
    escapes_names: ClassVar[bool]

    @abstractmethod
    def prepare(self, headers: Headers, body: bytes) -> Callable[[], bytes]:
        """Return a callable producing the wire bytes of SEND(headers, body).

        The callable must add ``content-length`` and apply the library's 1.2 escaping, and it
        must not mutate anything the next call depends on: it is called many times in a row.
        """


# --------------------------------------------------------------------------- stompest


class StompestDecoder(DecoderAdapter):
    """``stompest.protocol.StompParser('1.2')``: ``add(chunk)``, ``get()`` while ``canRead()``."""

    name = "stompest"

    def decode(self, chunks: Sequence[bytes]) -> list[Any]:
        parser = stompest.protocol.StompParser("1.2")
        add, can_read, get = parser.add, parser.canRead, parser.get
        frame_cls = stompest.protocol.StompFrame
        out: list[Any] = []
        for chunk in chunks:
            add(chunk)
            while can_read():
                frame = get()
                if type(frame) is frame_cls:
                    out.append(frame)
        return out

    def normalize(self, frame: Any) -> Decoded:
        return Decoded(frame.command, first_wins(frame.rawHeaders), frame.body)


class StompestEncoder(EncoderAdapter):
    """``bytes(StompFrame('SEND', headers, body, version='1.2'))``."""

    name = "stompest"
    escapes_names = True

    def prepare(self, headers: Headers, body: bytes) -> Callable[[], bytes]:
        frame_cls = stompest.protocol.StompFrame
        base = dict(headers)
        length = str(len(body))

        def encode() -> bytes:
            # stompest does not add content-length itself; its StompFrame keeps the dict given.
            return bytes(frame_cls("SEND", {**base, "content-length": length}, body, version="1.2"))

        return encode


# --------------------------------------------------------------------------- stomp.py


class _FeedTransport(stomp.transport.BaseTransport):  # type: ignore[misc]
    """A stomp.py transport whose socket is a list of chunks handed over one at a time.

    stomp.py's stream framing lives in the private ``BaseTransport.__read``, which pulls from
    ``receive()``.  With ``blocking = False`` a ``None`` from ``receive()`` ends one read pass,
    so each ``feed`` runs exactly the framing code the real io thread runs per ``recv``.
    """

    def __init__(self) -> None:
        super().__init__(auto_decode=False)
        self.running = True
        self.blocking = False
        self._pending: bytes | None = None

    def receive(self) -> bytes | None:
        chunk, self._pending = self._pending, None
        return chunk

    def feed(self, chunk: bytes) -> list[bytes]:
        self._pending = chunk
        raw_frames: list[bytes] = self._BaseTransport__read()
        return raw_frames


class StompPyDecoder(DecoderAdapter):
    """stomp.py: ``BaseTransport.__read`` (stream framing) + ``utils.parse_frame`` per frame."""

    name = "stomp.py"

    def decode(self, chunks: Sequence[bytes]) -> list[Any]:
        feed = _FeedTransport().feed
        parse = stomp.utils.parse_frame
        out: list[Any] = []
        for chunk in chunks:
            for raw in feed(chunk):
                frame = parse(raw)
                if frame is not None and frame.cmd:
                    out.append(frame)
        return out

    def normalize(self, frame: Any) -> Decoded:
        return Decoded(frame.cmd, dict(frame.headers), frame.body)


class StompPyEncoder(EncoderAdapter):
    """stomp.py's send path: content-length, ``Protocol12._escape_headers``, ``convert_frame``.

    ``_escape_headers`` rewrites the dict in place (values only, never names), so every call
    works on a fresh copy, as ``Protocol12.send`` effectively does with its keyword headers.
    """

    name = "stomp.py"
    escapes_names = False

    def prepare(self, headers: Headers, body: bytes) -> Callable[[], bytes]:
        utils = stomp.utils
        # The method only touches its argument; calling it unbound avoids building a
        # Protocol12, which needs a live transport.
        escape = stomp.protocol.Protocol12._escape_headers
        base = dict(headers)
        length = len(body)

        def encode() -> bytes:
            frame_headers: dict[str, Any] = {**base, "content-length": length}
            escape(None, frame_headers)
            return bytes(utils.pack(utils.convert_frame(utils.Frame("SEND", frame_headers, body))))

        return encode


# --------------------------------------------------------------------------- stompman


class StompmanDecoder(DecoderAdapter):
    """``stompman.serde.FrameParser().parse_frames_from_chunk(chunk)`` (a generator)."""

    name = "stompman"

    def decode(self, chunks: Sequence[bytes]) -> list[Any]:
        parse = stompman.serde.FrameParser().parse_frames_from_chunk
        heartbeat = stompman.HeartbeatFrame
        out: list[Any] = []
        for chunk in chunks:
            out.extend(f for f in parse(chunk) if type(f) is not heartbeat)
        return out

    def normalize(self, frame: Any) -> Decoded:
        command = stompman.serde.FRAMES_TO_COMMANDS[type(frame)].decode()
        return Decoded(command, dict(frame.headers), getattr(frame, "body", b""))


class StompmanEncoder(EncoderAdapter):
    """``stompman.serde.dump_frame(SendFrame(headers=..., body=...))``."""

    name = "stompman"
    escapes_names = True

    def prepare(self, headers: Headers, body: bytes) -> Callable[[], bytes]:
        dump = stompman.serde.dump_frame
        send_frame = stompman.SendFrame
        base = dict(headers)
        length = str(len(body))

        def encode() -> bytes:
            # Same as SendFrame.build(add_content_length=True) minus its keyword plumbing.
            return dump(send_frame(headers={**base, "content-length": length}, body=body))  # type: ignore[typeddict-item]

        return encode


PEER_DECODERS: tuple[DecoderAdapter, ...] = (StompestDecoder(), StompPyDecoder(), StompmanDecoder())
PEER_ENCODERS: tuple[EncoderAdapter, ...] = (StompestEncoder(), StompPyEncoder(), StompmanEncoder())
