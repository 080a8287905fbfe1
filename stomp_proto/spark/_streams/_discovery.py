"""Partition discovery: finding ``<stream>-N`` streams added while a query runs.

RabbitMQ 3.10 has no super streams, so the partitions of ``stream`` are the
plain streams ``<stream>-0`` .. ``<stream>-<N-1>``.  With
``discoverPartitions`` the source looks, at each trigger, for the next ones:
``<stream>-N``, then ``<stream>-(N+1)`` and so on, up to the first missing
one (a gap ends the search).  A new partition is read from its first kept
offset: the planner starts every stream that is not in a batch's start
offset there.

STOMP has no "does this queue exist" request.  A SUBSCRIBE to
``/amq/queue/<name>`` with a receipt is the probe: the RECEIPT says the
stream exists (the subscription, at ``next`` with a prefetch of 1, is ended
by the DISCONNECT and receives nothing), an ERROR ``NOT_FOUND`` says it does
not - and ends the connection, so each look costs one connection (a few
milliseconds), and RabbitMQ logs the NOT_FOUND.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping, Sequence

from ..._client._core import BrokerError
from ..._events import Error, Receipt, Subscribe
from .._options import ConnectionSettings
from ._link import StreamLink, amq_destination
from ._reader import StreamsPlanner

__all__ = ["adopt", "discover", "next_partitions", "partition_index"]

log = logging.getLogger("stomp_proto.spark")


def discover(planner: StreamsPlanner) -> None:
    """With ``discoverPartitions``: add the new partitions the broker has to ``planner``."""
    base = planner.settings.discover_partitions
    if base is None:
        return
    new = next_partitions(planner.connection, base, planner.settings.streams)
    if new:
        log.info("stomp-streams: new partitions of %s: %s", base, ", ".join(new))
        planner.add_streams(new)


def adopt(planner: StreamsPlanner, *offsets: Mapping[str, int]) -> None:
    """With ``discoverPartitions``: add the streams that offsets from the checkpoint name
    (partitions discovered before a restart) to ``planner``."""
    if planner.settings.discover_partitions is None:
        return
    for offset in offsets:
        planner.add_streams(list(offset))


def partition_index(base: str, stream: str) -> int | None:
    """N for a stream named ``<base>-N``; None for any other name."""
    match = re.fullmatch(re.escape(base) + r"-(\d+)", stream)
    return int(match.group(1)) if match else None


def next_partitions(connection: ConnectionSettings, base: str, known: Sequence[str]) -> list[str]:
    """The partitions of ``base`` after the highest one in ``known`` that exist on the broker,
    in order, up to the first missing one."""
    indexes = [i for i in (partition_index(base, s) for s in known) if i is not None]
    found: list[str] = []
    index = max(indexes, default=-1) + 1
    while True:
        name = f"{base}-{index}"
        if not _exists(connection, name):
            return found
        found.append(name)
        index += 1


def _exists(connection: ConnectionSettings, stream: str) -> bool:
    """Whether ``stream`` exists (see the module docstring)."""
    link = StreamLink(connection)
    try:
        link.send(
            Subscribe(
                amq_destination(stream),
                id="discover",
                ack="client",
                receipt="exists",
                headers=(("prefetch-count", "1"), ("x-stream-offset", "next")),
            )
        )
        deadline = time.monotonic() + connection.timeout
        while True:
            event = link.next_event(deadline)
            if event is None:
                raise TimeoutError(
                    f"no answer within {connection.timeout:g} s to a SUBSCRIBE to {stream!r}"
                )
            if isinstance(event, Receipt) and event.receipt_id == "exists":
                link.close(connection.timeout)
                return True
            if isinstance(event, Error):
                text = f"{event.message or ''} {event.body.decode('utf-8', 'replace')}"
                if "NOT_FOUND" in text or "not found" in text.lower():
                    return False
                raise BrokerError(event)
            link.check(event)
    finally:
        link.abandon()
