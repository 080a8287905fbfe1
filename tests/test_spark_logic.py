"""The Spark data sources' logic, without Spark: options, rows, offsets and ACKs, writes, captures.

Everything runs against the embedded broker in a background thread.  Needs
pyarrow (the ``spark`` extra); skipped without it, except on CI (CI=true),
where a missing pyarrow is a failure.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import pickle
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from adapter_harness import dead_port
from timeouts import bound_text, scaled

from stomp_proto import (
    Ack,
    BrokerError,
    ClientConnection,
    Connect,
    Connected,
    Disconnect,
    Event,
    Frame,
    FrameEncoder,
    Message,
    Receipt,
    Send,
    Subscribe,
)
from stomp_proto import threads as stomp_threads
from stomp_proto.broker import Broker

T = TypeVar("T")


def require(module: str) -> Any:
    """Import ``module``; skip without it, but fail on CI, where the spark extra is installed."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"{module} is needed on CI (install '.[spark]'): {exc}") from exc
        pytest.skip(
            f"{module} is not installed (pip install -e '.[spark]')", allow_module_level=True
        )


pa = require("pyarrow")

from stomp_proto.spark import _capture, _schema  # noqa: E402
from stomp_proto.spark._options import (  # noqa: E402
    CaptureSettings,
    ConnectionSettings,
    ReaderSettings,
    WriterSettings,
)
from stomp_proto.spark._queue._reader import StreamConsumer, drain  # noqa: E402
from stomp_proto.spark._queue._writer import (  # noqa: E402
    PartitionWriter,
    SendEncoder,
    plan_columns,
)

pytestmark = pytest.mark.timeout(60)


# -- the broker in a thread ------------------------------------------------------------


class BrokerThread:
    """The embedded broker on its own event loop in a daemon thread (Spark's runners are
    other processes, and the test's own thread blocks in Spark calls)."""

    def __init__(self, port: int = 0, **options: Any) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="test-broker", daemon=True
        )
        self._thread.start()

        async def start() -> Broker:
            broker = Broker("127.0.0.1", port, **options)
            await broker.start()
            return broker

        self.broker = self.call(start())
        self.host = self.broker.host
        self.port = self.broker.port

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 30) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def inspect(self, function: Callable[[], T]) -> T:
        """Run ``function`` on the broker's loop (its state changes only there)."""

        async def run() -> T:
            return function()

        return self.call(run())

    def queued(self, destination: str) -> int:
        return self.inspect(lambda: self.broker.core.queued(destination))

    def in_flight(self) -> int:
        """Messages delivered to some subscription and not yet acknowledged."""

        def count() -> int:
            total = 0
            for session in self.broker.core.sessions:
                connection = session.connection
                for key in connection.subscriptions:
                    total += len(connection.pending_acks(key))
            return total

        return self.inspect(count)

    def wait_for(self, condition: Callable[[], bool], timeout: float = 10.0) -> None:
        """Until ``condition()`` holds, within ``timeout`` s on an idle machine (scaled)."""
        deadline = time.monotonic() + scaled(timeout)
        while not condition():
            if time.monotonic() > deadline:
                what = getattr(condition, "__qualname__", repr(condition))
                raise AssertionError(f"{what} not met in {bound_text(timeout)}")
            time.sleep(0.02)

    def options(self, **extra: Any) -> dict[str, str]:
        """Data source options for this broker (strings, as Spark passes them)."""
        values = {"host": self.host, "port": str(self.port), **extra}
        return {k.lower(): str(v) for k, v in values.items()}

    def send(self, destination: str, count: int, start: int = 0, **headers: str) -> None:
        with stomp_threads.connect(self.host, self.port) as client:
            for n in range(start, start + count):
                client.send(
                    destination,
                    f"body-{n}".encode(),
                    headers={"seq": str(n), **headers},
                    receipt=n == start + count - 1,
                )

    def receive(self, destination: str, count: int, timeout: float = 10.0) -> list[Message]:
        got: list[Message] = []
        with (
            stomp_threads.connect(self.host, self.port) as client,
            client.subscribe(destination, ack="client-individual") as subscription,
        ):
            while len(got) < count:
                message = subscription.get(timeout)
                assert message is not None
                client.ack(message)
                got.append(message)
        return got

    def close(self) -> None:
        self.call(self.broker.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


@pytest.fixture
def broker() -> Iterator[BrokerThread]:
    server = BrokerThread()
    try:
        yield server
    finally:
        server.close()


def reader_for(broker: BrokerThread, destination: str, **options: Any) -> StreamConsumer:
    values = broker.options(destination=destination, **options)
    return StreamConsumer(
        ConnectionSettings.from_options(values),
        ReaderSettings.from_options(values, streaming=True),
    )


def read_until(
    reader: StreamConsumer, start: int, rows: int, timeout: float = 10.0
) -> tuple[list[dict[str, Any]], int]:
    """read() from ``start`` until a batch has rows (streaming reads never wait)."""
    deadline = time.monotonic() + timeout
    while True:
        batches, end = reader.read({"offset": start})
        if batches or time.monotonic() > deadline:
            break
        time.sleep(0.02)
    found = [row for batch in batches for row in batch.to_pylist()]
    assert len(found) <= rows
    return found, end["offset"]


# -- options -----------------------------------------------------------------------


def test_options_defaults_and_case() -> None:
    # Spark lower-cases option names; values arrive as strings.
    options = {"host": "mq", "port": "61614", "destination": "/queue/a", "maxbatchsize": "500"}
    connection = ConnectionSettings.from_options(options)
    reader = ReaderSettings.from_options(options, streaming=True)
    assert (connection.host, connection.port, connection.vhost) == ("mq", 61614, "/")
    assert connection.heartbeat == (10_000, 10_000) and connection.ssl_context() is None
    assert reader.ack == "client" and reader.max_batch_size == 500
    assert reader.prefetch == 1000  # room for two batches
    assert reader.subscription_headers() == {
        "prefetch-count": "1000",
        "activemq.prefetchSize": "1000",
    }
    batch = ReaderSettings.from_options(options, streaming=False)
    assert batch.prefetch == 0 and batch.subscription_headers() == {"prefetch-count": "0"}
    limited = ReaderSettings.from_options({**options, "maxmessages": "70"}, streaming=False)
    assert limited.prefetch == 70


def test_options_headers_tls_and_errors() -> None:
    options = {
        "destination": "/queue/a",
        "subscribeheaders": '{"selector": "kind = \'x\'", "prefetch-count": 7, "durable": true}',
        "prefetch": "none",
        "tls": "true",
        "tlsverify": "false",
        "versions": "1.1,1.2",
    }
    reader = ReaderSettings.from_options(options, streaming=True)
    assert reader.subscription_headers() == {
        "selector": "kind = 'x'",
        "prefetch-count": "7",
        "durable": "true",
    }
    connection = ConnectionSettings.from_options(options)
    assert connection.versions == ("1.1", "1.2")
    context = connection.ssl_context()
    assert context is not None and not context.check_hostname
    with pytest.raises(ValueError, match="'destination' option is required"):
        ReaderSettings.from_options({}, streaming=True)
    with pytest.raises(ValueError, match="'port' must be an integer"):
        ConnectionSettings.from_options({"port": "x"})
    with pytest.raises(ValueError, match="'subscribeHeaders' must be a JSON object"):
        ReaderSettings.from_options({**options, "subscribeheaders": "[1]"}, streaming=True)
    with pytest.raises(ValueError, match="'ackMode' must be one of"):
        ReaderSettings.from_options({**options, "ackmode": "sometimes"}, streaming=True)
    with pytest.raises(ValueError, match="'heartbeat'"):
        ConnectionSettings.from_options({"heartbeat": "5"})
    with pytest.raises(ValueError, match="'versions'"):
        ConnectionSettings.from_options({"versions": "1.2,2.0"})
    with pytest.raises(ValueError, match="needs a path"):
        CaptureSettings.from_options({})


def test_a_url_option_stands_for_the_connection_options() -> None:
    secret = "s3cret-pw"
    connection = ConnectionSettings.from_options(
        {"url": f"stomp+ssl://alice:{secret}@broker.example:61620/prod", "timeout": "5"}
    )
    assert (connection.host, connection.port, connection.login) == (
        "broker.example",
        61620,
        "alice",
    )
    assert (connection.passcode, connection.vhost, connection.tls) == (secret, "prod", True)
    assert connection.timeout == 5.0
    assert secret not in repr(connection)
    failover = ConnectionSettings.from_options(
        {"URL": "failover:(stomp://h1:1,stomp://h2:2)?randomize=true"}
    )
    assert failover.hosts == (("h1", 1), ("h2", 2)) and failover.randomize
    assert pickle.loads(pickle.dumps(failover)) == failover
    for options, named in [
        ({"url": "stomp://h", "port": "1"}, "'port' is given both"),
        ({"url": "stomp://a@h", "login": "b"}, "'login' is given both"),
        ({"url": "stomp://h", "tls": "true"}, "'tls' is given both"),
        ({"url": "ws://h/ws"}, "WebSocket"),
        ({"url": "failover:(stomp://h)?initialReconnectDelay=5"}, "reconnect options"),
        ({"url": "failover:(stomp://h)?connectTimeout=500"}, "bounded by its 'timeout'"),
        ({"url": "failover:(stomp://h)?failoverOnTimeout=true"}, "bounded by its 'timeout'"),
        ({"url": f"stomp://alice:{secret}@h:port"}, "option 'url': URL: the port"),
    ]:
        with pytest.raises(ValueError, match=named) as caught:
            ConnectionSettings.from_options(options)
        assert secret not in str(caught.value)


def test_a_failover_url_connects_to_the_first_address_that_answers(broker: BrokerThread) -> None:
    with dead_port() as dead, dead_port() as also_dead:
        url = f"failover:(stomp://{broker.host}:{dead},stomp://{broker.host}:{broker.port})"
        connection = ConnectionSettings.from_options({"url": url})
        with connection.open_socket() as sock:
            assert sock.getpeername()[1] == broker.port
        nobody = ConnectionSettings.from_options(
            {"url": f"failover:(stomp://{broker.host}:{dead},stomp://{broker.host}:{also_dead})"}
        )
        with pytest.raises(OSError, match="any of 2 brokers") as caught:
            nobody.open_socket()
    assert f":{dead}:" in str(caught.value)


# Each bad option, as a Kafka user mistypes it, and the words its error must hold: the
# option's name, its value and the accepted form.
BAD_OPTIONS = [
    ("stomp", {"port": "abc"}, ["'port'", "integer", "'abc'"]),
    ("stomp", {"maxBatchSize": "-5"}, ["'maxBatchSize'", ">= 1", "'-5'"]),
    ("stomp", {"ackMode": "sometimes"}, ["'ackMode'", "client-individual", "'sometimes'"]),
    ("stomp", {"subscribeHeaders": "{bad"}, ["'subscribeHeaders'", "JSON object", "'{bad'"]),
    ("stomp", {"timeout": "soon"}, ["'timeout'", "number", "'soon'"]),
    ("stomp", {"idleTimeout": "-1"}, ["'idleTimeout'", ">= 0", "'-1'"]),
    ("stomp", {"sendHeaders": "[1]"}, ["'sendHeaders'", "JSON object", "'[1]'"]),
    ("stomp-streams", {"stream": "s", "maxOffsetsPerTrigger": "-5"},
     ["'maxOffsetsPerTrigger'", ">= 1", "'-5'"]),
    ("stomp-streams", {"stream": "s", "startingOffsets": "earlist"},
     ["'startingOffsets'", "earliest | latest", "'earlist'"]),
    ("stomp-streams", {"stream": "s", "startingOffsets": "{bad json"},
     ["'startingOffsets'", "JSON object of stream to offset", "'{bad json'"]),
    ("stomp-streams", {"stream": "s", "partitions": "0"}, ["'partitions'", ">= 1", "'0'"]),
    ("stomp-streams", {"stream": "s", "port": "abc"}, ["'port'", "integer", "'abc'"]),
    ("stomp-streams", {"stream": "s", "failOnDataLoss": "maybe"},
     ["'failOnDataLoss'", "true or false", "'maybe'"]),
    ("stomp-streams", {"stream": "s", "createStreams": "sure"},
     ["'createStreams'", "true or false", "'sure'"]),
    ("stomp-streams", {"streams": "/queue/x"}, ["'streams'", "'/queue/x'", "stream name"]),
    ("stomp-streams", {"stream": "s", "schema": "avro"}, ["'schema'", "kafka", "'avro'"]),
    ("stomp-streams", {"stream": "s", "schema": "kafka", "keyType": "string"},
     ["'keyType'", "schema=kafka"]),
    ("stomp-streams", {"stream": "s", "retryTimeout": "-1"}, ["'retryTimeout'", ">= 0", "'-1'"]),
    ("stomp-streams", {"stream": "s", "startingOffsets": '{"s": {"0": -3}}'},
     ["'startingOffsets'", "-2 (earliest), -1 (latest)", "-3"]),
    ("stomp-streams", {"stream": "s", "endingOffsets": '{"s": {"0": -2}}'},
     ["'endingOffsets'", "-1 (latest)", "-2"]),
]  # fmt: skip


def data_source(name: str, options: dict[str, str]) -> Any:
    """The data source class for ``name``, made as Spark makes it at load() and save()."""
    pytest.importorskip("pyspark")
    from pyspark.sql.datasource import CaseInsensitiveDict

    from stomp_proto.spark import StompDataSource, StompStreamsDataSource

    cls = {"stomp": StompDataSource, "stomp-streams": StompStreamsDataSource}[name]
    return cls(options=CaseInsensitiveDict(options))


@pytest.mark.parametrize(("source", "options", "words"), BAD_OPTIONS)
def test_a_bad_option_fails_when_the_source_is_made_naming_it(
    source: str, options: dict[str, str], words: list[str]
) -> None:
    with pytest.raises(ValueError) as failure:
        data_source(source, options)
    for word in words:
        assert word in str(failure.value), (word, str(failure.value))


def test_a_read_without_streams_fails_at_its_schema_a_write_may_route_by_its_column() -> None:
    source = data_source("stomp-streams", {})  # a sink whose rows name their streams
    with pytest.raises(ValueError, match=r"needs 'stream' and 'partitions'.*or 'streams'"):
        source.schema()


def test_good_options_pass_and_a_read_without_a_destination_fails_at_its_schema() -> None:
    source = data_source("stomp", {"destination": "/queue/a", "maxBatchSize": "10"})
    assert source.schema()
    # A sink needs no destination option (rows may carry theirs), a read does.
    sink = data_source("stomp", {"destinationColumn": "to"})
    with pytest.raises(ValueError, match="'destination' option is required"):
        sink.schema()
    data_source("stomp-streams", {"stream": "s", "startingOffsets": '{"s-0": 4}'})


def test_unknown_options_are_logged_with_the_nearest_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level("WARNING", logger="stomp_proto.spark"):
        data_source(
            "stomp-streams",
            {"stream": "s", "maxoffsetspertriger": "5", "checkpointLocation": "/x", "zzz": "1"},
        )
        data_source("stomp", {"destination": "/queue/a", "destnation": "/queue/b"})
    messages = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert messages == [
        "stomp-streams: unknown option 'maxoffsetspertriger' is ignored; "
        "did you mean 'maxOffsetsPerTrigger'?",
        "stomp-streams: unknown option 'zzz' is ignored",
        "stomp: unknown option 'destnation' is ignored; did you mean 'destination'?",
    ]


def test_every_option_is_documented() -> None:
    from stomp_proto.spark._options import option_names

    page = (Path(__file__).resolve().parent.parent / "docs" / "spark.rst").read_text()
    for names in option_names().values():
        for name in names:
            assert f"``{name}``" in page, name


# -- rows ----------------------------------------------------------------------------


def test_message_rows() -> None:
    message = Message(
        "/queue/a",
        "m-1",
        subscription="s",
        body=b"\x00\x01",
        ack="a-1",
        content_type="application/octet-stream",
        headers=(("x", "1"), ("x", "2"), ("redelivered", "true"), ("content-length", "2")),
    )
    assert _schema.message_headers(message) == [
        ("content-type", "application/octet-stream"),
        ("x", "1"),
        ("redelivered", "true"),
    ]
    batch = _schema.message_batch([(1_700_000_000_000_000, message)])
    row = batch.to_pylist()[0]
    assert row["destination"] == "/queue/a" and row["message_id"] == "m-1"
    assert row["subscription"] == "s" and row["body"] == b"\x00\x01"
    assert row["received_at"].year == 2023
    assert [name for name, _ in row["headers"]] == ["content-type", "x", "redelivered"]


def test_arrow_schemas_are_what_spark_expects() -> None:
    """Spark checks a data source's record batches against the schema it derives from the DDL."""
    try:
        types = importlib.import_module("pyspark.sql.types")
        arrow_types = importlib.import_module("pyspark.sql.pandas.types")
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("pyspark is not installed")
    t = types

    def struct(*fields: tuple[str, Any]) -> Any:
        return t.StructType([t.StructField(name, kind) for name, kind in fields])

    headers = t.MapType(t.StringType(), t.StringType())
    message = struct(
        ("destination", t.StringType()),
        ("message_id", t.StringType()),
        ("subscription", t.StringType()),
        ("headers", headers),
        ("body", t.BinaryType()),
        ("received_at", t.TimestampType()),
    )
    capture = struct(
        ("path", t.StringType()),
        ("frame_index", t.LongType()),
        ("offset", t.LongType()),
        ("command", t.StringType()),
        ("headers", headers),
        ("body", t.BinaryType()),
        ("error", t.StringType()),
    )
    to_arrow = arrow_types.to_arrow_schema
    assert to_arrow(message, timezone="UTC").equals(_schema.MESSAGE_ARROW_SCHEMA)
    assert to_arrow(capture, timezone="UTC").equals(_schema.CAPTURE_ARROW_SCHEMA)
    pair = struct(("key", t.StringType()), ("value", t.StringType()))
    for key_type, key_binary in ((t.StringType(), False), (t.BinaryType(), True)):
        streams = struct(
            ("stream", t.StringType()),
            ("offset", t.LongType()),
            ("headers", headers),
            ("body", t.BinaryType()),
            ("received_at", t.TimestampType()),
            ("key", key_type),
            ("row_id", t.StringType()),
            ("partition", t.IntegerType()),
            ("timestamp", t.TimestampType()),
            ("header_list", t.ArrayType(pair)),
        )
        expected = to_arrow(streams, timezone="UTC")
        assert expected.equals(_schema.streams_arrow_schema(key_binary), check_metadata=True)
        assert [f.type for f in expected] == [
            f.type for f in _schema.streams_arrow_schema(key_binary)
        ]


# -- streaming reads -------------------------------------------------------------------


def test_stream_reader_acks_a_batch_only_in_the_next_read(broker: BrokerThread) -> None:
    broker.send("/queue/s", 250)
    reader = reader_for(broker, "/queue/s", maxBatchSize=100)
    assert reader.initial_offset() == {"offset": 0}
    pickle.loads(pickle.dumps(reader))  # Spark pickles it before it connects
    try:
        seen: list[str] = []
        start = 0
        batches = 0
        while len(seen) < 250:
            rows, end = read_until(reader, start, 100)
            assert end == start + len(rows) and rows
            batches += 1
            seen += [row["body"].decode() for row in rows]
            # This batch is not acknowledged until Spark asks for the next one...
            assert broker.in_flight() >= len(rows)
            # ... and a commit() of an earlier offset changes nothing.
            reader.commit({"offset": start})
            assert broker.in_flight() >= len(rows)
            start = end
        assert seen == [f"body-{n}" for n in range(250)]
        assert batches >= 3
        # Once Spark asks from the end of the last batch, everything is acknowledged.
        assert reader.read({"offset": start})[1] == {"offset": start}
        broker.wait_for(lambda: broker.in_flight() == 0)
        assert broker.queued("/queue/s") == 0 and reader.acknowledged == 250
        # Pickling a connected reader leaves its connection and pending ACKs behind.
        assert pickle.loads(pickle.dumps(reader))._consumer is None
    finally:
        reader.close()


def test_stream_reader_restart_gets_unacked_messages_again(broker: BrokerThread) -> None:
    broker.send("/queue/r", 60)
    first = reader_for(broker, "/queue/r", maxBatchSize=40)
    rows, end = read_until(first, 0, 40)
    assert len(rows) == 40 and end == 40
    first.close()  # the query stopped: batch 0..40 was never committed
    # A new process resumes from the checkpoint's offset; numbers go on from there.
    second = reader_for(broker, "/queue/r", maxBatchSize=100)
    try:
        seen: list[dict[str, Any]] = []
        start = 40
        while len(seen) < 60:
            got, start = read_until(second, start, 100)
            seen += got
        assert start == 100
        assert sorted(int(r["body"][5:]) for r in seen) == list(range(60))
        # The first connection had all 60 (prefetch): all of them come back.
        redelivered = [r for r in seen if dict(r["headers"]).get("redelivered") == "true"]
        assert len(redelivered) == 60
        assert {r["message_id"] for r in rows} <= {r["message_id"] for r in redelivered}
        second.read({"offset": start})
        broker.wait_for(lambda: broker.in_flight() == 0)
    finally:
        second.close()


@pytest.mark.parametrize("ack", ["client", "client-individual", "auto"])
def test_stream_reader_under_a_small_prefetch(broker: BrokerThread, ack: str) -> None:
    """Acking in read() (not in commit()) keeps a prefetch-limited stream moving."""
    broker.send("/queue/p", 20)
    reader = reader_for(broker, "/queue/p", maxBatchSize=100, prefetch=5, ackMode=ack)
    try:
        start, seen = 0, 0
        while seen < 20:
            rows, start = read_until(reader, start, 100 if ack == "auto" else 5)
            assert rows, "stalled"
            seen += len(rows)
        reader.read({"offset": start})
        broker.wait_for(lambda: broker.in_flight() == 0 and broker.queued("/queue/p") == 0)
    finally:
        reader.close()


def test_stream_reader_available_now_waits_for_the_first_messages(broker: BrokerThread) -> None:
    broker.send("/queue/n", 5)
    reader = reader_for(broker, "/queue/n", idleTimeout="2")
    reader.prepare_available_now()
    try:
        batches, end = reader.read({"offset": 0})  # right after connecting
        assert end == {"offset": 5} and batches[0].num_rows == 5
        started = time.monotonic()
        assert reader.read({"offset": 5}) == ([], {"offset": 5})  # idle: the query may end
        assert time.monotonic() - started >= 1.5
        broker.wait_for(lambda: broker.in_flight() == 0)
    finally:
        reader.close()


def test_stream_reader_rejects_foreign_offsets(broker: BrokerThread) -> None:
    reader = reader_for(broker, "/queue/x")
    with pytest.raises(ValueError, match="not an offset"):
        reader.read({"n": 3})


# -- batch reads ----------------------------------------------------------------------


def test_drain_until_idle_then_ack(broker: BrokerThread) -> None:
    broker.send("/queue/d", 30)
    values = broker.options(destination="/queue/d", idleTimeout="0.3", maxBatchSize="8")
    connection = ConnectionSettings.from_options(values)
    reader = ReaderSettings.from_options(values, streaming=False)
    rows = [row for batch in drain(connection, reader, None) for row in batch.to_pylist()]
    assert [row["body"] for row in rows] == [f"body-{n}".encode() for n in range(30)]
    broker.wait_for(lambda: broker.in_flight() == 0)
    assert broker.queued("/queue/d") == 0


def test_drain_with_a_limit_and_a_failed_task(broker: BrokerThread) -> None:
    broker.send("/queue/e", 30)
    values = broker.options(destination="/queue/e", idleTimeout="0.3", maxBatchSize="4")
    connection = ConnectionSettings.from_options(values)
    reader = ReaderSettings.from_options(values, streaming=False)
    rows = sum(batch.num_rows for batch in drain(connection, reader, 10))
    assert rows == 10
    broker.wait_for(lambda: broker.in_flight() == 0 and broker.queued("/queue/e") == 20)
    # A task that fails half-way acknowledges nothing: all of it comes back.
    batches = drain(connection, reader, None)
    next(batches)
    batches.close()
    broker.wait_for(lambda: broker.in_flight() == 0 and broker.queued("/queue/e") == 20)


# -- writes ---------------------------------------------------------------------------


def test_plan_columns() -> None:
    settings = WriterSettings.from_options({"destination": "/queue/w"})
    plan = plan_columns([("body", "string"), ("headers", "map<string,string>")], settings)
    assert (plan.body, plan.destination, plan.headers) == ("body", None, "headers")
    plan = plan_columns([("destination", "string"), ("body", "binary")], WriterSettings())
    assert plan.destination == "destination" and plan.headers is None
    # Kafka's sink takes a 'value' column: so does this one, when there is no 'body'.
    assert plan_columns([("value", "binary")], settings).body == "value"
    assert plan_columns([("value", "string"), ("body", "binary")], settings).body == "body"
    with pytest.raises(ValueError, match="needs a 'body' column"):
        plan_columns([("payload", "binary")], settings)
    with pytest.raises(ValueError, match="needs a 'payload' column"):
        plan_columns([("value", "binary")], WriterSettings.from_options({"bodyColumn": "payload"}))
    with pytest.raises(ValueError, match="it is bigint"):
        plan_columns([("body", "bigint")], settings)
    with pytest.raises(ValueError, match="needs a destination"):
        plan_columns([("body", "binary")], WriterSettings())
    with pytest.raises(ValueError, match="must be map<string,string>"):
        plan_columns([("body", "binary"), ("headers", "map<string,int>")], settings)
    renamed = WriterSettings.from_options(
        {"bodycolumn": "payload", "destinationcolumn": "to", "headerscolumn": "h"}
    )
    plan = plan_columns(
        [("to", "string"), ("payload", "binary"), ("h", "map<string,string>")], renamed
    )
    assert (plan.body, plan.destination, plan.headers) == ("payload", "to", "h")


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
def test_send_encoder_makes_the_encoders_bytes(version: str) -> None:
    encoder = FrameEncoder(version)  # type: ignore[arg-type]
    sends = SendEncoder(encoder, "tx-1", "/queue/default", {"persistent": "true", "ack": "x"})
    rows = [
        (b"binary", "/queue/a", None),
        ("text é", "/queue/b", None),
        (b"", None, None),
        (None, "/queue/a", []),
        (b"with headers", "/queue/a", [("k", "v"), ("persistent", "false"), ("receipt", "r")]),
        ("text", "/queue/a", {"content-type": "text/csv", "nothing": None}),
    ]
    if version != "1.0":
        rows.append((b"escaped", "/queue/a:b\\c", [("key:1", "line\nbreak")]))
    data = sends.encode([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])

    def expected(body: Any, destination: str | None, headers: Any) -> bytes:
        own = dict(headers or {})
        merged = {"destination": destination or "/queue/default", "transaction": "tx-1"}
        merged.update({"persistent": "true"} if "persistent" not in own else {})
        merged.update({k: v for k, v in own.items() if v is not None and k != "receipt"})
        if isinstance(body, str) and "content-type" not in own:
            merged["content-type"] = "text/plain;charset=utf-8"
        payload = body.encode() if isinstance(body, str) else (body or b"")
        return encoder.encode(Frame("SEND", tuple(merged.items()), payload))

    assert data == b"".join(expected(*row) for row in rows)
    with pytest.raises(ValueError, match="row 7 has no destination"):
        SendEncoder(encoder, "tx", None, {}).encode([b"x"], [None], None, first_row=7)


def writer_for(
    broker: BrokerThread, fields: list[tuple[str, str]], **options: Any
) -> PartitionWriter:
    values = broker.options(**options)
    settings = WriterSettings.from_options(values)
    return PartitionWriter(
        ConnectionSettings.from_options(values), settings, plan_columns(fields, settings)
    )


def test_partition_writer_sends_in_one_transaction(broker: BrokerThread) -> None:
    fields = [("destination", "string"), ("body", "string"), ("headers", "map<string,string>")]
    writer = writer_for(broker, fields, destination="/queue/w0", sendHeaders='{"origin": "spark"}')
    schema = pa.schema(
        [
            ("destination", pa.string()),
            ("body", pa.string()),
            ("headers", pa.map_(pa.string(), pa.string())),
        ]
    )

    def batch(start: int, count: int) -> Any:
        return pa.record_batch(
            [
                pa.array([None if n % 2 else "/queue/w1" for n in range(start, start + count)]),
                pa.array([f"row {n}" for n in range(start, start + count)]),
                pa.array(
                    [[("n", str(n))] if n % 3 == 0 else None for n in range(start, start + count)],
                    pa.map_(pa.string(), pa.string()),
                ),
            ],
            schema=schema,
        )

    sent, transaction = writer.write_batches([batch(0, 5), batch(5, 0), batch(5, 5)])
    assert sent == 10 and transaction is not None and transaction.startswith("spark-")
    odd = broker.receive("/queue/w0", 5)
    even = broker.receive("/queue/w1", 5)
    assert [m.body for m in even] == [f"row {n}".encode() for n in range(0, 10, 2)]
    assert [m.body for m in odd] == [f"row {n}".encode() for n in range(1, 10, 2)]
    by_body = {m.body: m for m in odd + even}
    assert by_body[b"row 3"].headers == (("origin", "spark"), ("n", "3"))
    assert by_body[b"row 1"].content_type == "text/plain;charset=utf-8"
    assert all(dict(m.headers).get("transaction") is None for m in by_body.values())


def test_partition_writer_failure_sends_nothing(broker: BrokerThread) -> None:
    writer = writer_for(broker, [("body", "binary")], destination="/queue/f")

    def batches() -> Iterator[Any]:
        yield pa.record_batch([pa.array([b"a", b"b"])], names=["body"])
        raise RuntimeError("the task failed upstream")

    with pytest.raises(RuntimeError, match="failed upstream"):
        writer.write_batches(batches())
    time.sleep(0.2)
    assert broker.queued("/queue/f") == 0
    # An empty partition does not even connect.
    assert writer.write_batches(iter([])) == (0, None)


def test_partition_writer_reports_the_brokers_error() -> None:
    server = BrokerThread(max_queue_length=5)
    try:
        writer = writer_for(server, [("body", "binary")], destination="/queue/full")
        rows = pa.record_batch([pa.array([b"x"] * 10)], names=["body"])
        with pytest.raises(BrokerError, match=r"queue full|transaction"):
            writer.write_batches([rows])
        assert server.queued("/queue/full") == 0
    finally:
        server.close()


def test_partition_writer_rows_api(broker: BrokerThread) -> None:
    """Spark 4.0's streaming writer hands Row objects (here: dicts, which index the same way)."""
    writer = writer_for(
        broker, [("body", "binary"), ("headers", "map<string,string>")], destination="/queue/rows"
    )
    rows = [{"body": f"r{n}".encode(), "headers": {"n": str(n)}} for n in range(25)]
    assert writer.write_rows(iter(rows), chunk=10)[0] == 25
    got = broker.receive("/queue/rows", 25)
    assert [dict(m.headers)["n"] for m in got] == [str(n) for n in range(25)]


# -- captures ---------------------------------------------------------------------------


def record_session(broker: BrokerThread, folder: Path) -> tuple[Path, Path]:
    """A real session over a plain socket, recording each direction's bytes to a file."""
    sent, received = bytearray(), bytearray()
    conn = ClientConnection()
    with socket.create_connection((broker.host, broker.port)) as sock:

        def say(event: Event) -> None:
            data = conn.send(event)
            sent.extend(data)
            sock.sendall(data)

        def expect(kind: type[Event]) -> Event:
            while True:
                event = conn.next_event()
                if isinstance(event, kind):
                    return event
                if event is None:
                    data = sock.recv(65536)
                    received.extend(data)
                    conn.receive_data(data or None)

        say(Connect(host="/", heartbeat=(0, 0)))
        expect(Connected)
        say(Subscribe("/queue/cap", id="s1", ack="client-individual"))
        for n in range(3):
            say(Send("/queue/cap", b"\x00binary\n" * n, headers=(("k", f"a:b\\{n}"),)))
        for _ in range(3):
            message = expect(Message)
            assert isinstance(message, Message)
            say(Ack.of(message))
        say(Disconnect(receipt="bye"))
        expect(Receipt)
    client, server = folder / "client.stomp", folder / "server.stomp"
    client.write_bytes(bytes(sent))
    server.write_bytes(bytes(received))
    return client, server


def test_capture_decodes_a_recorded_session(broker: BrokerThread, tmp_path: Path) -> None:
    client, server = record_session(broker, tmp_path)
    settings = CaptureSettings.from_options({"path": str(tmp_path)})
    assert _capture.capture_files(settings) == [str(client), str(server)]
    rows = list(_capture.decode_rows(str(client), settings))
    commands = [row[3] for row in rows]
    assert commands == ["CONNECT", "SUBSCRIBE", *["SEND"] * 3, *["ACK"] * 3, "DISCONNECT"]
    assert [row[1] for row in rows] == list(range(len(rows)))
    sends = rows[2:5]
    assert [row[5] for row in sends] == [b"\x00binary\n" * n for n in range(3)]
    assert [row[4]["k"] for row in sends] == [f"a:b\\{n}" for n in range(3)]  # unescaped
    data = client.read_bytes()
    for row in rows:
        assert data[row[2] :].startswith(row[3].encode() + b"\n")  # offset: where the frame starts
    server_rows = list(_capture.decode_rows(str(server), settings))
    assert [row[3] for row in server_rows] == ["CONNECTED", *["MESSAGE"] * 3, "RECEIPT"]
    assert all(row[6] is None for row in rows + server_rows)
    batches = list(_capture.decode_file(str(server), settings))
    assert batches[0].schema.equals(_schema.CAPTURE_ARROW_SCHEMA)
    assert sum(b.num_rows for b in batches) == 5


def test_capture_bad_input(tmp_path: Path) -> None:
    good = FrameEncoder("1.2").encode(Frame("SEND", (("destination", "/q"),), b"x"))
    truncated = tmp_path / "cut.stomp"
    truncated.write_bytes(good + b"\n\n" + good[:-3])
    garbage = tmp_path / "garbage.stomp"
    garbage.write_bytes(good + b"NOT A COMMAND\n\n\0")
    settings = CaptureSettings.from_options({"path": str(tmp_path / "*.stomp")})
    rows = list(_capture.decode_rows(str(truncated), settings))
    assert [r[3] for r in rows] == ["SEND", None]
    assert rows[1][2] == len(good) + 2 and rows[1][6].startswith("truncated:")
    rows = list(_capture.decode_rows(str(garbage), settings))
    assert rows[1][2] == len(good) and rows[1][6].startswith("bad_command")
    beats = CaptureSettings.from_options({"path": str(truncated), "includeheartbeats": "true"})
    assert [r[3] for r in _capture.decode_rows(str(truncated), beats)] == [
        "SEND",
        "HEARTBEAT",
        "HEARTBEAT",
        None,
    ]
    failing = CaptureSettings.from_options({"path": str(garbage), "onerror": "fail"})
    with pytest.raises(_capture.CaptureError, match=f"garbage.stomp at byte {len(good)}"):
        list(_capture.decode_rows(str(garbage), failing))
    with pytest.raises(FileNotFoundError):
        _capture.capture_files(CaptureSettings.from_options({"path": str(tmp_path / "none*")}))


def test_capture_versions(tmp_path: Path) -> None:
    # A 1.0 stream: no escaping, so "\c" is two characters.  Auto mode learns
    # 1.0 from the CONNECTED frame (no version header).
    stream = b"CONNECTED\n\n\0MESSAGE\ndestination:/q\nmessage-id:1\nk:a\\cb\n\n\0"
    path = tmp_path / "old.stomp"
    path.write_bytes(stream)
    auto = CaptureSettings.from_options({"path": str(path)})
    assert list(_capture.decode_rows(str(path), auto))[1][4]["k"] == "a\\cb"
    forced = CaptureSettings.from_options({"path": str(path), "version": "1.2"})
    assert list(_capture.decode_rows(str(path), forced))[1][4]["k"] == "a:b"


# -- TLS and heart-beats --------------------------------------------------------------------


@pytest.fixture
def tls_files(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_read_and_write_over_tls(tls_files: tuple[Path, Path]) -> None:
    cert, key = tls_files
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = BrokerThread(ssl=context)
    try:
        tls = {"tls": "true", "tlsCaFile": str(cert)}
        writer = writer_for(server, [("body", "binary")], destination="/queue/tls", **tls)
        rows = pa.record_batch([pa.array([b"secret %d" % n for n in range(300)])], names=["body"])
        assert writer.write_batches([rows])[0] == 300
        reader = reader_for(server, "/queue/tls", maxBatchSize=120, **tls)
        try:
            start, seen = 0, 0
            while seen < 300:
                got, start = read_until(reader, start, 120)
                seen += len(got)
            reader.read({"offset": start})
            server.wait_for(lambda: server.in_flight() == 0 and server.queued("/queue/tls") == 0)
        finally:
            reader.close()
        # Without the CA the certificate is refused.
        with pytest.raises(ssl.SSLError):
            reader_for(server, "/queue/tls", tls="true").read({"offset": 0})
    finally:
        server.close()


def test_reader_keeps_heart_beats_while_idle() -> None:
    server = BrokerThread(heartbeat=(100, 100))
    try:
        reader = reader_for(server, "/queue/hb", heartbeat="100,100")
        try:
            assert reader.read({"offset": 0}) == ([], {"offset": 0})
            time.sleep(1.0)  # ten heart-beat periods without a message either way
            server.send("/queue/hb", 3)
            rows, end = read_until(reader, 0, 3)
            assert len(rows) == 3 and end == 3
            assert reader._consumer is not None and reader._consumer.alive
        finally:
            reader.close()
    finally:
        server.close()


def test_ending_offsets_on_a_streaming_read_is_refused_naming_it() -> None:
    source = data_source("stomp-streams", {"stream": "s", "endingOffsets": "latest"})
    with pytest.raises(ValueError, match=r"'endingOffsets' is for batch reads.*availableNow"):
        source.streamReader(None)
