"""The ``stomp-streams`` source and sink without Spark or sockets: offsets, plans, routing.

RabbitMQ stream queues keep their messages after they are read, each at an
offset that the broker puts on every MESSAGE (``x-stream-offset``).  That
makes a stream replayable, and a Spark micro-batch becomes a set of offset
ranges, one or more per stream, that executor tasks read in parallel.  The
rules this module encodes were measured on RabbitMQ 3.10 (``docs/spark.rst``):

* An offset of the source is ``{"<stream>": next offset to read}``.
* Offsets are dense inside a segment, but every segment after the first
  starts with an entry that is no message and still takes an offset.  So a
  range is defined by offsets, never by counts, and a reader that starts at
  ``a`` and first sees ``a + 1`` has lost nothing.
* Retention deletes whole segments from the head, and a read from a deleted
  offset silently starts at the first kept message.  Whether data was lost
  is therefore decided by comparing offsets (:func:`lost_range`).
* A range ``[a, b)`` is read by emitting while ``offset < b`` and stopping at
  the first ``offset >= b - 1`` (:class:`RangeCursor`): ``b - 1`` may be a
  segment's first entry, which never arrives as a message.
* The broker silently reads ``next`` for an ``x-stream-offset`` it cannot
  parse, so offsets from options are checked here, before anything is sent.

Everything here is plain, picklable data and pure functions.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .._options import _Options, warn_once

__all__ = [
    "KAFKA_OPTIONS",
    "ROW_ID_HEADER",
    "STREAM_OFFSET_HEADER",
    "DataLossError",
    "OffsetSpec",
    "RangeCursor",
    "StreamRange",
    "StreamsReaderSettings",
    "StreamsWriterSettings",
    "cap_by_backlog",
    "lost_range",
    "parse_offset_spec",
    "partition_of_key",
    "plan_ranges",
    "stream_names",
]

#: The MESSAGE header holding a stream message's offset.
STREAM_OFFSET_HEADER = "x-stream-offset"
#: The header the sink puts a per-row id in (readers deduplicate on it).
ROW_ID_HEADER = "x-row-id"
#: The header the sink puts a row's key in (the reader's ``key`` column).
KEY_HEADER = "x-key"
#: The header the sink stamps each message with: ms since the epoch when it was sent
#: (the reader's ``timestamp`` column, the same on every read of the message).
TIMESTAMP_HEADER = "x-timestamp"


class DataLossError(RuntimeError):
    """Offsets that were to be read were deleted by retention first."""


# -- offsets ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends, as the user gave it (checked, not yet resolved).

    ``kind`` is ``earliest``, ``latest``, ``offsets`` (a JSON object of stream
    to offset; streams it leaves out take ``default``), ``timestamp``
    (Unix seconds: the first chunk written at or after it) or ``timestamps``
    (one such time per stream; streams left out take ``default``).
    """

    kind: str
    offsets: Mapping[str, int] = field(default_factory=dict)
    timestamp: int = 0
    #: For streams an ``offsets`` or ``timestamps`` spec leaves out: ``earliest`` or ``latest``.
    default: str = "earliest"
    #: ``timestamps``: Unix seconds per stream (Kafka's ``startingOffsetsByTimestamp``).
    timestamps: Mapping[str, int] = field(default_factory=dict)


def parse_offset_spec(
    name: str, text: str, streams: Sequence[str], *, allowed: tuple[str, ...], default: str
) -> OffsetSpec:
    """Check an offsets option (``startingOffsets``/``endingOffsets``); ValueError if wrong.

    ``allowed`` lists the kinds this option takes.  The broker itself would
    read a misspelt offset as ``next`` without a word, hence the strictness.
    """
    value = text.strip()
    lowered = value.lower()
    if lowered in ("earliest", "latest"):
        if lowered not in allowed:
            raise ValueError(f"option {name!r} cannot be {value!r}")
        return OffsetSpec(lowered)
    if value.startswith("{"):
        return OffsetSpec("offsets", _offsets_json(name, text, streams, allowed), default=default)
    if "timestamp" in allowed:
        try:
            seconds = _timestamp(value)
        except ValueError as exc:
            raise ValueError(f"option {name!r}: {exc}") from None
        if seconds is not None:
            if seconds >= SECONDS_AS_MS_BELOW // 10:
                warn_once(
                    "stomp-streams: option %r is %d seconds since the Unix epoch, which is %s; "
                    "if it is in milliseconds (%s), give timestamp=%d",
                    name, seconds, _utc(seconds), _utc(seconds / 1000), seconds // 1000,
                )  # fmt: skip
            return OffsetSpec("timestamp", timestamp=seconds)
    kinds = " | ".join(
        {"earliest": "earliest", "latest": "latest", "offsets": '{"<stream>": <offset>}',
         "timestamp": "timestamp=<unix seconds> | <ISO 8601 time>"}[k]
        for k in allowed
    )  # fmt: skip
    raise ValueError(f"option {name!r} must be {kinds}; not {text!r}")


#: Kafka's offset sentinels in ``startingOffsets``/``endingOffsets`` JSON.
EARLIEST = -2
LATEST = -1


def _offsets_json(
    name: str, text: str, streams: Sequence[str], allowed: tuple[str, ...]
) -> dict[str, int]:
    """``{"<stream>": offset}``, or Kafka's ``{"<stream>": {"<partition>": offset}}`` for
    the streams ``<stream>-<partition>``; ``-2`` is earliest, ``-1`` latest (as in Kafka)."""
    form = 'a JSON object of stream to offset, like {"orders-0": 42} or {"orders": {"0": 42}}'
    lowest = EARLIEST if "earliest" in allowed else LATEST
    meaning = "-2 (earliest), -1 (latest)" if lowest == EARLIEST else "-1 (latest)"
    offsets: dict[str, int] = {}
    for stream, offset in _per_stream(name, text, streams, form):
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < lowest:
            raise ValueError(
                f"option {name!r}: the offset of {stream!r} must be a whole number "
                f">= 0, or {meaning}; not {offset!r}"
            )
        offsets[stream] = offset
    return offsets


def _per_stream(
    name: str, text: str, streams: Sequence[str], form: str
) -> list[tuple[str, object]]:
    """The ``(stream, value)`` pairs of a JSON object by stream, ``{"orders-0": v}``, or in
    Kafka's shape by topic and partition, ``{"orders": {"0": v}}``; ValueError naming
    ``name`` for bad JSON or a stream that is not read."""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"option {name!r} must be {form}, not {text!r} ({exc})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"option {name!r} must be {form}, not {text!r}")
    pairs: list[tuple[str, object]] = []
    for key, value in parsed.items():
        if isinstance(value, dict):
            pairs += [(f"{key}-{p}", v) for p, v in value.items()]
        else:
            pairs.append((key, value))
    for stream, _ in pairs:
        if stream not in streams:
            raise ValueError(
                f"option {name!r} names stream {stream!r}, which is not read "
                f"(the streams are: {', '.join(streams)})"
            )
    return pairs


def _milliseconds(name: str, value: object) -> int:
    """Kafka's timestamps are milliseconds since the epoch; RabbitMQ's are whole seconds."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(
            f"option {name!r} must be milliseconds since the Unix epoch (like 1767225600000), "
            f"not {value!r}"
        )
    if value < SECONDS_AS_MS_BELOW:
        warn_once(
            "stomp-streams: option %r is %d ms since the Unix epoch, which is %s; "
            "if %d is in seconds (%s), give %d",
            name, value, _utc(value / 1000), value, _utc(value), value * 1000,
        )  # fmt: skip
    return value // 1000


#: Milliseconds before 2001-01-01: a stream timestamp that small is surely seconds.
SECONDS_AS_MS_BELOW = 978_307_200_000


def _utc(seconds: float) -> str:
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):
        return "out of range"


def kafka_starting_spec(
    options: Mapping[str, str], streams: Sequence[str], fallback: OffsetSpec
) -> OffsetSpec | None:
    """Kafka's ``startingTimestamp`` or ``startingOffsetsByTimestamp``, if given (ms).

    ``startingTimestamp`` wins over ``startingOffsetsByTimestamp``, which wins
    over ``startingOffsets`` (``fallback``), as in Kafka's source.  The JSON
    is Kafka's ``{"<stream>": {"<partition>": ms}}`` (``<stream>-<partition>``)
    or ``{"<stream name>": ms}``; streams it leaves out start as ``fallback``
    says (``earliest`` or ``latest``).
    """
    read = _Options(options)
    single = read.text("startingTimestamp")
    if single is not None:
        return OffsetSpec("timestamp", timestamp=_milliseconds("startingTimestamp", single))
    text = read.text("startingOffsetsByTimestamp")
    if text is None:
        return None
    name = "startingOffsetsByTimestamp"
    form = 'a JSON object {"<stream>": {"<partition>": <ms>}} or {"<stream name>": <ms>}'
    times = {s: _milliseconds(name, ms) for s, ms in _per_stream(name, text, streams, form)}
    if fallback.kind not in ("earliest", "latest"):
        raise ValueError(
            f"option {name!r}: the streams it leaves out start at 'startingOffsets', "
            f"which must then be earliest or latest, not {fallback.kind!r}"
        )
    return OffsetSpec("timestamps", timestamps=times, default=fallback.kind)


def _timestamp(value: str) -> int | None:
    """Unix seconds from ``timestamp=<seconds>`` or an ISO 8601 time; None if neither."""
    if value.lower().startswith("timestamp="):
        number = value.partition("=")[2].strip()
        if number.isdigit():
            return int(number)
        raise ValueError(f"a timestamp must be whole Unix seconds: {value!r}")
    if len(value) >= 10 and value[4:5] == "-" and value[7:8] == "-":
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        return math.floor(moment.timestamp())
    return None


def check_offsets(
    name: str, offsets: object, streams: Sequence[str] | None = None
) -> dict[str, int]:
    """An offset Spark hands back (from the checkpoint) as ``{stream: int}``; ValueError if not."""
    if not isinstance(offsets, dict):
        raise ValueError(f"{name}: not an offset of the stomp-streams source: {offsets!r}")
    result: dict[str, int] = {}
    for stream, offset in offsets.items():
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"{name}: bad offset {offset!r} for stream {stream!r}")
        result[str(stream)] = offset
    return result


# -- which streams --------------------------------------------------------------------


def stream_names(options: Mapping[str, str]) -> tuple[str, ...]:
    """The streams named by ``stream`` + ``partitions`` or by ``streams``; ValueError if neither."""
    read = _Options(options)
    listed = read.text("streams")
    base = read.text("stream")
    if listed is not None and base is not None:
        raise ValueError("give either 'stream' (with 'partitions') or 'streams', not both")
    if listed is not None:
        names = tuple(s.strip() for s in listed.split(",") if s.strip())
        if not names:
            raise ValueError(
                f"option 'streams' must be a comma-separated list of stream names, not {listed!r}"
            )
        if len(set(names)) != len(names):
            raise ValueError(f"option 'streams' lists a stream twice: {listed!r}")
    elif base is not None:
        count = read.integer("partitions", 1, minimum=1)
        names = tuple(f"{base}-{i}" for i in range(count))
    else:
        raise ValueError(
            "stomp-streams needs 'stream' and 'partitions' (streams <stream>-0 .. "
            "<stream>-<partitions - 1>) or 'streams' (a comma-separated list)"
        )
    for name in names:
        if "/" in name or not name.isprintable():
            raise ValueError(
                f"option {'streams' if listed is not None else 'stream'!r}: {name!r} is not a "
                "stream name (give the queue's name, like 'orders', not a destination)"
            )
    return names


@dataclass(frozen=True)
class StreamsReaderSettings:
    """The ``stomp-streams`` read options, checked."""

    streams: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    #: Most offsets in one micro-batch over all streams (None: no limit).
    max_offsets_per_trigger: int | None
    #: Most offsets one read task takes (None: one task per stream and batch).
    max_offsets_per_partition: int | None
    fail_on_data_loss: bool
    #: Un-ACKed messages the broker may have in flight to one range read.
    prefetch: int
    #: Seconds a range read may go without a message before its task fails.
    read_timeout: float
    #: Seconds a tail or first-offset probe waits for a first message (an empty stream).
    probe_timeout: float
    #: Seconds without a new message that end a probe's chunk.
    probe_quiet: float
    #: Rows per Arrow record batch a range read returns.
    batch_rows: int
    key_header: str
    row_id_header: str
    #: ``keyType=binary``: the ``key`` column is binary, as Kafka's.
    key_binary: bool = False
    timestamp_header: str = TIMESTAMP_HEADER
    #: ``stream``: the base name of ``<stream>-N`` (None when ``streams`` lists them).
    stream_base: str | None = None
    #: ``discoverPartitions``: look for a new ``<stream>-N`` at each trigger.
    discover_partitions: bool = False
    #: ``schema=kafka``: rows in the Kafka source's columns.
    kafka_schema: bool = False

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> StreamsReaderSettings:
        read = _Options(options)
        streams = stream_names(options)
        base = read.text("stream")
        discover = read.flag("discoverPartitions", False)
        if discover and base is None:
            raise ValueError(
                "option 'discoverPartitions' is true, which needs the streams named by "
                "'stream' (as <stream>-0 .. <stream>-N), not listed by 'streams'"
            )
        starting = parse_offset_spec(
            "startingOffsets",
            read.text("startingOffsets", "earliest") or "earliest",
            streams,
            allowed=("earliest", "latest", "offsets", "timestamp"),
            default="earliest",
        )
        starting = kafka_starting_spec(options, streams, starting) or starting
        ending = parse_offset_spec(
            "endingOffsets",
            read.text("endingOffsets", "latest") or "latest",
            streams,
            allowed=("latest", "offsets"),
            default="latest",
        )
        kafka = read.choice("schema", "default", ("default", "kafka")) == "kafka"
        if kafka and read.text("keyType") is not None:
            raise ValueError(
                "option 'keyType' has no meaning with schema=kafka (Kafka's key is binary)"
            )
        return cls(
            streams=streams,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=read.optional_integer("maxOffsetsPerTrigger", minimum=1),
            max_offsets_per_partition=read.optional_integer("maxOffsetsPerPartition", minimum=1),
            fail_on_data_loss=read.flag("failOnDataLoss", True),
            prefetch=read.integer("prefetch", 2000, minimum=1),
            read_timeout=read.number("readTimeout", 60.0, minimum=0.001),
            probe_timeout=read.number("probeTimeout", 0.25, minimum=0.001),
            probe_quiet=read.number("probeQuiet", 0.025, minimum=0.001),
            batch_rows=read.integer("batchRows", 10_000, minimum=1),
            key_header=read.text("keyHeader", KEY_HEADER) or KEY_HEADER,
            row_id_header=read.text("rowIdHeader", ROW_ID_HEADER) or ROW_ID_HEADER,
            key_binary=read.choice("keyType", "string", ("string", "binary")) == "binary",
            timestamp_header=read.text("timestampHeader", TIMESTAMP_HEADER) or TIMESTAMP_HEADER,
            stream_base=base,
            discover_partitions=discover,
            kafka_schema=kafka,
        )

    def topic_of(self, stream: str) -> str:
        """The ``topic`` column (``schema=kafka``): ``<stream>`` for ``<stream>-N`` of the
        ``stream`` option, the stream's own name otherwise."""
        return (
            self.stream_base if self.stream_base and self.number_of(stream) is not None else stream
        )

    def partition_of(self, stream: str) -> int:
        """The ``partition`` column of a stream: ``N`` of ``<stream>-N``, or its place in
        ``streams``; -1 for a stream that is neither."""
        number = self.number_of(stream)
        if number is not None:
            return number
        return self.streams.index(stream) if stream in self.streams else -1

    def number_of(self, stream: str) -> int | None:
        """``N`` when ``stream`` is ``<stream>-N`` of the ``stream`` option, else None."""
        base = self.stream_base
        if base is None or not stream.startswith(f"{base}-"):
            return None
        suffix = stream[len(base) + 1 :]
        return int(suffix) if suffix.isdigit() and suffix == str(int(suffix)) else None


@dataclass(frozen=True)
class StreamsWriterSettings:
    """The ``stomp-streams`` write options, checked."""

    streams: tuple[str, ...]
    #: Declare missing streams (True) or only check that they exist (False).
    create_streams: bool
    #: ``x-max-length-bytes`` for streams this sink declares (None: the broker's default).
    max_length_bytes: int | None
    key_column: str
    stream_column: str
    body_column: str
    headers_column: str
    key_header: str
    row_id_header: str
    #: Headers added to every SEND (a row's own headers win).
    send_headers: Mapping[str, str] = field(default_factory=dict)
    timestamp_header: str = TIMESTAMP_HEADER
    #: ``exactlyOnce``: guard each task so that retried, speculative and replayed attempts
    #: add no duplicate (see ``_guard``). so that retried and speculative attempts add no duplicate.
    exactly_once: bool = True

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> StreamsWriterSettings:
        """The write options, checked.  With neither ``stream`` nor ``streams`` the rows'
        ``stream`` column routes them (``streams`` is then empty), as Kafka's sink
        routes by its ``topic`` column when no ``topic`` option is given."""
        read = _Options(options)
        named = read.text("stream") is not None or read.text("streams") is not None
        return cls(
            streams=stream_names(options) if named else (),
            create_streams=read.flag("createStreams", True),
            max_length_bytes=read.optional_integer("maxLengthBytes", minimum=1),
            key_column=read.text("keyColumn", "key") or "key",
            stream_column=read.text("streamColumn", "stream") or "stream",
            body_column=read.text("bodyColumn", "body") or "body",
            headers_column=read.text("headersColumn", "headers") or "headers",
            key_header=read.text("keyHeader", KEY_HEADER) or KEY_HEADER,
            row_id_header=read.text("rowIdHeader", ROW_ID_HEADER) or ROW_ID_HEADER,
            send_headers=read.headers("sendHeaders"),
            timestamp_header=read.text("timestampHeader", TIMESTAMP_HEADER) or TIMESTAMP_HEADER,
            exactly_once=read.flag("exactlyOnce", True),
        )

    def declare_headers(self) -> dict[str, str]:
        """SUBSCRIBE headers, beyond the stream type, for the streams this sink declares."""
        headers: dict[str, str] = {}
        if self.max_length_bytes is not None:
            headers["x-max-length-bytes"] = str(self.max_length_bytes)
        return headers


def streams_option_names() -> dict[str, tuple[str, ...]]:
    """Every option the stream source and sink read (for the docs and tests)."""
    return {
        "streams-read": (
            "stream", "partitions", "streams", "startingOffsets", "startingTimestamp",
            "startingOffsetsByTimestamp", "endingOffsets",
            "maxOffsetsPerTrigger", "maxOffsetsPerPartition", "failOnDataLoss", "prefetch",
            "readTimeout", "probeTimeout", "probeQuiet", "batchRows", "keyHeader",
            "rowIdHeader", "keyType", "timestampHeader", "discoverPartitions", "schema",
        ),
        "streams-write": (
            "stream", "partitions", "streams", "createStreams", "maxLengthBytes", "keyColumn",
            "streamColumn", "bodyColumn", "headersColumn", "keyHeader", "rowIdHeader",
            "sendHeaders", "timestampHeader", "exactlyOnce",
        ),
    }  # fmt: skip


#: Kafka source and sink options that ``stomp-streams`` does not read, and what to do
#: instead (the warning for one of them says so; ``docs/spark.rst`` has the whole table).
KAFKA_OPTIONS = {
    "kafka.bootstrap.servers": "give the broker with 'host' and 'port', or 'url'",
    "kafka.*": "Kafka client settings have no meaning here (the connection options are "
    "'host', 'port', 'login', 'passcode', 'vhost', 'tls', 'timeout', 'retryTimeout')",
    "subscribe": "name the streams with 'stream' (and 'partitions'), or list them in 'streams'",
    "subscribePattern": "no patterns: name the streams with 'stream' and 'partitions' "
    "(discoverPartitions=true finds the new ones), or list them in 'streams'",
    "assign": "list the streams in 'streams' (a stream is a partition), and where each "
    "starts in 'startingOffsets'",
    "topic": "the sink's streams are named by 'stream' (and 'partitions') or 'streams'",
    "includeHeaders": "headers are always read, in the 'headers' column (and 'header_list'; "
    "with schema=kafka, Kafka's 'headers')",
    "minPartitions": "not applicable: a batch reads each stream in one task; "
    "maxOffsetsPerPartition splits a stream's range over several tasks "
    "('partitions' is the number of streams)",
    "maxRecordsPerPartition": "use maxOffsetsPerPartition",
    "groupIdPrefix": "not applicable: the broker keeps no consumer position; "
    "the query's checkpoint does",
    "kafkaConsumer.pollTimeoutMs": "use readTimeout (seconds)",
    "fetchOffset.numRetries": "use retryTimeout (seconds)",
    "fetchOffset.retryIntervalMs": "use retryTimeout (seconds)",
    "minOffsetsPerTrigger": "not supported: each trigger reads what is there, up to "
    "maxOffsetsPerTrigger",
    "maxTriggerDelay": "not supported (no minOffsetsPerTrigger)",
    "endingTimestamp": "not supported: give endingOffsets",
    "endingOffsetsByTimestamp": "not supported: give endingOffsets",
    "startingOffsetsByTimestampStrategy": "not supported: a stream with no message at or "
    "after its timestamp starts after its last message",
}


# -- planning ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamRange:
    """Offsets ``[start, end)`` of one stream: what one read task takes."""

    stream: str
    start: int
    end: int


def plan_ranges(
    start: Mapping[str, int], end: Mapping[str, int], max_per_range: int | None
) -> list[StreamRange]:
    """The read tasks between two offsets: each stream's ``[start, end)`` in ranges of at most
    ``max_per_range`` offsets; streams with nothing to read get none."""
    ranges: list[StreamRange] = []
    for stream, stop in end.items():
        first = start.get(stream, 0)
        if stop <= first:
            continue
        step = stop - first if max_per_range is None else max_per_range
        for a in range(first, stop, step):
            ranges.append(StreamRange(stream, a, min(a + step, stop)))
    return ranges


def cap_by_backlog(
    start: Mapping[str, int], latest: Mapping[str, int], max_offsets: int
) -> dict[str, int]:
    """End offsets that advance at most ``max_offsets`` in total, shared by backlog.

    Each stream gets a share of the limit in proportion to how far behind it
    is (largest remainders first), so a lagging stream catches up while none
    starves; every stream with a backlog advances at least one offset when the
    limit allows it.
    """
    backlog = {s: max(0, latest[s] - start.get(s, 0)) for s in latest}
    if sum(backlog.values()) <= max_offsets:
        return dict(latest)
    granted = dict.fromkeys(latest, 0)
    left = max_offsets
    behind = [s for s in latest if backlog[s] > 0]
    if left >= len(behind):
        for s in behind:
            granted[s] = 1
        left -= len(behind)
    rest = {s: backlog[s] - granted[s] for s in latest}
    total = sum(rest.values())
    shares = {s: left * n / total for s, n in rest.items()}
    for s, share in shares.items():
        granted[s] += math.floor(share)
    left = max_offsets - sum(granted.values())
    for s in sorted(shares, key=lambda s: (math.floor(shares[s]) - shares[s], s)):
        if left <= 0:
            break
        if granted[s] < backlog[s]:
            granted[s] += 1
            left -= 1
    return {s: start.get(s, 0) + granted[s] for s in latest}


def lost_range(start: int, first_kept: int | None) -> tuple[int, int] | None:
    """The offsets ``[start, end)`` retention deleted before a read from ``start``, or None.

    ``first_kept`` is the offset of the first message the stream still has
    (None for an empty stream).  The segment holding it opens with an entry
    that is no message, at ``first_kept - 1``, so a start there lost nothing.
    """
    if first_kept is None or start >= first_kept - 1:
        return None
    return start, first_kept - 1


def data_loss_message(stream: str, start: int, first_kept: int) -> str:
    return (
        f"stream {stream!r}: offsets {start}..{first_kept - 2} were deleted by retention "
        f"before they were read (the read starts at offset {start}; the first offset the "
        f"stream still has is {first_kept}).  Set failOnDataLoss=false to go on from "
        f"offset {first_kept} instead."
    )


class RangeCursor:
    """The stop rule of a range read ``[start, end)``, fed the offsets as they arrive.

    :meth:`take` says whether a message belongs in the range; :attr:`done`
    turns true at the first offset ``>= end - 1``.  With ``fail_on_data_loss``
    the first message must be at ``start`` or ``start + 1`` (a segment's
    opening entry); anything later means retention got there first.
    """

    __slots__ = ("_check_loss", "done", "end", "last", "seen", "start", "stream")

    def __init__(self, stream: str, start: int, end: int, *, fail_on_data_loss: bool) -> None:
        self.stream = stream
        self.start = start
        self.end = end
        self.done = end <= start
        self.seen = 0
        self.last: int | None = None
        self._check_loss = fail_on_data_loss

    def take(self, offset: int) -> bool:
        """True if the message at ``offset`` is one of the range's (emit it).

        The native twin of collect_messages (``stomp_proto/_streams_native.pyx``)
        does the same, inline, for a message after the first at or past the start.
        """
        if self.last is None and self._check_loss and offset > self.start + 1:
            raise DataLossError(data_loss_message(self.stream, self.start, offset))
        if offset < self.start:  # not expected from offset=K; never emit it twice
            return False
        self.seen += 1
        self.last = offset
        if offset >= self.end - 1:
            self.done = True
        return offset < self.end


# -- routing ----------------------------------------------------------------------------


def partition_of_key(key: str | bytes, partitions: int) -> int:
    """The partition a key belongs to: ``crc32(key) % partitions``.

    CRC-32 is the same in every process and language (Python's ``hash`` is
    salted per process), so writers anywhere route a key to the same stream.
    """
    data = key.encode("utf-8") if isinstance(key, str) else key
    return zlib.crc32(data) % partitions


def route(
    streams: Sequence[str],
    keys: Iterable[str | bytes | None] | None,
    named: Iterable[str | None] | None,
    count: int,
    task_partition: int,
) -> list[str]:
    """The stream each of ``count`` rows goes to.

    With ``named`` (the ``stream`` column, read only when no ``stream`` option
    is given, so ``streams`` is empty) each row goes to the stream it names.
    Otherwise its key picks ``streams[crc32(key) % len(streams)]``, and a row
    without a key goes to the stream of the Spark partition writing it.
    """
    if not streams:
        if named is None:
            raise ValueError(
                "the stomp-streams sink needs the 'stream' option or a 'stream' column"
            )
        targets = list(named)
        if None in targets:
            raise ValueError(
                f"row {targets.index(None)} of the write has a null 'stream' column and no "
                "'stream' option is given: every row must name its stream"
            )
        return targets  # type: ignore[return-value]
    fallback = streams[task_partition % len(streams)]
    result = [fallback] * count
    if keys is not None:
        n = len(streams)
        for i, key in enumerate(keys):
            if key is not None:
                result[i] = streams[partition_of_key(key, n)]
    if named is not None:
        for i, name in enumerate(named):
            if name is not None:
                result[i] = name
    return result
