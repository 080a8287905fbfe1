"""The blocking STOMP client, for plain scripts and threaded programs.

.. code-block:: python

    with stomp_proto.threads.connect("127.0.0.1", 61613) as client:
        with client.subscribe("/queue/work", ack="client-individual") as messages:
            client.send("/queue/work", b"hello", receipt=True)
            for message in messages:
                client.ack(message)
                break

The client is written in ``stomp_proto._client._threads`` (sockets in
``_client._blocking``); what it shares with the async clients (options, ids,
routing, errors, the reconnect schedule) is in the sans-IO ``ClientCore``.
Every call writes from the caller's own thread, and a thread that needs data
(a consumer with nothing buffered, a wait for a receipt) reads the socket
itself while no other thread does; one background thread reads when nobody
else needs to, keeps heart-beats and reconnects.  The client may be used from
any number of threads at once.
"""

from __future__ import annotations

from typing import Unpack

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
from ._client._threads import DISPATCH_THREAD as DISPATCH_THREAD  # on_message's threads
from ._client._threads import READER_THREAD as READER_THREAD  # the background thread's name
from ._client._threads import Client, Subscription, Transaction, Unsolicited, open_client
from ._public import present_as

__all__ = [
    "Backoff",
    "BrokerError",
    "Client",
    "ClientError",
    "ClientState",
    "ClientStats",
    "ConnectionLost",
    "HeartBeatLost",
    "ReconnectExhausted",
    "SessionEvent",
    "Subscription",
    "Transaction",
    "Unsolicited",
    "connect",
]

present_as("stomp_proto.threads", Client, Subscription, Transaction, Unsolicited)


def connect(
    host: str | None = None, port: int | None = None, **options: Unpack[ClientOptions]
) -> Client:
    """Connect to the broker at ``host:port`` and log in; returns a :class:`Client`
    (use it in a ``with`` block).

    ``host`` and ``port`` default to 127.0.0.1 and 61613; ``host`` may be a
    connection URL instead (``stomp://user:pass@host:61613/vhost``,
    ``failover:(...)``, see :doc:`failover`), and ``hosts=[(host, port), ...]``
    names several brokers.

    ``options`` are described by :class:`~stomp_proto.ClientOptions`.  Errors
    are :class:`ConnectionLost` and :class:`BrokerError`.
    """
    return open_client(ConnectOptions.build(host, port, options))
