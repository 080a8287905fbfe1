"""How far behind a streaming query is, from the progress Spark reports.

PySpark's Python sources can report their latest offset (``stomp-streams``
does, through ``reportLatestOffset``: Spark shows it as ``latestOffset``
beside each batch's ``endOffset``), but they cannot add custom metrics to a
query's progress, nor set its source description.  The lag is therefore
computed from the progress itself, where the user already looks: no probe,
no connection.  Pure Python; no pyspark needed.
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


def offsets_behind_latest(progress: Any) -> dict[str, int]:
    """Offsets each stream of a ``stomp-streams`` query is behind its tail, after a batch.

    ``progress`` is ``query.lastProgress`` (or one of ``query.recentProgress``,
    or the JSON of one as a dict).  For every source whose ``endOffset`` and
    ``latestOffset`` are ``{stream: offset}`` objects, each stream gives
    ``latestOffset - endOffset`` (never below 0): how many offsets were
    already in the stream when the batch was planned and are left for later
    batches.  ``sum(...values())`` is the query's total.  Sources that report
    no latest offset (``stomp``: a queue has no offsets to compare) add
    nothing; a progress without a batch gives ``{}``.
    """
    behind: dict[str, int] = {}
    for source in _as_dict(progress).get("sources") or ():
        if not isinstance(source, Mapping):
            continue
        end = _offsets(source.get("endOffset"))
        latest = _offsets(source.get("latestOffset"))
        if end is None or latest is None:
            continue
        for stream, tail in latest.items():
            behind[stream] = max(0, tail - end.get(stream, 0))
    return behind
