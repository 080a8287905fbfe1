"""Kombu's own integration suite (from Kombu's sdist) on this transport, per broker.

Every class of Kombu's ``t/integration/common.py`` runs against the embedded
broker, RabbitMQ and ActiveMQ, with the fixtures Kombu's suite asks for:
``connection``, ``invalid_connection`` (nothing listens at its port) and
``failover_connection`` (a dead URL, then a live one, in Kombu's ``;`` form).
A test a broker cannot pass for want of a feature is skipped, and the skip
names the feature.
"""

from __future__ import annotations

import kombu
import pytest
import stomp_proto_kombu  # noqa: F401  (registers the stomp:// scheme)
from conftest import BrokerUnderTest, free_port
from kombu_suite import load

common = load()


@pytest.fixture
def connection(broker: BrokerUnderTest) -> kombu.Connection:
    return kombu.Connection(broker.url())


@pytest.fixture
def invalid_connection(broker: BrokerUnderTest) -> kombu.Connection:
    return kombu.Connection(f"stomp://guest:guest@127.0.0.1:{free_port()}//")


@pytest.fixture
def failover_connection(broker: BrokerUnderTest) -> kombu.Connection:
    return kombu.Connection(f"stomp://127.0.0.1:{free_port()};{broker.url()}")


class TestBasicFunctionality(common.BasicFunctionality):  # type: ignore[misc]
    pass


class TestExchangeTypes(common.BaseExchangeTypes):  # type: ignore[misc]
    pass


class TestTimeToLive(common.BaseTimeToLive):  # type: ignore[misc]
    @pytest.fixture(autouse=True)
    def _needs_ttl(self, broker: BrokerUnderTest) -> None:
        broker.require("ttl")


class TestPriority(common.BasePriority):  # type: ignore[misc]
    PRIORITY_ORDER = "asc"

    @pytest.fixture(autouse=True)
    def _needs_priority(self, broker: BrokerUnderTest) -> None:
        broker.require("priority")

    def test_publish_requeue_consume(self, connection: kombu.Connection) -> None:
        # Kombu's test requeues messages after leaving the consumer's block.
        self._broker.require("requeue-through-the-queue")
        super().test_publish_requeue_consume(connection)

    @pytest.fixture(autouse=True)
    def _keep_broker(self, broker: BrokerUnderTest) -> None:
        self._broker = broker


class TestMessage(common.BaseMessage):  # type: ignore[misc]
    pass


class TestEventLoop(common.BaseEventLoop):  # type: ignore[misc]
    pass


class TestFailover(common.BaseFailover):  # type: ignore[misc]
    pass
