"""How far behind a streaming query is, from the progress Spark reports.

PySpark's Python sources can report their latest offset (``stomp-streams``
does, through ``reportLatestOffset``: Spark shows it as ``latestOffset``
beside each batch's ``endOffset``), but they cannot add custom metrics to a
query's progress, nor set its source description.  The lag is therefore
computed from the progress itself, where the user already looks.  Only for
a batch that Spark replays from its offset log after a restart, whose
progress has no latest offset, are the tails fetched from the broker, when
the caller gives the connection options.  No pyspark needed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["offsets_behind_latest"]


def _offsets(value: Any) -> dict[str, int] | None:
    """A ``{stream: offset}`` dict from a progress field (JSON text or parsed); None if not."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, Mapping):
        return None
    found: dict[str, int] = {}
    for name, offset in value.items():
        if isinstance(offset, bool) or not isinstance(offset, int):
            return None
        found[str(name)] = offset
    return found


def _as_dict(progress: Any) -> Mapping[str, Any]:
    if isinstance(progress, Mapping):
        return progress
    text = getattr(progress, "json", None)  # pyspark's StreamingQueryProgress
    if isinstance(text, str):
        parsed = json.loads(text)
        if isinstance(parsed, dict):
            return parsed
    raise TypeError(
        "expected a streaming query's progress (query.lastProgress, or its JSON as a dict), "
        f"not {type(progress).__name__}"
    )


def behind(end: Mapping[str, int], latest: Mapping[str, int]) -> dict[str, int]:
    """Offsets each stream of ``latest`` is past ``end`` (never below 0)."""
    return {stream: max(0, tail - end.get(stream, 0)) for stream, tail in latest.items()}


def _fetch_latest(connection: Mapping[str, str], end: Mapping[str, int]) -> dict[str, int]:
    """Each stream's next offset after its tail now, as the source's planner probes it
    (a stream known to hold messages is probed again, longer, if it looks empty)."""
    from ._options import ConnectionSettings
    from ._streams._offsets import StreamsReaderSettings
    from ._streams._reader import StreamsPlanner

    planner = StreamsPlanner(
        ConnectionSettings.from_options(connection),
        StreamsReaderSettings.from_options({"streams": ",".join(sorted(end))}),
    )
    planner.reached(end)
    return planner.latest()


def offsets_behind_latest(
    progress: Any, connection: Mapping[str, str] | None = None
) -> dict[str, int]:
    """Offsets each stream of a ``stomp-streams`` query is behind its tail, after a batch.

    ``progress`` is ``query.lastProgress`` (or one of ``query.recentProgress``,
    or the JSON of one as a dict).  For every source whose ``endOffset`` and
    ``latestOffset`` are ``{stream: offset}`` objects, each stream gives
    ``latestOffset - endOffset`` (never below 0): how many offsets were
    already in the stream when the batch was planned and are left for later
    batches.  ``sum(...values())`` is the query's total.  Sources that report
    no latest offset (``stomp``: a queue has no offsets to compare) add
    nothing; a progress without a batch gives ``{}``.

    The first batch after a restart from a checkpoint is often the one
    planned before the stop, which Spark replays from its offset log without
    asking the source for its latest offset: its ``latestOffset`` is null.
    Given ``connection``, the source's options (``host``, ``port``,
    ``login``, ``passcode``, ``vhost``, TLS ...; others are ignored), the
    tails of such a batch's streams are fetched from the broker now, so
    that batch too gives the real backlog; without it, it adds nothing.
    """
    lag: dict[str, int] = {}
    for source in _as_dict(progress).get("sources") or ():
        if not isinstance(source, Mapping):
            continue
        end = _offsets(source.get("endOffset"))
        if end is None:
            continue
        latest = _offsets(source.get("latestOffset"))
        # Not for the stomp source, whose offset is a count of messages ({"offset": n}).
        if latest is None and connection is not None and end and set(end) != {"offset"}:
            latest = _fetch_latest(connection, end)
        if latest is not None:
            lag.update(behind(end, latest))
    return lag
