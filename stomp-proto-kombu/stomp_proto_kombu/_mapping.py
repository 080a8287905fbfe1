"""What a Kombu message becomes on the wire, and what each broker makes of it.

A Kombu message is an envelope (body, headers, properties): every virtual
transport stores it whole, and so does this one, as the JSON body of the STOMP
message - Celery's headers hold lists and dicts that STOMP's flat text headers
could not carry.  What a broker acts on goes into STOMP headers beside it:
``priority``, the time to live (``expiration`` for RabbitMQ, ``expires`` for
ActiveMQ), ``persistent``, and a queue's ``x-*`` arguments (RabbitMQ declares
the queue with them).  A message that some other STOMP client sent (no
envelope) is read as a message whose body is the STOMP body.

:class:`Broker` is what differs between brokers, found from CONNECTED's
``server`` header: how a rejected message is put back or dropped.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from stomp_proto import Message

__all__ = ["Broker", "broker_of", "envelope_of", "queue_headers", "send_headers", "wire_body"]

#: The content type of a STOMP body that holds a Kombu envelope.
ENVELOPE_TYPE = "application/json"
#: The envelope's keys, all present in what Kombu's virtual channel publishes.
_ENVELOPE_KEYS = frozenset({"body", "content-encoding", "content-type", "headers", "properties"})


@dataclass(frozen=True, slots=True)
class Broker:
    """What one kind of broker does with a rejected message.

    ``requeue_nack``: a NACK delivers the message again (True), or dead-letters
    it (False: ActiveMQ's NACK is a poison acknowledgement).
    ``drop_header``: a NACK header that makes the broker drop (or dead-letter)
    the message instead; ``None`` when it has none.
    """

    name: str
    requeue_nack: bool
    drop_header: tuple[str, str] | None


RABBITMQ = Broker("RabbitMQ", requeue_nack=True, drop_header=("requeue", "false"))
ACTIVEMQ = Broker("ActiveMQ", requeue_nack=False, drop_header=None)
#: The embedded broker and any broker not known here: a NACK delivers again.
OTHER = Broker("other", requeue_nack=True, drop_header=None)


def broker_of(server: str | None) -> Broker:
    """The :class:`Broker` for a CONNECTED ``server`` header (``RabbitMQ/3.10.8``)."""
    product = (server or "").split("/", 1)[0].lower()
    if product == "rabbitmq":
        return RABBITMQ
    if product == "activemq":
        return ACTIVEMQ
    return OTHER


def wire_body(message: Mapping[str, Any]) -> bytes:
    """The STOMP body of a Kombu envelope."""
    return json.dumps(message, separators=(",", ":")).encode()


def send_headers(
    message: Mapping[str, Any], queue_arguments: Mapping[str, Any] | None
) -> dict[str, str]:
    """The STOMP headers that carry what the broker acts on, for a Kombu envelope."""
    properties = message.get("properties") or {}
    headers: dict[str, str] = {}
    priority = properties.get("priority")
    if priority is not None:
        headers["priority"] = str(int(priority))
    expiration = properties.get("expiration")
    if expiration is not None:
        ttl = int(float(expiration))  # Kombu's expiration: milliseconds, as text
        headers["expiration"] = str(ttl)  # RabbitMQ: a per-message TTL
        headers["expires"] = str(int(time.time() * 1000) + ttl)  # ActiveMQ: a deadline
    if properties.get("delivery_mode", 2) == 2:
        headers["persistent"] = "true"
    headers.update(queue_headers(queue_arguments))
    return headers


#: The queue arguments that go with a queue's frames (RabbitMQ declares the queue
#: with them).  ``x-expires`` and ``x-message-ttl`` do not: a process that sends to
#: a queue without knowing them (a Celery worker answering an rpc:// result queue)
#: would declare it without them, which RabbitMQ refuses once it has them.
QUEUE_ARGUMENTS = frozenset(
    {
        "x-max-priority",
        "x-max-length",
        "x-max-length-bytes",
        "x-overflow",
        "x-dead-letter-exchange",
        "x-dead-letter-routing-key",
        "x-queue-mode",
    }
)


def queue_headers(queue_arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """The STOMP headers for a queue's declared arguments (see :data:`QUEUE_ARGUMENTS`)."""
    return {
        name: str(value)
        for name, value in (queue_arguments or {}).items()
        if name in QUEUE_ARGUMENTS
    }


def envelope_of(message: Message) -> dict[str, Any]:
    """The Kombu envelope a STOMP message carries, with a delivery tag of its own.

    A message without an envelope (sent by another STOMP client) becomes one
    whose body is the STOMP body and whose headers are the STOMP headers.
    """
    envelope = _parsed(message.body)
    if envelope is None:
        envelope = {
            "body": message.body,
            "content-encoding": "binary",
            "content-type": message.content_type or "application/data",
            "headers": dict(message.headers),
            "properties": {"delivery_info": {"exchange": "", "routing_key": ""}},
        }
    properties = envelope.setdefault("properties", {})
    # Each delivery is tagged anew: a message delivered again (after a NACK) is a
    # new delivery, acknowledged by its own tag.  (A tag is unique within the
    # process, which is all Kombu asks, and costs no system call.)
    properties["delivery_tag"] = f"{_TAG_PREFIX}{next(_TAG_NUMBERS):x}"
    if any(name == "redelivered" and value == "true" for name, value in message.headers):
        envelope["redelivered"] = True
    return envelope


_TAG_PREFIX = uuid.uuid4().hex[:12] + "."
_TAG_NUMBERS = itertools.count(1)


def _parsed(body: bytes) -> dict[str, Any] | None:
    if not body.startswith(b"{"):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, dict) and value.keys() >= _ENVELOPE_KEYS:
        return value
    return None
