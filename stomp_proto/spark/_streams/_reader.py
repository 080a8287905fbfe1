"""The stream source's two halves without Spark: planning (driver) and range reads (executors).

:class:`StreamsPlanner` is what Spark's driver-side calls go to: where a query
starts (``initialOffset``), how far a micro-batch reaches (``latestOffset``,
with ``maxOffsetsPerTrigger`` and ``Trigger.AvailableNow``), and which ranges
the tasks of a batch read (``partitions``).  It learns the streams' state
from probes (:func:`~._link.probe_streams`), injected so that tests can
fake them.  :func:`read_partition` is one task: one range over one
connection, as Arrow record batches.

The broker keeps no consumer position for a stream, and the ranges of a
micro-batch are fixed in Spark's offset log before they are read, so a
batch replayed after a crash reads the very same messages: with a sink that
commits each batch once (idempotently), every message lands exactly once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .._options import ConnectionSettings
from ._link import MissingStreamError, ProbeResult, probe_streams, read_range
from ._offsets import (
    EARLIEST,
    LATEST,
    DataLossError,
    StreamRange,
    StreamsReaderSettings,
    cap_by_backlog,
    data_loss_message,
    lost_range,
    plan_ranges,
)

__all__ = ["StreamsPlanner", "read_partition"]

log = logging.getLogger("stomp_proto.spark")

Probe = Callable[..., dict[str, ProbeResult]]

#: How often a probe that found nothing in a stream known to hold messages is repeated.
PROBE_RETRIES = 3


class StreamsPlanner:
    """Offsets and ranges for a query over a fixed set of streams (see the module docstring).

    Picklable; it connects only inside its methods, one probe connection at a time.
    """

    def __init__(
        self,
        connection: ConnectionSettings,
        settings: StreamsReaderSettings,
        probe: Probe = probe_streams,
    ) -> None:
        self.connection = connection
        self.settings = settings
        self._probe_fn = probe
        #: The highest tail each stream was seen with: a probe that times out under
        #: load must not make a stream look empty (its offsets never go back).
        self._tails: dict[str, int] = {}
        #: First kept offsets from the latest probe (None: the stream was empty).
        self._firsts: dict[str, int | None] = {}
        #: Trigger.AvailableNow: the ends the query stops at.
        self._target: dict[str, int] | None = None
        #: The streams read: the configured ones, and those discovered since
        #: (``discoverPartitions``).
        self._streams: tuple[str, ...] = tuple(settings.streams)

    # -- probes --------------------------------------------------------------------

    def probe(self, *, tails: bool = True, firsts: bool = True) -> dict[str, ProbeResult]:
        """Probe every stream; a stream that looks empty but is known not to be is probed
        again, with longer waits (a loaded broker can take longer than ``probeTimeout``).

        A stream is known not to be empty once some probe saw a message in it; a
        truly empty stream costs one ``probeTimeout`` per call, no more.
        """
        s = self.settings
        found = dict(self._probe_once(self._streams, tails, firsts, s.probe_timeout))
        timeout = s.probe_timeout
        for _ in range(PROBE_RETRIES):
            slow = [
                stream
                for stream, r in found.items()
                if (tails and r.tail is None and stream in self._tails)
                or (firsts and r.first is None and (r.tail is not None or stream in self._tails))
            ]
            if not slow:
                break
            timeout *= 4
            log.info("stomp-streams: probing %s again (%.2f s)", ", ".join(slow), timeout)
            again = self._probe_once(slow, tails, firsts, timeout)
            for stream, r in again.items():
                old = found[stream]
                found[stream] = ProbeResult(
                    first=old.first if old.first is not None else r.first,
                    tail=max((t for t in (old.tail, r.tail) if t is not None), default=None),
                )
        for stream, result in found.items():
            if result.tail is not None:
                self._tails[stream] = max(self._tails.get(stream, -1), result.tail)
            if firsts and (result.first is not None or stream not in self._tails):
                self._firsts[stream] = result.first
            elif firsts:
                self._firsts.pop(stream, None)  # unknown: the read task checks for loss
        return found

    def _probe_once(
        self, streams: Sequence[str], tails: bool, firsts: bool, timeout: float
    ) -> dict[str, ProbeResult]:
        return self._probe_fn(
            self.connection,
            streams,
            tails=tails,
            firsts=firsts,
            timeout=timeout,
            quiet=self.settings.probe_quiet,
        )

    def reached(self, offsets: Mapping[str, int]) -> None:
        """Note that each stream holds the offsets below ``offsets`` (a batch's end): a
        probe that then finds one of them empty looks again, longer."""
        for stream, offset in offsets.items():
            if offset > 0:
                self._tails[stream] = max(self._tails.get(stream, -1), offset - 1)

    def latest(self) -> dict[str, int]:
        """Each stream's next offset after its tail (0 for an empty stream)."""
        self.probe()
        return {s: self._tails.get(s, -1) + 1 for s in self._streams}

    def earliest(self) -> dict[str, int]:
        """Each stream's first kept offset (0 for an empty stream)."""
        found = self.probe()
        return {s: found[s].first or 0 for s in self._streams}

    # -- what Spark's driver calls ---------------------------------------------------

    def initial_offsets(self) -> dict[str, int]:
        """Where a new query (or a batch read) starts, per ``startingOffsets``."""
        spec = self.settings.starting
        streams = self._streams
        if spec.kind == "latest":
            return self.latest()
        if spec.kind == "timestamp":
            return self._starts_at(streams, spec.timestamp)
        if spec.kind == "timestamps":
            starts: dict[str, int] = {}
            by_time: dict[int, list[str]] = {}
            for stream, seconds in spec.timestamps.items():
                by_time.setdefault(seconds, []).append(stream)
            for seconds, group in sorted(by_time.items()):
                starts.update(self._starts_at(group, seconds))
            rest = [s for s in streams if s not in starts]
            if rest:
                others = self.latest() if spec.default == "latest" else self.earliest()
                starts.update({s: others[s] for s in rest})
            return {s: starts[s] for s in streams}
        if spec.kind == "offsets":
            left_out = LATEST if spec.default == "latest" else EARLIEST
            return self._resolve({s: spec.offsets.get(s, left_out) for s in streams})
        return self.earliest()

    def _resolve(self, offsets: Mapping[str, int]) -> dict[str, int]:
        """``offsets`` with Kafka's ``-2`` (earliest) and ``-1`` (latest) made real."""
        latest = self.latest() if LATEST in offsets.values() else {}
        earliest = self.earliest() if EARLIEST in offsets.values() else {}
        return {
            s: latest[s] if o == LATEST else earliest[s] if o == EARLIEST else o
            for s, o in offsets.items()
        }

    def _starts_at(self, streams: Sequence[str], seconds: int) -> dict[str, int]:
        """Where each stream's first chunk written at or after ``seconds`` starts."""
        found = self._probe_fn(
            self.connection,
            streams,
            tails=True,
            firsts=True,
            timestamp=seconds,
            timeout=self.settings.probe_timeout,
            quiet=self.settings.probe_quiet,
        )
        # Nothing written since the timestamp: start after the tail.
        starts: dict[str, int] = {}
        for s in streams:
            first, tail = found[s].first, found[s].tail
            starts[s] = first if first is not None else (-1 if tail is None else tail) + 1
        return starts

    def ending_offsets(self) -> dict[str, int]:
        """Where a batch read ends, per ``endingOffsets``; never past the tails it finds."""
        latest = self.latest()
        spec = self.settings.ending
        if spec.kind == "offsets":
            ends = {s: spec.offsets.get(s, LATEST) for s in latest}
            return {s: latest[s] if o == LATEST else min(o, latest[s]) for s, o in ends.items()}
        return latest

    def reported_latest(self) -> dict[str, int]:
        """Each stream's next offset after the highest tail seen so far (no new probe):
        what Spark shows as the source's ``latestOffset`` in a query's progress."""
        return {s: self._tails.get(s, -1) + 1 for s in self._streams}

    def discover(self, known: Iterable[str] = ()) -> list[str]:
        """``discoverPartitions``: the new ``<stream>-N`` streams, now read too.

        Streams of the checkpoint's offsets (``known``) are taken back first;
        then ``<stream>-<next N>`` is probed until one does not exist.  Each
        trigger costs one probe that finds no stream (RabbitMQ answers it with
        an ERROR, on a connection of its own).
        """
        settings = self.settings
        if not settings.discover_partitions:
            return []
        found = self._adopt(known)
        while True:
            numbers = [settings.number_of(s) for s in self._streams]
            candidate = f"{settings.stream_base}-{max(n for n in numbers if n is not None) + 1}"
            try:
                self._probe_once([candidate], True, True, settings.probe_timeout)
            except MissingStreamError:
                break
            found += self._adopt([candidate])
        if found:
            log.info("stomp-streams: reading new streams %s", ", ".join(found))
        return found

    def _adopt(self, streams: Iterable[str]) -> list[str]:
        """Read the ``<stream>-N`` among ``streams`` too (``discoverPartitions``)."""
        settings = self.settings
        if not settings.discover_partitions:
            return []
        new = [s for s in streams if s not in self._streams and settings.number_of(s) is not None]
        if new:
            self._streams = tuple(sorted({*self._streams, *new}, key=settings.partition_of))
        return new

    def prepare_available_now(self) -> None:
        """``Trigger.AvailableNow``: fix the ends at the tails of this moment."""
        self.discover()
        self._target = self.latest()

    def latest_offsets(self, start: Mapping[str, int], max_offsets: int | None) -> dict[str, int]:
        """The end of the next micro-batch from ``start``: the tails (or the AvailableNow
        target), at most ``max_offsets`` further in total; ``start`` itself if nothing is new."""
        if self._target is None:
            self.discover(start)
        elif any(s in self._target and self._target[s] < int(o) for s, o in start.items()):
            # A target below where the query stands: the probe that fixed it found those
            # streams empty in time (a loaded broker, a planner new after a restart),
            # since a tail never goes back.  Probe again, longer, knowing they hold
            # messages, or an availableNow query would end with their backlog unread.
            self.reached(start)
            found = self.latest()
            self._target = {s: max(self._target.get(s, 0), found[s]) for s in found}
        latest = dict(self._target) if self._target is not None else self.latest()
        begin = self._start_of(start)
        latest = {s: max(latest[s], begin[s]) for s in latest}
        if max_offsets is not None:
            latest = cap_by_backlog(begin, latest, max_offsets)
        return latest

    def ranges(self, start: Mapping[str, int], end: Mapping[str, int]) -> list[StreamRange]:
        """The read tasks of the batch ``start``..``end``, after the data-loss check."""
        # A batch planned before a restart may hold streams discovered then.
        self._adopt([*start, *end])
        begin = self._start_of(start)
        wanted = {s: e for s, e in end.items() if s in begin and e > begin[s]}
        if wanted and any(s not in self._firsts for s in wanted):
            self.probe()
        for stream in wanted:
            first = self._firsts.get(stream)
            lost = lost_range(begin[stream], first)
            if lost is None or first is None:
                continue
            if self.settings.fail_on_data_loss:
                raise DataLossError(data_loss_message(stream, begin[stream], first))
            log.warning("stomp-streams: %s", data_loss_message(stream, begin[stream], first))
            begin[stream] = min(first, wanted[stream])
        return plan_ranges(begin, wanted, self.settings.max_offsets_per_partition)

    def _start_of(self, start: Mapping[str, int]) -> dict[str, int]:
        """``start`` for every stream read; a stream new to the query starts at its first kept
        offset (as Kafka's source does with a new partition)."""
        missing = [s for s in self._streams if s not in start]
        firsts: dict[str, int] = {}
        if missing:
            found = self.probe()
            firsts = {s: found[s].first or 0 for s in missing}
        return {s: int(start[s]) if s in start else firsts[s] for s in self._streams}


def read_partition(
    connection: ConnectionSettings, settings: StreamsReaderSettings, part: StreamRange
) -> Iterator[Any]:
    """One read task: the range's messages as Arrow record batches of up to ``batchRows`` rows.

    The frames of each read from the socket go straight into the columns of the
    batch being built (:class:`~.._schema.StreamRows`).
    """
    from .._schema import StreamRows

    rows = StreamRows(
        part.stream,
        settings.key_header,
        settings.row_id_header,
        partition=settings.partition_of(part.stream),
        timestamp_header=settings.timestamp_header,
        key_binary=settings.key_binary,
        topic=settings.topic_of(part.stream) if settings.kafka_schema else None,
    )
    limit = settings.batch_rows
    for got in read_range(
        connection,
        part,
        prefetch=settings.prefetch,
        read_timeout=settings.read_timeout,
        fail_on_data_loss=settings.fail_on_data_loss,
    ):
        if got:
            rows.add(got, time.time_ns() // 1000)
            if len(rows) >= limit:
                yield rows.take()
    if len(rows):
        yield rows.take()
