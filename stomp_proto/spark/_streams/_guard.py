"""Exactly-once writes to streams: one attempt of a task at a time, resuming after earlier ones.

Spark may run a write task more than once: again after a failure
(``spark.task.maxFailures``), again in a retried stage, twice at once under
speculative execution, and again when a micro-batch is replayed after the
driver restarted.  A stream cannot take a message back, so the sink makes
sure no attempt sends a row an earlier or concurrent attempt already sent:

* **Identity.**  Each row's id (the ``x-row-id`` header) is made of the
  write (query and micro-batch, or one id per batch write made on the
  driver), the Spark partition, a 64-bit digest of what is sent (stream,
  key, headers, body) and how many earlier rows of the partition had the
  same digest.  So a retry gives each row the id it had in the first
  attempt, even when the rows come in another order (after a shuffle).
* **A lock per task.**  Each attempt subscribes to a small classic queue
  named after the write and the partition, declared with
  ``x-single-active-consumer``: RabbitMQ delivers to one consumer at a time
  and hands over to the next only when that one's connection ends.  The
  queue is the task's journal: an attempt puts a ``started`` marker in it
  before its first row.  Nothing is ever acknowledged, so the markers go back
  to the queue for the next attempt; the queue deletes itself
  (``x-expires``) :data:`GUARD_EXPIRY_MS` after its last consumer left.
* **Floors.**  Before an attempt's first row to a stream, it records in
  the journal a *floor* for that stream: an offset the stream had already
  reached (the first one seen by a ``last`` probe, or 0 when the probe
  heard nothing), and waits until the marker is back.  Every row it then
  sends to that stream has a higher offset.
* **Resuming.**  An attempt that becomes the active consumer reads the
  journal.  No ``started`` marker but its own: it is the first, and sends
  everything.  Otherwise it reads each stream an earlier attempt left a
  floor for, from the lowest floor to the tail, collects the ids of this
  write and partition found there, and sends only the rows whose id is not
  among them.  A stream with no floor had nothing sent to it.

Offsets, not clocks: the executors' clocks and the broker's may be far
apart (no NTP, a resumed VM, an Erlang VM in ``no_time_warp`` mode after
the host's clock stepped), and a window taken from timestamps would then
start after the rows it is meant to find.

There is no "finished" marker to skip that reading: an attempt whose rows
were all confirmed can still fail as a Spark task (a step before the sink
failed, and the sink saw its input end early), and its retry then has rows
that attempt never saw.  The single active consumer is what makes a
concurrent (speculative) attempt safe: it waits, with nothing sent, until the
other ends; then it finds the rows the other sent.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

from ..._events import Message, Receipt, Send, Subscribe
from .._options import ConnectionSettings
from ._link import StreamLink, probe_streams, read_range
from ._offsets import StreamRange

__all__ = [
    "FLOOR_PROBE_TIMEOUT",
    "GUARD_EXPIRY_MS",
    "GUARD_QUEUE_PREFIX",
    "History",
    "RowIds",
    "TaskGuard",
    "guard_queue",
    "rows_already_written",
    "stream_floors",
]

log = logging.getLogger("stomp_proto.spark")

#: The journal queues are named ``stomp-sink-guard.<write>.<partition>``.
GUARD_QUEUE_PREFIX = "stomp-sink-guard."
#: A journal queue is deleted this long (ms) after its last consumer left: a retry or a
#: replay of the same micro-batch later than that is not guarded.
GUARD_EXPIRY_MS = 15 * 60 * 1000
#: How long a floor probe waits for a stream's last chunk (a broker sends it in a few ms).
#: A stream that sends nothing by then is taken as empty: floor 0, which is always safe (a
#: retry then reads the whole stream), so the wait is kept short, as every first attempt
#: to a new stream pays it.
FLOOR_PROBE_TIMEOUT = 0.1
#: Credit for journal markers: an attempt adds two or three.
_JOURNAL_PREFETCH = 1000
#: How long a scan waits for the next message of a range that exists.
_SCAN_READ_TIMEOUT = 30.0


def guard_queue(write_id: str, partition: int) -> str:
    """The journal queue of one write task."""
    return f"{GUARD_QUEUE_PREFIX}{write_id}.{partition}"


@dataclass(frozen=True)
class History:
    """What the journal said when this attempt became the only one running."""

    #: Whether an earlier attempt (or an earlier connection of this one) ran.
    earlier: bool
    #: Per stream an earlier attempt sent to (or may have), the lowest floor it recorded.
    floors: dict[str, int]


class TaskGuard:
    """The lock and journal of one write task, on the connection that sends its rows."""

    def __init__(self, link: StreamLink, write_id: str, partition: int) -> None:
        self.link = link
        self.queue = guard_queue(write_id, partition)
        self.attempt = uuid.uuid4().hex

    def acquire(self) -> History:
        """Wait until this attempt is the queue's active consumer; read the journal."""
        link = self.link
        link.send(
            Subscribe(
                f"/queue/{self.queue}",
                id="guard",
                ack="client",
                receipt="guard-subscribed",
                headers=(
                    ("x-single-active-consumer", "true"),
                    ("x-expires", str(GUARD_EXPIRY_MS)),
                    # Durable, with persistent markers: a retry after a broker restart
                    # still finds the journal of the attempts before it.
                    ("durable", "true"),
                    ("auto-delete", "false"),
                    ("exclusive", "false"),
                    ("prefetch-count", str(_JOURNAL_PREFETCH)),
                ),
            )
        )
        markers = self._until(self._mark("started"), waiting=True)
        # Active now.  Markers requeued when the previous consumer left may come in any
        # order, but all of them are ready before a marker sent now, behind them.
        markers += self._until(self._mark("fence"), waiting=False)
        earlier = any(
            m.get("attempt") != self.attempt and m.get("kind") == "started" for m in markers
        )
        floors: dict[str, int] = {}
        for m in markers:
            stream, offset = m.get("stream"), m.get("offset")
            if m.get("kind") == "floor" and isinstance(stream, str) and isinstance(offset, int):
                floors[stream] = min(offset, floors.get(stream, offset))
        if earlier:
            log.info(
                "stomp-streams sink: %s was attempted before; sending only the rows "
                "not in the streams",
                self.queue,
            )
        return History(earlier=earlier, floors=floors)

    def record_floors(self, floors: dict[str, int]) -> None:
        """Put each stream's floor in the journal; return once the broker holds them all.

        Called before the first row to those streams is sent, with nothing else in
        flight on the connection (so no RECEIPT is waited for meanwhile).
        """
        last = ""
        for stream, offset in floors.items():
            last = self._mark("floor", stream=stream, offset=offset)
        if last:
            self._until(last, waiting=False)

    def _mark(self, kind: str, **fields: Any) -> str:
        marker = f"{kind}-{uuid.uuid4().hex[:8]}"
        body = {"attempt": self.attempt, "kind": kind, "at": time.time(), "marker": marker}
        body.update(fields)
        self.link.send(
            Send(
                f"/amq/queue/{self.queue}",
                json.dumps(body).encode(),
                headers=(("content-type", "application/json"), ("persistent", "true")),
            )
        )
        return marker

    def _until(self, marker: str, *, waiting: bool) -> list[dict[str, Any]]:
        """The journal's markers delivered until ``marker`` itself comes back."""
        link = self.link
        seen: list[dict[str, Any]] = []
        logged = False
        while True:
            deadline = time.monotonic() + link.settings.timeout
            event = link.next_event(deadline)
            if event is None:
                if not waiting:
                    raise TimeoutError(f"the journal queue {self.queue} sent nothing back")
                if not logged:  # another attempt is active: wait for it to end
                    logged = True
                    log.info(
                        "stomp-streams sink: another attempt of %s is running; waiting for it",
                        self.queue,
                    )
                continue
            if isinstance(event, Message) and event.subscription == "guard":
                try:
                    found = json.loads(event.body)
                except ValueError:
                    continue  # not ours
                if not isinstance(found, dict):
                    continue
                if found.get("marker") == marker:
                    return seen
                seen.append(found)
            elif isinstance(event, Receipt):
                continue
            else:
                link.check(event)


class RowIds:
    """Row ids that a retry gives again: digest of what is sent, and its repeat count."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        #: Digest -> how many rows had it; an int key costs about 100 bytes per row.
        self.seen: dict[int, int] = {}

    def next(self, stream: str, key: Any, body: bytes, headers: list[tuple[str, str]]) -> str:
        digest = hashlib.blake2b(digest_size=8)
        digest.update(stream.encode())
        digest.update(b"\0" + (b"" if key is None else _bytes(key)) + b"\0")
        digest.update(repr(headers).encode())
        digest.update(b"\0")
        digest.update(body)
        number = int.from_bytes(digest.digest(), "big")
        repeat = self.seen.get(number, -1) + 1
        self.seen[number] = repeat
        name = f"{self.prefix}{number:016x}"
        return name if repeat == 0 else f"{name}.{repeat}"


def _bytes(value: Any) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    return str(value).encode("utf-8")


def stream_floors(connection: ConnectionSettings, streams: list[str]) -> dict[str, int]:
    """For each stream, an offset it has reached now (0 when it sends nothing in time).

    Any offset of the stream's last chunk will do: whatever is sent after this
    call lands above it.  One probe connection for all of them.
    """
    probes = probe_streams(
        connection, streams, firsts=False, quiet=0.0, timeout=FLOOR_PROBE_TIMEOUT
    )
    return {s: probes[s].tail or 0 for s in streams}


def rows_already_written(
    connection: ConnectionSettings, stream: str, prefix: str, floor: int, header: str
) -> set[str]:
    """Ids starting with ``prefix`` in ``header`` of the messages of ``stream`` from
    offset ``floor`` to the tail as it is now."""
    tail = probe_streams(connection, [stream], firsts=False)[stream].tail
    if tail is None or tail < floor:
        return set()
    found: set[str] = set()
    part = StreamRange(stream, floor, tail + 1)
    for got in read_range(
        connection,
        part,
        prefetch=2000,
        read_timeout=max(_SCAN_READ_TIMEOUT, connection.timeout),
        fail_on_data_loss=False,
    ):
        for _, frame in got:
            value = frame.get(header)
            if value is not None and value.startswith(prefix):
                found.add(value)
    return found
