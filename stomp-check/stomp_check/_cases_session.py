"""Cases on the session: connecting, heart-beating, receipts, ERROR, frames before CONNECT."""

from __future__ import annotations

import itertools
import re
import time
from concurrent.futures import ThreadPoolExecutor

from stomp_proto import Version

from ._case import ALL, V11, V12, Outcome, Probe, case, describe
from ._common import beat_window, judge_gap, too_long
from ._wire import RawFrame, Wire, build

# -- connecting --------------------------------------------------------------------


@case("connecting", "connected", "STATED")
def connected(p: Probe) -> Outcome:
    """A valid CONNECT is answered with CONNECTED."""
    wire = p.session()
    return p.ok(f"CONNECTED {dict(wire.connected.headers) if wire.connected else ''}")


@case("connecting", "connected-version", "MUST")
def connected_version(p: Probe) -> Outcome:
    """CONNECTED names the version asked for (1.0 when accept-version is missing)."""
    wire = p.session()
    version = wire.connected.get("version") if wire.connected else None
    if p.version == "1.0":
        return p.check(
            version in (None, "1.0"),
            f"version {version!r} for a 1.0 client",
            ok=f"version {version!r}",
        )
    return p.check(version == p.version, f"version {version!r}", ok=f"version {version}")


@case("connecting", "negotiation", "STATED", V11)
def highest_common_version(p: Probe) -> Outcome:
    """accept-version with several versions gives the highest one in common."""
    offered = "1.0,1.1" if p.version == "1.1" else "1.0,1.1,1.2"
    wire = p.open()
    headers = [("accept-version", offered), *p.connect_headers()[1:]]
    wire.send(build("CONNECT", headers))
    got = wire.expect("CONNECTED")
    version = got.get("version") if got else None
    return p.check(
        version == p.version,
        f"offered {offered}, got {version!r}",
        ok=f"offered {offered}, got {version}",
    )


@case("connecting", "negotiation", "STATED", ("1.1",))
def unknown_version_in_list(p: Probe) -> Outcome:
    """accept-version:1.1,2.0 gives 1.1 (the spec's example)."""
    wire = p.open()
    wire.send(build("CONNECT", [("accept-version", "1.1,2.0"), *p.connect_headers()[1:]]))
    got = wire.expect("CONNECTED")
    version = got.get("version") if got else None
    return p.check(
        version == "1.1", f"got {describe(got) if got else 'nothing'} {version!r}", ok="1.1"
    )


def _error_then_close(p: Probe, wire: Wire, got: RawFrame | None, *, close: bool = True) -> Outcome:
    """A refusal judged: an ERROR came (``got``), and the connection closed (if ``close``)."""
    closed = wire.wait_closed()
    state = ", closed" if closed else ", left open"
    return p.check(
        got is not None and (closed or not close),
        ("ERROR" if got else "no ERROR") + state,
        ok="ERROR" + state,
    )


@case("connecting", "negotiation-none", "MUST", V11, levels={"1.1": "SHOULD"})
def no_common_version(p: Probe) -> Outcome:
    """accept-version with no version in common gives ERROR and the close."""
    wire = p.open()
    wire.send(build("CONNECT", [("accept-version", "9.8"), *p.connect_headers()[1:]]))
    got = wire.expect("CONNECTED")
    if got is not None and got.command == "CONNECTED":
        return p.broken(f"CONNECTED version {got.get('version')!r}")
    # 1.1 asks for the ERROR only; closing after it is 1.2's addition.
    return _error_then_close(p, wire, got, close=p.version != "1.1")


@case("connecting", "negotiation-none", "UNSTATED", V11)
def no_common_version_lists(p: Probe) -> Outcome:
    """The ERROR for no common version has a version header listing the broker's."""
    wire = p.open()
    wire.send(build("CONNECT", [("accept-version", "9.8"), *p.connect_headers()[1:]]))
    got = wire.expect("CONNECTED")
    if got is None or got.command != "ERROR":
        return p.broken("no ERROR: " + (describe(got) if got else "nothing"))
    return p.check(
        got.get("version") is not None,
        "no version header on the ERROR",
        ok=f"version:{got.get('version')}",
    )


@case("connecting", "stomp-frame", "MUST", V11, levels={"1.1": "SHOULD"})
def stomp_command(p: Probe) -> Outcome:
    """The STOMP command logs in like CONNECT."""
    wire = p.open()
    wire.send(build("STOMP", p.connect_headers()))
    got = wire.expect("CONNECTED")
    return p.check(
        got is not None and got.command == "CONNECTED",
        "got " + (describe(got) if got else "nothing"),
        ok="CONNECTED",
    )


@case("connecting", "server-header", "MUST", V11)
def server_header(p: Probe) -> Outcome:
    """The server header, when present, is name["/"version] *(comment)."""
    wire = p.session()
    server = wire.connected.get("server") if wire.connected else None
    if server is None:
        return p.info("no server header")
    good = re.fullmatch(r"[^/ ]+(/[^ ]+)?( .*)?", server) is not None
    return p.check(good, f"server {server!r}", ok=f"server {server!r}")


@case("connecting", "heart-beat-header", "MUST", V11)
def connected_heart_beat(p: Probe) -> Outcome:
    """The CONNECTED heart-beat header, when present, is two integers."""
    wire = p.session(heartbeat="500,500")
    value = wire.connected.get("heart-beat") if wire.connected else None
    if value is None:
        return p.info("no heart-beat header (no heart-beats)")
    return p.check(
        re.fullmatch(r"\d+,\d+", value) is not None,
        f"heart-beat {value!r}",
        ok=f"heart-beat:{value}",
    )


@case("connecting", "body-only", "MUST")
def connected_has_no_body(p: Probe) -> Outcome:
    """CONNECTED has no body."""
    wire = p.session()
    body = wire.connected.body if wire.connected else b""
    return p.check(body == b"", f"body {body!r}", ok="empty")


@case("connecting", "reject-connect", "SHOULD")
def wrong_passcode(p: Probe) -> Outcome:
    """A refused login gives ERROR and the close (a broker may also let anyone in)."""
    wire = p.open()
    headers = [h for h in p.connect_headers() if h[0] not in ("login", "passcode")]
    wire.send(
        build(
            "CONNECT",
            [*headers, ("login", p.target.login or "guest"), ("passcode", "wrong-" + p.name("p"))],
        )
    )
    got = wire.expect("CONNECTED")
    if got is not None and got.command == "CONNECTED":
        return p.info("logged in anyway (no authentication, or anonymous access)")
    return _error_then_close(p, wire, got)


@case("connecting", "vhost", "MAY", V11)
def unknown_vhost(p: Probe) -> Outcome:
    """What an unknown virtual host in ``host`` does."""
    wire = p.open()
    headers = [(k, p.name("nohost") if k == "host" else v) for k, v in p.connect_headers()]
    wire.send(build("CONNECT", headers))
    got = wire.expect("CONNECTED")
    return p.info(
        "CONNECTED (host ignored or a default used)"
        if got and got.command == "CONNECTED"
        else "refused: " + (describe(got) if got else "nothing")
    )


@case("connecting", "connected", "UNSTATED")
def session_header(p: Probe) -> Outcome:
    """Whether CONNECTED carries a session header."""
    wire = p.session()
    return p.info(f"session {wire.connected.get('session')!r}" if wire.connected else "")


@case("connecting", "connected", "UNSTATED", V11)
def missing_host(p: Probe) -> Outcome:
    """What a CONNECT without host (required of 1.1+ clients) does."""
    wire = p.open()
    wire.send(build("CONNECT", [h for h in p.connect_headers() if h[0] != "host"]))
    got = wire.expect("CONNECTED")
    return p.info(describe(got) if got else "no answer")


@case("connecting", "connected", "UNSTATED")
def second_connect(p: Probe) -> Outcome:
    """What a second CONNECT on a logged-in session does."""
    wire = p.session()
    wire.send(build("CONNECT", p.connect_headers()))
    got = wire.expect("CONNECTED", timeout=min(1.0, p.timeout))
    closed = wire.wait_closed(0.3)
    return p.info((describe(got) if got else "no answer") + ("; closed" if closed else ""))


# -- heart-beating -------------------------------------------------------------------


def _gaps(wire: Wire, since: float) -> list[float]:
    times = [since] + [t for t in wire.arrivals if t > since] + [wire.now()]
    return [b - a for a, b in itertools.pairwise(times)]


#: Sessions :func:`broker_sends_beats` watches at once.
BEAT_SESSIONS = 8


def _beats_after(wire: Wire, since: float) -> list[float]:
    """EOLs that came alone, after ``since`` (not the EOL a broker writes after a NUL)."""
    framed = {frame.at for frame in wire.frames}
    return [t for t in wire.eols if t > since and t not in framed]


def _negotiated(wire: Wire, wanted: int) -> int:
    """The broker's send interval for a client that wants beats every ``wanted`` ms (0: none)."""
    value = wire.connected.get("heart-beat") if wire.connected else None
    try:
        sx = int((value or "0,0").split(",")[0])
    except ValueError:
        return 0
    return 0 if sx == 0 else max(sx, wanted)


@case("heart-beating", "heart-beat-send", "MUST", V11)
def broker_sends_beats(p: Probe) -> Outcome:
    """The broker sends data at least every negotiated interval (EOLs when idle)."""
    # Several sessions at once: a broker whose beats follow a timer of its own
    # (ActiveMQ: gaps of one or two intervals, by the phase of its timer) shows its
    # worst gap in one of them, so the verdict does not depend on luck.
    wires = [p.session(heartbeat="0,1000") for _ in range(BEAT_SESSIONS)]
    wire = wires[0]
    interval = _negotiated(wire, 1000)
    if interval == 0:
        return p.absent("the broker offers no heart-beats (sx = 0)")
    window = beat_window(p, interval)
    if window is None:
        return too_long(p, interval)
    start = wire.now()
    with ThreadPoolExecutor(len(wires)) as pool:
        stray = [f for got in pool.map(lambda w: w.quiet(window), wires) for f in got]
    worst = max(max(_gaps(w, start)) for w in wires) * 1000
    if not all(_beats_after(w, start) for w in wires):
        return p.broken(f"no heart-beat in {window:.1f} s at {interval} ms")
    if stray:
        return p.broken(f"frames instead of EOLs: {[f.command for f in stray]}")
    return judge_gap(p, interval, worst)


@case("heart-beating", "heart-beat-rate", "UNSTATED", V11)
def negotiated_rate(p: Probe) -> Outcome:
    """What the broker answers to heart-beat:500,1500."""
    wire = p.session(heartbeat="500,1500")
    return p.info(
        f"CONNECTED heart-beat:{wire.connected.get('heart-beat') if wire.connected else None}"
    )


@case("heart-beating", "heart-beat-rate", "STATED", V11)
def no_beats_when_zero(p: Probe) -> Outcome:
    """heart-beat:0,0 means no beats from the broker."""
    wire = p.session(heartbeat="0,0")
    wire.quiet(1.5)
    beats = _beats_after(wire, 0.0)
    return p.check(not beats, f"{len(beats)} EOLs in 1.5 s", ok="none in 1.5 s")


@case("heart-beating", "heart-beat-missing", "MUST", V11)
def no_beats_when_missing(p: Probe) -> Outcome:
    """A CONNECT without heart-beat gets no beats."""
    wire = p.session(heartbeat=None)
    wire.quiet(1.5)
    beats = _beats_after(wire, 0.0)
    return p.check(not beats, f"{len(beats)} EOLs in 1.5 s", ok="none in 1.5 s")


@case("heart-beating", "heart-beat-dead", "MAY", V11, levels={"1.1": "UNSTATED"})
def silent_client_dropped(p: Probe) -> Outcome:
    """A client that promised beats and stays silent is dropped (time recorded)."""
    wire = p.session(heartbeat="300,0")
    value = wire.connected.get("heart-beat") if wire.connected else None
    sy = int((value or "0,0").split(",")[1]) if value and "," in value else 0
    if sy == 0:
        return p.absent("the broker wants no heart-beats (sy = 0)")
    interval = max(300, sy)
    start = wire.now()
    if wire.wait_closed(min(4 * interval / 1000 + 1, 7.0)):
        return p.ok(f"dropped after {(wire.now() - start) * 1000:.0f} ms at {interval} ms")
    return p.info(f"not dropped within {4 * interval} ms at {interval} ms")


@case("heart-beating", "heart-beat-tolerant", "SHOULD", V11)
def beating_client_kept(p: Probe) -> Outcome:
    """A client that beats as promised stays connected."""
    wire = p.session(heartbeat="300,0")
    value = wire.connected.get("heart-beat") if wire.connected else "0,0"
    sy = int((value or "0,0").split(",")[1]) if value and "," in value else 0
    interval = max(300, sy) if sy else 300
    deadline = time.monotonic() + min(3 * interval / 1000, 4.0)
    while time.monotonic() < deadline and not wire.closed:
        wire.send(b"\n")
        wire.quiet(interval / 2000)
    if wire.closed:
        return p.broken(f"dropped although beating every {interval // 2} ms")
    got = p.receipt(wire, "BEGIN", [("transaction", p.name("t"))])
    return p.check(
        got is not None and got.command == "RECEIPT",
        "no RECEIPT after beating",
        ok=f"alive after beats every {interval // 2} ms",
    )


@case("heart-beating", "heart-beat-header", "UNSTATED", V11)
def bad_heart_beat_value(p: Probe) -> Outcome:
    """What heart-beat:abc does."""
    wire = p.open()
    wire.send(build("CONNECT", p.connect_headers(heartbeat="abc")))
    got = wire.expect("CONNECTED")
    return p.info(describe(got) if got else "no answer")


@case("heart-beating", "heart-beat-header", "UNSTATED", V11)
def single_heart_beat_value(p: Probe) -> Outcome:
    """What heart-beat:1000 (one number) does."""
    wire = p.open()
    wire.send(build("CONNECT", p.connect_headers(heartbeat="1000")))
    got = wire.expect("CONNECTED")
    return p.info(describe(got) if got else "no answer")


# -- receipts ----------------------------------------------------------------------


def _receipt_for(p: Probe, command: str) -> Outcome:
    wire = p.session()
    dest = p.queue()
    tx = p.name("tx")
    headers: list[tuple[str, str]]
    if command in ("ACK", "NACK"):
        mode = "client-individual" if p.version != "1.0" else "client"
        p.subscribe(wire, dest, ack=mode)
        p.frame(wire, "SEND", [("destination", dest)], b"to ack")
        headers = p.ack_headers(p.message(wire))
    elif command == "UNSUBSCRIBE":
        p.subscribe(wire, dest)
        headers = [("id", "s1")] if p.version != "1.0" else [("destination", dest)]
    elif command in ("COMMIT", "ABORT"):
        p.must_receipt(wire, "BEGIN", [("transaction", tx)])
        headers = [("transaction", tx)]
    elif command == "BEGIN":
        headers = [("transaction", tx)]
    elif command == "SUBSCRIBE":
        headers = [("destination", dest), ("id", "s1")]
    elif command == "SEND":
        headers = [("destination", dest)]
    else:
        headers = []
    rid = p.name("receipt")
    p.frame(wire, command, [*headers, ("receipt", rid)], b"x" if command == "SEND" else b"")
    got = wire.expect("RECEIPT", receipt=rid)
    if got is None or got.command != "RECEIPT":
        return p.broken(f"{command}: " + (describe(got) if got else "no RECEIPT"))
    return p.check(got.body == b"", "the RECEIPT has a body", ok=f"RECEIPT for {command}")


def _receipt_case(command: str, versions: tuple[Version, ...]) -> None:
    def run(p: Probe) -> Outcome:
        return _receipt_for(p, command)

    run.__doc__ = f"{command} with a receipt header is answered with its RECEIPT."
    case("receipts", "receipt", "STATED", versions)(run)


for _command in ("SEND", "SUBSCRIBE", "UNSUBSCRIBE", "BEGIN", "COMMIT", "ABORT", "ACK"):
    _receipt_case(_command, ALL)
_receipt_case("NACK", V11)
_receipt_case("DISCONNECT", ALL)


@case("receipts", "receipt-cumulative", "STATED")
def receipts_in_order(p: Probe) -> Outcome:
    """Twenty receipts come back in the order of the frames."""
    wire = p.session()
    dest = p.queue()
    ids = [f"r{i}" for i in range(20)]
    wire.send(
        b"".join(
            build("SEND", [("destination", dest), ("receipt", rid)], b"x", version=p.version)
            for rid in ids
        )
    )
    got = []
    for _ in ids:
        frame = wire.expect("RECEIPT")
        if frame is None or frame.command != "RECEIPT":
            break
        got.append(frame.get("receipt-id"))
    return p.check(got == ids, f"receipt order {got}", ok="in order")


@case("receipts", "receipt-id", "MUST", V11, levels={"1.1": "STATED"})
def escaped_receipt(p: Probe) -> Outcome:
    """A receipt with a colon comes back escaped in receipt-id."""
    wire = p.session()
    p.frame(wire, "BEGIN", [("transaction", p.name("t")), ("receipt", "r:1")])
    got = wire.expect("RECEIPT")
    if got is None or got.command != "RECEIPT":
        return p.broken("no RECEIPT: " + (describe(got) if got else "nothing"))
    return p.check(
        got.get("receipt-id") == "r\\c1", f"receipt-id raw {got.get('receipt-id')!r}", ok="r\\c1"
    )


@case("receipts", "disconnect", "UNSTATED")
def close_after_disconnect(p: Probe) -> Outcome:
    """Whether the broker closes after the DISCONNECT receipt."""
    wire = p.session()
    got = p.receipt(wire, "DISCONNECT")
    closed = wire.wait_closed(1.0)
    return p.info((describe(got) if got else "no RECEIPT") + ("; closed" if closed else "; open"))


# -- ERROR -------------------------------------------------------------------------


def _error_on_open_session(p: Probe, receipt: bool = True) -> tuple[Wire, RawFrame | None]:
    """Provoke a portable ERROR: a SEND without destination."""
    wire = p.session()
    headers = [("receipt", "bad-1")] if receipt else []
    p.frame(wire, "SEND", [("x-no", "destination"), *headers], b"lost")
    return wire, wire.expect("ERROR", "RECEIPT")


@case("error", "send-error", "MUST")
def send_without_destination(p: Probe) -> Outcome:
    """A SEND without destination gets an ERROR."""
    _wire, got = _error_on_open_session(p)
    return p.check(
        (got.command if got else None) == "ERROR",
        "got " + (describe(got) if got else "nothing"),
        ok="ERROR",
    )


@case("error", "send-error", "MUST", V11)
def closed_after_send_error(p: Probe) -> Outcome:
    """After the ERROR for an unprocessable SEND, the connection is closed."""
    wire, got = _error_on_open_session(p)
    if got is None or got.command != "ERROR":
        return p.broken("no ERROR")
    return p.check(wire.wait_closed(), "ERROR but the connection stayed open", ok="closed")


@case("error", "error-close", "MUST", V12)
def closed_after_error(p: Probe) -> Outcome:
    """After any ERROR (an unknown transaction), the broker closes the connection."""
    wire = p.session()
    p.frame(wire, "COMMIT", [("transaction", p.name("nope"))])
    got = wire.expect("ERROR", "RECEIPT")
    if got is None or got.command != "ERROR":
        return p.info(
            "no ERROR for an unknown transaction: " + (describe(got) if got else "nothing")
        )
    return p.check(wire.wait_closed(), "ERROR but the connection stayed open", ok="closed")


@case("error", "error-message", "SHOULD")
def error_has_message(p: Probe) -> Outcome:
    """The ERROR has a message header."""
    _wire, got = _error_on_open_session(p)
    if got is None or got.command != "ERROR":
        return p.broken("no ERROR")
    return p.check(
        got.get("message") is not None,
        "no message header",
        ok=f"message {got.get('message')!r}",
    )


@case("error", "error-receipt-id", "SHOULD", V11)
def error_has_receipt_id(p: Probe) -> Outcome:
    """The ERROR for a frame with a receipt carries that receipt-id."""
    _wire, got = _error_on_open_session(p)
    if got is None or got.command != "ERROR":
        return p.broken("no ERROR")
    rid = got.get("receipt-id")
    return p.check(rid == "bad-1", f"receipt-id {rid!r}", ok="receipt-id:bad-1")


@case("error", "content-length-error", "SHOULD")
def error_content_length(p: Probe) -> Outcome:
    """An ERROR with a body carries content-length."""
    _wire, got = _error_on_open_session(p)
    if got is None or got.command != "ERROR":
        return p.broken("no ERROR")
    if not got.body:
        return p.ok("no body")
    return p.check(
        got.get("content-length") is not None,
        "body without content-length",
        ok="content-length present",
    )


@case("error", "content-type", "SHOULD")
def error_content_type(p: Probe) -> Outcome:
    """An ERROR with a body carries content-type."""
    _wire, got = _error_on_open_session(p)
    if got is None or got.command != "ERROR":
        return p.broken("no ERROR")
    if not got.body:
        return p.ok("no body")
    return p.check(
        got.get("content-type") is not None,
        "body without content-type",
        ok=f"content-type {got.get('content-type')!r}",
    )


@case("error", "send-error", "MUST")
def error_before_close(p: Probe) -> Outcome:
    """An unprocessable SEND (body longer than content-length) gets an ERROR before the close."""
    wire = p.session()
    wire.send(b"SEND\ndestination:" + p.queue().encode() + b"\ncontent-length:2\n\nbody\x00")
    got = wire.expect("ERROR", "RECEIPT")
    closed = wire.wait_closed()
    if not closed:
        return p.info("the connection stayed open: " + (describe(got) if got else "no ERROR"))
    return p.check(
        got is not None and got.command == "ERROR",
        "closed without an ERROR",
        ok="ERROR, then closed",
    )


@case("error", "subscribe-error", "MUST")
def subscribe_without_destination(p: Probe) -> Outcome:
    """A SUBSCRIBE without destination gets an ERROR."""
    wire = p.session()
    p.frame(wire, "SUBSCRIBE", [("id", "s1"), ("receipt", "r-sub")])
    got = wire.expect("ERROR", "RECEIPT")
    return p.check(
        got is not None and got.command == "ERROR",
        "got " + (describe(got) if got else "nothing"),
        ok="ERROR",
    )


@case("error", "unknown-command", "MAY")
def unknown_command(p: Probe) -> Outcome:
    """What an unknown command (FOO) does."""
    wire = p.session()
    wire.send(build("FOO", [("receipt", "r-foo")]))
    got = wire.expect("ERROR", "RECEIPT")
    closed = wire.wait_closed(0.5)
    return p.info((describe(got) if got else "no answer") + ("; closed" if closed else "; open"))


@case("error", "error-may", "MAY", ("1.0", "1.1"))
def open_after_error_old(p: Probe) -> Outcome:
    """Whether the broker keeps a 1.0/1.1 session open after an ERROR."""
    wire = p.session()
    p.frame(wire, "COMMIT", [("transaction", p.name("nope"))])
    got = wire.expect("ERROR", "RECEIPT")
    closed = wire.wait_closed(0.5)
    return p.info((describe(got) if got else "no answer") + ("; closed" if closed else "; open"))


# -- frames before CONNECT ---------------------------------------------------------


def _before_connect(p: Probe, data: bytes, what: str) -> Outcome:
    wire = p.open()
    wire.send(data)
    got = wire.expect("RECEIPT", "CONNECTED", "MESSAGE")
    if got is not None and got.command != "ERROR":
        return p.broken(f"{what} before CONNECT was processed: {describe(got)}")
    closed = wire.wait_closed()
    if got is None and not closed:
        return p.info(f"{what}: no answer, connection left open")
    return p.ok(
        f"{what}: "
        + (describe(got) if got else "no ERROR")
        + ("; closed" if closed else "; left open")
    )


@case("before-connect", "before-connect", "STATED", V12)
def send_before_connect(p: Probe) -> Outcome:
    """A SEND before CONNECT is not processed."""
    return _before_connect(
        p, build("SEND", [("destination", p.queue()), ("receipt", "r0")], b"early"), "SEND"
    )


@case("before-connect", "before-connect", "STATED", V12)
def subscribe_before_connect(p: Probe) -> Outcome:
    """A SUBSCRIBE before CONNECT is not processed."""
    return _before_connect(
        p,
        build("SUBSCRIBE", [("destination", p.queue()), ("id", "s"), ("receipt", "r0")]),
        "SUBSCRIBE",
    )


@case("before-connect", "before-connect", "STATED", V12)
def begin_before_connect(p: Probe) -> Outcome:
    """A BEGIN before CONNECT is not processed."""
    return _before_connect(p, build("BEGIN", [("transaction", "t"), ("receipt", "r0")]), "BEGIN")


@case("before-connect", "before-connect", "UNSTATED", V12)
def garbage_first(p: Probe) -> Outcome:
    """What text that is no frame does as the first bytes."""
    wire = p.open()
    wire.send(b"hello world\r\n\r\n\x00")
    got = wire.expect("CONNECTED")
    closed = wire.wait_closed(0.5)
    return p.info((describe(got) if got else "no answer") + ("; closed" if closed else "; open"))


@case("before-connect", "before-connect", "UNSTATED", V12)
def http_first(p: Probe) -> Outcome:
    """What an HTTP request does as the first bytes."""
    wire = p.open()
    wire.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    got = wire.expect("CONNECTED")
    closed = wire.wait_closed(0.5)
    return p.info((describe(got) if got else "no answer") + ("; closed" if closed else "; open"))


# -- STOMP over WebSocket ----------------------------------------------------------


@case("websocket", "websocket", "UNSTATED", V11, needs="websocket")
def subprotocol(p: Probe) -> Outcome:
    """The WebSocket subprotocol agreed is this version's (v12.stomp...)."""
    wire = p.open()
    want = f"v{p.version.replace('.', '')}.stomp"
    return p.check(wire.subprotocol == want, f"subprotocol {wire.subprotocol!r}", ok=want)


@case("websocket", "websocket", "UNSTATED", ALL, needs="websocket")
def frames_split_over_messages(p: Probe) -> Outcome:
    """A frame split over two WebSocket messages is read whole."""
    from ._common import roundtrip

    _wire, got = roundtrip(p, [], b"split over messages", chunk=7)
    return p.info(
        "read whole"
        if got is not None and got.command == "MESSAGE"
        else "not read: " + (describe(got) if got else "nothing")
    )


@case("websocket", "websocket", "UNSTATED", ALL, needs="websocket")
def error_reaches_client(p: Probe) -> Outcome:
    """Whether an ERROR reaches a WebSocket client before the close."""
    wire = p.session()
    wire.send(b"SEND\ndestination:" + p.queue().encode() + b"\ncontent-length:2\n\nbody\x00")
    got = wire.expect("ERROR", "RECEIPT")
    closed = wire.wait_closed()
    return p.info((describe(got) if got else "no ERROR") + ("; closed" if closed else "; open"))
