"""The ``stomp`` source and sink ride out a broker restart: refused and lost connections retried.

A private embedded broker (in a thread of this process, on a port of its
own) is stopped and started again on the same port under a streaming query
in Spark that reads one queue and writes another, and, without Spark, under
a write task's open transaction and a batch read's subscription.  The
embedded broker keeps its queues in memory, so what it held when it stopped
is gone: the Spark test checks that the query carries on with the messages
sent after the restart; the transaction test checks that every row of the
transaction arrives once.  Each retry is logged with the broker's
host and port and the reason; past ``retryTimeout`` the call fails with an
error naming the broker.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from brokers import restartable_port
from test_spark_integration import spark  # noqa: F401
from test_spark_logic import BrokerThread, require

pa = require("pyarrow")

from stomp_proto.spark._options import ConnectionSettings, ReaderSettings, WriterSettings  # noqa: E402
from stomp_proto.spark._queue._reader import drain  # noqa: E402
from stomp_proto.spark._queue._writer import PartitionWriter, plan_columns  # noqa: E402
from stomp_proto.spark._retry import BrokerUnavailableError  # noqa: E402

pytestmark = pytest.mark.timeout(240)

#: Seconds the broker stays down: several retries (0.1, 0.2, 0.4, 0.8 s ...) fall in it.
OUTAGE = 3.0


class RestartingBroker:
    """The embedded broker on a fixed port, which can be stopped and started again."""

    def __init__(self) -> None:
        # Not a port of bind(0): one from the ephemeral range could be taken by an
        # outgoing connection while the broker is down (see restartable_port).
        self.server: BrokerThread | None = BrokerThread(port=restartable_port(24600, 25600))
        self.host, self.port = self.server.host, self.server.port

    def stop(self) -> None:
        assert self.server is not None
        self.server.close()  # each client gets the broker's ERROR, then the connection closes
        self.server = None

    def start(self) -> None:
        self.server = BrokerThread(port=self.port)

    def outage(self, seconds: float = OUTAGE, *, until_tried: bool = False) -> None:
        """Down for ``seconds``: connections refused.  ``until_tried``: then down until a
        client has tried again - connections taken and closed at once, as by a broker
        going away - so that a client that gives up at its first failure cannot pass."""
        self.stop()
        time.sleep(seconds)
        if until_tried:
            with socket.create_server((self.host, self.port)) as going_away:
                going_away.settimeout(240)
                going_away.accept()[0].close()
        self.start()

    @property
    def up(self) -> BrokerThread:
        assert self.server is not None
        return self.server

    def options(self, **extra: Any) -> dict[str, str]:
        return {"host": self.host, "port": str(self.port), **{k: str(v) for k, v in extra.items()}}


@pytest.fixture
def broker() -> Iterator[RestartingBroker]:
    restarting = RestartingBroker()
    try:
        yield restarting
    finally:
        if restarting.server is not None:
            restarting.server.close()


def _wait(condition: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.2)


@pytest.mark.timeout(600)  # a Spark session and micro-batches on a loaded machine
def test_a_streaming_query_from_a_queue_to_a_queue_rides_out_a_restart(
    spark: Any,  # noqa: F811
    broker: RestartingBroker,
    tmp_path: Path,
) -> None:
    source, sink = "/queue/restart-in", "/queue/restart-out"
    # One query, the stomp source into the stomp sink: a read and a write at once.
    query = (
        spark.readStream.format("stomp")
        .options(**broker.options(destination=source))
        .load()
        .select("body")
        .writeStream.format("stomp")
        .options(**broker.options(destination=sink))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="0.5 seconds")
        .start()
    )

    def copied(first: int) -> list[str]:
        def done() -> bool:
            return broker.up.queued(sink) >= 20 or not query.isActive

        _wait(done, f"messages {first}.. copied", 240)
        assert query.isActive, query.exception()  # a query that gave up at the restart
        return sorted(m.body.decode() for m in broker.up.receive(sink, 20))

    try:
        broker.up.send(source, 20)
        assert copied(0) == sorted(f"body-{n}" for n in range(20))
        broker.outage(until_tried=True)
        # The source subscribes again and the sink connects again (the broker lost
        # nothing that matters here: what it held had been copied and taken).
        broker.up.send(source, 20, start=20)
        assert copied(20) == sorted(f"body-{n}" for n in range(20, 40))
    finally:
        query.stop()


def test_a_transaction_cut_by_a_restart_is_sent_again_in_full_once(
    broker: RestartingBroker, caplog: pytest.LogCaptureFixture
) -> None:
    destination = "/queue/restart-write"
    settings = WriterSettings.from_options({"destination": destination})
    writer = PartitionWriter(
        ConnectionSettings.from_options(broker.options()),
        settings,
        plan_columns([("body", "string")], settings),
    )
    stopped = threading.Event()

    def batches() -> Iterator[Any]:
        yield pa.record_batch({"body": [f"row-{n}" for n in range(100)]})
        broker.stop()  # the transaction's connection is lost with its first 100 rows
        stopped.set()
        threading.Timer(OUTAGE, broker.start).start()
        yield pa.record_batch({"body": [f"row-{n}" for n in range(100, 200)]})

    with caplog.at_level("WARNING", logger="stomp_proto.spark"):
        sent, transaction = writer.write_batches(batches())
    assert stopped.is_set() and sent == 200 and transaction is not None
    received = broker.up.receive(destination, 200)
    assert sorted(m.body.decode() for m in received) == sorted(f"row-{n}" for n in range(200))
    assert broker.up.queued(destination) == 0  # once each: nothing more behind them
    retries = [r.getMessage() for r in caplog.records]
    assert retries, "no retry was logged"
    assert all(
        m.startswith(f"stomp: writing to {destination}: broker {broker.host}:{broker.port}: ")
        for m in retries
    ), retries
    assert any("refused" in m for m in retries), retries


def test_a_batch_read_rides_out_a_restart(
    broker: RestartingBroker, caplog: pytest.LogCaptureFixture
) -> None:
    destination = "/queue/restart-drain"
    broker.up.send(destination, 30)
    reader = ReaderSettings.from_options(
        {"destination": destination, "maxBatchSize": "10", "idleTimeout": "1"}, streaming=False
    )
    connection = ConnectionSettings.from_options(broker.options())
    batches = drain(connection, reader, None)
    first = next(batches)  # subscribed, 10 messages taken (and not yet acknowledged)
    assert first.num_rows == 10
    broker.stop()
    restart = threading.Timer(OUTAGE, lambda: (broker.start(), broker.up.send(destination, 5, 30)))
    restart.start()
    with caplog.at_level("WARNING", logger="stomp_proto.spark"):
        rest = [b.to_pydict()["body"] for b in batches]
    restart.join()
    bodies = {body.decode() for batch in rest for body in batch}
    # The rest of the 30, as far as they were taken before the stop (the broker lost
    # the others), then the 5 sent after the restart.
    assert {f"body-{n}" for n in range(30, 35)} <= bodies <= {f"body-{n}" for n in range(10, 35)}
    retries = [r.getMessage() for r in caplog.records]
    assert retries and all(
        m.startswith(f"stomp: reading {destination}: broker {broker.host}:{broker.port}: ")
        for m in retries
    ), retries


def test_past_retry_timeout_the_source_and_sink_fail_naming_the_broker(
    broker: RestartingBroker, caplog: pytest.LogCaptureFixture
) -> None:
    broker.stop()  # and never back: every connect is refused
    options = broker.options(retryTimeout="0.8")
    connection = ConnectionSettings.from_options(options)
    settings = WriterSettings.from_options({"destination": "/queue/x"})
    writer = PartitionWriter(connection, settings, plan_columns([("body", "string")], settings))
    reader = ReaderSettings.from_options({"destination": "/queue/x"}, streaming=False)
    for what, call in (
        ("writing to /queue/x", lambda: writer.write_batches([pa.record_batch({"body": ["a"]})])),
        ("reading /queue/x", lambda: next(drain(connection, reader, None))),
    ):
        caplog.clear()
        began = time.monotonic()
        with (
            caplog.at_level("WARNING", logger="stomp_proto.spark"),
            pytest.raises(BrokerUnavailableError) as failure,
        ):
            call()
        assert 0.8 <= time.monotonic() - began < 5
        message = str(failure.value)
        assert message.startswith(f"stomp: {what}: the broker at {broker.host}:{broker.port} ")
        assert "retryTimeout=0.8 s" in message and "refused" in message
        assert len(caplog.records) >= 3, what  # 0.1, 0.2, 0.4 s ... apart
