"""ClientCore, the protocol-side state every client adapter shares.

Driven here without any I/O: the core's ClientConnection talks to a
ServerConnection through bytes, and the events it reads are routed by hand,
as an adapter's reader does.
"""

from __future__ import annotations

import dataclasses

import pytest

from stomp_proto import (
    AckMode,
    Connect,
    Connected,
    LocalProtocolError,
    Message,
    ServerConnection,
    Subscribe,
    Unsubscribe,
    Version,
)
from stomp_proto._client._core import ClientCore, ClientError, ConnectionLost, ConnectOptions

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")


class Handle:
    """An adapter's subscription object, as little as the core needs."""

    def __init__(self, event: Subscribe) -> None:
        self._event = event
        self._receipt: str | None = None
        self._active = False
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
    assert core.restore_subscriptions() == [h._event for h in handles]
    error = ConnectionLost("gone")
    core.finish(error)
    core.finish(ConnectionLost("later"))
    assert core.error is error and core.subscriptions == {}
    assert [h.ended for h in handles] == [[error], [error]]
