"""The stomp-streams sink adds no duplicate when a write task runs more than once.

Against RabbitMQ: attempts of one task driven through the writer itself (an
attempt that dies midway, its retry with the rows in another order, a third
after the task finished, two concurrent attempts as under speculative
execution), then through Spark with a task that fails after the sink sent part
of its rows and is retried (``local[2,3]``: ``spark.task.maxFailures=3``).
Every check counts the messages in the streams afterwards.

Needs RabbitMQ with the stream plugin (``scripts/start-brokers.sh rabbitmq``);
the Spark test also needs pyspark and Java 17, and runs in its own process
(``scripts/spark_sink_check.py``) because the retry count is fixed when the
SparkContext starts.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import Endpoint, in_ci, real_broker, spark_settings

from stomp_proto.spark._options import ConnectionSettings
from stomp_proto.spark._streams._guard import RowIds, guard_queue
from stomp_proto.spark._streams._link import declare_streams, probe_streams, read_range
from stomp_proto.spark._streams._offsets import StreamRange, StreamsWriterSettings
from stomp_proto.spark._streams._writer import StreamColumns, StreamsPartitionWriter

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parent.parent
CHECK = ROOT / "scripts" / "spark_sink_check.py"

Chunk = tuple[list[Any], list[Any] | None, list[Any] | None, list[Any] | None]


@pytest.fixture(scope="module")
def rabbitmq() -> Endpoint:
    return real_broker("rabbitmq")


@pytest.fixture
def connection(rabbitmq: Endpoint) -> ConnectionSettings:
    return spark_settings(rabbitmq)


def stream_contents(connection: ConnectionSettings, streams: tuple[str, ...]) -> list[Any]:
    """Every message in ``streams``, as MESSAGE frames."""
    tails = probe_streams(connection, streams, firsts=False)
    found: list[Any] = []
    for stream in streams:
        tail = tails[stream].tail
        if tail is None:
            continue
        for got in read_range(
            connection, StreamRange(stream, 0, tail + 1), prefetch=1000, read_timeout=20.0,
            fail_on_data_loss=True,
        ):  # fmt: skip
            found.extend(frame for _, frame in got)
    return found


class Task:
    """One write task's rows (with repeats) sent in chunks; can die after ``fail_after`` rows."""

    def __init__(self, rows: list[tuple[bytes, str]]) -> None:
        self.rows = rows

    def chunks(
        self, *, reverse: bool = False, fail_after: int | None = None, pause: float = 0.0
    ) -> Iterator[Chunk]:
        rows = self.rows[::-1] if reverse else self.rows
        for start in range(0, len(rows), 250):
            if fail_after is not None and start >= fail_after:
                raise RuntimeError("injected: the task dies midway")
            part = rows[start : start + 250]
            yield [b for b, _ in part], [k for _, k in part], None, None
            time.sleep(pause)


@pytest.fixture
def streams(connection: ConnectionSettings) -> Iterator[StreamsWriterSettings]:
    base = f"spark-sink-test-{uuid.uuid4().hex[:10]}"
    settings = StreamsWriterSettings.from_options({"stream": base, "partitions": "2"})
    declare_streams(connection, settings.streams, create=True)
    yield settings
    from test_spark_streams_rabbitmq import delete_queues_later

    delete_queues_later(connection.vhost or "/", base)


def writer_for(connection: ConnectionSettings, settings: StreamsWriterSettings) -> Any:
    return StreamsPartitionWriter(
        connection, settings, StreamColumns(body="body", key="key", stream=None, headers=None)
    )


def rows_of(count: int) -> list[tuple[bytes, str]]:
    # Every tenth row repeats the one before it exactly: both must arrive, once each.
    rows = [(f"row-{i}".encode(), f"k{i % 13}") for i in range(count)]
    return [rows[i - 1] if i % 10 == 9 else row for i, row in enumerate(rows)]


def test_a_retry_sends_only_what_the_failed_attempt_did_not(
    connection: ConnectionSettings, streams: StreamsWriterSettings
) -> None:
    writer = writer_for(connection, streams)
    task = Task(rows_of(3000))
    write = f"job-{uuid.uuid4().hex[:8]}"
    with pytest.raises(RuntimeError, match="injected"):
        writer.send(task.chunks(fail_after=1250), task_partition=0, row_id_prefix=write)
    first = stream_contents(connection, streams.streams)
    assert 0 < len(first) < 3000  # the failed attempt left rows behind
    # The retry gets its rows in another order (as after a shuffle): same ids all the same.
    sent = writer.send(task.chunks(reverse=True), task_partition=0, row_id_prefix=write)
    assert sum(sent.values()) == 3000
    after = stream_contents(connection, streams.streams)
    assert collections.Counter(m.body for m in after) == collections.Counter(
        b for b, _ in task.rows
    )
    ids = [m.get("x-row-id") for m in after]
    assert len(ids) == len(set(ids)) == 3000
    assert all(i.startswith(f"{write}-0-") for i in ids)
    # A third attempt after the task finished sends nothing, and says what is there.
    again = writer.send(task.chunks(), task_partition=0, row_id_prefix=write)
    assert again == sent
    assert len(stream_contents(connection, streams.streams)) == 3000


def test_without_the_guard_a_retry_duplicates(
    connection: ConnectionSettings, streams: StreamsWriterSettings
) -> None:
    """The control: the injected failure does cause duplicates when the guard is off."""
    import dataclasses

    writer = writer_for(connection, dataclasses.replace(streams, exactly_once=False))
    task = Task(rows_of(2000))
    with pytest.raises(RuntimeError, match="injected"):
        writer.send(task.chunks(fail_after=1000), task_partition=0, row_id_prefix="plain")
    writer.send(task.chunks(), task_partition=0, row_id_prefix="plain")
    assert len(stream_contents(connection, streams.streams)) > 2000


def test_two_concurrent_attempts_write_each_row_once(
    connection: ConnectionSettings, streams: StreamsWriterSettings
) -> None:
    """Speculative execution, simulated: Spark's local mode never speculates."""
    writer = writer_for(connection, streams)
    task = Task(rows_of(4000))
    write = f"spec-{uuid.uuid4().hex[:8]}"
    results: dict[str, Any] = {}

    def attempt(name: str, pause: float) -> None:
        try:
            results[name] = writer.send(
                task.chunks(pause=pause), task_partition=1, row_id_prefix=write
            )
        except BaseException as exc:  # reported below
            results[name] = exc

    slow = threading.Thread(target=attempt, args=("slow", 0.05))
    slow.start()
    time.sleep(0.3)  # the slow attempt holds the task's lock and has sent some rows
    fast = threading.Thread(target=attempt, args=("fast", 0.0))
    fast.start()
    slow.join(120)
    fast.join(120)
    assert isinstance(results["slow"], dict), results
    assert results["fast"] == results["slow"]
    found = stream_contents(connection, streams.streams)
    assert len(found) == 4000
    assert len({m.get("x-row-id") for m in found}) == 4000


def test_row_ids_follow_the_rows_not_their_order() -> None:
    rows = [("s-0", "k", b"a", []), ("s-0", "k", b"b", []), ("s-0", "k", b"a", [])]
    rows += [("s-1", "k", b"a", []), ("s-0", None, b"a", []), ("s-0", "k", b"a", [("h", "1")])]
    first, second = RowIds("w-0-"), RowIds("w-0-")
    ids = [first.next(*row) for row in rows]
    again = [second.next(*row) for row in reversed(rows)]
    assert sorted(ids) == sorted(again)
    assert len(set(ids)) == len(rows)  # every field counts, and a repeat gets a suffix
    assert ids[2] == f"{ids[0]}.1" and all(i.startswith("w-0-") for i in ids)


def test_each_task_has_its_own_journal() -> None:
    assert guard_queue("q-7", 3) == "stomp-sink-guard.q-7.3"
    assert guard_queue("q-7", 3) != guard_queue("q-7", 4) != guard_queue("q-8", 3)


@pytest.mark.spark
def test_spark_retries_a_write_task_without_duplicates(rabbitmq: Endpoint) -> None:
    """A task dies after the sink sent part of its rows; Spark runs it again."""
    from test_spark_integration import _unavailable

    problem = _unavailable()
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI=true and Spark cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    done = subprocess.run(
        [sys.executable, str(CHECK), "retry", "--port", str(rabbitmq.port), "--rows", "20000",
         "--login", rabbitmq.login or "", "--passcode", rabbitmq.passcode or "",
         "--vhost", rabbitmq.vhost or "/"],
        capture_output=True, text=True, timeout=280, check=False, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    # Without the guard the injected failures duplicate rows: the fault is real.
    assert report["unguarded"]["messages"] > 20000, report
    assert report["unguarded"]["failed_attempts"] >= 1, report
    guarded = report["guarded"]
    assert guarded["failed_attempts"] >= 1, report
    assert guarded["messages"] == guarded["distinct_rows"] == 20000, report


class _SkewedClock:
    """``time`` as seen by an executor whose wall clock is ``skew`` seconds off the broker's."""

    def __init__(self, skew: float) -> None:
        self.skew = skew

    def time(self) -> float:
        return time.time() + self.skew

    def time_ns(self) -> int:
        return time.time_ns() + int(self.skew * 1e9)

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.mark.parametrize("skew", [-90.0, 90.0], ids=["executor-behind", "executor-ahead"])
def test_a_retry_is_exact_whatever_the_executor_clock_says(
    connection: ConnectionSettings,
    streams: StreamsWriterSettings,
    monkeypatch: pytest.MonkeyPatch,
    skew: float,
) -> None:
    """Executors' clocks and the broker's differ (no NTP, a VM resumed, an Erlang VM in
    ``no_time_warp`` mode after the host clock stepped): the guard must not depend on them."""
    import dataclasses

    from stomp_proto.spark._streams import _guard, _writer

    # Rows of another writer first, so that the task's rows start well inside the streams.
    other = Task([(f"other-{i}".encode(), f"k{i % 13}") for i in range(600)])
    plain = writer_for(connection, dataclasses.replace(streams, exactly_once=False))
    plain.send(other.chunks(), task_partition=0, row_id_prefix="other")
    clock = _SkewedClock(skew)
    # A loaded machine may answer a floor probe late; floor 0 is safe but not what is tested.
    monkeypatch.setattr(_guard, "FLOOR_PROBE_TIMEOUT", 10.0)
    monkeypatch.setattr(_guard, "time", clock)
    monkeypatch.setattr(_writer, "time", clock)
    read_from: list[tuple[str, int]] = []
    real_read = _writer.rows_already_written

    def spy(
        connection: ConnectionSettings, stream: str, prefix: str, floor: int, header: str
    ) -> set[str]:
        read_from.append((stream, floor))
        return real_read(connection, stream, prefix, floor, header)

    monkeypatch.setattr(_writer, "rows_already_written", spy)
    writer = writer_for(connection, streams)
    task = Task(rows_of(1500))
    write = f"skew-{uuid.uuid4().hex[:8]}"
    with pytest.raises(RuntimeError, match="injected"):
        writer.send(task.chunks(fail_after=750), task_partition=0, row_id_prefix=write)
    writer.send(task.chunks(reverse=True), task_partition=0, row_id_prefix=write)
    after = stream_contents(connection, streams.streams)
    assert collections.Counter(m.body for m in after) == collections.Counter(
        b for b, _ in task.rows + other.rows
    )
    # The retry read each stream from a floor inside it, not from its start.
    assert sorted(s for s, _ in read_from) == sorted(streams.streams)
    assert all(floor > 0 for _, floor in read_from), read_from
