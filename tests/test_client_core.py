"""ClientCore, the protocol-side state every client adapter shares.

Driven here without any I/O: the core's ClientConnection talks to a
ServerConnection through bytes, and the events it reads are routed by hand,
as an adapter's reader does.
"""

from __future__ import annotations

import dataclasses

import pytest
from helpers import pure_core

from stomp_proto import (
    AckMode,
    Begin,
    Connect,
    Connected,
    Error,
    LocalProtocolError,
    Message,
    Receipt,
    Send,
    ServerConnection,
    Subscribe,
    Unsubscribe,
    Version,
)
from stomp_proto._client._backoff import Backoff
from stomp_proto._client._core import ClientCore, End, Reconnects
from stomp_proto._client._errors import BrokerError, ClientError, ConnectionLost
from stomp_proto._client._options import ConnectOptions

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")


class Handle:
    """An adapter's subscription object, as little as the core needs."""

    def __init__(self, event: Subscribe) -> None:
        self._event = event
        self.ended: list[ClientError | None] = []

    def _end(self, error: ClientError | None) -> None:
        self.ended.append(error)


class Session:
    """A ClientCore connected to a ServerConnection, with one subscription."""

    def __init__(self, version: Version, ack: AckMode) -> None:
        self.core: ClientCore[Handle] = ClientCore(
            ConnectOptions(host="127.0.0.1", port=0, versions=(version,))
        )
        self.server = ServerConnection()
        self.server.receive_data(self.core.conn.send(self.core.options.connect_event()))
        assert isinstance(self.server.next_event(), Connect)
        self.core.conn.receive_data(self.server.send(Connected(session="s")))
        assert isinstance(self.core.conn.next_event(), Connected)
        self.subscription = self.core.subscribe_event("/queue/q", ack, None, None)
        self.handle = Handle(self.subscription)
        subscribe, _ = self.core.subscribing(self.handle)
        self.server.receive_data(self.core.conn.send(subscribe))
        assert isinstance(self.server.next_event(), Subscribe)
        self.core.subscribe_done(self.handle, ok=True)
        self.count = 0

    def deliver(self, n: int, headers: tuple[tuple[str, str], ...] = ()) -> list[Message]:
        """``n`` MESSAGEs from the server, routed by the core."""
        delivered = []
        for _ in range(n):
            self.count += 1
            message = Message(
                "/queue/q",
                message_id=f"m{self.count}",
                subscription=self.subscription.id,
                ack=f"a{self.count}" if self.server.version == "1.2" else None,
                headers=headers,
            )
            self.core.conn.receive_data(self.server.send(message))
            event = self.core.conn.next_event()
            route = self.core.route(event)  # type: ignore[arg-type]
            assert route is event  # a MESSAGE routes to the subscription it names
            delivered.append(route)
        return delivered

    def ack(self, message: Message) -> None:
        """What an adapter's ``ack()`` does, and the server receiving it."""
        self.server.receive_data(self.core.conn.ack(message))
        assert self.server.next_event() is not None

    def unacked(self) -> int:
        """Deliveries awaiting an (N)ACK: the connection's ledger, the only one."""
        return len(self.core.conn.pending_acks(self.subscription.key))


@pytest.mark.parametrize("version", VERSIONS)
def test_cumulative_ack_forgets_every_earlier_message(version: Version) -> None:
    # 1.2 SUBSCRIBE "ack Header": in client mode an ACK covers all messages
    # delivered before it.
    session = Session(version, "client")
    messages = session.deliver(5)
    session.ack(messages[3])
    assert session.core.conn.pending_acks(session.subscription.id) == (
        (messages[4].ack if version == "1.2" else messages[4].message_id),
    )
    for settled in messages[:4]:
        with pytest.raises(LocalProtocolError):
            session.core.conn.ack(settled)
    session.ack(messages[4])
    assert session.unacked() == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_many_cumulative_acks_leave_nothing_behind(version: Version) -> None:
    session = Session(version, "client")
    for _ in range(50):
        batch = session.deliver(20)
        session.ack(batch[-1])
    assert session.unacked() == 0


@pytest.mark.parametrize("version", ("1.1", "1.2"))
def test_client_individual_ack_forgets_only_that_message(version: Version) -> None:
    session = Session(version, "client-individual")
    messages = session.deliver(3)
    session.ack(messages[2])
    assert session.unacked() == 2
    session.core.conn.check_delivered(messages[0])  # still awaiting its own ACK
    session.ack(messages[0])
    session.ack(messages[1])
    assert session.unacked() == 0


def test_auto_mode_tracks_nothing() -> None:
    session = Session("1.2", "auto")
    session.deliver(10)
    assert session.unacked() == 0


def test_unsubscribe_forgets_what_the_subscription_awaited() -> None:
    session = Session("1.2", "client")
    messages = session.deliver(4)
    unsubscribe = session.core.unsubscribing(session.handle)
    assert unsubscribe == Unsubscribe(id=session.subscription.id)
    session.core.conn.send(unsubscribe)
    assert session.unacked() == 0
    with pytest.raises(LocalProtocolError):
        session.core.conn.ack(messages[0])


def test_messages_of_an_earlier_connection_cannot_be_acked() -> None:
    session = Session("1.2", "client")
    messages = session.deliver(2)
    session.core.new_connection()
    with pytest.raises(LocalProtocolError):
        session.core.conn.ack(messages[1])


@pytest.mark.parametrize("version", VERSIONS)
def test_a_redelivery_with_the_same_ids_is_not_the_old_message(version: Version) -> None:
    # After a reconnect a broker may redeliver with the same ids (ActiveMQ's
    # message-id; delivery tags that restart), marked as a redelivery: only
    # the new delivery acknowledges it, never the one from the connection
    # that is gone.  An equal copy of the new one (rebuilt, unpickled) does.
    ack: AckMode = "client-individual" if version != "1.0" else "client"
    first = Session(version, ack)
    (old,) = first.deliver(1)
    second = Session(version, ack)
    (new,) = second.deliver(1, headers=(("redelivered", "true"),))
    assert (old.message_id, old.ack) == (new.message_id, new.ack) and old != new
    with pytest.raises(LocalProtocolError, match="not delivered on this connection"):
        second.core.conn.ack(old)
    assert second.unacked() == 1
    second.ack(dataclasses.replace(new))
    assert second.unacked() == 0


def test_a_message_settles_the_receipt_of_its_subscribe() -> None:
    # A MESSAGE proves the broker took the SUBSCRIBE: the client stops waiting
    # for that RECEIPT (it may sit behind a full buffer), and only once.
    core: ClientCore[Handle] = ClientCore(ConnectOptions())
    handle = Handle(core.subscribe_event("/queue/q", "auto", None, "s1"))
    event, receipt = core.subscribing(handle)
    assert event.receipt == receipt and core.subscriptions == {"s1": handle}
    message = Message("/queue/q", message_id="m", subscription="s1")
    assert core.target(message) == (handle, receipt)
    assert core.target(message) == (handle, None)
    assert core.target(Message("/queue/q", message_id="m", subscription="")) == (None, None)


def test_registry_restores_and_finishes_subscriptions() -> None:
    core: ClientCore[Handle] = ClientCore(ConnectOptions())
    handles = [Handle(core.subscribe_event(f"/queue/{n}", "auto", None, None)) for n in "ab"]
    for handle in handles:
        core.subscribing(handle)
        core.subscribe_done(handle, ok=True)
    failed = Handle(core.subscribe_event("/queue/c", "auto", None, None))
    core.subscribing(failed)
    core.subscribe_done(failed, ok=False)
    restored = core.restore_subscriptions()
    assert [dataclasses.replace(e, receipt=None) for e in restored] == [h._event for h in handles]
    assert all(e.receipt for e in restored)  # the core confirms each (see the restore tests)
    error = ConnectionLost("gone")
    core.finish(error)
    core.finish(ConnectionLost("later"))
    assert core.error is error and core.subscriptions == {}
    assert [h.ended for h in handles] == [[error], [error]]


# -- restoring subscriptions after a reconnect ------------------------------------------


def _restoring(names: str) -> tuple[ClientCore[Handle], list[Handle], list[Subscribe]]:
    """A core with one confirmed subscription per letter of ``names``, being restored."""
    core: ClientCore[Handle] = ClientCore(ConnectOptions(reconnect=Backoff()))
    handles = [Handle(core.subscribe_event(f"/queue/{n}", "auto", None, n)) for n in names]
    for handle in handles:
        core.subscribing(handle)
        core.subscribe_done(handle, ok=True)
    core.new_connection()
    return core, handles, core.restore_subscriptions()


def test_an_error_during_restore_refuses_the_oldest_unconfirmed_subscription() -> None:
    # RabbitMQ: SUBSCRIBE to a deleted /amq/queue/ gets ERROR not_found, with no
    # receipt-id; it answers frames in order, so the receipts before it name
    # the subscriptions it took.
    core, (a, b, c), restored = _restoring("abc")
    assert core.route(Receipt(restored[0].receipt or "")) is None  # a is back
    route = core.route(Error(message="not_found", body=b"NOT_FOUND - no queue 'b'"))
    assert isinstance(route, End) and isinstance(route.error, BrokerError)
    assert b.ended == [route.error] and a.ended == [] and c.ended == []
    assert list(core.subscriptions) == ["a", "c"]  # the next session restores these
    assert core.refused
    # Refusing a restored subscription is progress: it does not count as an ERROR ending.
    assert all(core.again(route.error, 0.0) for _ in range(10))


def test_an_error_with_a_receipt_id_refuses_the_subscription_it_names() -> None:
    core, (a, b, c), restored = _restoring("abc")
    route = core.route(Error(message="no", receipt_id=restored[2].receipt))
    assert isinstance(route, End)
    assert c.ended == [route.error] and a.ended == b.ended == []
    assert list(core.subscriptions) == ["a", "b"]


def test_a_message_confirms_a_restored_subscription() -> None:
    core, (a, b), restored = _restoring("ab")
    core.target(Message("/queue/a", message_id="m", subscription="a"))
    core.route(Receipt(restored[1].receipt or ""))
    route = core.route(Error(message="broker shutting down"))
    assert isinstance(route, End) and not core.refused
    assert a.ended == b.ended == []  # nothing was pending: an ordinary ERROR


def test_messages_for_a_left_subscription_are_not_strangers() -> None:
    session = Session("1.2", "client-individual")
    session.core.unsubscribing(session.handle)
    message = Message("/queue/q", message_id="m", subscription=session.handle._event.key)
    assert session.core.target(message) == (session.handle, None)  # the adapter drops it
    session.core.new_connection()
    assert session.core.target(message) == (None, None)


def test_waits_grow_while_attempts_fail_and_start_over_after_a_held_session() -> None:
    backoff = Backoff(initial=1.0, factor=2.0, maximum=8.0, jitter=0.0, held_after=1.0)
    policy = Reconnects(backoff)
    lost = ConnectionLost("cut")
    # A dead broker: every attempt fails, the waits grow to the maximum and stay there.
    assert policy.again(lost, 0.0)
    assert [policy.next_delay() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    # A broker that accepts and drops at once: a short session is a failed attempt.
    policy.started(100.0)
    assert policy.again(lost, 100.5) and policy.next_delay() == 8.0
    # A flapping link: sessions of a few seconds, each cut followed by the first wait.
    for start in (200.0, 210.0, 220.0):
        policy.started(start)
        assert policy.again(lost, start + 3.0) and policy.next_delay() == 1.0


def test_a_flapping_link_recovers_at_once_and_a_dead_broker_is_not_hammered() -> None:
    """The fault trial: cuts every 3-7 s never let a session last 10 s; with the old rule
    (start over only after ``reset_after``) the waits climbed to ``maximum``."""
    backoff = Backoff(jitter=0.0)
    policy = Reconnects(backoff)
    lost = ConnectionLost("cut")
    now, waits = 0.0, []
    for lasted in [3.0, 7.0, 4.5, 5.0, 3.2, 6.9] * 20:
        policy.started(now)
        now += lasted
        assert policy.again(lost, now)
        wait = policy.next_delay()
        assert wait is not None
        waits.append(wait)
        now += wait
    assert set(waits) == {backoff.initial}
    # A broker that is down: at most one attempt every `maximum` seconds.
    dead = [policy.next_delay() for _ in range(20)]
    assert dead[-1] == backoff.maximum and all(w is not None for w in dead)
    # One that accepts and then drops within a second: no faster than the dead one.
    policy = Reconnects(backoff)
    now, waits = 0.0, []
    for _ in range(20):
        policy.started(now)
        now += 0.2
        assert policy.again(lost, now)
        wait = policy.next_delay()
        assert wait is not None
        waits.append(wait)
        now += wait
    assert waits[-1] == backoff.maximum


def test_errors_in_a_row_end_the_reconnects() -> None:
    policy = Reconnects(Backoff(error_attempts=2, reset_after=10.0))
    error = BrokerError(Error(message="broker shutting down"))
    assert policy.again(error, 0.0)
    policy.started(1.0)
    assert policy.again(error, 2.0)
    policy.started(3.0)
    assert not policy.again(error, 4.0)  # the third ERROR in a row
    # A healthy session in between starts the count over.
    policy = Reconnects(Backoff(error_attempts=1, reset_after=10.0))
    assert policy.again(error, 0.0)
    policy.started(1.0)
    assert policy.again(error, 20.0)


def test_no_backoff_no_reconnect() -> None:
    core: ClientCore[Handle] = ClientCore(ConnectOptions())
    assert not core.again(ConnectionLost("cut"), 0.0)


def test_connect_options_repr_hides_the_passcode() -> None:
    options = ConnectOptions(login="alice", passcode="s3cret")
    assert "s3cret" not in repr(options) and "login='alice'" in repr(options)
    assert options.connect_event().passcode == "s3cret"


@pytest.mark.parametrize(
    ("body", "content_type", "headers", "transaction"),
    [
        (b"x" * 4096, None, {"x-ts": "1"}, None),
        (b"", "application/json", (("a", "1"), ("a", "2")), "tx-1"),
        (bytearray(b"abc"), None, None, None),
        ("text", None, {}, None),
    ],
)
def test_the_send_of_send_is_the_event_a_user_would_make(
    body: bytes | bytearray | str,
    content_type: str | None,
    headers: dict[str, str] | tuple[tuple[str, str], ...] | None,
    transaction: str | None,
) -> None:
    """send() makes its SEND without the dataclass's __init__ when it can: every
    field must still be set, and to what Send(...) gives (a str body is UTF-8
    text, a bytearray becomes bytes)."""
    core: ClientCore[Handle] = ClientCore(ConnectOptions())
    for receipt in (False, True):
        event, receipt_id = core.send_event(
            "/queue/a",
            body,
            content_type=content_type,
            headers=headers,
            transaction=transaction,
            receipt=receipt,
            content_length=False,
        )
        wanted = Send(
            "/queue/a",
            body,  # type: ignore[arg-type]  # converted, as send() converts it
            content_type=content_type,
            transaction=transaction,
            receipt=receipt_id,
            headers=headers or (),  # type: ignore[arg-type]
            content_length=False,
        )
        assert (receipt_id is not None) is receipt
        assert event == wanted
        assert dataclasses.asdict(event) == dataclasses.asdict(wanted)


SENDS: list[dict[str, object]] = [
    {},
    {"content_type": "text/plain", "headers": {"x-ts": "1", "a": "b:c\nd"}},
    {"headers": (("a", "1"), ("a", "2")), "transaction": "tx-1"},
    {"transaction": "tx-unknown"},  # refused: no such transaction is open
    {"headers": {"x": 1}},  # a header value that is not a str
    {"headers": [("a", "1")]},  # pairs in a list
    {"body": b"a\x00b", "content_length": False},  # refused: the NUL would end the body
    {"body": b"y" * 5000, "version": "1.1"},
    {"body": b"z", "version": "1.0", "headers": {"k": "v\nw"}},  # 1.0 has no escapes
    {"content_type": 7},
    {"destination": 7},
    {"destination": ""},
    {"body": 7},
]


def send_outcome(spec: dict[str, object], *, parts: bool) -> tuple[bytes, str]:
    """What sending the SEND of ``spec`` in an open session gives: send()'s way (its
    fields, ``parts``) or the user's (a Send, sent): the bytes and the session's state,
    or the error's type and message."""
    options = dict(spec)
    session = Session(options.pop("version", "1.2"), "auto")  # type: ignore[arg-type]
    core, conn = session.core, session.core.conn
    conn.send(Begin("tx-1"))
    fields = {"destination": "/queue/a", "body": b"x", "content_type": None, "headers": None}
    fields |= {"transaction": None, "content_length": True} | options
    try:
        if parts:
            event, _ = core.send_event(**fields, receipt=False, parts=True)  # type: ignore[arg-type]
            data = core.frame(conn, event, None)
        else:
            fields["headers"] = fields["headers"] or ()
            data = conn.send(Send(**fields))  # type: ignore[arg-type]
    except (TypeError, LocalProtocolError) as exc:
        return type(exc).__name__.encode(), str(exc)
    return data, f"{conn.state} {core.stats.sent}"


@pytest.mark.parametrize("spec", SENDS, ids=lambda spec: repr(spec)[:48])
def test_send_writes_what_a_user_made_send_writes_on_both_builds(spec: dict[str, object]) -> None:
    """send() hands its SEND to the connection as its fields, not an event, and the
    accelerated build makes the frame from them natively: the bytes, the state after
    and every refusal must be those of the Send a user makes and sends, on either
    build (the counts aside: only send() counts what it sends)."""
    native = send_outcome(spec, parts=True)
    with pure_core():
        pure = send_outcome(spec, parts=True)
        user = send_outcome(spec, parts=False)
    assert native == pure
    assert native[0] == user[0]
    assert native[1].split()[0] == user[1].split()[0]
    if not native[0].isalpha():  # (bytes, not a refusal)
        assert native[1].split()[1] == "1"


@pytest.mark.parametrize("destination", ["", None, 7])
def test_send_to_no_destination_is_refused_as_a_user_made_send_is(destination: object) -> None:
    """A SEND needs a destination, a non-empty string (STOMP 1.2, SEND: "REQUIRED
    headers: destination"): send() refuses one as the Send a user makes is refused
    (a LocalProtocolError for an empty one, a TypeError for one not a str)."""
    core = Session("1.2", "auto").core
    with pytest.raises((TypeError, LocalProtocolError)) as by_user:
        core.conn.send(Send(destination, b"x"))  # type: ignore[arg-type]
    with pytest.raises(by_user.type, match=str(by_user.value)[:20]):
        event, _ = core.send_event(
            destination,  # type: ignore[arg-type]
            b"x",
            content_type=None,
            headers=None,
            transaction=None,
            receipt=False,
            content_length=True,
        )
        core.conn.send(event)


def test_a_settlement_with_headers_carries_them_to_the_wire() -> None:
    # ack()/nack(headers=...): RabbitMQ's requeue:false rides on the NACK, after the
    # headers of the version; without headers the plain (fast) settlement is kept.
    core: ClientCore[Handle] = ClientCore(ConnectOptions(versions=("1.2",)))
    server = ServerConnection()
    server.receive_data(core.conn.send(core.options.connect_event()))
    server.next_event()
    core.conn.receive_data(server.send(Connected(version="1.2")))
    core.route(core.conn.next_event())
    handle = Handle(core.subscribe_event("/queue/q", "client-individual", None, "s1"))
    event, _ = core.subscribing(handle)
    server.receive_data(core.conn.send(event))
    server.next_event()
    core.conn.receive_data(
        server.send(Message("/queue/q", message_id="m1", subscription="s1", ack="a1"))
    )
    message = core.conn.next_event()
    assert isinstance(message, Message)
    plain, _ = core.settle_event(message, None, False, nack=True)
    assert not hasattr(plain, "headers")
    nack, receipt = core.settle_event(message, None, False, nack=True, headers={"requeue": "false"})
    assert receipt is None
    data = core.frame(core.conn, nack, message)
    assert data.startswith(b"NACK\n") and b"\nrequeue:false\n" in data and b"id:a1\n" in data
    assert core.server is None  # this Connected named no server
