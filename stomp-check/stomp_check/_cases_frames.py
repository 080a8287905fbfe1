"""Cases on the frame format: EOLs, escapes, whitespace, repeats, content-length, limits, bodies."""

from __future__ import annotations

from stomp_proto import FrameDecoder, ProtocolError

from ._case import (
    SHOULD_IN_10,
    STATED_BEFORE_12,
    UNSTATED_BEFORE_12,
    V11,
    V12,
    Outcome,
    Probe,
    case,
    describe,
)
from ._common import roundtrip, user_header
from ._wire import build

# -- frames and EOLs -------------------------------------------------------------


@case("frames", "frame-eol", "MUST", levels=UNSTATED_BEFORE_12)
def crlf_send(p: Probe) -> Outcome:
    """A SEND whose lines end in CRLF is read as the same frame."""
    _wire, got = roundtrip(p, [("x-crlf", "v")], b"body", eol=b"\r\n")
    if got is None or got.command != "MESSAGE":
        return p.broken("CRLF frame refused: " + (describe(got) if got else "no MESSAGE"))
    return p.check(
        got.get("x-crlf") == "v" and got.body == b"body",
        f"header/body changed: x-crlf={got.get('x-crlf')!r} body={got.body!r}",
        ok="CRLF accepted",
    )


@case("frames", "frame-eol", "MUST", levels=UNSTATED_BEFORE_12)
def crlf_connect(p: Probe) -> Outcome:
    """A CONNECT whose lines end in CRLF is answered with CONNECTED."""
    wire = p.open()
    wire.send(build("CONNECT", p.connect_headers(), eol=b"\r\n"))
    got = wire.expect("CONNECTED")
    return p.check(
        got is not None and got.command == "CONNECTED",
        "got " + (describe(got) if got else "nothing"),
        ok="CONNECTED",
    )


@case("frames", "frame-eols-after-nul", "STATED")
def eols_between_frames(p: Probe) -> Outcome:
    """Several EOLs after a frame's NUL are skipped, the next frame is read."""
    eols = b"\n\r\n\n" if p.version == "1.2" else b"\n\n\n"
    raw = (
        build("SEND", [("destination", "{dest}")], b"one")
        + eols
        + build("SEND", [("destination", "{dest}")], b"two")
    )
    wire, first = roundtrip(p, [], raw=raw)
    second = wire.expect("MESSAGE")
    bodies = [f.body for f in (first, second) if f is not None and f.command == "MESSAGE"]
    return p.check(bodies == [b"one", b"two"], f"bodies received: {bodies}", ok="both frames read")


@case("frames", "frame-eol", "MUST", levels=STATED_BEFORE_12)
def one_byte_at_a_time(p: Probe) -> Outcome:
    """A frame written one octet per packet is read whole (STOMP is a stream)."""
    _wire, got = roundtrip(p, [("x-slow", "1")], b"slow body", chunk=1)
    return p.check(
        got is not None and got.command == "MESSAGE" and got.body == b"slow body",
        "got " + (describe(got) if got else "nothing"),
        ok="read whole",
    )


@case("frames", "frame-eol", "MUST", levels=STATED_BEFORE_12)
def frames_in_one_packet(p: Probe) -> Outcome:
    """Ten frames in one packet are all read."""
    raw = b"".join(build("SEND", [("destination", "{dest}")], str(i).encode()) for i in range(10))
    wire, got = roundtrip(p, [], raw=raw)
    bodies = []
    while got is not None and got.command == "MESSAGE":
        bodies.append(got.body)
        if len(bodies) == 10:
            break
        got = wire.expect("MESSAGE")
    return p.check(len(bodies) == 10, f"{len(bodies)} of 10 messages came", ok="all 10 read")


@case("frames", "frame-eols-after-nul", "UNSTATED")
def eol_after_nul(p: Probe) -> Outcome:
    """Whether the broker writes EOLs after a frame's NUL (some clients choke on it)."""
    wire = p.session()
    raw = wire.connected.raw if wire.connected else b""
    p.must_receipt(wire, "BEGIN", [("transaction", p.name("t"))])
    after = "EOL after NUL" if wire.eols else "no EOL after NUL"
    return p.info(f"{after}; CONNECTED ends {raw[-3:]!r}")


@case("frames", "frame-eol", "MAY", levels=UNSTATED_BEFORE_12)
def server_line_endings(p: Probe) -> Outcome:
    """Which line endings the broker writes (LF or CRLF)."""
    wire = p.session()
    frame = wire.connected
    return p.info("CRLF" if frame is not None and frame.crlf else "LF")


@case("frames", "frame-case", "STATED")
def lowercase_command(p: Probe) -> Outcome:
    """A command in lower case ("send") is not taken for SEND."""
    raw = build("send", [("destination", "{dest}")], b"lower")
    _wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.broken("'send' was delivered like SEND")
    return p.ok("not delivered" + (f" ({describe(got)})" if got else ""))


@case("frames", "frame-case", "STATED")
def header_name_case(p: Probe) -> Outcome:
    """``Destination`` (capital D) is not taken for ``destination``."""
    raw = build("SEND", [("Destination", "{dest}")], b"capital")
    _wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.broken("a SEND with only 'Destination' was delivered")
    return p.ok("not delivered" + (f" ({describe(got)})" if got else ""))


@case("frames", "frame-eol", "MUST", levels=STATED_BEFORE_12)
def server_frames_decode_strictly(p: Probe) -> Outcome:
    """The broker's frames of a plain session pass the strictest decoder (stomp_proto's)."""
    wire, _got = roundtrip(p, [("x-a", "b:c")], b"hello", content_length=True)
    p.must_receipt(wire, "BEGIN", [("transaction", p.name("t"))])
    decoder = FrameDecoder(version=p.version, strict=True)
    problems = []
    for frame in wire.frames:
        if frame.command == "CONNECTED":
            continue
        try:
            decoder.receive_data(frame.raw)
            list(decoder)
        except ProtocolError as exc:
            problems.append(f"{frame.command}: {exc}")
            decoder = FrameDecoder(version=p.version, strict=True)
    return p.check(not problems, "; ".join(problems), ok=f"{len(wire.frames)} frames decoded")


# -- value encoding --------------------------------------------------------------


@case("value-encoding", "escape-encode", "MUST", V11)
def escaped_colon(p: Probe) -> Outcome:
    """A colon in a header value comes back (escaped as \\c on the wire)."""
    return user_header(p, "x-colon", "a:b:c")


@case("value-encoding", "escape-encode", "MUST", V11)
def escaped_newline(p: Probe) -> Outcome:
    """A line feed in a header value comes back (\\n)."""
    return user_header(p, "x-newline", "line1\nline2")


@case("value-encoding", "escape-encode", "MUST", V11)
def escaped_backslash(p: Probe) -> Outcome:
    """A backslash in a header value comes back (\\\\)."""
    return user_header(p, "x-backslash", "C:\\dir\\file")


@case("value-encoding", "escape-encode", "MUST", V12)
def escaped_carriage_return(p: Probe) -> Outcome:
    """A carriage return in a header value comes back (\\r)."""
    return user_header(p, "x-cr", "a\rb")


@case("value-encoding", "escape-encode", "MUST", V11)
def escaped_header_name(p: Probe) -> Outcome:
    """A colon in a header name comes back."""
    return user_header(p, "x:name", "v")


@case("value-encoding", "escape-encode", "MUST", V11)
def message_headers_escaped(p: Probe) -> Outcome:
    """The MESSAGE carries a colon in a value as \\c, never raw."""
    _wire, got = roundtrip(p, [("x-colon", "1:2")], b"x")
    if got is None or got.command != "MESSAGE":
        return p.broken("no MESSAGE: " + (describe(got) if got else "nothing"))
    raw = got.get_all("x-colon")
    return p.check(raw[:1] == ["1\\c2"], f"raw value on the wire: {raw!r}", ok="1\\c2 on the wire")


@case("value-encoding", "escape-undefined", "MUST", V11)
def undefined_escape(p: Probe) -> Outcome:
    """An undefined escape (\\t; \\r in 1.1) is a fatal error: no delivery, connection ended."""
    bad = "\\r" if p.version == "1.1" else "\\t"
    raw = build("SEND", [("destination", "{dest}"), ("x-bad", f"a{bad}b")], b"x", escaped=False)
    wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.broken(f"delivered; x-bad arrived as [{got.get('x-bad')}] (the header's octets)")
    closed = wire.wait_closed()
    return p.check(
        closed,
        "refused but the connection stayed open" + (f" ({describe(got)})" if got else ""),
        ok="connection ended" + (" after an ERROR" if got is not None else " without an ERROR"),
    )


@case("value-encoding", "escape-undefined", "MUST", V11)
def trailing_backslash(p: Probe) -> Outcome:
    """A value ending in a lone backslash is a fatal error."""
    raw = build("SEND", [("destination", "{dest}"), ("x-bad", "abc\\")], b"x", escaped=False)
    wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.broken(f"delivered; x-bad arrived as [{got.get('x-bad')}] (the header's octets)")
    return p.check(
        wire.wait_closed(), "refused but the connection stayed open", ok="connection ended"
    )


@case("value-encoding", "escape-connect", "STATED", V11)
def connect_not_unescaped(p: Probe) -> Outcome:
    """A backslash in a CONNECT header is not an escape (CONNECT is never escaped)."""
    wire = p.open()
    wire.send(build("CONNECT", [*p.connect_headers(), ("x-path", "C:\\tmp")]))
    got = wire.expect("CONNECTED")
    return p.check(
        got is not None and got.command == "CONNECTED",
        "refused: " + (describe(got) if got else "nothing"),
        ok="CONNECTED",
    )


@case("value-encoding", "escape-none-10", "UNSTATED", ("1.0",))
def backslash_in_10(p: Probe) -> Outcome:
    """How a STOMP 1.0 broker carries a backslash sequence (1.0 has no escapes)."""
    raw = build("SEND", [("destination", "{dest}"), ("x-bs", "a\\nb")], b"x", escaped=False)
    _wire, got = roundtrip(p, [], raw=raw)
    if got is None or got.command != "MESSAGE":
        return p.info("not delivered: " + (describe(got) if got else "nothing"))
    return p.info(f"x-bs sent as 'a\\\\nb', arrived raw as {got.get('x-bs')!r}")


@case("value-encoding", "escape-none-10", "UNSTATED", ("1.0",))
def colon_in_10(p: Probe) -> Outcome:
    """How a STOMP 1.0 broker carries a colon in a value."""
    raw = build("SEND", [("destination", "{dest}"), ("x-time", "12:30:45")], b"x", escaped=False)
    _wire, got = roundtrip(p, [], raw=raw)
    if got is None or got.command != "MESSAGE":
        return p.info("not delivered: " + (describe(got) if got else "nothing"))
    return p.info(f"arrived raw as {got.get('x-time')!r}")


@case("value-encoding", "utf8", "MUST")
def utf8_header(p: Probe) -> Outcome:
    """A UTF-8 header value (accents, CJK, emoji) comes back unchanged."""
    return user_header(p, "x-utf8", "héllo 中文 \U0001f600")


# -- header whitespace -------------------------------------------------------------


@case("header-whitespace", "no-trim", "MUST", levels={"1.0": "MAY"})
def padded_value(p: Probe) -> Outcome:
    """Spaces around a value are kept."""
    return user_header(p, "x-pad", "  padded  ")


@case("header-whitespace", "no-trim", "MUST", levels={"1.0": "MAY"})
def space_before_colon(p: Probe) -> Outcome:
    """A space before the colon belongs to the name."""
    return user_header(p, "x-name ", "v")


@case("header-whitespace", "no-trim", "MUST", V11)
def blank_value(p: Probe) -> Outcome:
    """A value of spaces only is kept."""
    return user_header(p, "x-blank", "   ")


@case("header-whitespace", "no-trim", "MUST", V11)
def tab_in_value(p: Probe) -> Outcome:
    """Tabs in a value are kept."""
    return user_header(p, "x-tab", "\ta\t")


@case("header-whitespace", "no-trim", "MUST", levels={"1.0": "MAY"})
def empty_value(p: Probe) -> Outcome:
    """An empty value is kept, the header present."""
    return user_header(p, "x-empty", "")


# -- repeated headers --------------------------------------------------------------


@case("repeated-headers", "repeated", "SHOULD", levels={"1.0": "MAY"})
def repeated_user_header(p: Probe) -> Outcome:
    """Of a repeated user header, the first is the value the MESSAGE gives."""
    _wire, got = roundtrip(p, [("x-rep", "first"), ("x-rep", "second")], b"x")
    if got is None or got.command != "MESSAGE":
        return p.broken("no MESSAGE: " + (describe(got) if got else "nothing"))
    values = got.get_all("x-rep")
    return p.check(
        values[:1] == ["first"], f"MESSAGE x-rep values: {values}", ok=f"first wins ({values})"
    )


@case("repeated-headers", "repeated", "SHOULD", levels={"1.0": "MAY"})
def repeated_destination(p: Probe) -> Outcome:
    """Of two destination headers, the first decides where the message goes."""
    wire = p.session()
    first, second = p.queue("first"), p.queue("second")
    p.subscribe(wire, first, "s1")
    p.subscribe(wire, second, "s2")
    p.frame(wire, "SEND", [("destination", first), ("destination", second)], b"where")
    got = wire.expect("MESSAGE")
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    went = "first" if got.get("destination") == first else "second"
    return p.check(went == "first", "delivered to the second destination", ok="first wins")


@case("repeated-headers", "repeated", "SHOULD", levels={"1.0": "MAY"})
def repeated_receipt(p: Probe) -> Outcome:
    """Of two receipt headers, the first is the receipt-id."""
    wire = p.session()
    p.frame(
        wire, "BEGIN", [("transaction", p.name("t")), ("receipt", "first"), ("receipt", "second")]
    )
    got = wire.expect("RECEIPT")
    if got is None or got.command != "RECEIPT":
        return p.broken("no RECEIPT: " + (describe(got) if got else "nothing"))
    return p.check(
        got.get("receipt-id") == "first", f"receipt-id {got.get('receipt-id')!r}", ok="first wins"
    )


@case("repeated-headers", "repeated", "SHOULD", V11)
def repeated_subscription_id(p: Probe) -> Outcome:
    """Of two SUBSCRIBE ids, the first is the MESSAGE's subscription."""
    wire = p.session()
    dest = p.queue()
    p.must_receipt(wire, "SUBSCRIBE", [("destination", dest), ("id", "first"), ("id", "second")])
    p.frame(wire, "SEND", [("destination", dest)], b"x")
    got = p.message(wire)
    return p.check(
        got.get("subscription") == "first",
        f"subscription {got.get('subscription')!r}",
        ok="first wins",
    )


@case("repeated-headers", "repeated", "SHOULD", levels={"1.0": "MAY"})
def repeated_content_length(p: Probe) -> Outcome:
    """Of two content-length headers, the first frames the body."""
    raw = b"SEND\ndestination:{dest}\ncontent-length:3\ncontent-length:5\n\nabc\x00"
    _wire, got = roundtrip(p, [], raw=raw)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(got.body == b"abc", f"body {got.body!r}", ok="first wins")


# -- content-length ---------------------------------------------------------------


@case("content-length", "content-length", "MUST", levels=SHOULD_IN_10)
def nuls_in_body(p: Probe) -> Outcome:
    """A body with NULs, framed by content-length, comes back whole."""
    body = b"a\x00b\x00\x00c"
    _wire, got = roundtrip(p, [], body, content_length=True)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(got.body == body, f"body {got.body!r}", ok="whole")


@case("content-length", "content-length", "MUST", levels=SHOULD_IN_10)
def zero_length(p: Probe) -> Outcome:
    """content-length:0 gives an empty body."""
    raw = b"SEND\ndestination:{dest}\ncontent-length:0\n\n\x00"
    _wire, got = roundtrip(p, [], raw=raw)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(got.body == b"", f"body {got.body!r}", ok="empty")


@case("content-length", "content-length-should", "SHOULD")
def message_has_content_length(p: Probe) -> Outcome:
    """A MESSAGE with a body carries content-length (even when the SEND had none)."""
    _wire, got = roundtrip(p, [], b"no length sent", content_length=False)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(
        got.get("content-length") is not None,
        "no content-length on the MESSAGE",
        ok=f"content-length:{got.get('content-length')}",
    )


@case("content-length", "content-length-should", "MUST", levels=SHOULD_IN_10)
def nul_body_has_content_length(p: Probe) -> Outcome:
    """A MESSAGE whose body holds NULs carries content-length."""
    _wire, got = roundtrip(p, [], b"x\x00y", content_length=True)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(got.get("content-length") is not None, "no content-length", ok="present")


@case("content-length", "content-length", "MUST", levels=SHOULD_IN_10)
def content_length_counts(p: Probe) -> Outcome:
    """The MESSAGE's content-length is the body's octet count."""
    body = "né\n".encode() * 10
    _wire, got = roundtrip(p, [], body, content_length=True)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    length = got.get("content-length")
    return p.check(
        length in (None, str(len(body))) and not got.fault,
        f"content-length {length!r} for {len(body)} octets {got.fault}",
        ok=f"{length}",
    )


@case("content-length", "content-length", "UNSTATED")
def non_numeric_length(p: Probe) -> Outcome:
    """What a non-numeric content-length does."""
    raw = b"SEND\ndestination:{dest}\ncontent-length:abc\n\nbody\x00"
    wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.info(f"ignored: delivered with body {got.body!r}")
    return p.info(
        "refused: "
        + (describe(got) if got else "nothing")
        + ("; closed" if wire.wait_closed(0.3) else "")
    )


@case("content-length", "content-length", "UNSTATED")
def negative_length(p: Probe) -> Outcome:
    """What a negative content-length does."""
    raw = b"SEND\ndestination:{dest}\ncontent-length:-1\n\nbody\x00"
    wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.info(f"delivered with body {got.body!r}")
    return p.info(
        "refused: "
        + (describe(got) if got else "nothing")
        + ("; closed" if wire.wait_closed(0.3) else "")
    )


@case("content-length", "content-length", "UNSTATED")
def padded_length(p: Probe) -> Outcome:
    """What content-length with spaces (" 4 ") does."""
    raw = b"SEND\ndestination:{dest}\ncontent-length: 4 \n\nbody\x00"
    _wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.info(f"accepted: body {got.body!r}")
    return p.info("refused: " + (describe(got) if got else "nothing"))


@case("content-length", "content-length", "MUST", levels=SHOULD_IN_10)
def length_short_of_body(p: Probe) -> Outcome:
    """A content-length shorter than the body (no NUL where it ends) is not delivered as sent."""
    raw = b"SEND\ndestination:{dest}\ncontent-length:2\n\nbody\x00"
    _wire, got = roundtrip(p, [], raw=raw)
    if got is not None and got.command == "MESSAGE":
        return p.broken(f"delivered with body {got.body!r}: content-length was not obeyed")
    return p.ok("refused: " + (describe(got) if got else "nothing"))


@case("content-length", "content-length", "MUST", levels=SHOULD_IN_10)
def length_reads_past_nul(p: Probe) -> Outcome:
    """content-length makes the broker read past a NUL in the body."""
    raw = b"SEND\ndestination:{dest}\ncontent-length:9\n\nbefore\x00af\x00"
    _wire, got = roundtrip(p, [], raw=raw)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(got.body == b"before\x00af", f"body {got.body!r}", ok="read past the NUL")


# -- size limits -------------------------------------------------------------------


def _limit(p: Probe, what: str, headers: list[tuple[str, str]], body: bytes = b"x") -> Outcome:
    wire, got = roundtrip(p, headers, body, content_length=True)
    if got is not None and got.command == "MESSAGE":
        return p.ok(f"{what}: accepted")
    closed = wire.wait_closed()
    seen = (describe(got) if got else "no ERROR") + ("; closed" if closed else "; left open")
    return p.check(got is not None and closed, f"{what}: {seen}", ok=f"{what}: limit ({seen})")


@case("size-limits", "size-limits", "SHOULD")
def many_headers(p: Probe) -> Outcome:
    """2000 headers: accepted, or ERROR then close."""
    return _limit(p, "2000 headers", [(f"x-h{i}", "v") for i in range(2000)])


@case("size-limits", "size-limits", "SHOULD")
def long_header(p: Probe) -> Outcome:
    """A 200 KiB header line: accepted, or ERROR then close."""
    return _limit(p, "200 KiB header", [("x-long", "v" * 200 * 1024)])


@case("size-limits", "size-limits", "SHOULD")
def big_body(p: Probe) -> Outcome:
    """A 4 MiB body: accepted, or ERROR then close."""
    return _limit(p, "4 MiB body", [], b"b" * (4 << 20))


# -- body and UTF-8 ----------------------------------------------------------------


def _body(p: Probe, body: bytes, content_length: bool | None = None) -> Outcome:
    _wire, got = roundtrip(p, [], body, content_length=content_length)
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(
        got.body == body,
        f"body changed: {len(got.body)} octets, starts {got.body[:40]!r}",
        ok=f"{len(body)} octets unchanged",
    )


@case("body", "utf8", "MUST")
def utf8_body(p: Probe) -> Outcome:
    """A UTF-8 text body comes back unchanged."""
    return _body(p, "héllo wörld 中文 \U0001f600".encode(), content_length=False)


@case("body", "content-length", "MUST", levels=SHOULD_IN_10)
def binary_body(p: Probe) -> Outcome:
    """A body of all 256 octet values comes back unchanged."""
    return _body(p, bytes(range(256)) * 4, content_length=True)


@case("body", "content-length", "MUST", levels=SHOULD_IN_10)
def empty_body(p: Probe) -> Outcome:
    """An empty body comes back empty."""
    return _body(p, b"")


@case("body", "content-length", "MUST", levels=SHOULD_IN_10)
def body_ending_in_eol(p: Probe) -> Outcome:
    """A body ending in EOLs keeps them."""
    return _body(p, b"line\n\r\n", content_length=False)


@case("body", "content-length", "MUST", levels=SHOULD_IN_10)
def large_body(p: Probe) -> Outcome:
    """A 256 KiB body comes back unchanged."""
    return _body(p, bytes(range(256)) * 1024, content_length=True)


@case("body", "content-type", "SHOULD")
def content_type_kept(p: Probe) -> Outcome:
    """The SEND's content-type reaches the MESSAGE."""
    _wire, got = roundtrip(p, [("content-type", "application/json;charset=utf-8")], b"{}")
    if got is None or got.command != "MESSAGE":
        return p.broken("not delivered: " + (describe(got) if got else "nothing"))
    return p.check(
        got.value("content-type", p.version) == "application/json;charset=utf-8",
        f"content-type {got.get('content-type')!r}",
        ok="kept",
    )


@case("body", "body-only", "UNSTATED", V12)
def body_on_subscribe(p: Probe) -> Outcome:
    """What a body on a SUBSCRIBE (which MUST NOT have one) does."""
    wire = p.session()
    p.frame(
        wire,
        "SUBSCRIBE",
        [("destination", p.queue()), ("id", "s1"), ("receipt", "r-body")],
        b"not allowed",
    )
    got = wire.expect("RECEIPT", "ERROR")
    return p.info(describe(got) if got else "no answer")
