"""The STOMP client for trio (install the ``trio`` extra).

.. code-block:: python

    async with stomp_proto.trio.connect("127.0.0.1", 61613) as client:
        async with client.subscribe("/queue/work", ack="client-individual") as messages:
            await client.send("/queue/work", b"hello", receipt=True)
            async for message in messages:
                await client.ack(message)
                break

The client itself is written once, in ``stomp_proto._client._async``;
``stomp_proto._client._trio`` supplies trio's streams, events, memory channels, tasks (in a nursery
owned by ``connect``) and deadlines.

For servers on trio's streams, :func:`drain_and_close` ends a connection so that
the ERROR sent last reaches a client that is still sending.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Unpack

import trio

from ._client._async import (
    AsyncClient,
    AsyncSubscription,
    AsyncTransaction,
    AsyncUnsolicited,
    open_client,
)
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
from ._client._trio import TrioBackend
from ._closing import trio_drain_and_close as drain_and_close
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

# The classes are the asyncio adapter's, and documented there.
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

    An async context manager: ``async with connect(...) as client``.  The same
    ``options`` (:class:`~stomp_proto.ClientOptions`) and behaviour as
    :func:`stomp_proto.asyncio.connect`.
    """
    try:
        async with trio.open_nursery() as nursery:
            client = await open_client(
                ConnectOptions.build(host, port, options), TrioBackend(nursery)
            )
            async with client:
                yield client
    except BaseExceptionGroup as group:
        # The nursery is ours, not the caller's: its only task is the reader,
        # which does not raise, so a group holds the one real exception.
        if len(group.exceptions) == 1:
            error = group.exceptions[0]
            raise error from error.__cause__  # keeps its cause, hides the group
        raise
