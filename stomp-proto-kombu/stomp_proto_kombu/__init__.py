"""A Kombu transport for STOMP brokers (RabbitMQ, ActiveMQ, Amazon MQ, stomp_proto's
own), so that Celery runs on them.

.. code-block:: python

    import stomp_proto_kombu  # registers the stomp:// and stomps:// schemes
    import kombu

    with kombu.Connection("stomp://guest:guest@127.0.0.1:61613//") as connection:
        queue = connection.SimpleQueue("work")
        queue.put({"hello": "world"})
        print(queue.get(timeout=5).payload)

Without the import, name the transport: ``kombu.Connection(url,
transport="stomp_proto_kombu:Transport")``.  See the documentation's Celery page.
"""

from __future__ import annotations

from kombu.transport import TRANSPORT_ALIASES

from ._transport import Channel, QoS, Transport

__all__ = ["Channel", "QoS", "Transport"]

#: The URL schemes that name this transport once it is imported.
SCHEMES = ("stomp", "stomps")

for _scheme in SCHEMES:
    TRANSPORT_ALIASES.setdefault(_scheme, "stomp_proto_kombu:Transport")
