"""Durable subscriptions on the real brokers: made, kept while away, and removed.

The recipes of docs/clients.rst (:ref:`durable-subscriptions`), run as printed
there: ActiveMQ names a durable topic subscription by ``client-id`` on CONNECT
and ``activemq.subscriptionName`` on SUBSCRIBE, and removes it by an UNSUBSCRIBE
with that header once its consumer has gone (``client.unsubscribe(id,
headers=...)``); RabbitMQ keeps a topic subscription made with ``durable:true``
and ``auto-delete:false`` in a queue of its own, removed by an UNSUBSCRIBE with
the same headers on the open subscription (``subscription.unsubscribe(headers=...)``).

Each test proves the subscription kept a message sent while nobody was
connected, and then that after the removal a message sent while nobody was
connected is gone: the first message of a new subscription is one sent after it.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from brokers import Endpoint, real_broker

import stomp_proto.asyncio
import stomp_proto.threads

HOST = "127.0.0.1"
WAIT = 20.0


def recipe(broker: Endpoint, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """The CONNECT and SUBSCRIBE headers that make ``name`` a durable subscription."""
    if broker.is_activemq:
        return {"client-id": f"client-{name}"}, {"activemq.subscriptionName": name}
    return {}, {"durable": "true", "auto-delete": "false"}


@pytest.mark.parametrize("name", ["activemq", "rabbitmq"])
def test_durable_topic_subscription_kept_and_removed_threads(name: str) -> None:
    broker = real_broker(name)
    sub_id = f"durable-{uuid.uuid4().hex[:10]}"
    topic = f"/topic/{sub_id}"
    connect_headers, headers = recipe(broker, sub_id)

    def durable() -> stomp_proto.threads.Client:
        options = broker.options(headers=connect_headers)
        return stomp_proto.threads.connect(HOST, broker.port, **options)

    def publish(body: str) -> None:
        with stomp_proto.threads.connect(HOST, broker.port, **broker.options()) as other:
            other.send(topic, body, receipt=True)

    def remove(client: stomp_proto.threads.Client, subscription: Any) -> None:
        if broker.is_activemq:  # its consumer first (the block's end), then by name
            subscription.unsubscribe(receipt=True)
            client.unsubscribe(sub_id, headers=headers, receipt=True)
        else:
            subscription.unsubscribe(headers=headers, receipt=True)

    with durable() as client, client.subscribe(topic, headers=headers, id=sub_id):
        pass  # made; leaving the block ends the consumer, not the subscription
    publish("while away")
    with durable() as client, client.subscribe(topic, headers=headers, id=sub_id) as subscription:
        kept = subscription.get(timeout=WAIT)
        assert kept is not None and kept.body == b"while away"
        remove(client, subscription)
    publish("after the removal")
    with durable() as client, client.subscribe(topic, headers=headers, id=sub_id) as subscription:
        client.send(topic, "marker", receipt=True)
        first = subscription.get(timeout=WAIT)
        assert first is not None and first.body == b"marker"
        remove(client, subscription)  # leave nothing behind on the shared broker


@pytest.mark.parametrize("name", ["activemq", "rabbitmq"])
def test_durable_topic_subscription_removed_asyncio(name: str) -> None:
    broker = real_broker(name)
    sub_id = f"durable-{uuid.uuid4().hex[:10]}"
    topic = f"/topic/{sub_id}"
    connect_headers, headers = recipe(broker, sub_id)
    options = broker.options(headers=connect_headers)

    async def main() -> bytes:
        async with stomp_proto.asyncio.connect(HOST, broker.port, **options) as client:
            async with client.subscribe(topic, headers=headers, id=sub_id) as subscription:
                if not broker.is_activemq:
                    await subscription.unsubscribe(headers=headers, receipt=True)
            if broker.is_activemq:
                await client.unsubscribe(sub_id, headers=headers, receipt=True)
        async with stomp_proto.asyncio.connect(HOST, broker.port, **broker.options()) as other:
            await other.send(topic, "after the removal", receipt=True)
        async with (
            stomp_proto.asyncio.connect(HOST, broker.port, **options) as client,
            client.subscribe(topic, headers=headers, id=sub_id) as subscription,
        ):
            await client.send(topic, "marker", receipt=True)
            first = await subscription.get(timeout=WAIT)
            assert first is not None
            if broker.is_activemq:
                await subscription.unsubscribe(receipt=True)
                await client.unsubscribe(sub_id, headers=headers, receipt=True)
            else:
                await subscription.unsubscribe(headers=headers, receipt=True)
            return first.body

    assert asyncio.run(main()) == b"marker"


def test_unsubscribe_of_no_open_subscription_needs_headers() -> None:
    """Without headers naming a durable subscription, an id with no open
    subscription is the application's mistake (1.2 §UNSUBSCRIBE)."""
    from test_threads_concurrency import BrokerThread

    service = BrokerThread()
    try:
        with stomp_proto.threads.connect(HOST, service.port) as client:
            with pytest.raises(stomp_proto.LocalProtocolError, match=r"activemq\.subscriptionName"):
                client.unsubscribe("never-made")
            with client.subscribe("/queue/open", id="open") as subscription:
                client.unsubscribe("open", receipt=True)  # an open one: as its own
                assert subscription.get(timeout=WAIT) is None  # it has ended
    finally:
        service.close()
