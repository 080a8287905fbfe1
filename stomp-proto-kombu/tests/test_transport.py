"""The transport's contract with Kombu where Kombu's own suite does not pin it."""

from __future__ import annotations

import time
import uuid
from typing import Any

import kombu
import pytest
import stomp_proto_kombu  # noqa: F401  (registers the stomp:// scheme)
from conftest import BrokerUnderTest
from stomp_proto_kombu._transport import DRAIN_BATCH

import stomp_proto


def test_drain_events_delivers_what_is_ready_in_batches(broker: BrokerUnderTest) -> None:
    """What is ready goes in one call, as Kombu's suite expects of pyamqp, but at most
    DRAIN_BATCH: Celery's result consumer drains until the result it waits for has
    come, keeps the others in a buffer of 8192 and drops the oldest, so a call that
    handed over every buffered message lost results of 10,000 tasks."""
    name = f"drain-batch-{uuid.uuid4().hex[:8]}"
    queue = kombu.Queue(name, kombu.Exchange(name, type="direct"), routing_key=name)
    count = DRAIN_BATCH + 20
    got: list[Any] = []
    with kombu.Connection(broker.url()) as connection:
        channel = connection.default_channel
        with connection.Consumer(queue, callbacks=[lambda body, _: got.append(body)],
                                 channel=channel, no_ack=True):  # fmt: skip
            producer = connection.Producer(channel)
            for number in range(count):
                producer.publish(number, exchange=queue.exchange, routing_key=name, declare=[queue])
            feeds = connection.transport.feeds
            # Until all are here, pushed by the broker (the wait is for that).
            deadline = time.monotonic() + 60
            while feeds.buffered(name) < count:
                assert time.monotonic() < deadline, f"{count} messages never reached {name}"
                time.sleep(0.01)
            delivered = []
            for _ in range(2):
                connection.drain_events(timeout=10)
                delivered.append(len(got))
    assert delivered == [DRAIN_BATCH, count]
    assert got == list(range(count))


def test_a_wrong_login_names_the_broker_and_its_reason(broker: BrokerUnderTest) -> None:
    url = f"stomp://{broker.login}:not-the-passcode@{broker.host}:{broker.port}//"
    connection = kombu.Connection(url, transport_options={"max_retries": 0})
    with connection, pytest.raises(ConnectionRefusedError) as refused:
        connection.connect()
    text = str(refused.value)
    assert f"the STOMP broker at {broker.host}:{broker.port} refused the CONNECT" in text
    reason = str(refused.value.__cause__)  # the broker's own words
    assert reason and reason in text


def test_an_unknown_transport_option_is_named(broker: BrokerUnderTest) -> None:
    connection = kombu.Connection(broker.url(), transport_options={"prefetch": 10})
    with pytest.raises(
        ValueError, match=r"unknown transport option\(s\) 'prefetch'.*prefetch_count"
    ):
        connection.connect()


def test_a_body_over_the_brokers_limit_is_its_error(tmp_path: Any) -> None:
    """The embedded broker started with a 1,000-byte body limit: a publish that waits
    for its receipt gets the broker's ERROR, which names the limit."""
    from conftest import PrivateBroker  # a broker of this test's own, with its limit

    broker = PrivateBroker("the embedded broker", tmp_path, {}, extra=["--max-body-size", "1000"])
    broker.start(fresh=True)
    try:
        url = broker.under_test.url()
        with kombu.Connection(url, transport_options={"confirm_publish": True}) as connection:
            queue = kombu.Queue(f"big-{uuid.uuid4().hex[:8]}")
            producer = connection.Producer()
            with pytest.raises(stomp_proto.BrokerError, match="max_body_size = 1000"):
                producer.publish("x" * 5000, routing_key=queue.name, declare=[queue])
    finally:
        broker.stop()
