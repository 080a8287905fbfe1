"""The STOMP client for asyncio, on the standard library alone.

.. code-block:: python

    async with stomp_proto.asyncio.connect("127.0.0.1", 61613) as client:
        async with client.subscribe("/queue/work", ack="client-individual") as messages:
            await client.send("/queue/work", b"hello", receipt=True)
            async for message in messages:
                await client.ack(message)
                break

The client itself is written once, in ``stomp_proto._client._async``;
``stomp_proto._client._asyncio`` supplies asyncio's streams, futures, queues, tasks and timeouts.

For servers on asyncio's streams, :func:`drain_and_close` ends a connection so
that the ERROR written last reaches a client that is still sending.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Unpack

from ._client._async import (
    AsyncClient,
    AsyncSubscription,
    AsyncTransaction,
    AsyncUnsolicited,
    open_client,
)
from ._client._asyncio import AsyncioBackend
from ._client._backoff import Backoff
from ._client._errors import (
    BrokerError,
    ClientError,
    ConnectionLost,
    HeartBeatLost,
    ReconnectExhausted,
)
from ._client._lifecycle import ClientState, ClientStats, SessionEvent
from ._client._options import ClientOptions, ConnectOptions
from ._closing import asyncio_drain_and_close as drain_and_close
from ._public import present_as

__all__ = [
    "AsyncClient",
    "AsyncSubscription",
    "AsyncTransaction",
    "AsyncUnsolicited",
    "Backoff",
    "BrokerError",
    "ClientError",
    "ClientState",
    "ClientStats",
    "ConnectionLost",
    "HeartBeatLost",
    "ReconnectExhausted",
    "SessionEvent",
    "connect",
    "drain_and_close",
]

# Shared with the trio adapter (which names them the same way); documented here.
present_as(
    "stomp_proto.asyncio", AsyncClient, AsyncSubscription, AsyncTransaction, AsyncUnsolicited
)


@asynccontextmanager
async def connect(
    host: str | None = None, port: int | None = None, **options: Unpack[ClientOptions]
) -> AsyncIterator[AsyncClient]:
    """Connect to the broker at ``host:port`` and log in; yield an :class:`AsyncClient`;
    leave with DISCONNECT.

    ``host`` and ``port`` default to 127.0.0.1 and 61613; ``host`` may be a
    connection URL instead (``stomp://user:pass@host:61613/vhost``,
    ``failover:(...)``, see :doc:`failover`), and ``hosts=[(host, port), ...]``
    names several brokers.

    An async context manager: ``async with connect(...) as client``.
    ``options`` are described by :class:`~stomp_proto.ClientOptions`.  Errors
    are :class:`ConnectionLost` and :class:`BrokerError`.
    """
    client = await open_client(ConnectOptions.build(host, port, options), AsyncioBackend())
    async with client:
        yield client
