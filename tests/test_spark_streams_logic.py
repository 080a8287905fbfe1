"""The ``stomp-streams`` logic without a JVM or a broker: offsets, planning, ranges, routing.

Probes are faked (the planner takes its probe function as an argument);
everything here runs in milliseconds.  The same rules against a real
RabbitMQ: ``tests/test_spark_streams_rabbitmq.py``.
"""

from __future__ import annotations

import pickle
import zlib
from typing import Any

import pytest

from stomp_proto.spark._options import ConnectionSettings
from stomp_proto.spark._streams._link import ProbeResult
from stomp_proto.spark._streams._offsets import (
    DataLossError,
    RangeCursor,
    StreamRange,
    StreamsReaderSettings,
    StreamsWriterSettings,
    cap_by_backlog,
    lost_range,
    parse_offset_spec,
    partition_of_key,
    plan_ranges,
    route,
    stream_names,
    streams_option_names,
)
from stomp_proto.spark._streams._reader import StreamsPlanner

STREAMS = ("s-0", "s-1", "s-2", "s-3")


# -- options and offsets ----------------------------------------------------------------


def test_stream_names() -> None:
    assert stream_names({"stream": "orders", "partitions": "3"}) == (
        "orders-0",
        "orders-1",
        "orders-2",
    )
    assert stream_names({"stream": "one"}) == ("one-0",)
    assert stream_names({"streams": " a, b ,c"}) == ("a", "b", "c")
    with pytest.raises(ValueError, match="not both"):
        stream_names({"stream": "x", "streams": "a"})
    with pytest.raises(ValueError, match="needs 'stream'"):
        stream_names({})
    with pytest.raises(ValueError, match="twice"):
        stream_names({"streams": "a,a"})
    with pytest.raises(ValueError, match="not a stream name"):
        stream_names({"streams": "/queue/a"})
    with pytest.raises(ValueError, match=">= 1"):
        stream_names({"stream": "x", "partitions": "0"})


@pytest.mark.parametrize(
    "text",
    [
        "offset:5",  # the broker's old spelling: RabbitMQ 3.10 would silently read `next`
        "offset=5",
        "5",
        "first",
        "next",
        "timestamp:1700000000",
        "timestamp=abc",
        '{"s-0": -3}',
        '{"s": {"0": -2.5}}',
        '{"s-0": 1.5}',
        '{"s-0": "5"}',
        '{"s-0": true}',
        '{"nope": 5}',
        "[1, 2]",
        "{not json",
    ],
)
def test_wrong_offset_syntax_is_refused_before_anything_is_sent(text: str) -> None:
    with pytest.raises(ValueError, match="startingOffsets"):
        StreamsReaderSettings.from_options({"streams": ",".join(STREAMS), "startingOffsets": text})


def test_offset_specs() -> None:
    assert (
        parse_offset_spec("o", "Earliest", STREAMS, allowed=("earliest",), default="earliest").kind
        == "earliest"
    )
    spec = parse_offset_spec("o", '{"s-1": 7}', STREAMS, allowed=("offsets",), default="latest")
    assert spec.kind == "offsets" and dict(spec.offsets) == {"s-1": 7}
    assert spec.default == "latest"
    stamp = parse_offset_spec(
        "o", "timestamp=1700000000", STREAMS, allowed=("timestamp",), default="earliest"
    )
    assert stamp.timestamp == 1_700_000_000
    iso = parse_offset_spec(
        "o", "2023-11-14T22:13:20Z", STREAMS, allowed=("timestamp",), default="earliest"
    )
    assert iso.timestamp == 1_700_000_000
    with pytest.raises(ValueError, match="endingOffsets"):
        StreamsReaderSettings.from_options({"streams": "a", "endingOffsets": "earliest"})
    with pytest.raises(ValueError, match="endingOffsets"):
        StreamsReaderSettings.from_options({"streams": "a", "endingOffsets": "timestamp=5"})


def test_reader_settings_defaults() -> None:
    settings = StreamsReaderSettings.from_options({"stream": "x", "partitions": "2"})
    assert settings.streams == ("x-0", "x-1")
    assert settings.starting.kind == "earliest" and settings.ending.kind == "latest"
    assert settings.fail_on_data_loss is True
    assert settings.max_offsets_per_trigger is None and settings.max_offsets_per_partition is None
    assert pickle.loads(pickle.dumps(settings)) == settings
    writer = StreamsWriterSettings.from_options({"streams": "a,b", "maxLengthBytes": "1000"})
    assert writer.create_streams and writer.declare_headers() == {"x-max-length-bytes": "1000"}


def test_every_streams_option_is_documented() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parent.parent / "docs" / "spark.rst").read_text()
    for names in streams_option_names().values():
        for name in names:
            assert f"``{name}``" in page, name


# -- ranges and the stop rule -----------------------------------------------------------


def test_plan_ranges_splits_by_offsets() -> None:
    start = {"a": 0, "b": 10, "c": 5}
    end = {"a": 25, "b": 10, "c": 4}
    assert plan_ranges(start, end, 10) == [
        StreamRange("a", 0, 10),
        StreamRange("a", 10, 20),
        StreamRange("a", 20, 25),
    ]
    assert plan_ranges(start, end, None) == [StreamRange("a", 0, 25)]
    # A stream the start does not know begins at 0.
    assert plan_ranges({}, {"d": 3}, 2) == [StreamRange("d", 0, 2), StreamRange("d", 2, 3)]


def test_ranges_cover_every_offset_once() -> None:
    start = {s: i * 7 for i, s in enumerate(STREAMS)}
    end = {s: 1000 + i for i, s in enumerate(STREAMS)}
    for size in (1, 3, 64, 999, 5000):
        covered: dict[str, list[int]] = {s: [] for s in STREAMS}
        for r in plan_ranges(start, end, size):
            assert 0 < r.end - r.start <= size
            covered[r.stream].extend(range(r.start, r.end))
        for s in STREAMS:
            assert covered[s] == list(range(start[s], end[s]))


def feed(cursor: RangeCursor, offsets: list[int]) -> tuple[list[int], int]:
    """Emitted offsets, and how many offsets were fed before the cursor was done."""
    emitted: list[int] = []
    for n, offset in enumerate(offsets):
        if cursor.take(offset):
            emitted.append(offset)
        if cursor.done:
            return emitted, n + 1
    return emitted, len(offsets)


def test_stop_rule_dense_range() -> None:
    cursor = RangeCursor("s", 10, 20, fail_on_data_loss=True)
    emitted, used = feed(cursor, list(range(10, 40)))
    assert emitted == list(range(10, 20))
    assert used == 10  # stopped at offset 19 = end - 1, before anything beyond the range came
    assert cursor.done


def test_stop_rule_when_end_minus_one_is_a_segment_start() -> None:
    # Offset 19 opens a segment and is no message: 18, then 20.  The range [10, 20)
    # must stop at 20 (>= end - 1) without emitting it, instead of waiting for 19.
    offsets = [*range(10, 19), *range(20, 30)]
    emitted, used = feed(RangeCursor("s", 10, 20, fail_on_data_loss=True), offsets)
    assert emitted == list(range(10, 19))
    assert used == 10


def test_segment_gap_of_one_at_the_start_is_no_loss() -> None:
    # The range starts on a segment's opening entry: the first message is start + 1.
    emitted, _ = feed(RangeCursor("s", 100, 105, fail_on_data_loss=True), [101, 102, 103, 104])
    assert emitted == [101, 102, 103, 104]
    # A gap inside the range (a segment boundary) is no loss either.
    emitted, _ = feed(RangeCursor("s", 0, 10, fail_on_data_loss=True), [0, 1, 2, 4, 5, 9])
    assert emitted == [0, 1, 2, 4, 5, 9]


def test_a_start_deleted_by_retention_is_data_loss() -> None:
    cursor = RangeCursor("orders-2", 100, 200, fail_on_data_loss=True)
    with pytest.raises(DataLossError, match=r"'orders-2'.*start.*100.*still has is 150"):
        cursor.take(150)
    emitted, _ = feed(RangeCursor("s", 100, 200, fail_on_data_loss=False), [150, 151, 199])
    assert emitted == [150, 151, 199]


def test_range_single_offset_and_empty() -> None:
    emitted, used = feed(RangeCursor("s", 7, 8, fail_on_data_loss=True), [7, 8, 9])
    assert emitted == [7] and used == 1
    assert RangeCursor("s", 8, 8, fail_on_data_loss=True).done


def test_lost_range() -> None:
    assert lost_range(0, None) is None  # empty stream
    assert lost_range(0, 0) is None
    assert lost_range(99, 100) is None  # 99 opens the first kept segment
    assert lost_range(98, 100) == (98, 99)
    assert lost_range(500, 100) is None


# -- maxOffsetsPerTrigger -------------------------------------------------------------------


def test_cap_by_backlog_shares_the_limit() -> None:
    start = {"a": 0, "b": 0, "c": 100}
    latest = {"a": 3000, "b": 1000, "c": 100}
    capped = cap_by_backlog(start, latest, 400)
    assert capped == {"a": 300, "b": 100, "c": 100}
    assert cap_by_backlog(start, latest, 10_000) == latest
    # Every stream behind moves when the limit allows, and the total is exact.
    capped = cap_by_backlog({"a": 0, "b": 0}, {"a": 1_000_000, "b": 1}, 2)
    assert capped == {"a": 1, "b": 1}
    for limit in (1, 7, 333, 3999):
        capped = cap_by_backlog(start, latest, limit)
        assert sum(capped[s] - start[s] for s in start) == limit
        assert all(start[s] <= capped[s] <= latest[s] for s in start)


# -- the planner, with a fake probe --------------------------------------------------------


class FakeStreams:
    """Streams as probes see them: (first kept, tail) per stream, None for empty."""

    def __init__(self, state: dict[str, tuple[int | None, int | None]]) -> None:
        self.state = state
        self.calls: list[dict[str, Any]] = []

    def __call__(self, connection: Any, streams: Any, **kwargs: Any) -> dict[str, ProbeResult]:
        self.calls.append(kwargs)
        result = {}
        for s in streams:
            first, tail = self.state[s]
            if kwargs.get("timestamp") is not None:
                first = tail  # as if only the last message was written after the timestamp
            result[s] = ProbeResult(
                first=first if kwargs.get("firsts", True) else None,
                tail=tail if kwargs.get("tails", True) else None,
            )
        return result


def planner(fake: FakeStreams, **options: str) -> StreamsPlanner:
    settings = StreamsReaderSettings.from_options({"streams": ",".join(fake.state), **options})
    return StreamsPlanner(ConnectionSettings(), settings, probe=fake)


def test_planner_initial_offsets() -> None:
    fake = FakeStreams({"a": (0, 99), "b": (5000, 9999), "c": (None, None)})
    assert planner(fake).initial_offsets() == {"a": 0, "b": 5000, "c": 0}
    assert planner(fake, startingOffsets="latest").initial_offsets() == {
        "a": 100,
        "b": 10000,
        "c": 0,
    }
    assert planner(fake, startingOffsets='{"a": 42}').initial_offsets() == {
        "a": 42,
        "b": 5000,
        "c": 0,
    }
    assert planner(fake, startingOffsets="timestamp=1700000000").initial_offsets() == {
        "a": 99,
        "b": 9999,
        "c": 0,
    }
    assert fake.calls[-1]["timestamp"] == 1_700_000_000


def test_planner_batch_ends_never_pass_the_tail() -> None:
    fake = FakeStreams({"a": (0, 99), "b": (0, 9)})
    p = planner(fake, endingOffsets='{"a": 50, "b": 500}')
    assert p.ending_offsets() == {"a": 50, "b": 10}


def test_planner_micro_batches_with_a_limit_and_available_now() -> None:
    fake = FakeStreams({"a": (0, 999), "b": (0, 99)})
    p = planner(fake, maxOffsetsPerPartition="300")
    start = p.initial_offsets()
    end = p.latest_offsets(start, 550)
    assert end == {"a": 500, "b": 50}
    ranges = p.ranges(start, end)
    assert [(r.stream, r.start, r.end) for r in ranges] == [
        ("a", 0, 300),
        ("a", 300, 500),
        ("b", 0, 50),
    ]
    # AvailableNow: the tails when it was prepared are the target, whatever comes later.
    p.prepare_available_now()
    fake.state["a"] = (0, 5000)
    end2 = p.latest_offsets(end, None)
    assert end2 == {"a": 1000, "b": 100}
    assert p.latest_offsets(end2, None) == end2  # nothing new: the query ends


def test_planner_never_goes_back_when_a_probe_finds_nothing() -> None:
    fake = FakeStreams({"a": (0, 99)})
    p = planner(fake)
    assert p.latest_offsets({"a": 0}, None) == {"a": 100}
    fake.state["a"] = (None, None)  # the probe timed out under load
    assert p.latest_offsets({"a": 100}, None) == {"a": 100}


def test_planner_data_loss() -> None:
    fake = FakeStreams({"a": (1000, 1999), "b": (0, 99)})
    p = planner(fake)
    lost = r"'a'.*0\.\.998.*first offset the stream still has is 1000"
    with pytest.raises(DataLossError, match=lost):
        p.ranges({"a": 0, "b": 0}, {"a": 2000, "b": 100})
    # A start on the kept segment's opening entry lost nothing.
    assert p.ranges({"a": 999, "b": 0}, {"a": 2000, "b": 100})[0] == StreamRange("a", 999, 2000)
    lenient = planner(fake, failOnDataLoss="false")
    assert lenient.ranges({"a": 0, "b": 0}, {"a": 2000, "b": 100})[0] == StreamRange(
        "a", 1000, 2000
    )


def test_planner_is_picklable_and_a_new_stream_starts_at_its_first_kept_offset() -> None:
    fake = FakeStreams({"a": (0, 9), "b": (40, 49)})
    p = pickle.loads(pickle.dumps(planner(fake)))
    p._probe_fn = fake
    # The checkpoint knows only "a" (the query was started with fewer streams).
    assert p.latest_offsets({"a": 5}, None) == {"a": 10, "b": 50}
    assert p.ranges({"a": 5}, {"a": 10, "b": 50}) == [
        StreamRange("a", 5, 10),
        StreamRange("b", 40, 50),
    ]


# -- routing -----------------------------------------------------------------------------


def test_key_routing_is_crc32_and_stable() -> None:
    assert partition_of_key("order-17", 4) == zlib.crc32(b"order-17") % 4
    assert partition_of_key(b"order-17", 4) == partition_of_key("order-17", 4)
    counts = [0] * 4
    for i in range(20_000):
        counts[partition_of_key(f"key-{i}", 4)] += 1
    assert all(4500 < c < 5500 for c in counts)


def test_route() -> None:
    streams = ["s-0", "s-1", "s-2"]
    keys = ["a", None, "b", None]
    named = [None, None, None, "elsewhere"]
    targets = route(streams, keys, named, 4, task_partition=4)
    assert targets[0] == streams[zlib.crc32(b"a") % 3]
    assert targets[1] == "s-1"  # no key: the Spark partition's stream (4 % 3)
    assert targets[2] == streams[zlib.crc32(b"b") % 3]
    assert targets[3] == "elsewhere"
    assert route(streams, None, None, 2, task_partition=0) == ["s-0", "s-0"]


def test_stream_columns() -> None:
    from stomp_proto.spark._streams._writer import StreamColumns, plan_stream_columns

    settings = StreamsWriterSettings.from_options({"streams": "a"})
    assert plan_stream_columns(
        [("body", "binary"), ("key", "string"), ("other", "bigint")], settings
    ) == StreamColumns(body="body", key="key", stream=None, headers=None)
    # Kafka's sink takes 'value' (and 'key', 'headers'): so does this one.
    assert plan_stream_columns([("value", "binary"), ("key", "binary")], settings) == (
        StreamColumns(body="value", key="key", stream=None, headers=None)
    )
    with pytest.raises(ValueError, match="needs a 'body' column"):
        plan_stream_columns([("payload", "binary")], settings)
    with pytest.raises(ValueError, match="headers column"):
        plan_stream_columns([("body", "string"), ("headers", "string")], settings)


# -- a range read that loses its connection -------------------------------------------------


def test_range_read_resumes_after_the_last_offset_received(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stomp_proto import Error, Message
    from stomp_proto._client._errors import BrokerError
    from stomp_proto.spark._streams import _link

    begins: list[int] = []

    def fake_read_from(
        settings: Any, stream: str, begin: int, cursor: RangeCursor, *rest: Any
    ) -> Any:
        begins.append(begin)
        for offset in range(begin, 100):
            if offset == 30 and len(begins) == 1:
                raise BrokerError(Error(message="Processing error"))
            message = Message(f"/amq/queue/{stream}", f"m{offset}", subscription="range")
            if cursor.take(offset):
                yield [(offset, message)]
            if cursor.done:
                return

    monkeypatch.setattr(_link, "_read_from", fake_read_from)
    got = [
        offset
        for chunk in _link.read_range(
            ConnectionSettings(), StreamRange("s", 10, 50), prefetch=10, read_timeout=1.0,
            fail_on_data_loss=True,
        )
        for offset, _ in chunk
    ]  # fmt: skip
    assert got == list(range(10, 50))
    assert begins == [10, 30]

    def missing(*args: Any) -> Any:
        raise BrokerError(Error(message="not_found", body=b"NOT_FOUND - no queue 's'"))
        yield  # a generator, as the real one

    monkeypatch.setattr(_link, "_read_from", missing)
    with pytest.raises(_link.MissingStreamError, match="'s' does not exist"):
        list(_link.read_range(ConnectionSettings(), StreamRange("s", 0, 5), prefetch=10,
                                    read_timeout=1.0, fail_on_data_loss=True))  # fmt: skip


def test_planner_probes_again_when_a_stream_with_messages_looks_empty() -> None:
    fake = FakeStreams({"a": (1000, 1999), "b": (None, None)})
    slow = {"first": 1}  # the first probe of "a" times out before its first message

    def probe(connection: Any, streams: Any, **kwargs: Any) -> dict[str, ProbeResult]:
        found = fake(connection, streams, **kwargs)
        if slow["first"] and "a" in found:
            slow["first"] -= 1
            found["a"] = ProbeResult(first=None, tail=found["a"].tail)
        return found

    p = planner(fake)
    p._probe_fn = probe
    # Without the second look "a" would seem to keep everything and the loss go unseen.
    with pytest.raises(DataLossError, match="'a'"):
        p.ranges({"a": 0, "b": 0}, p.latest())
    timeouts = [call["timeout"] for call in fake.calls]
    assert timeouts == [0.25, 1.0]  # the empty stream "b" is not probed again


def test_ack_frames_of_each_version() -> None:
    from stomp_proto import Frame
    from stomp_proto.spark._streams._link import _ack_frame

    message = Frame(
        "MESSAGE",
        (("subscription", "range"), ("message-id", "m-7"), ("ack", "a-7"), ("ack", "other")),
        b"",
    )
    assert _ack_frame("1.2", message) == Frame("ACK", (("id", "a-7"),))
    assert _ack_frame("1.1", message) == Frame(
        "ACK", (("subscription", "range"), ("message-id", "m-7"))
    )
    assert _ack_frame("1.0", message) == Frame("ACK", (("message-id", "m-7"),))


# -- progress and lag ----------------------------------------------------------------------


def test_the_latest_offset_reported_is_the_tails_the_last_probe_found() -> None:
    fake = FakeStreams({"a": (0, 99), "b": (None, None)})
    p = planner(fake, maxOffsetsPerTrigger="10")
    assert p.reported_latest() == {"a": 0, "b": 0}  # nothing probed yet
    calls = len(fake.calls)
    assert p.latest_offsets({"a": 0, "b": 0}, 10) == {"a": 10, "b": 0}
    assert p.reported_latest() == {"a": 100, "b": 0}  # the tails, not the capped end
    assert len(fake.calls) == calls + 1  # reporting does not probe again


def test_offsets_behind_latest_from_a_progress() -> None:
    import json

    from stomp_proto.spark import offsets_behind_latest

    progress = {
        "batchId": 1,
        "sources": [
            {
                "description": "PythonMicroBatchStream",
                "startOffset": {"o-0": 5, "o-1": 5},
                "endOffset": {"o-0": 9, "o-1": 11},
                "latestOffset": {"o-0": 18, "o-1": 22},
            },
            # The stomp source: a count, no latest offset.
            {"endOffset": '{"offset": 40}', "latestOffset": None},
        ],
    }
    assert offsets_behind_latest(progress) == {"o-0": 9, "o-1": 11}

    text = json.dumps({"sources": [{"endOffset": '{"o-0": 18}', "latestOffset": '{"o-0": 18}'}]})

    class Progress:  # what pyspark's StreamingQueryProgress offers: its JSON text
        json = text

    assert offsets_behind_latest(Progress()) == {"o-0": 0}
    assert offsets_behind_latest({"sources": []}) == {}
    with pytest.raises(TypeError, match="lastProgress"):
        offsets_behind_latest(None)


# -- Kafka's starting forms (milliseconds) -------------------------------------------------


def test_kafkas_starting_timestamps_are_milliseconds() -> None:
    def starting(**options: str) -> Any:
        return StreamsReaderSettings.from_options(
            {"stream": "o", "partitions": "2", **options}
        ).starting

    assert starting(startingTimestamp="1767225600999").timestamp == 1767225600
    assert starting(startingTimestamp="1767225600999").kind == "timestamp"
    # startingTimestamp wins, as in Kafka's source.
    assert starting(startingTimestamp="5000", startingOffsets="latest").timestamp == 5
    nested = starting(startingOffsetsByTimestamp='{"o": {"0": 7000, "1": 9999}}')
    assert (nested.kind, dict(nested.timestamps), nested.default) == (
        "timestamps",
        {"o-0": 7, "o-1": 9},
        "earliest",
    )
    flat = starting(startingOffsetsByTimestamp='{"o-1": 3000}', startingOffsets="latest")
    assert (dict(flat.timestamps), flat.default) == ({"o-1": 3}, "latest")
    for options, words in [
        ({"startingTimestamp": "yesterday"}, "'startingTimestamp' must be milliseconds"),
        ({"startingOffsetsByTimestamp": "{"}, "'startingOffsetsByTimestamp' must be a JSON"),
        ({"startingOffsetsByTimestamp": '{"o": {"5": 1}}'}, "'o-5', which is not read"),
        ({"startingOffsetsByTimestamp": '{"o-0": -1}'}, "not -1"),
        (
            {"startingOffsetsByTimestamp": '{"o-0": 1}', "startingOffsets": '{"o-1": 0}'},
            "earliest or latest",
        ),
    ]:
        with pytest.raises(ValueError, match=words):
            starting(**options)


def test_planner_starts_each_stream_at_its_own_time() -> None:
    fake = FakeStreams({"a": (0, 99), "b": (0, 49), "c": (10, 19)})
    p = planner(fake, startingOffsetsByTimestamp='{"a": 1000, "b": 2000}', startingOffsets="latest")
    # FakeStreams answers a timestamp probe with the tail (only the last message is newer).
    assert p.initial_offsets() == {"a": 99, "b": 49, "c": 20}
    timed = [call["timestamp"] for call in fake.calls if call.get("timestamp") is not None]
    assert timed == [1, 2]


# -- partition discovery ---------------------------------------------------------------------


class GrowingStreams(FakeStreams):
    """FakeStreams where a stream not (yet) in ``state`` does not exist on the broker."""

    def __call__(self, connection: Any, streams: Any, **kwargs: Any) -> dict[str, ProbeResult]:
        from stomp_proto.spark._streams._link import MissingStreamError

        missing = [s for s in streams if s not in self.state]
        if missing:
            raise MissingStreamError(f"stream {missing[0]!r} does not exist on the broker")
        return super().__call__(connection, streams, **kwargs)


def test_discover_partitions_reads_a_new_stream_from_its_first_offset() -> None:
    fake = GrowingStreams({"o-0": (0, 9)})
    settings = StreamsReaderSettings.from_options({"stream": "o", "discoverPartitions": "true"})
    p = StreamsPlanner(ConnectionSettings(), settings, probe=fake)
    assert p.latest_offsets({"o-0": 0}, None) == {"o-0": 10}
    fake.state["o-1"] = (0, 4)
    fake.state["o-2"] = (3, 7)  # retention already took its start
    end = p.latest_offsets({"o-0": 10}, None)
    assert end == {"o-0": 10, "o-1": 5, "o-2": 8}
    assert p.ranges({"o-0": 10}, end) == [StreamRange("o-1", 0, 5), StreamRange("o-2", 3, 8)]
    assert p.reported_latest() == {"o-0": 10, "o-1": 5, "o-2": 8}
    # After a restart, a planner that knows only o-0 takes the checkpoint's streams back.
    again = StreamsPlanner(ConnectionSettings(), settings, probe=fake)
    assert again.ranges({"o-0": 10, "o-1": 0, "o-2": 3}, end) == [
        StreamRange("o-1", 0, 5),
        StreamRange("o-2", 3, 8),
    ]
    assert settings.partition_of("o-2") == 2
    # Without the option, nothing new is read.
    plain = StreamsPlanner(
        ConnectionSettings(), StreamsReaderSettings.from_options({"stream": "o"}), probe=fake
    )
    assert plain.latest_offsets({"o-0": 0}, None) == {"o-0": 10}
    with pytest.raises(ValueError, match=r"'discoverPartitions'.*'stream'"):
        StreamsReaderSettings.from_options({"streams": "a,b", "discoverPartitions": "true"})


# -- Kafka's offset JSON ---------------------------------------------------------------------


def test_kafkas_offset_json_with_earliest_and_latest_sentinels() -> None:
    # Kafka's form: {"<topic>": {"<partition>": offset}}, -2 earliest, -1 latest; here a
    # topic is the base name of the streams <stream>-0 .. <stream>-N.
    fake = FakeStreams({"o-0": (100, 199), "o-1": (0, 49), "o-2": (7, 9)})

    def kafka_planner(**options: str) -> StreamsPlanner:
        settings = StreamsReaderSettings.from_options({"stream": "o", "partitions": "3", **options})
        return StreamsPlanner(ConnectionSettings(), settings, probe=fake)

    start = kafka_planner(startingOffsets='{"o": {"0": 150, "1": -2, "2": -1}}')
    assert start.initial_offsets() == {"o-0": 150, "o-1": 0, "o-2": 10}
    # Streams the JSON leaves out start at the earliest offset, as Kafka's do.
    assert kafka_planner(startingOffsets='{"o": {"0": 120}}').initial_offsets() == {
        "o-0": 120, "o-1": 0, "o-2": 7,
    }  # fmt: skip
    # Today's flat form still works, with the sentinels too.
    assert kafka_planner(startingOffsets='{"o-0": -1, "o-1": 3}').initial_offsets() == {
        "o-0": 200, "o-1": 3, "o-2": 7,
    }  # fmt: skip
    end = kafka_planner(endingOffsets='{"o": {"0": 180, "1": -1}}')
    assert end.ending_offsets() == {"o-0": 180, "o-1": 50, "o-2": 10}
    for options, words in [
        # -2 (earliest) is no end, as in Kafka.
        ({"endingOffsets": '{"o": {"0": -2}}'}, "'endingOffsets'.*-1 \\(latest\\); not -2"),
        ({"startingOffsets": '{"o": {"3": 5}}'}, "'o-3', which is not read"),
        ({"startingOffsets": '{"o": {"0": "5"}}'}, "not '5'"),
    ]:
        with pytest.raises(ValueError, match=words):
            kafka_planner(**options)


# -- the sink's routing ------------------------------------------------------------------------


def test_the_stream_option_wins_over_a_stream_column_as_kafkas_topic_option_does() -> None:
    from stomp_proto.spark._streams._writer import plan_stream_columns

    columns = [("body", "binary"), ("key", "string"), ("stream", "string")]
    # A DataFrame read from stream 'orders' carries stream = 'orders-N'; written with
    # stream=copy, every row goes to copy-N, never back to its source.
    copy = StreamsWriterSettings.from_options({"stream": "copy", "partitions": "2"})
    planned = plan_stream_columns(columns, copy)
    assert planned.stream is None and planned.key == "key"
    targets = route(copy.streams, ["a", "b", None], None, 3, task_partition=1)
    assert targets == [f"copy-{zlib.crc32(b'a') % 2}", f"copy-{zlib.crc32(b'b') % 2}", "copy-1"]
    # Without the option, the column routes each row.
    by_column = StreamsWriterSettings.from_options({})
    assert by_column.streams == ()
    assert plan_stream_columns(columns, by_column).stream == "stream"
    assert route((), ["a", None], ["x-1", "y-0"], 2, task_partition=0) == ["x-1", "y-0"]
    with pytest.raises(ValueError, match=r"row 1 .* null 'stream' column"):
        route((), None, ["x-1", None], 2, task_partition=0)
    with pytest.raises(ValueError, match=r"needs the 'stream' .* option, or a 'stream' column"):
        plan_stream_columns([("body", "binary")], by_column)


# -- options that are not silent ----------------------------------------------------------------


def test_kafka_options_are_explained_and_sparks_own_options_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from stomp_proto.spark._options import option_names, warn_unknown_options
    from stomp_proto.spark._streams._offsets import KAFKA_OPTIONS

    known = (*option_names()["connection"], *streams_option_names()["streams-read"])
    options = {
        "includeHeaders": "true", "minPartitions": "8", "queryName": "eo",
        "checkpointLocation": "/tmp/x", "path": "/tmp/y", "kafka.group.id": "g",
        "maxOffsetPerTrigger": "5", "includeHeader": "x",
    }  # fmt: skip
    with caplog.at_level("WARNING", logger="stomp_proto.spark"):
        warn_unknown_options("test-kafka-words", options, known, KAFKA_OPTIONS)
        warn_unknown_options("test-kafka-words", options, known, KAFKA_OPTIONS)  # once only
    messages = sorted(r.getMessage() for r in caplog.records)
    assert len(messages) == 5, messages
    text = "\n".join(messages)
    for spark_option in ("queryName", "checkpointLocation", "'path'"):
        assert spark_option not in text
    assert "'includeHeaders' is ignored: headers are always read" in text
    assert "'minPartitions' is ignored: not applicable" in text
    assert "'kafka.group.id' is ignored: Kafka client settings have no meaning" in text
    # A misspelling gets the option it can only mean; a name that only looks alike, none.
    assert "'maxOffsetPerTrigger' is ignored; did you mean 'maxOffsetsPerTrigger'?" in text
    assert "unknown option 'includeHeader' is ignored\n" in text + "\n"
    assert "did you mean 'partitions'" not in text and "'connectHeaders'" not in text


def test_a_timestamp_that_can_only_be_seconds_gets_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="stomp_proto.spark"):
        settings = StreamsReaderSettings.from_options(
            {"stream": "o", "startingTimestamp": "1767225600"}
        )
        StreamsReaderSettings.from_options({"stream": "o", "startingTimestamp": "1767225600000"})
    assert settings.starting.timestamp == 1767225  # read as Kafka reads it: milliseconds
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "'startingTimestamp' is 1767225600 ms since the Unix epoch" in warning
    assert "1970-01-21" in warning and "2026-01-01 00:00:00 UTC" in warning
    assert "give 1767225600000" in warning


# -- riding out a broker restart --------------------------------------------------------------


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_broker_that_stays_down_fails_the_call_past_retry_timeout_naming_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import time

    from stomp_proto.spark._retry import BrokerUnavailableError
    from stomp_proto.spark._streams._link import probe_streams

    port = _closed_port()  # nothing listens: every connect is refused, as while RabbitMQ is down
    settings = ConnectionSettings.from_options({"port": str(port), "retryTimeout": "0.8"})
    began = time.monotonic()
    with (
        caplog.at_level("WARNING", logger="stomp_proto.spark"),
        pytest.raises(BrokerUnavailableError) as failure,
    ):
        probe_streams(settings, ["s-0"])
    took = time.monotonic() - began
    assert 0.8 <= took < 5
    assert f"the broker at 127.0.0.1:{port} failed for" in str(failure.value)
    assert "retryTimeout=0.8 s" in str(failure.value) and "refused" in str(failure.value)
    retries = [r.getMessage() for r in caplog.records]
    assert len(retries) >= 3  # 0.1, 0.2, 0.4 s ... apart
    assert all(f"probing s-0: broker 127.0.0.1:{port}:" in m for m in retries)
    assert all("refused" in m for m in retries)
    # retryTimeout=0: no retry at all, the connection's own error.
    with pytest.raises(ConnectionRefusedError):
        probe_streams(ConnectionSettings(port=port, retry_timeout=0), ["s-0"])


def test_what_is_retried_and_what_fails_at_once() -> None:
    from stomp_proto import Error
    from stomp_proto._client._errors import BrokerError, ConnectionLost
    from stomp_proto.spark._retry import retrying
    from stomp_proto.spark._streams._link import MissingStreamError

    not_back = MissingStreamError(
        "stream 'o-0' does not exist on the broker (the broker said: not_found: NOT_FOUND - "
        "home node 'rabbit@host' of durable queue 'o-0' in vhost '/' is down or inaccessible)"
    )
    racing = BrokerError(
        Error(message="PRECONDITION_FAILED - queue 'o-0' does not have a replica on the local node")
    )
    failures: list[BaseException] = [not_back, ConnectionLost("the broker closed the connection"),
                                      BrokenPipeError(32, "Broken pipe"), racing]  # fmt: skip

    def flaky() -> str:
        if failures:
            raise failures.pop(0)
        return "done"

    assert retrying(ConnectionSettings(), "probing o-0", flaky) == "done"
    for final in (
        BrokerError(Error(message="Access refused for user 'guest'")),
        MissingStreamError("stream 'x' does not exist on the broker (NOT_FOUND - no queue 'x')"),
        TimeoutError("offsets 0..9 did not arrive within readTimeout=1 s"),
    ):
        calls: list[int] = []

        def fails(final: BaseException = final, calls: list[int] = calls) -> None:
            calls.append(1)
            raise final

        with pytest.raises(type(final)):
            retrying(ConnectionSettings(), "probing x", fails)
        assert len(calls) == 1, final


def test_a_replayed_batch_logs_the_lag_that_its_progress_cannot_show(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("pyspark")
    from stomp_proto.spark._streams._source import StreamsStreamReader

    fake = FakeStreams({"o-0": (0, 49), "o-1": (0, 9)})
    reader = StreamsStreamReader(planner(fake))
    # After a restart Spark first replays the batch of its offset log that had not
    # committed: the reader never planned it (no latestOffset call).
    with caplog.at_level("INFO", logger="stomp_proto.spark"):
        reader.partitions({"o-0": 15, "o-1": 5}, {"o-0": 20, "o-1": 10})
    (line,) = [r.getMessage() for r in caplog.records if "replayed" in r.getMessage()]
    assert '{"o-0": 15, "o-1": 5}..{"o-0": 20, "o-1": 10} is replayed' in line
    assert 'the streams are 30 offsets behind their tails after it: {"o-0": 30, "o-1": 0}' in line
    # A batch it planned itself logs nothing (its progress has the latest offsets).
    caplog.clear()
    with caplog.at_level("INFO", logger="stomp_proto.spark"):
        end = reader.latestOffset({"o-0": 20, "o-1": 10}, None)
        reader.partitions({"o-0": 20, "o-1": 10}, end)
        reader.partitions(end, end)  # Spark's empty range after a restart
    assert not [r for r in caplog.records if "replayed" in r.getMessage()]


def test_the_lag_of_a_batch_spark_gave_no_latest_offset_is_fetched_only_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from stomp_proto.spark import _progress, offsets_behind_latest

    fetched: list[dict[str, int]] = []

    def tails_now(connection: Any, end: dict[str, int]) -> dict[str, int]:
        fetched.append(dict(end))
        return {stream: 50 for stream in end}

    monkeypatch.setattr(_progress, "_fetch_latest", tails_now)
    progress = {
        "sources": [
            # pyspark's SourceProgress holds str() of a null latest offset: "None".
            {"endOffset": {"o-0": 20}, "latestOffset": "None"},
            # The stomp source: a count, never a stream's offsets.
            {"endOffset": '{"offset": 40}', "latestOffset": None},
        ]
    }
    assert offsets_behind_latest(progress) == {} and not fetched
    assert offsets_behind_latest(progress, {"port": "61613"}) == {"o-0": 30}
    assert fetched == [{"o-0": 20}]


def test_an_available_now_restart_whose_first_probe_timed_out_still_reads_the_backlog() -> None:
    fake = FakeStreams({"a": (0, 899), "b": (0, 99)})
    slow = {"a": 1}  # the first probe of "a" finds nothing in time (a loaded broker)

    def probe(connection: Any, streams: Any, **kwargs: Any) -> dict[str, ProbeResult]:
        found = fake(connection, streams, **kwargs)
        if slow["a"] and "a" in found:
            slow["a"] -= 1
            found["a"] = ProbeResult(first=None, tail=None)
        return found

    # A restart from a checkpoint at a=500, b=100: the planner is new and knows no tails
    # when Spark prepares the availableNow target, before it gives the start offsets.
    p = planner(fake)
    p._probe_fn = probe
    p.prepare_available_now()
    # "a" looked empty, yet the query stands at 500 in it: a tail never goes back, so
    # the target is probed again, and the backlog 500..899 is read.
    assert p.latest_offsets({"a": 500, "b": 100}, None) == {"a": 900, "b": 100}
