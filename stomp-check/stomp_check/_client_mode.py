"""``stomp-check client``: the checker plays a broker and judges a client.

The client under test runs the echo script (see ``docs/checking.rst``):

1. CONNECT, offering the versions it speaks (and heart-beats, to be checked on them);
2. SUBSCRIBE to ``/queue/check``;
3. for each MESSAGE, SEND to ``/queue/echo`` the same body with every header
   whose name starts with ``x-`` (as the library decoded it), asking for a
   receipt if it can;
4. when the session ends, connect again; stop when CONNECT is answered by an
   ERROR whose ``message`` is ``check-client done``.

Each case is one session: the checker accepts the connection, answers
CONNECTED with the case's version, sends its MESSAGE frames (escapes, NULs,
EOLs, CRLF, heart-beats...) and judges what the client echoes.
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass

from stomp_proto import Version

from ._case import (
    ALL,
    SHOULD_IN_10,
    STATED_BEFORE_12,
    V11,
    V12,
    Case,
    Outcome,
    Probe,
    Verdict,
    describe,
)
from ._clauses import CLAUSES
from ._common import beat_window, judge_gap, too_long
from ._runner import Report, Result
from ._wire import RawFrame, Target, Unreachable, Wire, build, unescape

#: The groups of the client cases (their ids are ``<version>/<group>/<n>``).
CLIENT_GROUPS = {
    "client-frames": "Client: frames and EOLs",
    "client-value-encoding": "Client: value encoding",
    "client-body": "Client: bodies",
    "client-heart-beating": "Client: heart-beating",
    "client-error": "Client: ERROR handling",
    "client-receipts": "Client: RECEIPT ordering",
}
#: What the checker says, as an ERROR to CONNECT, when every case has run.
DONE = "check-client done"
CHECK_QUEUE, ECHO_QUEUE = "/queue/check", "/queue/echo"

CLIENT_CATALOGUE: list[Case] = []
_HEARTBEAT: dict[str, str] = {}
_numbers: dict[tuple[str, str], itertools.count[int]] = {}


def client_case(
    group: str,
    clause: str,
    level: str,
    versions: tuple[Version, ...],
    *,
    heartbeat: str = "0,0",
    levels: dict[str, str] | None = None,
) -> Callable[[Callable[[ClientProbe], Outcome]], Callable[[ClientProbe], Outcome]]:
    """Register a client case (``heartbeat``: what CONNECTED offers; ``levels``: per version)."""
    quoted = CLAUSES[clause]

    def register(function: Callable[[ClientProbe], Outcome]) -> Callable[[ClientProbe], Outcome]:
        title = (function.__doc__ or function.__name__).strip().splitlines()[0]
        for version in versions:
            number = next(_numbers.setdefault((version, group), itertools.count(1)))
            judged = quoted.judged(version, (levels or {}).get(version, level))
            found = Case(
                f"{version}/{group}/{number}",
                group,
                version,
                judged.section,
                judged.text,
                judged.level,
                title,
                function,
                remark=judged.remark,
            )
            CLIENT_CATALOGUE.append(found)
            _HEARTBEAT[found.id] = heartbeat
        return function

    return register


@dataclass(slots=True)
class _Session:
    wire: Wire
    version: Version
    subscription: str
    #: The client's CONNECT heart-beat: (cx, cy).
    offered: tuple[int, int]


class ClientProbe(Probe):
    """What a client case runs with: the client's session, logged in and subscribed."""

    def __init__(self, case: Case, target: Target, session: _Session, log: list[str]) -> None:
        super().__init__(case, target)
        self.log = log
        self.session_ = session
        self.wire = session.wire
        self._ids = itertools.count(1)
        #: While True, :meth:`echo` leaves the client's receipts unanswered.
        self.hold_receipts = False

    @property
    def offered(self) -> tuple[int, int]:
        """The client's CONNECT heart-beat, ``(cx, cy)``."""
        return self.session_.offered

    def send_message(
        self,
        headers: list[tuple[str, str]],
        body: bytes = b"",
        *,
        eol: bytes = b"\n",
        content_length: bool | None = None,
        after: bytes = b"\n",
    ) -> None:
        """A MESSAGE for the client's subscription, then ``after`` (EOLs)."""
        base = [
            ("subscription", self.session_.subscription),
            ("message-id", f"m-{next(self._ids)}"),
            ("destination", CHECK_QUEUE),
        ]
        if self.version == "1.2":
            base.append(("ack", f"a-{next(self._ids)}"))
        self.wire.send(
            build(
                "MESSAGE",
                base + headers,
                body,
                version=self.version,
                eol=eol,
                content_length=content_length,
            )
            + after
        )

    def echo(self, timeout: float | None = None) -> RawFrame | None:
        """The next SEND the client echoes (answering its receipt, if any)."""
        frame = self.wire.expect("SEND", timeout=timeout)
        if frame is not None and frame.command == "SEND":
            rid = frame.get("receipt")
            if rid is not None and not self.hold_receipts:
                self.wire.send(
                    build(
                        "RECEIPT",
                        [("receipt-id", unescape(rid, self.version) or rid)],
                        version=self.version,
                    )
                )
            return frame
        return None

    def echoed(self, frame: RawFrame | None, name: str, value: str) -> Outcome:
        """Judge an echo: does header ``name`` carry ``value`` (decoded)?"""
        if frame is None:
            return self.broken("nothing was echoed")
        got = frame.decoded_headers(self.version).get(name)
        return self.check(
            got == value,
            f"{name} sent as {value!r}, echoed as {got!r}",
            ok=f"{name} echoed as {value!r}",
        )


def _handshake(wire: Wire, case: Case) -> _Session | str:
    connect = wire.expect("CONNECT", "STOMP")
    if connect is None or connect.command not in ("CONNECT", "STOMP"):
        return "the client sent no CONNECT"
    offered_versions = (connect.get("accept-version") or "1.0").split(",")
    if case.version not in offered_versions:
        wire.send(
            build(
                "ERROR",
                [("message", f"this case needs STOMP {case.version}"), ("version", case.version)],
            )
        )
        return f"unimplemented: the client offers {offered_versions}"
    try:
        cx, cy = (int(v) for v in (connect.get("heart-beat") or "0,0").split(","))
    except ValueError:
        cx, cy = 0, 0
    headers = [("server", "stomp-proto-check"), ("session", case.id)]
    if case.version != "1.0":
        headers = [("version", case.version), ("heart-beat", _HEARTBEAT[case.id]), *headers]
    wire.send(build("CONNECTED", headers))
    subscribe = wire.expect("SUBSCRIBE")
    if subscribe is None or subscribe.command != "SUBSCRIBE":
        return "the client did not SUBSCRIBE: " + (describe(subscribe) if subscribe else "")
    rid = subscribe.get("receipt")
    if rid is not None:
        wire.send(build("RECEIPT", [("receipt-id", rid)], version=case.version))
    sub_id = subscribe.value("id", case.version) or subscribe.value("destination", "1.0") or ""
    return _Session(wire, case.version, sub_id, (cx, cy))


def serve_client_cases(
    host: str,
    port: int,
    cases: list[Case],
    *,
    timeout: float = 2.0,
    accept_timeout: float = 60.0,
    on_listening: Callable[[int], None] | None = None,
    websocket: str | None = None,
) -> Report:
    """Listen on ``host:port``, play each case with the client that connects, then say done."""
    started = time.monotonic()
    listener = socket.create_server((host, port))
    listener.settimeout(accept_timeout)
    actual = listener.getsockname()[1]
    target = Target(host, actual, timeout=timeout, websocket=websocket)
    report = Report(
        {
            "host": host,
            "port": actual,
            "transport": f"websocket {websocket}" if websocket else "tcp",
            "server": "",
            "version": "",
            "heart-beat": "",
            "mode": "client",
        }
    )
    if on_listening is not None:
        on_listening(actual)
    try:
        for case in cases:
            if report.incomplete:
                report.results.append(Result(case, Verdict.NOT_RUN, report.incomplete, (), 0.0))
                continue
            result = _run_one(listener, case, target)
            if result is None:
                report.incomplete = f"no client connected within {accept_timeout:g} s"
                result = Result(case, Verdict.NOT_RUN, report.incomplete, (), accept_timeout)
            report.results.append(result)
        if not report.incomplete:
            _say_done(listener, target)
    finally:
        listener.close()
    report.duration = time.monotonic() - started
    return report


def _run_one(listener: socket.socket, case: Case, target: Target) -> Result | None:
    """Play ``case`` with the next client that connects (None: none came in time)."""
    log: list[str] = []
    started = time.monotonic()
    try:
        sock, _ = listener.accept()
    except TimeoutError:
        return None
    try:
        wire = Wire(target, log, "c1", started, accepted=sock)
    except Unreachable as exc:
        return Result(case, Verdict.NOT_RUN, str(exc), tuple(log), time.monotonic() - started)
    try:
        session = _handshake(wire, case)
        if isinstance(session, str):
            verdict = Verdict.UNIMPLEMENTED if session.startswith("unimpl") else Verdict.NOT_RUN
            outcome = Outcome(verdict, session)
        else:
            try:
                outcome = case.run(ClientProbe(case, target, session, log))
            except Exception as exc:
                outcome = Outcome(Verdict.NOT_RUN, f"checker error: {type(exc).__name__}: {exc}")
    finally:
        wire.close()
    return Result(case, outcome.verdict, outcome.detail, tuple(log), time.monotonic() - started)


def _say_done(listener: socket.socket, target: Target) -> None:
    listener.settimeout(min(target.timeout * 2, 5.0))
    try:
        sock, _ = listener.accept()
    except TimeoutError:
        return
    try:
        wire = Wire(target, [], "done", time.monotonic(), accepted=sock)
    except Unreachable:
        return
    wire.expect("CONNECT", "STOMP")
    wire.send(build("ERROR", [("message", DONE)]))
    wire.close()


# -- the cases -------------------------------------------------------------------


def _header_case(name: str, value: str) -> Callable[[ClientProbe], Outcome]:
    def run(p: ClientProbe) -> Outcome:
        p.send_message([(name, value)], b"x")
        return p.echoed(p.echo(), name, value)

    return run


for _name, _value, _versions, _what in (
    ("x-colon", "a:b", V11, "a colon (\\c)"),
    ("x-newline", "l1\nl2", V11, "a line feed (\\n)"),
    ("x-backslash", "C:\\dir", V11, "a backslash (\\\\)"),
    ("x-cr", "a\rb", V12, "a carriage return (\\r)"),
    ("x-utf8", "héllo 中文", ("1.0", "1.1", "1.2"), "UTF-8"),
    ("x-pad", "  padded  ", V11, "spaces around the value"),
):
    _run = _header_case(_name, _value)
    _run.__doc__ = f"A MESSAGE header with {_what} is decoded (and echoed) unchanged."
    _run.__name__ = f"client_header_{_name[2:]}"
    client_case(
        "client-value-encoding",
        "escape-decode" if _versions != ("1.0", "1.1", "1.2") else "utf8",
        "MUST",
        _versions,
    )(_run)


@client_case("client-value-encoding", "repeated-client", "SHOULD", ("1.0", "1.1", "1.2"))
def client_repeated_header(p: ClientProbe) -> Outcome:
    """Of a repeated MESSAGE header, the client takes the first."""
    p.send_message([("x-rep", "first"), ("x-rep", "second")], b"x")
    return p.echoed(p.echo(), "x-rep", "first")


@client_case("client-body", "content-length", "MUST", ALL, levels=SHOULD_IN_10)
def client_nul_body(p: ClientProbe) -> Outcome:
    """A body with NULs, framed by content-length, reaches the client whole."""
    body = b"a\x00b\x00\x00c"
    p.send_message([], body, content_length=True)
    got = p.echo()
    return p.check(
        got is not None and got.body == body,
        f"echoed body {got.body if got else None!r}",
        ok="whole",
    )


@client_case("client-body", "utf8", "MUST", ("1.0", "1.1", "1.2"))
def client_utf8_body(p: ClientProbe) -> Outcome:
    """A UTF-8 body without content-length reaches the client unchanged."""
    body = "héllo wörld 中文".encode()
    p.send_message([("content-type", "text/plain;charset=utf-8")], body, content_length=False)
    got = p.echo()
    return p.check(
        got is not None and got.body == body,
        f"echoed body {got.body if got else None!r}",
        ok="unchanged",
    )


@client_case("client-body", "content-length", "MUST", ALL, levels=SHOULD_IN_10)
def client_large_body(p: ClientProbe) -> Outcome:
    """A 512 KiB body reaches the client whole."""
    body = bytes(range(256)) * 2048
    p.send_message([], body, content_length=True)
    got = p.echo(timeout=max(p.timeout, 5.0))
    return p.check(
        got is not None and got.body == body,
        f"echoed {len(got.body) if got else 0} octets",
        ok="whole",
    )


@client_case("client-frames", "frame-eols-after-nul", "STATED", ("1.0", "1.1", "1.2"))
def client_eols_after_nul(p: ClientProbe) -> Outcome:
    """EOLs after a MESSAGE's NUL are skipped; the next MESSAGE is read."""
    p.send_message([("x-n", "1")], b"one", after=b"\n\n\n")
    p.send_message([("x-n", "2")], b"two")
    bodies = [f.body for f in (p.echo(), p.echo()) if f is not None]
    return p.check(bodies == [b"one", b"two"], f"echoed {bodies}", ok="both read")


@client_case("client-frames", "frame-eol", "MUST", V12)
def client_crlf(p: ClientProbe) -> Outcome:
    """A MESSAGE with CRLF line endings is read (no CR left in values)."""
    p.send_message([("x-crlf", "v")], b"crlf", eol=b"\r\n", after=b"\r\n")
    return p.echoed(p.echo(), "x-crlf", "v")


@client_case("client-frames", "frame-eol", "MUST", ALL, levels=STATED_BEFORE_12)
def client_split_frames(p: ClientProbe) -> Outcome:
    """A MESSAGE written one octet at a time is read whole."""
    frame = build(
        "MESSAGE",
        [
            ("subscription", p.session_.subscription),
            ("message-id", "s1"),
            ("destination", CHECK_QUEUE),
            ("ack", "s1"),
            ("x-slow", "1"),
        ],
        b"slow",
        version=p.version,
    )
    for octet in range(len(frame)):
        p.wire.send(frame[octet : octet + 1])
    return p.echoed(p.echo(), "x-slow", "1")


@client_case("client-heart-beating", "heart-beat-send", "MUST", V11, heartbeat="300,300")
def client_sends_beats(p: ClientProbe) -> Outcome:
    """The client sends data at least every negotiated interval."""
    cx = p.offered[0]
    if cx == 0:
        return p.absent("the client offers no heart-beats (cx = 0)")
    interval = max(cx, 300)
    window = beat_window(p, interval)
    if window is None:
        return too_long(p, interval)
    start = p.wire.now()
    deadline = time.monotonic() + window
    while time.monotonic() < deadline and not p.wire.closed:
        p.wire.send(b"\n")  # the checker's own beats, so the client keeps the session
        p.wire.quiet(0.15)
    times = [start] + [t for t in p.wire.arrivals if t > start] + [p.wire.now()]
    worst = max(b - a for a, b in itertools.pairwise(times)) * 1000
    if p.wire.closed:
        return p.broken("the client closed the session")
    return judge_gap(p, interval, worst)


@client_case("client-heart-beating", "heart-beat-tolerant", "SHOULD", V11, heartbeat="300,300")
def client_keeps_beating_broker(p: ClientProbe) -> Outcome:
    """A client getting the broker's beats keeps the session and still reads MESSAGEs."""
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline and not p.wire.closed:
        p.wire.send(b"\n")
        p.wire.quiet(0.2)
    if p.wire.closed:
        return p.broken("the client ended the session")
    p.send_message([("x-after", "beats")], b"after")
    return p.echoed(p.echo(), "x-after", "beats")


@client_case("client-error", "error-close", "MAY", ("1.0", "1.1", "1.2"))
def client_closes_after_error(p: ClientProbe) -> Outcome:
    """Whether the client ends the session when an ERROR comes (the broker left it open)."""
    p.wire.send(
        build(
            "ERROR",
            [("message", "check: an error"), ("content-type", "text/plain")],
            b"details\x00with a NUL",
            version=p.version,
            content_length=True,
        )
    )
    closed = p.wire.wait_closed(max(p.timeout, 2.0))
    return p.info("closed the session" if closed else "kept the session open")


@client_case("client-receipts", "receipt-cumulative", "STATED", ("1.0", "1.1", "1.2"))
def client_message_before_receipt(p: ClientProbe) -> Outcome:
    """A MESSAGE that arrives before the RECEIPT the client waits for is still delivered."""
    p.send_message([("x-n", "1")], b"first")
    p.hold_receipts = True
    first = p.echo()
    if first is None:
        return p.broken("nothing was echoed")
    rid = first.get("receipt")
    if rid is None:
        p.hold_receipts = False
        return p.absent("the client's SEND asks for no receipt")
    p.send_message([("x-n", "2")], b"second")
    time.sleep(0.1)
    p.wire.send(
        build("RECEIPT", [("receipt-id", unescape(rid, p.version) or rid)], version=p.version)
    )
    p.hold_receipts = False
    second = p.echo()
    return p.check(
        second is not None and second.body == b"second",
        "the second MESSAGE was not echoed",
        ok="delivered while a receipt was due",
    )


__all__ = ["CLIENT_CATALOGUE", "CLIENT_GROUPS", "DONE", "ClientProbe", "serve_client_cases"]
