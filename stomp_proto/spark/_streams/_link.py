"""Talking to RabbitMQ stream queues over STOMP: probes, range reads, declarations, sends.

All of it runs in the caller's thread on one blocking socket and a
:class:`~stomp_proto.ClientConnection`, with no heart-beats: every use is
short (a probe, one range, one task's writes) and always reading or writing.
The frames are the ones measured on RabbitMQ 3.10 (``docs/spark.rst``):

* A **probe** subscribes with ``prefetch-count:1`` and never ACKs.  From
  ``x-stream-offset:last`` the broker then sends exactly the stream's last
  chunk, whose highest offset is the tail; from ``first`` (or
  ``timestamp=T``) the first message is the first kept one.  No receipt can
  mark the end of a chunk, so a probe ends once ``quiet`` seconds pass with
  no new message, or after ``timeout`` seconds for a stream that sends none
  (an empty one).
* A **range read** subscribes at ``offset=a`` with ``ack:client`` and a
  prefetch, ACKs now and then only to return credit (the broker keeps no
  position), and stops by the rule of :class:`~._offsets.RangeCursor`.  It
  is the hot path, so past the handshake it decodes with a bare
  :class:`~stomp_proto.FrameDecoder` and hands on MESSAGE frames.
* Every connection ends with DISCONNECT and a receipt.  Never UNSUBSCRIBE
  with messages in flight: RabbitMQ answers that with an ERROR.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..._client._errors import BrokerError, ConnectionLost
from ..._connection import ClientConnection
from ..._decoder import FrameDecoder
from ..._encoder import FrameEncoder
from ..._errors import ProtocolError
from ..._events import (
    Connected,
    ConnectionClosed,
    Disconnect,
    Error,
    Event,
    FrameEvent,
    HeartBeatTimeout,
    Message,
    Receipt,
    Subscribe,
)
from ..._frame import Frame
from .._options import ConnectionSettings
from .._retry import Retry, retrying
from ._messages import collect, stream_offset
from ._offsets import RangeCursor, StreamRange

__all__ = [
    "MissingStreamError",
    "ProbeResult",
    "StreamLink",
    "declare_streams",
    "probe_streams",
    "read_range",
]

_READ_SIZE = 256 * 1024
#: A range read that got less than this from one read waits _READ_PAUSE before the
#: next, so that the broker's deliveries are read in bulk (see _read_from).
_SHORT_READ = 64 * 1024
_READ_PAUSE = 0.002
log = logging.getLogger("stomp_proto.spark")


class MissingStreamError(RuntimeError):
    """A stream the source or sink needs does not exist on the broker."""


def amq_destination(stream: str) -> str:
    """The destination of an existing stream (no declaration, no arguments checked)."""
    return f"/amq/queue/{stream}"


def message_offset(message: Message) -> int:
    """The ``x-stream-offset`` of a stream MESSAGE."""
    return stream_offset(message.headers, message.destination)


class StreamLink:
    """One blocking STOMP connection (see the module docstring)."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self.settings = settings
        self.conn = ClientConnection()
        sock = self.sock = settings.open_socket()
        try:
            self.send(settings.connect_event(heartbeat=(0, 0)))
            deadline = time.monotonic() + settings.timeout
            while True:
                event = self.next_event(deadline)
                if event is None:
                    raise TimeoutError(
                        f"no CONNECTED from {settings.host}:{settings.port} within "
                        f"{settings.timeout:g} s"
                    )
                if isinstance(event, Connected):
                    break
                self.check(event)
        except BaseException:
            sock.close()
            raise

    def send(self, event: FrameEvent) -> None:
        self.write(self.conn.send(event))

    def write(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError as exc:
            raise self._failure(exc) from exc

    def next_event(self, deadline: float) -> Event | None:
        """The next event, reading until ``deadline`` (monotonic); None at the deadline."""
        conn = self.conn
        while True:
            try:
                event = conn.next_event()
            except ProtocolError as exc:
                raise ConnectionLost(f"bad data from the broker: {exc}") from exc
            if event is not None:
                return event
            if not self.fill(deadline):
                return None

    def fill(self, deadline: float) -> bool:
        """Read once from the socket into the connection; False if ``deadline`` passed first."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(_READ_SIZE)
        except TimeoutError:
            return False
        except OSError as exc:
            raise ConnectionLost(f"connection to the broker failed: {exc}") from exc
        self.conn.receive_data(data or None)
        return True

    def wait_for_receipts(self, receipts: dict[str, str], what: str) -> None:
        """Read until every receipt in ``receipts`` (receipt id -> stream) has come.

        Messages are skipped; an ERROR or the end of the connection raises, and
        so does ``settings.timeout`` passing: "no receipt for ``what`` <streams>".
        """
        timeout = self.settings.timeout
        deadline = time.monotonic() + timeout
        while receipts:
            event = self.next_event(deadline)
            if event is None:
                raise TimeoutError(
                    f"no receipt for {what} {', '.join(receipts.values())} within {timeout:g} s"
                )
            if isinstance(event, Receipt):
                receipts.pop(event.receipt_id, None)
            elif not isinstance(event, Message):
                self.check(event)

    @staticmethod
    def check(event: Event) -> None:
        """Raise for an ERROR or the end of the connection; ignore anything else."""
        if isinstance(event, Error):
            raise BrokerError(event)
        if isinstance(event, (ConnectionClosed, HeartBeatTimeout)):
            raise ConnectionLost("the broker closed the connection")

    def close(self, timeout: float = 5.0) -> bool:
        """DISCONNECT with a receipt; True if the receipt came (a clean end).

        Messages still in flight are dropped on the way.
        """
        clean = False
        with contextlib.suppress(Exception):
            receipt = f"bye-{uuid.uuid4().hex[:8]}"
            self.send(Disconnect(receipt=receipt))
            deadline = time.monotonic() + timeout
            while (event := self.next_event(deadline)) is not None:
                if isinstance(event, Receipt) and event.receipt_id == receipt:
                    clean = True
                    break
                if isinstance(event, (Error, ConnectionClosed)):
                    break
        self.abandon()
        return clean

    def abandon(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def _failure(self, exc: OSError) -> Exception:
        """What to raise for a failed write: the broker's ERROR, when it sent one."""
        with contextlib.suppress(Exception):
            deadline = time.monotonic() + 1.0
            while (event := self.next_event(deadline)) is not None:
                if isinstance(event, Error):
                    return BrokerError(event)
        return ConnectionLost(f"connection to the broker failed: {exc}")


def _missing(error: BrokerError | ConnectionLost, streams: Sequence[str]) -> Exception:
    """A clear error for the broker's NOT_FOUND, naming the stream when it can."""
    text = str(error)
    if "NOT_FOUND" not in text and "not found" not in text.lower():
        return error
    named = [s for s in streams if f"'{s}'" in text] or list(streams)
    return MissingStreamError(
        f"stream {', '.join(repr(s) for s in named)} does not exist on the broker "
        f"(the broker said: {text})"
    )


@dataclass(frozen=True)
class ProbeResult:
    """What probes found for one stream: offsets of its first and last kept messages."""

    first: int | None
    tail: int | None


def probe_streams(
    settings: ConnectionSettings,
    streams: Sequence[str],
    *,
    tails: bool = True,
    firsts: bool = True,
    timestamp: int | None = None,
    timeout: float = 0.5,
    quiet: float = 0.025,
) -> dict[str, ProbeResult]:
    """Tails (``last`` probes) and first kept offsets (``first``, or ``timestamp=T``) of streams.

    All probes run at once on one connection, so N streams cost about what
    one does.  ``first`` is the offset of the first message at or after
    ``timestamp`` when one is given.  A stream that sends nothing within
    ``timeout`` seconds is empty (None).
    """
    if not streams:
        return {}

    def attempt() -> dict[str, ProbeResult]:
        link = StreamLink(settings)
        try:
            return _probe(link, streams, tails, firsts, timestamp, timeout, quiet)
        except BrokerError as exc:
            link.abandon()
            raise _missing(exc, streams) from exc
        except ConnectionLost:
            link.abandon()
            raise
        finally:
            link.close()

    return retrying(settings, f"probing {', '.join(streams)}", attempt)


def _probe(
    link: StreamLink,
    streams: Sequence[str],
    tails: bool,
    firsts: bool,
    timestamp: int | None,
    timeout: float,
    quiet: float,
) -> dict[str, ProbeResult]:
    start_spec = "first" if timestamp is None else f"timestamp={timestamp}"
    # subscription id -> (stream, "tail" | "first")
    probes: dict[str, tuple[str, str]] = {}
    for i, stream in enumerate(streams):
        for kind, spec, wanted in (("tail", "last", tails), ("first", start_spec, firsts)):
            if not wanted:
                continue
            sub = f"{kind}-{i}"
            probes[sub] = (stream, kind)
            link.send(
                Subscribe(
                    amq_destination(stream),
                    id=sub,
                    ack="client",
                    headers=(("prefetch-count", "1"), ("x-stream-offset", spec)),
                )
            )
    found: dict[str, int] = {}
    last_arrival: dict[str, float] = {}
    begun = time.monotonic()

    def settled(now: float) -> bool:
        for sub, (_, kind) in probes.items():
            if sub not in found:
                if now - begun < timeout:
                    return False
            elif kind == "tail" and now - last_arrival[sub] < quiet:
                return False
        return True

    while True:
        now = time.monotonic()
        if settled(now):
            break
        # Wake for the next moment a probe could settle.
        waits = [begun + timeout]
        waits += [t + quiet for s, t in last_arrival.items() if probes[s][1] == "tail"]
        wake = min(w for w in waits if w > now) if any(w > now for w in waits) else now + quiet
        event = link.next_event(wake)
        if event is None:
            continue
        if isinstance(event, Message):
            sub = event.subscription or ""
            if sub not in probes:
                continue
            offset = message_offset(event)
            if probes[sub][1] == "tail":
                found[sub] = max(found.get(sub, offset), offset)
                last_arrival[sub] = time.monotonic()
            elif sub not in found:
                found[sub] = offset
        else:
            link.check(event)
    result: dict[str, ProbeResult] = {}
    for i, stream in enumerate(streams):
        result[stream] = ProbeResult(first=found.get(f"first-{i}"), tail=found.get(f"tail-{i}"))
    return result


def declare_streams(
    settings: ConnectionSettings,
    streams: Sequence[str],
    *,
    create: bool,
    arguments: Mapping[str, str] | None = None,
) -> None:
    """Make sure each stream exists before anything is sent to it.

    A SEND to a stream that does not exist is dropped silently (even with a
    receipt), so the sink never sends before this.  With ``create`` a
    SUBSCRIBE to ``/queue/NAME`` with ``x-queue-type:stream`` declares the
    stream (a no-op when it exists with the same arguments); without it a
    SUBSCRIBE to ``/amq/queue/NAME`` only checks, and a missing stream raises
    :class:`MissingStreamError`.  Subscriptions start at ``next`` and are
    ended by DISCONNECT, never UNSUBSCRIBE.
    """
    if not streams:
        return
    retrying(
        settings,
        f"declaring {', '.join(streams)}",
        lambda: _declare(settings, streams, create, arguments or {}),
    )


def _declare(
    settings: ConnectionSettings, streams: Sequence[str], create: bool, arguments: Mapping[str, str]
) -> None:
    link = StreamLink(settings)
    try:
        receipts: dict[str, str] = {}
        for i, stream in enumerate(streams):
            receipt = f"declared-{i}"
            receipts[receipt] = stream
            headers: list[tuple[str, str]] = [
                ("prefetch-count", "1"),
                ("x-stream-offset", "next"),
            ]
            if create:
                headers = [
                    ("x-queue-type", "stream"),
                    ("durable", "true"),
                    ("auto-delete", "false"),
                    *arguments.items(),
                    *headers,
                ]
            link.send(
                Subscribe(
                    f"/queue/{stream}" if create else amq_destination(stream),
                    id=f"declare-{i}",
                    ack="client",
                    receipt=receipt,
                    headers=tuple(headers),
                )
            )
        link.wait_for_receipts(receipts, "the declaration of")
    except BrokerError as exc:
        link.abandon()
        raise _missing(exc, streams) from exc
    finally:
        link.close()


def read_range(
    settings: ConnectionSettings,
    part: StreamRange,
    *,
    prefetch: int,
    read_timeout: float,
    fail_on_data_loss: bool,
) -> Iterator[list[tuple[int, Frame]]]:
    """The messages of ``part`` as lists of ``(offset, MESSAGE frame)``, in offset order.

    Each list is what one read from the socket gave (possibly empty).  Fails
    with ``TimeoutError`` naming the stream, the range and the last offset
    seen when no message comes for ``read_timeout`` seconds; with
    :class:`~._offsets.DataLossError` when retention deleted the range's
    start (unless ``fail_on_data_loss`` is false).  A connection that fails
    midway is made again, from the offset after the last one received (a
    stream can be read again from any offset), as :mod:`.._retry` allows.
    """
    cursor = RangeCursor(part.stream, part.start, part.end, fail_on_data_loss=fail_on_data_loss)
    retry = Retry(settings, f"reading {part.stream} offsets {part.start}..{part.end - 1}")
    while not cursor.done:
        begin = part.start if cursor.last is None else cursor.last + 1
        try:
            for got in _read_from(settings, part.stream, begin, cursor, prefetch, read_timeout):
                if got:
                    retry.succeeded()
                yield got
        except Exception as exc:  # Retry.failed re-raises what it cannot mend
            retry.failed(_missing(exc, [part.stream]) if isinstance(exc, BrokerError) else exc)


def _ack_frame(version: str, frame: Frame) -> Frame:
    """The ACK of a MESSAGE frame of the subscription ``range`` (cumulative: ``ack:client``)."""
    headers = dict(reversed(frame.headers))  # first of a repeated name wins
    if version == "1.2":
        return Frame("ACK", (("id", headers["ack"]),))
    if version == "1.1":
        return Frame("ACK", (("subscription", "range"), ("message-id", headers["message-id"])))
    return Frame("ACK", (("message-id", headers["message-id"]),))


def _read_from(
    settings: ConnectionSettings,
    stream: str,
    begin: int,
    cursor: RangeCursor,
    prefetch: int,
    read_timeout: float,
) -> Iterator[list[tuple[int, Frame]]]:
    """One connection's part of :func:`read_range`: from ``begin`` until the cursor is done.

    After the handshake the frames are decoded by a bare :class:`~stomp_proto.FrameDecoder`
    rather than through the connection's events, and sorted into the range's
    messages by :func:`~._messages.collect_messages` (natively on the accelerated
    build): a range read needs only each MESSAGE's offset, headers and body, and
    skipping the event objects and the connection's bookkeeping makes a task about
    1.4-1.9x faster (measured on 50,000 messages).  ACKs and the final DISCONNECT
    are encoded by the library's
    :class:`~stomp_proto.FrameEncoder` for the negotiated version.

    A read that brought less than ``_SHORT_READ`` bytes is followed by a pause of
    ``_READ_PAUSE`` (2 ms) before the next, as a Kafka consumer's ``fetch.max.wait.ms``
    gathers a fetch: a task faster than the broker (about 50k messages/s over
    STOMP) would otherwise wake for every few messages, and those wake-ups cost
    it more CPU than the messages (measured: about 5 messages per read and twice
    the CPU per row on the accelerated build).  The broker keeps sending into the
    socket meanwhile, within the prefetch, so the rows/s stay what it delivers.
    """
    link = StreamLink(settings)
    try:
        version = link.conn.version or "1.2"
        decoder, encoder = FrameDecoder(version), FrameEncoder(version)
        # Nothing arrives between CONNECTED and the SUBSCRIBE, so from here on the
        # socket's bytes are the decoder's alone.
        link.send(
            Subscribe(
                amq_destination(stream),
                id="range",
                ack="client",
                headers=(
                    ("prefetch-count", str(prefetch)),
                    ("x-stream-offset", f"offset={begin}"),
                ),
            )
        )
        sock = link.sock
        sock.settimeout(read_timeout)
        # ACK (cumulatively) once half the prefetch is used: only to return credit.
        ack_every = max(1, prefetch // 2)
        unacked = 0
        last: Frame | None = None
        while not cursor.done:
            try:
                data = sock.recv(_READ_SIZE)
            except TimeoutError:
                raise TimeoutError(
                    f"stream {stream!r}: offsets {cursor.start}..{cursor.end - 1} did not "
                    f"arrive within readTimeout={read_timeout:g} s (last offset received: "
                    f"{cursor.last if cursor.last is not None else 'none'}; the range may "
                    "lie beyond the stream's tail)"
                ) from None
            except OSError as exc:
                raise ConnectionLost(f"connection to the broker failed: {exc}") from exc
            if not data:
                raise ConnectionLost("the broker closed the connection")
            decoder.receive_data(data)
            got: list[tuple[int, Frame]] = []
            while True:
                seen, newest, other = collect(decoder, cursor, got, stream)
                unacked += seen
                last = newest or last
                if other is None:
                    break
                if other.command == "ERROR":
                    raise BrokerError(Error.from_frame(other, version))
            if unacked >= ack_every and last is not None and not cursor.done:
                sock.sendall(encoder.encode(_ack_frame(version, last)))
                unacked = 0
            yield got
            if len(data) < _SHORT_READ and not cursor.done:
                time.sleep(_READ_PAUSE)
        _disconnect(sock, decoder, encoder, read_timeout)
    except ProtocolError as exc:
        raise ConnectionLost(f"bad data from the broker: {exc}") from exc
    finally:
        link.abandon()


def _disconnect(
    sock: socket.socket, decoder: FrameDecoder, encoder: FrameEncoder, timeout: float
) -> bool:
    """DISCONNECT with a receipt on a raw connection; True once the RECEIPT came.

    The messages still in flight arrive first and are dropped.
    """
    with contextlib.suppress(OSError, ProtocolError):
        sock.sendall(encoder.encode(Frame("DISCONNECT", (("receipt", "bye"),))))
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            sock.settimeout(remaining)
            data = sock.recv(_READ_SIZE)
            if not data:
                return False
            decoder.receive_data(data)
            while (frame := decoder.next_frame()) is not None:
                if isinstance(frame, Frame) and frame.command in ("RECEIPT", "ERROR"):
                    return frame.command == "RECEIPT" and frame.get("receipt-id") == "bye"
    return False
