"""A hypothesis state machine driving a ClientConnection and a ServerConnection back to back.

The test keeps its own model of the session (written from the specs, not from the code) and
uses it to tell legal from illegal actions:

* a legal action never raises, and both connections then agree with the model;
* an illegal client action raises LocalProtocolError and leaves the client's observable state
  (state, subscriptions, transactions, pending acks and receipts, timer) unchanged;
* an illegal server action (MESSAGE for no subscription, RECEIPT nobody asked for, ...) is
  refused the same way on the server;
* every byte string either side produces is fed to the other and must decode there (any
  RemoteProtocolError fails the test).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from connection_helpers import VERSIONS, Link, snapshot
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from stomp_proto import (
    Abort,
    Ack,
    Begin,
    ClientConnection,
    Commit,
    Connect,
    Connected,
    ConnectionState,
    Disconnect,
    Error,
    Event,
    FrameEncoder,
    HeartBeat,
    HeartBeatTimeout,
    LocalProtocolError,
    Message,
    Nack,
    Receipt,
    Send,
    ServerConnection,
    Subscribe,
    Unsubscribe,
    Version,
)

S = ConnectionState
KEYS = ("s1", "s2", "s3")
TXS = ("t1", "t2")
RECEIPTS = (None, None, None, None, "r1", "r2", "r3")
MODES = ("auto", "client", "client-individual")
HEARTBEATS = ((0, 0), (0, 0), (100, 100), (0, 200), (300, 0), (150, 250))
OFFERS: tuple[tuple[Version, ...], ...] = (
    VERSIONS,
    ("1.0",),
    ("1.1",),
    ("1.2",),
    ("1.0", "1.1"),
    ("1.1", "1.2"),
)


@dataclass
class Sub:
    event: Subscribe
    pending: list[str] = field(default_factory=list)  # idents, oldest first


@dataclass
class Model:
    state: S = S.IDLE
    version: Version | None = None
    subs: dict[str, Sub] = field(default_factory=dict)
    txs: set[str] = field(default_factory=set)
    receipts: set[str] = field(default_factory=set)
    disconnect_receipt: str | None = None

    @property
    def connected(self) -> bool:
        return self.state is S.CONNECTED

    def receipt_ok(self, receipt: str | None) -> bool:
        return receipt is None or receipt not in self.receipts

    def ident(self, message: Message) -> str | None:
        return message.ack if self.version == "1.2" else message.message_id


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.client = ClientConnection()
        self.server = ServerConnection()
        self.link = Link(self.client, self.server)
        self.model = Model()
        self.messages: list[Message] = []  # every MESSAGE the client read, settled or not
        self.counter = 0
        self.now = 1000.0

    # -- plumbing -------------------------------------------------------------------------

    def to_server(self, data: bytes) -> list[Event]:
        return self.link.to_server(data)

    def to_client(self, data: bytes) -> list[Event]:
        return self.link.to_client(data)

    def client_refuses(self, event: Event) -> None:
        before = snapshot(self.client, KEYS)
        try:
            data = self.client.send(event)
        except LocalProtocolError:
            pass
        else:
            raise AssertionError(f"illegal {event!r} was accepted: {data!r}")
        assert snapshot(self.client, KEYS) == before

    def server_refuses(self, event: Event) -> None:
        before = snapshot(self.server, KEYS)
        try:
            data = self.server.send(event)
        except LocalProtocolError:
            pass
        else:
            raise AssertionError(f"illegal server {event!r} was accepted: {data!r}")
        assert snapshot(self.server, KEYS) == before

    def client_sends(self, event: Event, legal: bool) -> list[Event]:
        """Send ``event`` from the client: accepted and delivered if legal, refused if not."""
        if not legal:
            self.client_refuses(event)
            return []
        got = self.to_server(self.client.send(event))
        receipt = getattr(event, "receipt", None)
        if receipt is not None:
            self.model.receipts.add(receipt)
        return got

    def close_both(self) -> None:
        self.model.state = S.CLOSED
        self.model.subs.clear()
        self.model.txs.clear()

    # -- handshake --------------------------------------------------------------------------

    @initialize(
        now=st.integers(0, 4).map(lambda n: n != 1),
        offer=st.sampled_from(OFFERS),
        chb=st.sampled_from(HEARTBEATS),
        shb=st.sampled_from(HEARTBEATS),
        stomp=st.booleans(),
    )
    def start(
        self,
        now: bool,
        offer: tuple[Version, ...],
        chb: tuple[int, int],
        shb: tuple[int, int],
        stomp: bool,
    ) -> None:
        if now:
            self.connect(offer, chb, shb, stomp)

    @rule(
        offer=st.sampled_from(OFFERS),
        chb=st.sampled_from(HEARTBEATS),
        shb=st.sampled_from(HEARTBEATS),
        stomp=st.booleans(),
    )
    def connect(
        self, offer: tuple[Version, ...], chb: tuple[int, int], shb: tuple[int, int], stomp: bool
    ) -> None:
        # 1.2 §CONNECT or STOMP Frame: a server handles STOMP like CONNECT.
        command = "STOMP" if stomp else "CONNECT"
        event = Connect(
            host="localhost", accept_versions=offer, heartbeat=chb, frame_command=command
        )
        # Only 1.1+ servers know the STOMP frame: offering 1.0 alone with it is refused.
        if self.model.state is not S.IDLE or (stomp and offer == ("1.0",)):
            self.client_refuses(event)
            return
        [connect] = self.to_server(self.client.send(event))
        assert connect == event
        assert self.client.state is S.CONNECTING
        [connected] = self.to_client(self.server.send(Connected(heartbeat=shb)))
        assert isinstance(connected, Connected)
        self.model.state = S.CONNECTED
        self.model.version = offer[-1]  # the server speaks all three: the highest offered
        assert connected.version == self.model.version

    # -- client actions -------------------------------------------------------------------------

    def _subscribe(self, key: str, mode: str, with_id: bool, receipt: str | None) -> None:
        m = self.model
        destination = f"/queue/{key}"
        event = Subscribe(destination, id=key if with_id else None, ack=mode, receipt=receipt,
                          headers=(("prefetch-count", "5"),))  # type: ignore[arg-type]  # fmt: skip
        # 1.1/1.2 §SUBSCRIBE id Header: id required, unique; 1.0: no client-individual.
        legal = (
            m.connected
            and event.key not in m.subs
            and (with_id or m.version == "1.0")
            and not (mode == "client-individual" and m.version == "1.0")
            and m.receipt_ok(receipt)
        )
        got = self.client_sends(event, legal)
        if legal:
            assert got == [event]
            m.subs[event.key] = Sub(event)

    @rule(
        key=st.sampled_from(KEYS),
        mode=st.sampled_from(MODES),
        with_id=st.booleans(),
        receipt=st.sampled_from(RECEIPTS),
    )
    def subscribe(self, key: str, mode: str, with_id: bool, receipt: str | None) -> None:
        self._subscribe(key, mode, with_id, receipt)

    @precondition(lambda self: self.model.connected and len(self.model.subs) < len(KEYS))
    @rule(data=st.data(), mode=st.sampled_from(MODES), with_id=st.booleans())
    def subscribe_legal(self, data: st.DataObject, mode: str, with_id: bool) -> None:
        m = self.model
        if m.version == "1.0":
            mode = "client" if mode == "client-individual" else mode
        else:
            with_id = True
        free = [k for k in KEYS if k not in m.subs and f"/queue/{k}" not in m.subs]
        if not free:
            return
        key = data.draw(st.sampled_from(free), label="key")
        before = len(m.subs)
        self._subscribe(key, mode, with_id, None)
        assert len(m.subs) == before + 1

    @rule(key=st.sampled_from(KEYS), by_destination=st.booleans(),
          receipt=st.sampled_from(RECEIPTS))  # fmt: skip
    def unsubscribe(self, key: str, by_destination: bool, receipt: str | None) -> None:
        m = self.model
        destination = f"/queue/{key}"
        if by_destination:
            event = Unsubscribe(destination=destination, receipt=receipt)
        else:
            event = Unsubscribe(id=key, receipt=receipt)
        # 1.0 §UNSUBSCRIBE: by destination (id-less subscriptions) or by id; 1.1+: by id.
        legal = (
            m.connected
            and event.key in m.subs
            and (not by_destination or m.version == "1.0")
            and m.receipt_ok(receipt)
        )
        got = self.client_sends(event, legal)
        if legal:
            assert got == [event]
            del m.subs[event.key]  # type: ignore[arg-type]

    @rule(tx=st.sampled_from((None, None, *TXS)), receipt=st.sampled_from(RECEIPTS),
          body=st.binary(max_size=8), content_length=st.booleans())  # fmt: skip
    def send(self, tx: str | None, receipt: str | None, body: bytes, content_length: bool) -> None:
        m = self.model
        event = Send("/queue/x", body, transaction=tx, receipt=receipt,
                     headers=(("persistent", "true"),), content_length=content_length)  # fmt: skip
        legal = (
            m.connected
            and (tx is None or tx in m.txs)
            and m.receipt_ok(receipt)
            and (content_length or b"\x00" not in body)
        )
        got = self.client_sends(event, legal)
        if legal:
            [received] = got
            assert isinstance(received, Send)
            assert received.body == body and received.transaction == tx
            assert received.headers == (("persistent", "true"),)
            assert received.content_length == (content_length and bool(body))

    def waiting(self) -> list[Message]:
        """Messages the client read and has not acknowledged yet."""
        m = self.model
        return [
            msg
            for msg in self.messages
            if not msg.unknown_subscription
            and any(m.ident(msg) in sub.pending for sub in m.subs.values())
        ]

    @rule(data=st.data(), nack=st.booleans(), tx=st.sampled_from((None, None, *TXS)),
          receipt=st.sampled_from(RECEIPTS))  # fmt: skip
    def ack(self, data: st.DataObject, nack: bool, tx: str | None, receipt: str | None) -> None:
        if self.messages:
            message = data.draw(st.sampled_from(self.messages), label="message")
            self._ack(message, nack, tx, receipt)

    @precondition(lambda self: self.model.connected and bool(self.waiting()))
    @rule(data=st.data(), nack=st.booleans(), in_tx=st.booleans())
    def ack_legal(self, data: st.DataObject, nack: bool, in_tx: bool) -> None:
        m = self.model
        message = data.draw(st.sampled_from(self.waiting()), label="message")
        tx = data.draw(st.sampled_from(sorted(m.txs)), label="tx") if in_tx and m.txs else None
        self._ack(message, nack and m.version != "1.0", tx, None)

    def _ack(self, message: Message, nack: bool, tx: str | None, receipt: str | None) -> None:
        m = self.model
        key = message.subscription if message.subscription is not None else message.destination
        sub = None if message.unknown_subscription else m.subs.get(key)
        ident = m.ident(message)
        # Only MESSAGEs of a client-acknowledged subscription, once; NACK only from 1.1.
        legal = (
            m.connected
            and sub is not None
            and ident in sub.pending
            and not (nack and m.version == "1.0")
            and (tx is None or tx in m.txs)
            and m.receipt_ok(receipt)
        )
        cls = Nack if nack else Ack
        event = cls.of(message, transaction=tx, receipt=receipt)
        got = self.client_sends(event, legal)
        if not legal:
            return
        assert sub is not None
        position = sub.pending.index(ident)  # type: ignore[arg-type]
        # 1.2 §SUBSCRIBE ack Header: client mode is cumulative, client-individual is not.
        if sub.event.ack == "client":
            covered, sub.pending = sub.pending[: position + 1], sub.pending[position + 1 :]
        else:
            covered = [sub.pending.pop(position)]
        [received] = got
        assert type(received) is cls
        assert received.covered == tuple(covered)  # type: ignore[attr-defined]

    @rule(tx=st.sampled_from(TXS), receipt=st.sampled_from(RECEIPTS))
    def begin(self, tx: str, receipt: str | None) -> None:
        m = self.model
        legal = m.connected and tx not in m.txs and m.receipt_ok(receipt)
        if self.client_sends(Begin(tx, receipt=receipt), legal):
            m.txs.add(tx)

    @rule(tx=st.sampled_from(TXS), commit=st.booleans(), receipt=st.sampled_from(RECEIPTS))
    def finish(self, tx: str, commit: bool, receipt: str | None) -> None:
        m = self.model
        legal = m.connected and tx in m.txs and m.receipt_ok(receipt)
        event = (Commit if commit else Abort)(tx, receipt=receipt)
        if self.client_sends(event, legal):
            m.txs.discard(tx)

    @rule(roll=st.integers(0, 4), receipt=st.sampled_from(RECEIPTS))
    def disconnect(self, roll: int, receipt: str | None) -> None:
        if roll:
            return  # rare on purpose: the session ends
        m = self.model
        legal = m.connected and m.receipt_ok(receipt)
        got = self.client_sends(Disconnect(receipt=receipt), legal)
        if not legal:
            return
        assert got == [Disconnect(receipt=receipt)]
        m.txs.clear()  # 1.2 §BEGIN: implicitly aborted
        if receipt is None:
            self.close_both()
        else:
            m.state = S.DISCONNECTING
            m.disconnect_receipt = receipt

    @rule(from_client=st.booleans())
    def heartbeat(self, from_client: bool) -> None:
        legal = self.model.state in (S.CONNECTED, S.DISCONNECTING)
        if not legal:
            if from_client:
                self.client_refuses(HeartBeat())
            else:
                self.server_refuses(HeartBeat())
            return
        if from_client:
            assert self.to_server(self.client.send(HeartBeat())) == []
        else:
            assert self.to_client(self.server.send(HeartBeat())) == []

    @rule(dt=st.floats(min_value=0.0, max_value=0.3))
    def tick(self, dt: float) -> None:
        """Advance a shared fake clock, running both timers and carrying their EOLs."""
        target = self.now + dt
        for _ in range(1000):
            pending = [
                (deadline, conn)
                for conn in (self.client, self.server)
                if (deadline := conn.get_timer()) is not None
            ]
            due = [(max(d, self.now), c) for d, c in pending if max(d, self.now) <= target]
            if not due:
                break
            when, conn = min(due, key=lambda p: p[0])
            self.now = when
            out = conn.handle_timer(when)
            assert out in (b"", b"\n")
            if out:
                if conn is self.client:
                    assert self.to_server(out) == []
                else:
                    assert self.to_client(out) == []
            for c in (self.client, self.server):
                # Both sides send whenever their interval asks, and every byte is delivered
                # at once: nobody may time out.
                assert not any(isinstance(e, HeartBeatTimeout) for e in list(c))
        self.now = target

    # -- server actions -------------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), with_ack=st.booleans(), body=st.binary(max_size=8))
    def server_message(self, key: str, with_ack: bool, body: bytes) -> None:
        self._message(key, with_ack, body)

    @precondition(lambda self: self.model.connected and bool(self.model.subs))
    @rule(data=st.data(), body=st.binary(max_size=8), count=st.integers(1, 3))
    def server_message_legal(self, data: st.DataObject, body: bytes, count: int) -> None:
        subs = sorted(self.model.subs.values(), key=lambda s: s.event.key)
        sub = data.draw(st.sampled_from(subs), label="sub")
        key = sub.event.id or sub.event.destination.rsplit("/", 1)[1]
        for _ in range(count):
            before = len(self.messages)
            self._message(key, True, body)
            assert len(self.messages) == before + 1

    def _message(self, key: str, with_ack: bool, body: bytes) -> None:
        m = self.model
        self.counter += 1
        n = self.counter
        # The subscription with id ``key``, or (1.0) the id-less one on its destination.
        sub = m.subs.get(key) or m.subs.get(f"/queue/{key}")
        event = Message(
            f"/queue/{key}",
            f"m{n}",
            subscription=key if sub is None else sub.event.id,
            ack=f"a{n}" if with_ack else None,
            body=body,
            headers=(("x-n", str(n)),),
        )
        legal = (
            m.connected
            and sub is not None
            # 1.2 §MESSAGE: a client-acknowledged subscription's MESSAGE needs an ack header.
            and not (m.version == "1.2" and sub.event.ack != "auto" and not with_ack)
        )
        if not legal:
            self.server_refuses(event)
            return
        assert sub is not None
        [received] = self.to_client(self.server.send(event))
        assert isinstance(received, Message)
        assert not received.unknown_subscription
        assert received.headers == (("x-n", str(n)),)
        assert received.body == body
        if sub.event.ack != "auto":
            sub.pending.append(m.ident(received))  # type: ignore[arg-type]
        self.messages.append(received)

    @rule(roll=st.integers(0, 3), key=st.sampled_from(("/temp-queue/a", "s9")))
    def temp_queue_message(self, roll: int, key: str) -> None:
        """RabbitMQ delivers /temp-queue/ replies on subscriptions the client never made."""
        m = self.model
        if roll or m.state not in (S.CONNECTED, S.DISCONNECTING):
            return
        assert m.version is not None
        self.counter += 1
        event = Message("/temp-queue/a", f"T_{self.counter}", subscription=key, body=b"r")
        [received] = self.to_client(FrameEncoder(m.version).encode(event.to_frame(m.version)))
        assert isinstance(received, Message) and received.unknown_subscription
        self.messages.append(received)

    @precondition(lambda self: self.model.state in (S.CONNECTED, S.DISCONNECTING)
                  and bool(self.model.receipts))  # fmt: skip
    @rule(data=st.data())
    def server_receipt_legal(self, data: st.DataObject) -> None:
        self.server_receipt(data.draw(st.sampled_from(sorted(self.model.receipts)), label="id"))

    @rule(receipt=st.sampled_from(RECEIPTS[4:]))
    def server_receipt(self, receipt: str) -> None:
        m = self.model
        legal = m.state in (S.CONNECTED, S.DISCONNECTING) and receipt in m.receipts
        if not legal:
            self.server_refuses(Receipt(receipt))
            return
        assert self.to_client(self.server.send(Receipt(receipt))) == [Receipt(receipt)]
        m.receipts.discard(receipt)
        if receipt == m.disconnect_receipt:
            self.close_both()

    @rule(data=st.data())
    def server_error(self, data: st.DataObject) -> None:
        # Rare on purpose: an ERROR ends everything.
        if data.draw(st.integers(0, 9), label="roll") != 5:
            return
        m = self.model
        event = Error(message="boom", body=b"detail")
        if m.state is S.CLOSED:
            self.server_refuses(event)
            return
        if m.state is S.IDLE:
            return  # the client has not even sent CONNECT: nothing to answer
        assert self.to_client(self.server.send(event)) == [event]
        self.close_both()

    # -- invariants -----------------------------------------------------------------------------

    @invariant()
    def agree_with_model(self) -> None:
        m, client, server = self.model, self.client, self.server
        assert client.state is m.state
        assert server.state is m.state
        if m.state is S.CLOSED:
            assert client.get_timer() is None and server.get_timer() is None
            return
        if m.state is S.IDLE:
            return
        assert client.version == server.version == m.version
        assert set(client.subscriptions) == set(server.subscriptions) == set(m.subs)
        assert client.transactions == server.transactions == m.txs
        assert set(client.pending_receipts) == m.receipts
        for key, sub in m.subs.items():
            assert client.pending_acks(key) == tuple(sub.pending), key
            assert server.pending_acks(key) == tuple(sub.pending), key
        assert client.heartbeat == server.heartbeat[::-1]


SessionMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestSession = SessionMachine.TestCase
