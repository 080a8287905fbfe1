"""A ``stomp-streams`` read task's fast path against the event path, on the same recorded bytes.

A read task decodes MESSAGE frames with a bare :class:`~stomp_proto.FrameDecoder`
and appends them straight into the columns of an Arrow batch
(:class:`~stomp_proto.spark._schema.StreamRows`).  Here a fake broker socket
replays a recorded RabbitMQ session to the real task code
(``read_partition``), in several splittings of the bytes, and the rows must
be the ones the library's event path gives for the same bytes: a
:class:`~stomp_proto.ClientConnection`'s ``Message`` events, whose headers are
read as STOMP reads them (1.2 §Repeated Header Entries: the first wins).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

pa = pytest.importorskip("pyarrow")

import stomp_proto  # noqa: E402
from stomp_proto import (  # noqa: E402
    ClientConnection,
    Connect,
    Frame,
    FrameDecoder,
    FrameEncoder,
    Message,
)
from stomp_proto._client._errors import ConnectionLost  # noqa: E402
from stomp_proto.spark import _schema  # noqa: E402
from stomp_proto.spark._options import ConnectionSettings  # noqa: E402
from stomp_proto.spark._streams import _link, _messages  # noqa: E402
from stomp_proto.spark._streams._offsets import (  # noqa: E402
    DataLossError,
    RangeCursor,
    StreamRange,
    StreamsReaderSettings,
)
from stomp_proto.spark._streams._reader import read_partition  # noqa: E402

STREAM = "orders-0"
OMITTED = _schema.STREAM_OMITTED_HEADERS


def message(
    offset: int,
    headers: list[tuple[str, str]],
    body: bytes,
    after: tuple[tuple[str, str], ...] = (),
) -> Frame:
    """A MESSAGE as RabbitMQ sends one from a stream (its header order: the message's
    own headers sorted, so ``after`` holds those that sort after x-stream-offset)."""
    return Frame(
        "MESSAGE",
        (
            ("subscription", "range"),
            ("destination", f"/queue/{STREAM}"),
            ("message-id", f"T_range@@session-x@@{offset + 1}"),
            ("redelivered", "false"),
            ("ack", f"T_range@@session-x@@{offset + 1}"),
            *headers,
            ("x-stream-offset", str(offset)),
            *after,
        ),
        body,
    )


def recorded_messages() -> list[Frame]:
    frames = [
        message(0, [("x-key", "k0"), ("x-row-id", "r0"), ("x-timestamp", "1767225600123")], b"a"),
        # Repeated names: the first wins, in the headers column and for the key.
        message(1, [("x-key", "first"), ("x-key", "second"), ("note", "a"), ("note", "b")], b""),
        # Escapes (1.2 §Value Encoding): colon, newline, CR and backslash in names and values.
        message(2, [("odd:name", "a:b\nc\rd\\e"), ("x-row-id", "r:2")], b"x"),
        # A binary body with NULs and every byte value (content-length frames it).
        message(3, [("content-type", "application/octet-stream")], bytes(range(256)) * 3),
        # No key, no row id, non-ASCII text.
        message(4, [("greeting", "grüße, 世界"), ("x-timestamp", "soon")], "ünïcode".encode()),
        # A header that shares its name with an omitted one, repeated.
        message(5, [("x-key", "k5"), ("destination", "ignored")], b"last"),
    ]
    # Enough plain messages that the task flushes more than one batch (batchRows=4).
    frames += [
        message(
            i,
            [("x-key", f"k{i}"), ("x-row-id", f"r{i}")],
            b"y" * i,
            (("x-timestamp", f"17672256001{i:02d}"),),
        )
        for i in range(6, 11)
    ]
    return frames


def recorded_session() -> tuple[bytes, bytes]:
    """The broker's bytes: the CONNECTED, then the range's MESSAGEs."""
    encoder = FrameEncoder("1.2")
    connected = encoder.encode(
        Frame("CONNECTED", (("version", "1.2"), ("heart-beat", "0,0"), ("server", "fake")))
    )
    return connected, b"".join(encoder.encode(f) for f in recorded_messages())


#: The broker's answer to the task's closing DISCONNECT.
GOODBYE = FrameEncoder("1.2").encode(Frame("RECEIPT", (("receipt-id", "bye"),)))


class ReplaySocket:
    """A broker socket that replays recorded bytes in the given chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = list(chunks)
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(bytes(data))

    def recv(self, size: int) -> bytes:
        if not self.chunks:
            return b""
        chunk = self.chunks.pop(0)
        if len(chunk) > size:
            self.chunks.insert(0, chunk[size:])
            chunk = chunk[:size]
        return chunk

    def settimeout(self, timeout: float | None) -> None:
        pass

    def setsockopt(self, *args: Any) -> None:
        pass

    def close(self) -> None:
        pass


def splits(data: bytes) -> Iterator[tuple[str, list[bytes]]]:
    yield "whole", [data]
    yield "bytewise", [data[i : i + 1] for i in range(len(data))]
    for size in (7, 100, 333):
        yield f"chunks of {size}", [data[i : i + size] for i in range(0, len(data), size)]
    # A frame split inside its binary body, another inside its head.
    body_at = data.index(bytes(range(256))) + 100
    head_at = data.index(b"greeting")
    yield "split in a body and a head", [data[:body_at], data[body_at:head_at], data[head_at:]]


def fast_rows(monkeypatch: pytest.MonkeyPatch, chunks: list[bytes]) -> list[dict[str, Any]]:
    connected, _ = recorded_session()
    sock = ReplaySocket([connected, *chunks, GOODBYE])
    monkeypatch.setattr(ConnectionSettings, "open_socket", lambda self: sock)
    settings = StreamsReaderSettings.from_options(
        {"streams": STREAM, "batchRows": "4", "readTimeout": "5"}
    )
    batches = list(read_partition(ConnectionSettings(), settings, StreamRange(STREAM, 0, 11)))
    # Whole, it is one read and one batch; in pieces, batches of about batchRows.
    assert len(batches) == 1 if len(chunks) == 1 else len(batches) > 1
    assert all(b.schema == _schema.STREAMS_ARROW_SCHEMA for b in batches)
    return [row for b in batches for row in b.to_pylist()]


def event_rows(data: bytes) -> list[dict[str, Any]]:
    """The same bytes through the event path: a ClientConnection's Message events."""
    connected, _ = recorded_session()
    conn = ClientConnection()
    conn.send(Connect(host="/"))
    conn.receive_data(connected)
    conn.next_event()
    conn.receive_data(data)
    rows = []
    while (event := conn.next_event()) is not None:
        if not isinstance(event, Message):
            continue
        raw = list(event.headers)
        if event.content_type is not None:
            raw.append(("content-type", event.content_type))
        first: dict[str, str] = {}
        for name, value in raw:
            first.setdefault(name, value)
        stamp = first.get("x-timestamp")
        rows.append(
            {
                "stream": STREAM,
                "offset": int(first["x-stream-offset"]),
                "headers": {k: v for k, v in first.items() if k not in OMITTED},
                "body": event.body,
                "key": first.get("x-key"),
                "row_id": first.get("x-row-id"),
                "partition": 0,
                "timestamp": (
                    datetime.fromtimestamp(int(stamp) / 1000, UTC)
                    if stamp is not None and stamp.isdigit()
                    else None
                ),
                "header_list": by_name([(k, v) for k, v in raw if k not in OMITTED]),
            }
        )
    return rows


def by_name(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """Each name's values in wire order (the event path keeps content-type apart)."""
    found: dict[str, list[str]] = {}
    for name, value in pairs:
        found.setdefault(name, []).append(value)
    return found


def test_the_fast_path_gives_the_event_paths_rows_however_the_bytes_are_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, data = recorded_session()
    expected = event_rows(data)
    assert len(expected) == 11
    assert expected[1]["key"] == "first" and expected[1]["headers"]["note"] == "a"
    assert expected[2]["headers"]["odd:name"] == "a:b\nc\rd\\e"
    assert expected[1]["header_list"]["note"] == ["a", "b"]
    assert expected[0]["timestamp"] is not None and expected[4]["timestamp"] is None
    for how, chunks in splits(data):
        got = fast_rows(monkeypatch, chunks)
        for row in got:
            assert row.pop("received_at") is not None
            row["headers"] = dict(row["headers"])
            row["header_list"] = by_name([(h["key"], h["value"]) for h in row["header_list"]])
        assert got == expected, how


def test_headers_keep_the_first_of_a_name_and_header_list_keeps_every_one() -> None:
    rows = _schema.StreamRows(STREAM, "x-key", "x-row-id", partition=3, key_binary=True)
    plain, repeated = recorded_messages()[0], recorded_messages()[1]
    # header_list shares the headers arrays until a row repeats a name, mid-batch here.
    rows.add([(0, plain)], 7)
    rows.add([(1, repeated), (2, plain)], 8)
    batch = rows.take()
    assert batch.schema == _schema.streams_arrow_schema(True)
    first, second, third = batch.to_pylist()
    assert second["headers"] == [("redelivered", "false"), ("x-key", "first"), ("note", "a")]
    assert [(h["key"], h["value"]) for h in second["header_list"]] == [
        ("redelivered", "false"),
        ("x-key", "first"),
        ("x-key", "second"),
        ("note", "a"),
        ("note", "b"),
    ]
    for row in (first, third):
        assert [(h["key"], h["value"]) for h in row["header_list"]] == row["headers"]
    assert (first["key"], second["key"], first["partition"]) == (b"k0", b"first", 3)
    assert first["timestamp"] == datetime(2026, 1, 1, 0, 0, 0, 123000, UTC)
    assert len(rows) == 0  # take() starts a new batch


def test_header_layouts_are_bounded() -> None:
    rows = _schema.StreamRows(STREAM, "x-key", "x-row-id")
    frames = [
        (i, Frame("MESSAGE", ((f"h{i}", "v"), ("x-stream-offset", str(i)))))
        for i in range(_schema.MAX_LAYOUTS + 50)
    ]
    rows.add(frames, 1)
    assert len(rows._layouts) == _schema.MAX_LAYOUTS
    batch = rows.take()
    assert batch.column("headers").to_pylist()[-1] == [(f"h{len(frames) - 1}", "v")]


def test_schema_kafka_gives_the_kafka_sources_columns_from_the_same_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, data = recorded_session()
    expected = event_rows(data)
    connected, _ = recorded_session()
    sock = ReplaySocket([connected, data, GOODBYE])
    monkeypatch.setattr(ConnectionSettings, "open_socket", lambda self: sock)
    # Streams orders-0 .. orders-N: Kafka's topic "orders", partition N.
    settings = StreamsReaderSettings.from_options(
        {"stream": "orders", "partitions": "1", "schema": "kafka", "readTimeout": "5"}
    )
    batches = list(read_partition(ConnectionSettings(), settings, StreamRange(STREAM, 0, 11)))
    assert all(b.schema == _schema.KAFKA_ARROW_SCHEMA for b in batches)
    # Spark's Kafka source: key, value, topic, partition, offset, timestamp, timestampType,
    # headers as (string, binary) pairs, in this order.
    assert _schema.KAFKA_ARROW_SCHEMA.names == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    got = [row for b in batches for row in b.to_pylist()]
    assert len(got) == len(expected)
    for row, want in zip(got, expected, strict=True):
        assert row["key"] == (None if want["key"] is None else want["key"].encode())
        assert row["value"] == want["body"]
        assert (row["topic"], row["partition"], row["offset"]) == ("orders", 0, want["offset"])
        assert row["timestamp"] == want["timestamp"]
        # Kafka's types: 0 is CreateTime (the sink's stamp), -1 no timestamp at all.
        assert row["timestampType"] == (-1 if want["timestamp"] is None else 0)
        pairs = [(h["key"], h["value"]) for h in row["headers"]]
        assert all(isinstance(v, bytes) for _, v in pairs)
        assert by_name([(k, v.decode()) for k, v in pairs]) == want["header_list"]


needs_native = pytest.mark.skipif(
    stomp_proto.BUILD != "accelerated", reason="the native fast path is not loaded"
)


def collected(
    collect: Any, chunks: list[bytes], start: int, end: int, *, check_loss: bool = False
) -> list[Any]:
    """What ``collect`` gives for each chunk of a read of ``[start, end)``, as reprs."""
    decoder = FrameDecoder("1.2")
    cursor = RangeCursor(STREAM, start, end, fail_on_data_loss=check_loss)
    trace: list[Any] = []
    for chunk in chunks:
        decoder.receive_data(chunk)
        while True:
            got: list[tuple[int, Frame]] = []
            answer = collect(decoder, cursor, got, STREAM)
            trace.append(repr((answer, got, cursor.done, cursor.last, cursor.seen)))
            if answer[2] is None:
                break
    return trace


@needs_native
def test_the_native_message_step_sorts_frames_as_the_pure_one() -> None:
    _, data = recorded_session()
    encoder = FrameEncoder("1.2")
    # A heart-beat, and an ERROR that the step hands back to its caller.
    error = encoder.encode(Frame("ERROR", (("message", "gone"),)))
    between = data.index(b"\x00MESSAGE") + 1
    stream = data[:between] + b"\n" + data[between:] + error + data
    for how, chunks in splits(stream):
        # The whole range, one that starts late, one that ends early (then drops), one
        # that ends at its first message, and one whose start is one before the first
        # message (a segment's opening entry: no data loss).
        for start, end in ((0, 11), (3, 11), (0, 5), (0, 1), (-1, 4)):
            for check_loss in (False, True):
                native = collected(_messages.collect, chunks, start, end, check_loss=check_loss)
                pure = collected(
                    _messages.collect_messages, chunks, start, end, check_loss=check_loss
                )
                assert native == pure, (how, start, end, check_loss)


@needs_native
def test_a_range_whose_start_is_gone_fails_alike_on_both_steps() -> None:
    _, data = recorded_session()
    # The stream's first message is offset 0: a range from -5 lost its start to
    # retention (with failOnDataLoss); without the check, both take from 0 on.
    for collect in (_messages.collect, _messages.collect_messages):
        with pytest.raises(DataLossError, match="'orders-0'"):
            collected(collect, [data], -5, 11, check_loss=True)
    assert collected(_messages.collect, [data], -5, 11) == collected(
        _messages.collect_messages, [data], -5, 11
    )


@needs_native
def test_a_message_without_an_offset_fails_alike_on_both_steps() -> None:
    frame = FrameEncoder("1.2").encode(Frame("MESSAGE", (("x-key", "k"),)))
    for collect in (_messages.collect, _messages.collect_messages):
        with pytest.raises(ConnectionLost, match="from 'orders-0' has no x-stream-offset"):
            collected(collect, [frame], 0, 11)


@needs_native
def test_the_native_row_step_builds_the_pure_ones_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames = list(enumerate(recorded_messages()))
    # Calls as reads make them: layouts change within a call; a call that meets a
    # repeated name leaves the rest of it, and of the batch, to the pure code.
    calls = [frames[6:8], frames[8:9] + frames[0:1], frames[9:11], frames[2:5], frames[1:2]]
    calls += [frames[5:7], frames[0:3]]

    def batches() -> list[Any]:
        rows = _schema.StreamRows(STREAM, "x-key", "x-row-id", partition=2)
        taken = []
        for number, messages in enumerate(calls):
            rows.add(messages, 1_000 + number)
            if number in (3, 6):
                taken.append(rows.take().to_pylist())
        return taken

    native = batches()
    monkeypatch.setattr(_schema, "_native", None)
    assert native == batches()


def test_a_range_read_pauses_after_a_short_read_only_while_more_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A task faster than the broker would wake for every few messages: after a read
    # shorter than _SHORT_READ it pauses, so that the next read finds more.  Not
    # after a long read (it is behind), nor once the range is read.
    encoder = FrameEncoder("1.2")
    big = encoder.encode(message(0, [], b"b" * _link._SHORT_READ))
    small = [encoder.encode(message(i, [], b"s")) for i in (1, 2)]
    connected, _ = recorded_session()
    sock = ReplaySocket([connected, big, small[0], small[1], GOODBYE])
    monkeypatch.setattr(ConnectionSettings, "open_socket", lambda self: sock)
    pauses: list[float] = []
    monkeypatch.setattr(_link.time, "sleep", pauses.append)
    settings = StreamsReaderSettings.from_options({"streams": STREAM, "readTimeout": "5"})
    batches = list(read_partition(ConnectionSettings(), settings, StreamRange(STREAM, 0, 3)))
    assert [r["offset"] for b in batches for r in b.to_pylist()] == [0, 1, 2]
    assert pauses == [_link._READ_PAUSE]
