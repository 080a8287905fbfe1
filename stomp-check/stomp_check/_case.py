"""What a case is, the verdicts, and the :class:`Probe` a case runs with.

A case is a function of a :class:`Probe` registered with :func:`case` for
one or more STOMP versions; each version gives one case id,
``<version>/<group>/<n>``, numbered in the order of registration.  The
function decides by returning an outcome made by the probe: ``p.ok(...)``,
``p.broken(...)`` (a FAILED verdict where the clause is a requirement, MUST or
STATED, NON-STRICT where it says SHOULD), ``p.info(...)`` or ``p.absent(...)``.
"""

from __future__ import annotations

import enum
import itertools
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from stomp_proto import Version

from ._clauses import CLAUSES
from ._wire import RawFrame, Target, Unreachable, Wire, build


class Verdict(enum.Enum):
    """Autobahn's verdicts."""

    #: The broker does what the clause says.
    OK = "OK"
    #: A SHOULD is missed.
    NON_STRICT = "NON-STRICT"
    #: A MUST is broken.
    FAILED = "FAILED"
    #: The specs leave it open; the detail records what the broker did.
    INFORMATIONAL = "INFORMATIONAL"
    #: An optional feature is absent (or the run's transport cannot test it).
    UNIMPLEMENTED = "UNIMPLEMENTED"
    #: The case could not run (CONNECT refused, no CONNECTED, the broker gone, a
    #: checker error): no verdict on the broker, never counted as FAILED.
    NOT_RUN = "NOT-RUN"

    def __str__(self) -> str:
        return self.value


#: How strongly a clause binds a broker, read from the quoted words of the case's own
#: version, and what a miss gets.  The STOMP texts use RFC 2119 keywords unevenly: much of
#: each is stated as plain fact ("will be treated as", "is", the grammar), and those
#: statements define the protocol as much as a MUST does, so they fail like one.
LEVELS: dict[str, str] = {
    "MUST": "the clause says MUST or REQUIRED: a miss is FAILED",
    "STATED": (
        'a rule the clause states without a keyword (the frame grammar, "will be treated '
        'as", "is processed"): a miss is FAILED, as for MUST'
    ),
    "SHOULD": "the clause says SHOULD or RECOMMENDED: a miss is NON-STRICT",
    "MAY": "the clause says MAY or OPTIONAL: a miss is INFORMATIONAL",
    "UNSTATED": (
        "the spec of this version states no rule for what the case observes (or not this "
        "rule at all): the case records what the broker did, INFORMATIONAL"
    ),
}
#: The levels whose miss is FAILED.
REQUIRED = ("MUST", "STATED")


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a case function decided."""

    #: The verdict.
    verdict: Verdict
    #: Why, in a few words (what was sent and what came back).
    detail: str


class Setup(Exception):
    """A step every case relies on failed (CONNECT refused, no MESSAGE came)."""


@dataclass(frozen=True, slots=True)
class Case:
    """One check of one clause in one STOMP version."""

    #: ``<version>/<group>/<n>``, e.g. ``1.2/receipts/1``.
    id: str
    #: The group (a key of :data:`GROUPS`).
    group: str
    #: The STOMP version the case speaks.
    version: Version
    #: Where the clause is: ``1.2 §Heart-beating``.
    section: str
    #: The clause, the spec's words only, quoted from that section.
    clause: str
    #: A key of :data:`LEVELS`: how a miss is judged, by the quoted words of this case's
    #: own version (MUST, SHOULD and MAY only where they use the keyword).
    level: str
    #: What the case checks, in one line.
    title: str
    #: The case function (given a :class:`Probe`, or a client-mode probe).
    run: Callable[[Any], Outcome] = field(repr=False, compare=False)
    #: Needs a transport feature: "websocket" (runs only over WebSocket) or "".
    needs: str = ""
    #: The checker's own note on the clause or its level (never the spec's words).
    remark: str = ""


GROUPS: dict[str, str] = {
    "frames": "Frames and EOLs",
    "value-encoding": "Value encoding",
    "header-whitespace": "Header whitespace",
    "repeated-headers": "Repeated headers",
    "content-length": "content-length",
    "size-limits": "Size limits",
    "connecting": "Connecting and version negotiation",
    "heart-beating": "Heart-beating",
    "receipts": "Receipts",
    "error": "ERROR semantics",
    "subscribe": "SUBSCRIBE ids and ack modes",
    "ack": "ACK and NACK",
    "transactions": "Transactions",
    "message": "MESSAGE headers",
    "body": "Body and UTF-8",
    "before-connect": "Frames before CONNECT",
    "websocket": "STOMP over WebSocket",
    "streams": "RabbitMQ stream extensions",
}

CATALOGUE: list[Case] = []
_counters: dict[tuple[str, str], itertools.count[int]] = {}

ALL: tuple[Version, ...] = ("1.0", "1.1", "1.2")
V11: tuple[Version, ...] = ("1.1", "1.2")
V12: tuple[Version, ...] = ("1.2",)
#: ``levels=`` for a rule that 1.0 and 1.1 state without a keyword ("will", "is", their
#: grammar) and 1.2 with MUST or REQUIRED: a miss fails in every version.
STATED_BEFORE_12: dict[str, str] = {"1.0": "STATED", "1.1": "STATED"}
#: ``levels=`` for a case whose rule 1.0 and 1.1 do not have in their own words.
UNSTATED_BEFORE_12: dict[str, str] = {"1.0": "UNSTATED", "1.1": "UNSTATED"}
#: ``levels=`` for a MUST that STOMP 1.0 words as "should" or "recommended".
SHOULD_IN_10: dict[str, str] = {"1.0": "SHOULD"}


def case(
    group: str,
    clause: str,
    level: str,
    versions: tuple[Version, ...] = ALL,
    *,
    levels: dict[str, str] | None = None,
    needs: str = "",
) -> Callable[[Callable[[Probe], Outcome]], Callable[[Probe], Outcome]]:
    """Register a case function for each of ``versions`` (``levels`` overrides per version)."""
    if group not in GROUPS:
        raise ValueError(f"unknown group {group!r}")
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}")
    quoted = CLAUSES[clause]

    def register(function: Callable[[Probe], Outcome]) -> Callable[[Probe], Outcome]:
        title = (function.__doc__ or function.__name__).strip().splitlines()[0]
        for version in versions:
            number = next(_counters.setdefault((version, group), itertools.count(1)))
            judged = quoted.judged(version, (levels or {}).get(version, level))
            CATALOGUE.append(
                Case(
                    id=f"{version}/{group}/{number}",
                    group=group,
                    version=version,
                    section=judged.section,
                    clause=judged.text,
                    level=judged.level,
                    title=title,
                    run=function,
                    needs=needs,
                    remark=judged.remark,
                )
            )
        return function

    return register


class Probe:
    """What a case runs with: the target, its version, fresh connections and names."""

    def __init__(self, case: Case, target: Target) -> None:
        #: The case being run.
        self.case = case
        #: Its STOMP version.
        self.version: Version = case.version
        #: Where to connect.
        self.target = target
        #: Seconds to wait for one answer.
        self.timeout = target.timeout
        #: The wire log, shared by every connection of the case.
        self.log: list[str] = []
        self._started = time.monotonic()
        self._wires: list[Wire] = []
        self._tag = uuid.uuid4().hex[:10]
        self._names = itertools.count(1)
        #: How many of the run's queues the case named.
        self.queues = 0

    # -- outcomes --------------------------------------------------------------

    def ok(self, detail: str = "") -> Outcome:
        """The clause is met."""
        return Outcome(Verdict.OK, detail)

    def broken(self, detail: str) -> Outcome:
        """The clause is not met: FAILED for a MUST or STATED rule, NON-STRICT for a SHOULD."""
        if self.case.level in REQUIRED:
            return Outcome(Verdict.FAILED, detail)
        if self.case.level == "SHOULD":
            return Outcome(Verdict.NON_STRICT, detail)
        return Outcome(Verdict.INFORMATIONAL, detail)

    def info(self, detail: str) -> Outcome:
        """INFORMATIONAL: what the broker did where the specs leave it open."""
        return Outcome(Verdict.INFORMATIONAL, detail)

    def absent(self, detail: str) -> Outcome:
        """UNIMPLEMENTED: an optional feature is absent."""
        return Outcome(Verdict.UNIMPLEMENTED, detail)

    def check(self, good: bool, detail: str, *, ok: str = "") -> Outcome:
        """:meth:`ok` (with ``ok`` as detail) when ``good``, else :meth:`broken`."""
        return self.ok(ok or detail) if good else self.broken(detail)

    # -- names -----------------------------------------------------------------

    def queue(self, label: str = "q") -> str:
        """A destination no other case (nor run) uses."""
        self.queues += 1
        return f"{self.target.prefix}{self._tag}.{label}{next(self._names)}"

    def name(self, label: str) -> str:
        """A unique name (for receipts, transactions, ids)."""
        return f"{label}-{self._tag}-{next(self._names)}"

    # -- connections -----------------------------------------------------------

    def open(self, versions: tuple[Version, ...] | None = None) -> Wire:
        """A new connection, not logged in (``versions``: the WebSocket subprotocols)."""
        wire = Wire(
            self.target,
            self.log,
            f"c{len(self._wires) + 1}",
            self._started,
            versions or (self.version,),
        )
        self._wires.append(wire)
        return wire

    def connect_headers(
        self, version: Version | None = None, heartbeat: str | None = "0,0"
    ) -> list[tuple[str, str]]:
        """The CONNECT headers of a normal login (``heartbeat=None``: no heart-beat header)."""
        version = version or self.version
        headers: list[tuple[str, str]] = []
        if version != "1.0":
            headers.append(("accept-version", version))
        headers.append(("host", self.target.vhost or self.target.host))
        if self.target.login is not None:
            headers.append(("login", self.target.login))
        if self.target.passcode is not None:
            headers.append(("passcode", self.target.passcode))
        if heartbeat is not None and version != "1.0":
            headers.append(("heart-beat", heartbeat))
        return headers

    def session(
        self, *, heartbeat: str | None = "0,0", extra: list[tuple[str, str]] | None = None
    ) -> Wire:
        """A connection logged in with this case's version (Setup when refused)."""
        wire = self.open()
        wire.send(build("CONNECT", self.connect_headers(heartbeat=heartbeat) + (extra or [])))
        frame = wire.expect("CONNECTED")
        if frame is None or frame.command != "CONNECTED":
            raise Setup(
                "CONNECT was not answered with CONNECTED: "
                + (describe(frame) if frame else "nothing came")
            )
        wire.connected = frame
        return wire

    def frame(
        self,
        wire: Wire,
        command: str,
        headers: list[tuple[str, str]] | None = None,
        body: bytes = b"",
    ) -> None:
        """Send a well-formed frame of this case's version."""
        wire.send(build(command, headers or [], body, version=self.version))

    def receipt(
        self,
        wire: Wire,
        command: str,
        headers: list[tuple[str, str]] | None = None,
        body: bytes = b"",
    ) -> RawFrame | None:
        """Send a frame with a receipt; the RECEIPT (or ERROR) that answers it."""
        rid = self.name("r")
        self.frame(wire, command, [*(headers or []), ("receipt", rid)], body)
        return wire.expect("RECEIPT", receipt=rid)

    def must_receipt(
        self,
        wire: Wire,
        command: str,
        headers: list[tuple[str, str]] | None = None,
        body: bytes = b"",
    ) -> RawFrame:
        """:meth:`receipt`, failing the case set-up when no RECEIPT comes."""
        answer = self.receipt(wire, command, headers, body)
        if answer is None or answer.command != "RECEIPT":
            raise Setup(
                f"{command} with a receipt got " + (describe(answer) if answer else "no RECEIPT")
            )
        return answer

    def subscribe(
        self,
        wire: Wire,
        destination: str,
        sub_id: str = "s1",
        ack: str | None = None,
        extra: list[tuple[str, str]] | None = None,
    ) -> None:
        """SUBSCRIBE with a receipt (no ``id`` in 1.0 unless one is given); waits for it."""
        headers = [("destination", destination)]
        if self.version != "1.0" or sub_id != "s1":
            headers.append(("id", sub_id))
        if ack:
            headers.append(("ack", ack))
        self.must_receipt(wire, "SUBSCRIBE", headers + (extra or []))

    def message(self, wire: Wire, timeout: float | None = None) -> RawFrame:
        """The next MESSAGE, failing the case set-up when none comes."""
        frame = wire.expect("MESSAGE", timeout=timeout)
        if frame is None or frame.command != "MESSAGE":
            raise Setup("expected a MESSAGE, got " + (describe(frame) if frame else "nothing"))
        return frame

    def ack_headers(self, message: RawFrame, sub_id: str = "s1") -> list[tuple[str, str]]:
        """ACK/NACK headers naming ``message`` as this version wants them."""
        version = self.version
        if version == "1.2":
            return [("id", message.value("ack", version) or "")]
        headers = [("message-id", message.value("message-id", version) or "")]
        if version == "1.1":
            headers.append(("subscription", sub_id))
        return headers

    @contextmanager
    def closing(self) -> Iterator[None]:
        """Close every connection of the case at the end."""
        try:
            yield
        finally:
            for wire in self._wires:
                wire.close()


def describe(frame: RawFrame) -> str:
    """A frame in a few words, for details."""
    if frame.command == "ERROR":
        return f"ERROR message={frame.get('message')!r}"
    if frame.command == "RECEIPT":
        return f"RECEIPT receipt-id={frame.get('receipt-id')!r}"
    return frame.command


def run_case(case: Case, target: Target) -> tuple[Outcome, list[str], float, int]:
    """Run one case; its outcome, wire log, duration in seconds and queues named."""
    probe = Probe(case, target)
    started = time.monotonic()
    with probe.closing():
        try:
            outcome = case.run(probe)
        except Setup as exc:
            outcome = Outcome(Verdict.NOT_RUN, f"could not set the case up: {exc}")
        except Unreachable as exc:
            outcome = Outcome(Verdict.NOT_RUN, f"connection failed during the case: {exc}")
        except Exception as exc:  # a checker bug must show (the run exits 2), not pass
            outcome = Outcome(Verdict.NOT_RUN, f"checker error: {type(exc).__name__}: {exc}")
    return outcome, probe.log, time.monotonic() - started, probe.queues
