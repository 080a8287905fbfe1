"""Cases on messaging: subscriptions and ack modes, ACK/NACK, transactions, MESSAGE, streams."""

from __future__ import annotations

from ._case import SHOULD_IN_10, STATED_BEFORE_12, V11, V12, Outcome, Probe, case, describe
from ._common import nothing_before_sentinel, roundtrip
from ._wire import RawFrame, Wire


def _send_all(
    p: Probe, wire: Wire, dest: str, bodies: list[bytes], extra: list[tuple[str, str]] | None = None
) -> None:
    for body in bodies:
        p.frame(wire, "SEND", [("destination", dest), *(extra or [])], body)


def _messages(p: Probe, wire: Wire, count: int) -> list[RawFrame]:
    return [p.message(wire) for _ in range(count)]


def _unsettled_after_reconnect(p: Probe, dest: str, mode: str = "auto") -> list[bytes]:
    """Bodies a new session receives from ``dest`` before a sentinel."""
    wire = p.session()
    p.subscribe(wire, dest, ack=mode)
    p.frame(wire, "SEND", [("destination", dest)], b"sentinel")
    bodies: list[bytes] = []
    while True:
        got = wire.expect("MESSAGE")
        if got is None or got.command != "MESSAGE":
            return [*bodies, b"<nothing more: " + (describe(got).encode() if got else b"") + b">"]
        if got.body == b"sentinel":
            return bodies
        bodies.append(got.body)
        if mode != "auto":
            p.frame(wire, "ACK", p.ack_headers(got))


def _leave(p: Probe, wire: Wire) -> None:
    """DISCONNECT and wait for the RECEIPT or the close (some brokers close at once)."""
    p.receipt(wire, "DISCONNECT")
    wire.wait_closed(0.5)
    wire.close()


# -- SUBSCRIBE ids and ack modes ---------------------------------------------------


@case("subscribe", "ack-auto", "STATED")
def auto_ack(p: Probe) -> Outcome:
    """With ack:auto (the default) a delivered message is consumed: no redelivery."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest)
    _send_all(p, wire, dest, [b"m1"])
    p.message(wire)
    _leave(p, wire)
    again = _unsettled_after_reconnect(p, dest)
    return p.check(not again, f"delivered again: {again}", ok="not redelivered")


@case("subscribe", "ack-client", "STATED")
def client_ack_cumulative(p: Probe) -> Outcome:
    """With ack:client an ACK settles that message and all before it, not those after."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client")
    _send_all(p, wire, dest, [b"m1", b"m2", b"m3"])
    got = _messages(p, wire, 3)
    p.must_receipt(wire, "ACK", p.ack_headers(got[1]))
    _leave(p, wire)
    again = _unsettled_after_reconnect(
        p, dest, "client-individual" if p.version != "1.0" else "client"
    )
    return p.check(
        again == [b"m3"],
        f"after ACK of m2, redelivered: {again}",
        ok="m1, m2 settled; m3 redelivered",
    )


@case("subscribe", "ack-client-individual", "MUST", V11)
def client_individual_ack(p: Probe) -> Outcome:
    """With ack:client-individual an ACK settles only its message."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client-individual")
    _send_all(p, wire, dest, [b"m1", b"m2"])
    got = _messages(p, wire, 2)
    p.must_receipt(wire, "ACK", p.ack_headers(got[1]))
    _leave(p, wire)
    again = _unsettled_after_reconnect(p, dest, "client-individual")
    return p.check(
        again == [b"m1"],
        f"after ACK of m2 only, redelivered: {again}",
        ok="m1 redelivered, m2 settled",
    )


@case("subscribe", "ack-client", "UNSTATED")
def unacked_redelivered(p: Probe) -> Outcome:
    """Whether unacknowledged client-mode messages come back after a disconnect."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client")
    _send_all(p, wire, dest, [b"m1"])
    p.message(wire)
    _leave(p, wire)
    again = _unsettled_after_reconnect(p, dest, "client")
    return p.info(f"redelivered: {again}")


@case("subscribe", "subscribe-id", "MUST", V11)
def two_subscriptions(p: Probe) -> Outcome:
    """Two subscriptions on one connection get their own messages, each with its id."""
    wire = p.session()
    first, second = p.queue("a"), p.queue("b")
    p.subscribe(wire, first, "sub-a")
    p.subscribe(wire, second, "sub-b")
    p.frame(wire, "SEND", [("destination", first)], b"a")
    p.frame(wire, "SEND", [("destination", second)], b"b")
    got = {m.body: m.get("subscription") for m in _messages(p, wire, 2)}
    return p.check(got == {b"a": "sub-a", b"b": "sub-b"}, f"subscriptions: {got}", ok="matched")


@case("subscribe", "unsubscribe", "STATED")
def unsubscribe_stops(p: Probe) -> Outcome:
    """After UNSUBSCRIBE no more messages come from that subscription."""
    wire = p.session()
    dest, other = p.queue(), p.queue("other")
    p.subscribe(wire, dest)
    p.subscribe(wire, other, "s2")
    p.must_receipt(
        wire, "UNSUBSCRIBE", [("id", "s1")] if p.version != "1.0" else [("destination", dest)]
    )
    p.frame(wire, "SEND", [("destination", dest)], b"after")
    good, detail = nothing_before_sentinel(p, wire, other)
    return p.check(good, detail, ok="nothing after UNSUBSCRIBE")


@case("subscribe", "subscribe-id", "UNSTATED", V11)
def duplicate_subscription_id(p: Probe) -> Outcome:
    """What a second SUBSCRIBE with an id already in use does."""
    wire = p.session()
    p.subscribe(wire, p.queue(), "dup")
    got = p.receipt(wire, "SUBSCRIBE", [("destination", p.queue()), ("id", "dup")])
    return p.info(describe(got) if got else "no answer")


@case("subscribe", "unsubscribe", "UNSTATED", V11)
def unsubscribe_unknown(p: Probe) -> Outcome:
    """What UNSUBSCRIBE of an unknown id does."""
    wire = p.session()
    got = p.receipt(wire, "UNSUBSCRIBE", [("id", p.name("nope"))])
    return p.info(describe(got) if got else "no answer")


@case("subscribe", "ack-auto", "UNSTATED", V11)
def bad_ack_mode(p: Probe) -> Outcome:
    """What ack:bogus does."""
    wire = p.session()
    got = p.receipt(wire, "SUBSCRIBE", [("destination", p.queue()), ("id", "s1"), ("ack", "bogus")])
    return p.info(describe(got) if got else "no answer")


@case("subscribe", "subscribe-id", "UNSTATED", V12)
def subscribe_without_id(p: Probe) -> Outcome:
    """What a 1.2 SUBSCRIBE without id does."""
    wire = p.session()
    got = p.receipt(wire, "SUBSCRIBE", [("destination", p.queue())])
    return p.info(describe(got) if got else "no answer")


@case("subscribe", "destination-opaque", "UNSTATED")
def topic_destination(p: Probe) -> Outcome:
    """Whether /topic/ names fan out to two subscribers (destinations are the broker's)."""
    first, second = p.session(), p.session()
    dest = "/topic/stomp-check." + p.name("fan")
    p.subscribe(first, dest)
    p.subscribe(second, dest)
    p.frame(first, "SEND", [("destination", dest)], b"fan")
    got = [w.expect("MESSAGE", timeout=1.0) for w in (first, second)]
    count = sum(1 for g in got if g is not None and g.command == "MESSAGE")
    return p.info(f"/topic/ delivered to {count} of 2 subscribers")


# -- ACK and NACK ------------------------------------------------------------------


@case("ack", "ack-id", "MUST")
def ack_accepted(p: Probe) -> Outcome:
    """An ACK naming the MESSAGE as this version says is accepted."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client")
    p.frame(wire, "SEND", [("destination", dest)], b"x")
    got = p.receipt(wire, "ACK", p.ack_headers(p.message(wire)))
    return p.check(
        got is not None and got.command == "RECEIPT",
        "got " + (describe(got) if got else "nothing"),
        ok="accepted",
    )


@case("ack", "ack-id", "MUST", V11)
def ack_settles(p: Probe) -> Outcome:
    """An ACKed client-individual message is not delivered again."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client-individual")
    p.frame(wire, "SEND", [("destination", dest)], b"x")
    p.must_receipt(wire, "ACK", p.ack_headers(p.message(wire)))
    _leave(p, wire)
    again = _unsettled_after_reconnect(p, dest, "client-individual")
    return p.check(not again, f"redelivered: {again}", ok="settled")


@case("ack", "nack", "STATED", V11)
def nack_accepted(p: Probe) -> Outcome:
    """A NACK naming the MESSAGE is accepted."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client-individual")
    p.frame(wire, "SEND", [("destination", dest)], b"x")
    got = p.receipt(wire, "NACK", p.ack_headers(p.message(wire)))
    return p.check(
        got is not None and got.command == "RECEIPT",
        "got " + (describe(got) if got else "nothing"),
        ok="accepted",
    )


@case("ack", "nack", "UNSTATED", V11)
def nack_effect(p: Probe) -> Outcome:
    """What a NACKed message does next (redelivered, dropped, dead-lettered)."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client-individual")
    p.frame(wire, "SEND", [("destination", dest)], b"nacked")
    p.must_receipt(wire, "NACK", p.ack_headers(p.message(wire)))
    again = wire.expect("MESSAGE", timeout=1.0)
    return p.info(
        "redelivered at once"
        if again is not None and again.command == "MESSAGE"
        else "not redelivered within 1 s"
    )


@case("ack", "ack-id", "UNSTATED", V12)
def ack_unknown_id(p: Probe) -> Outcome:
    """What an ACK with an unknown id does."""
    wire = p.session()
    got = p.receipt(wire, "ACK", [("id", p.name("nope"))])
    return p.info(describe(got) if got else "no answer")


@case("ack", "ack-id", "UNSTATED", V12)
def ack_11_style_in_12(p: Probe) -> Outcome:
    """What a 1.1-style ACK (message-id, subscription) does in 1.2."""
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, ack="client")
    p.frame(wire, "SEND", [("destination", dest)], b"x")
    msg = p.message(wire)
    got = p.receipt(
        wire, "ACK", [("message-id", msg.value("message-id", "1.2") or ""), ("subscription", "s1")]
    )
    return p.info(describe(got) if got else "no answer")


# -- transactions ------------------------------------------------------------------


def _tx_session(p: Probe) -> tuple[Wire, str, str]:
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest)
    tx = p.name("tx")
    p.must_receipt(wire, "BEGIN", [("transaction", tx)])
    return wire, dest, tx


@case("transactions", "transaction", "STATED")
def send_held_until_commit(p: Probe) -> Outcome:
    """A SEND in a transaction is not delivered before the COMMIT."""
    wire, dest, tx = _tx_session(p)
    p.frame(wire, "SEND", [("destination", dest), ("transaction", tx)], b"in tx")
    good, detail = nothing_before_sentinel(p, wire, dest)
    return p.check(good, detail, ok="held")


@case("transactions", "transaction", "STATED")
def commit_delivers(p: Probe) -> Outcome:
    """COMMIT delivers the transaction's messages, in order."""
    wire, dest, tx = _tx_session(p)
    _send_all(p, wire, dest, [b"t1", b"t2", b"t3"], [("transaction", tx)])
    p.frame(wire, "COMMIT", [("transaction", tx)])
    bodies = [m.body for m in _messages(p, wire, 3)]
    return p.check(bodies == [b"t1", b"t2", b"t3"], f"bodies {bodies}", ok="in order")


@case("transactions", "transaction-abort", "STATED")
def abort_discards(p: Probe) -> Outcome:
    """ABORT discards the transaction's messages."""
    wire, dest, tx = _tx_session(p)
    p.frame(wire, "SEND", [("destination", dest), ("transaction", tx)], b"aborted")
    p.must_receipt(wire, "ABORT", [("transaction", tx)])
    good, detail = nothing_before_sentinel(p, wire, dest)
    return p.check(good, detail, ok="discarded")


@case("transactions", "transaction-implicit-abort", "STATED")
def disconnect_aborts(p: Probe) -> Outcome:
    """A transaction left open at DISCONNECT is aborted."""
    wire, dest, tx = _tx_session(p)
    p.frame(wire, "SEND", [("destination", dest), ("transaction", tx)], b"left open")
    _leave(p, wire)
    again = _unsettled_after_reconnect(p, dest)
    return p.check(not again, f"delivered: {again}", ok="aborted")


@case("transactions", "transaction-ack", "SHOULD")
def ack_in_aborted_tx(p: Probe) -> Outcome:
    """An ACK in an aborted transaction does not settle the message."""
    wire = p.session()
    dest = p.queue()
    mode = "client-individual" if p.version != "1.0" else "client"
    p.subscribe(wire, dest, ack=mode)
    p.frame(wire, "SEND", [("destination", dest)], b"keep")
    msg = p.message(wire)
    tx = p.name("tx")
    p.must_receipt(wire, "BEGIN", [("transaction", tx)])
    p.frame(wire, "ACK", [*p.ack_headers(msg), ("transaction", tx)])
    p.must_receipt(wire, "ABORT", [("transaction", tx)])
    _leave(p, wire)
    again = _unsettled_after_reconnect(p, dest, mode)
    return p.check(again == [b"keep"], f"redelivered: {again}", ok="not settled")


@case("transactions", "transaction-ack", "SHOULD")
def ack_in_committed_tx(p: Probe) -> Outcome:
    """An ACK in a committed transaction settles the message."""
    wire = p.session()
    dest = p.queue()
    mode = "client-individual" if p.version != "1.0" else "client"
    p.subscribe(wire, dest, ack=mode)
    p.frame(wire, "SEND", [("destination", dest)], b"settle")
    msg = p.message(wire)
    tx = p.name("tx")
    p.must_receipt(wire, "BEGIN", [("transaction", tx)])
    p.frame(wire, "ACK", [*p.ack_headers(msg), ("transaction", tx)])
    p.must_receipt(wire, "COMMIT", [("transaction", tx)])
    _leave(p, wire)
    again = _unsettled_after_reconnect(p, dest, mode)
    return p.check(not again, f"redelivered: {again}", ok="settled")


@case("transactions", "error-may", "MAY")
def commit_unknown(p: Probe) -> Outcome:
    """COMMIT of an unknown transaction gets an ERROR."""
    wire = p.session()
    got = p.receipt(wire, "COMMIT", [("transaction", p.name("nope"))])
    return p.check(
        got is not None and got.command == "ERROR",
        "got " + (describe(got) if got else "nothing"),
        ok="ERROR",
    )


@case("transactions", "transaction-unknown", "UNSTATED")
def begin_twice(p: Probe) -> Outcome:
    """What a second BEGIN of the same transaction does."""
    wire = p.session()
    tx = p.name("tx")
    p.must_receipt(wire, "BEGIN", [("transaction", tx)])
    got = p.receipt(wire, "BEGIN", [("transaction", tx)])
    return p.info(describe(got) if got else "no answer")


# -- MESSAGE headers ----------------------------------------------------------------


def _one_message(
    p: Probe, headers: list[tuple[str, str]] | None = None, ack: str | None = None
) -> tuple[RawFrame, str]:
    wire = p.session()
    dest = p.queue()
    p.subscribe(wire, dest, "sub-1" if p.version != "1.0" else "s1", ack=ack)
    p.frame(wire, "SEND", [("destination", dest), *(headers or [])], b"m")
    return p.message(wire), dest


@case("message", "message-destination", "MUST", levels={"1.1": "STATED"})
def message_destination(p: Probe) -> Outcome:
    """A MESSAGE carries a destination header."""
    msg, _dest = _one_message(p)
    return p.check(msg.get("destination") is not None, "no destination", ok="present")


@case("message", "message-destination", "SHOULD", levels={"1.1": "UNSTATED"})
def message_destination_same(p: Probe) -> Outcome:
    """The MESSAGE's destination is the SEND's."""
    msg, dest = _one_message(p)
    got = msg.value("destination", p.version)
    return p.check(got == dest, f"destination {got!r}", ok="identical")


@case("message", "message-headers", "MUST", levels=STATED_BEFORE_12)
def message_id(p: Probe) -> Outcome:
    """A MESSAGE carries a message-id header."""
    msg, _ = _one_message(p)
    return p.check(msg.get("message-id") is not None, "no message-id", ok="present")


@case("message", "message-headers", "MUST", levels=STATED_BEFORE_12)
def message_ids_unique(p: Probe) -> Outcome:
    """Two messages have different message-ids."""
    wire, first = roundtrip(p, [], b"one")
    dest = first.get("destination") if first else None
    if first is None or first.command != "MESSAGE" or dest is None:
        return p.broken("no MESSAGE")
    p.frame(wire, "SEND", [("destination", first.value("destination", p.version) or "")], b"two")
    second = p.message(wire)
    a, b = first.get("message-id"), second.get("message-id")
    return p.check(a != b, f"both message-id {a!r}", ok="different")


@case("message", "message-headers", "MUST", V11, levels={"1.1": "STATED"})
def message_subscription(p: Probe) -> Outcome:
    """A MESSAGE carries the subscription id it is delivered for."""
    msg, _ = _one_message(p)
    return p.check(
        msg.value("subscription", p.version) == "sub-1",
        f"subscription {msg.get('subscription')!r}",
        ok="sub-1",
    )


@case("message", "message-ack", "MUST", V12)
def message_ack_client(p: Probe) -> Outcome:
    """A MESSAGE of an ack:client subscription carries an ack header."""
    msg, _ = _one_message(p, ack="client")
    return p.check(msg.get("ack") is not None, "no ack header", ok="present")


@case("message", "message-ack", "MUST", V12)
def message_ack_individual(p: Probe) -> Outcome:
    """A MESSAGE of an ack:client-individual subscription carries an ack header."""
    msg, _ = _one_message(p, ack="client-individual")
    return p.check(msg.get("ack") is not None, "no ack header", ok="present")


@case("message", "message-ack", "UNSTATED", V12)
def message_ack_auto(p: Probe) -> Outcome:
    """Whether an ack:auto MESSAGE carries an ack header."""
    msg, _ = _one_message(p)
    return p.info("ack header present" if msg.get("ack") is not None else "no ack header")


@case("message", "send-user-headers", "MUST", levels=SHOULD_IN_10)
def user_headers_pass(p: Probe) -> Outcome:
    """User headers of the SEND are passed through to the MESSAGE."""
    msg, _ = _one_message(p, [("x-user-a", "1"), ("x-user-b", "two")])
    seen = msg.decoded_headers(p.version)
    good = seen.get("x-user-a") == "1" and seen.get("x-user-b") == "two"
    return p.check(
        good,
        f"got x-user-a={seen.get('x-user-a')!r} x-user-b={seen.get('x-user-b')!r}",
        ok="passed through",
    )


@case("message", "server-headers", "UNSTATED")
def server_added_headers(p: Probe) -> Outcome:
    """Which headers the broker adds to a MESSAGE."""
    msg, _ = _one_message(p)
    names = sorted(
        {k for k, _ in msg.headers}
        - {"destination", "message-id", "subscription", "content-length"}
    )
    return p.info(f"extra headers: {names}")


# -- RabbitMQ stream extensions ----------------------------------------------------


def _stream(p: Probe, offset: str) -> tuple[list[RawFrame], str]:
    wire = p.session()
    name = p.name("stream")
    declare = [
        ("destination", f"/queue/{name}"),
        ("id", "d"),
        ("ack", "client"),
        ("x-queue-type", "stream"),
        ("durable", "true"),
        ("auto-delete", "false"),
        ("prefetch-count", "1"),
        ("x-stream-offset", "next"),
    ]
    answer = p.receipt(wire, "SUBSCRIBE", declare)
    if answer is None or answer.command != "RECEIPT":
        return [], "could not declare a stream: " + (describe(answer) if answer else "nothing")
    dest = f"/amq/queue/{name}"
    for body in (b"s0", b"s1", b"s2"):
        p.frame(wire, "SEND", [("destination", dest), ("receipt", body.decode())], body)
        if wire.expect("RECEIPT", receipt=body.decode()) is None:
            return [], "SEND to the stream got no RECEIPT"
    reader = p.session()
    got = p.receipt(
        reader,
        "SUBSCRIBE",
        [
            ("destination", dest),
            ("id", "r"),
            ("ack", "client"),
            ("prefetch-count", "10"),
            ("x-stream-offset", offset),
        ],
    )
    if got is None or got.command != "RECEIPT":
        return [], "stream subscription refused: " + (describe(got) if got else "nothing")
    frames: list[RawFrame] = []
    while True:
        msg = reader.expect("MESSAGE", timeout=min(1.0, p.timeout))
        if msg is None or msg.command != "MESSAGE":
            return frames, ""
        frames.append(msg)


@case("streams", "stream-offset", "MAY", V12)
def stream_first(p: Probe) -> Outcome:
    """x-stream-offset:first replays a stream from its start."""
    frames, problem = _stream(p, "first")
    bodies = [f.body for f in frames]
    if bodies == [b"s0", b"s1", b"s2"] and all(f.get("x-stream-offset") for f in frames):
        return p.ok("replayed from the start")
    return p.absent(problem or f"no stream replay: got {bodies}")


@case("streams", "stream-offset", "MAY", V12)
def stream_offset_n(p: Probe) -> Outcome:
    """x-stream-offset:offset=1 starts at the second message."""
    frames, problem = _stream(p, "offset=1")
    bodies = [f.body for f in frames]
    if bodies == [b"s1", b"s2"]:
        return p.ok("started at offset 1")
    return p.absent(problem or f"no offsets: got {bodies}")


@case("streams", "stream-offset", "MAY", V12)
def stream_offset_header(p: Probe) -> Outcome:
    """Stream MESSAGEs carry x-stream-offset."""
    frames, problem = _stream(p, "first")
    offsets = [f.get("x-stream-offset") for f in frames]
    if frames and all(o is not None for o in offsets):
        return p.ok(f"offsets {offsets}")
    return p.absent(problem or "no x-stream-offset on MESSAGE")
