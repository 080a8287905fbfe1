"""Selecting cases and running them against a broker, several at a time."""

from __future__ import annotations

import fnmatch
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from stomp_proto import Version

from . import _cases_frames, _cases_messaging, _cases_session  # noqa: F401  (registration)
from ._case import CATALOGUE, GROUPS, Case, Verdict, run_case
from ._wire import Target, Unreachable, Wire, build, left_behind, queue_headers


@dataclass(frozen=True, slots=True)
class Result:
    """One case's verdict, why, and what went over the wire."""

    #: The case.
    case: Case
    #: Its verdict.
    verdict: Verdict
    #: Why.
    detail: str
    #: The wire log: one line per write, read or event, with its time.
    wire: tuple[str, ...]
    #: Seconds the case took.
    duration: float
    #: How many of the run's queues the case named.
    queues: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The case's entry in the JSON report."""
        return {
            "id": self.case.id,
            "group": self.case.group,
            "section": self.case.section,
            "clause": self.case.clause,
            "remark": self.case.remark,
            "level": self.case.level,
            "title": self.case.title,
            "verdict": str(self.verdict),
            "detail": self.detail,
            "wire": list(self.wire),
            "duration": round(self.duration, 3),
        }


@dataclass(slots=True)
class Report:
    """A whole run: the broker, every result in catalogue order, and when."""

    #: What the broker said of itself (``server``, ``version``...) and where it is.
    broker: dict[str, Any]
    #: The results, in catalogue order.
    results: list[Result] = field(default_factory=list)
    #: Seconds the run took.
    duration: float = 0.0
    #: Why the run is incomplete ("" when every case ran): the broker stopped answering...
    incomplete: str = ""
    #: What the run leaves on the broker (its queues), in a sentence.
    left_behind: str = ""
    #: When the run started, UTC, ISO 8601 to the second.
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))

    def counts(self) -> Counter[str]:
        """How many cases got each verdict."""
        return Counter(str(r.verdict) for r in self.results)

    def failed(self, *, strict: bool = False) -> bool:
        """Whether a case FAILED (or, with ``strict``, was NON-STRICT)."""
        bad = {Verdict.FAILED, Verdict.NON_STRICT} if strict else {Verdict.FAILED}
        return any(r.verdict in bad for r in self.results)

    def not_run(self) -> list[Result]:
        """The cases that could not run (their verdict is NOT-RUN)."""
        return [r for r in self.results if r.verdict is Verdict.NOT_RUN]

    def summary(self) -> dict[str, Any]:
        """Counts of verdicts, overall and per group, and the duration."""
        groups: dict[str, dict[str, int]] = {}
        for result in self.results:
            counts = groups.setdefault(result.case.group, {})
            counts[str(result.verdict)] = counts.get(str(result.verdict), 0) + 1
        return {
            "cases": len(self.results),
            "verdicts": dict(self.counts()),
            "groups": groups,
            "duration": round(self.duration, 1),
            "incomplete": self.incomplete,
            "left_behind": self.left_behind,
        }

    def as_dict(self) -> dict[str, Any]:
        """The JSON report: ``cases``, ``broker``, ``summary``."""
        return {
            "cases": [r.as_dict() for r in self.results],
            "broker": self.broker,
            "started": self.started,
            "summary": self.summary(),
        }


def select(
    versions: Iterable[Version],
    include: Iterable[str] = (),
    exclude: Iterable[str] = (),
    catalogue: list[Case] | None = None,
) -> list[Case]:
    """The catalogue's cases of ``versions`` whose ids match ``include`` and not ``exclude``.

    Patterns are shell wildcards on case ids (``1.2/heart-beating/*``); a
    pattern without wildcard or slash also matches a whole group (``receipts``).
    """
    include, exclude = list(include), list(exclude)
    wanted = set(versions)

    def matches(case: Case, pattern: str) -> bool:
        if "/" not in pattern and not any(c in pattern for c in "*?["):
            return case.group == pattern
        return fnmatch.fnmatchcase(case.id, pattern)

    return [
        case
        for case in (CATALOGUE if catalogue is None else catalogue)
        if case.version in wanted
        and (not include or any(matches(case, p) for p in include))
        and not any(matches(case, p) for p in exclude)
    ]


# How long a broker that took the login probe after a miss must keep answering for
# the miss to stand: a broker shutting down closes its connections before its
# listener.
MISS_GRACE = 0.5


def probe_broker(target: Target) -> dict[str, Any]:
    """CONNECT once; the broker's CONNECTED headers, or :class:`Unreachable`."""
    log: list[str] = []
    wire = Wire(target, log, "c0", time.monotonic())
    try:
        headers = [("accept-version", "1.0,1.1,1.2"), ("host", target.vhost or target.host)]
        if target.login is not None:
            headers.append(("login", target.login))
        if target.passcode is not None:
            headers.append(("passcode", target.passcode))
        wire.send(build("CONNECT", headers))
        got = wire.expect("CONNECTED")
        if got is None or got.command != "CONNECTED":
            detail = f"ERROR {got.get('message')!r}" if got is not None else "no answer"
            raise Unreachable(f"the broker did not accept CONNECT: {detail}")
        wire.send(build("DISCONNECT", []))
        connected = dict(got.headers)
    finally:
        wire.close()
    return {
        "host": target.host,
        "port": target.port,
        "transport": "websocket " + target.websocket
        if target.websocket
        else ("tls" if target.tls else "tcp"),
        "server": connected.get("server", ""),
        "version": connected.get("version", "1.0"),
        "heart-beat": connected.get("heart-beat", ""),
    }


def run(target: Target, cases: list[Case], *, workers: int = 12) -> Report:
    """Run ``cases`` against the broker; :class:`Unreachable` when it cannot be reached."""
    started = time.monotonic()
    report = Report(probe_broker(target))
    target = replace(target, queue_headers=queue_headers(report.broker["server"]))

    def one(case: Case) -> Result:
        if case.needs == "websocket" and not target.websocket:
            return Result(
                case,
                Verdict.UNIMPLEMENTED,
                "not checked: the run is not over WebSocket (--websocket PATH)",
                (),
                0.0,
            )
        outcome, log, duration, queues = run_case(case, target)
        verdict, detail = outcome.verdict, outcome.detail
        if verdict in (Verdict.FAILED, Verdict.NON_STRICT):
            # A miss is only a verdict while the broker still answers: one that is
            # gone or paused misses everything, and that is no violation.  A broker
            # that has begun to shut down can still take a login for a moment after
            # it closed the case's connection, so the miss stands only if it still
            # answers after a grace period too.
            gone = _unreachable(target)
            if not gone:
                time.sleep(MISS_GRACE)
                gone = _unreachable(target)
            if gone:
                verdict, detail = Verdict.NOT_RUN, f"{gone} (the case saw: {detail})"
        return Result(case, verdict, detail, tuple(log), duration, queues)

    # The slow cases (heart-beats, size limits) first, so they overlap the rest.
    slow = ("heart-beating", "size-limits", "streams")
    order = sorted(cases, key=lambda c: c.group not in slow)
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        done = dict(zip([c.id for c in order], pool.map(one, order), strict=True))
    report.results = [done[c.id] for c in cases]
    report.left_behind = left_behind(target, sum(r.queues for r in report.results))
    if report.not_run():
        gone = _unreachable(target)
        report.incomplete = f"{len(report.not_run())} cases could not run; " + (
            gone if gone else "the broker still answers CONNECT"
        )
    report.duration = time.monotonic() - started
    return report


def _unreachable(target: Target) -> str:
    """Why the broker no longer accepts a login ("" when it does)."""
    try:
        probe_broker(target)
    except Unreachable as exc:
        return f"the broker stopped answering: {exc}"
    return ""


__all__ = ["GROUPS", "Report", "Result", "probe_broker", "run", "select"]
