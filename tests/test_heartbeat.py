"""Heart-beats (1.2 §Heart-beating): negotiation, and the timer API driven by a fake clock.

The connections read no clock: the tests pass plain floats (seconds) to ``handle_timer`` and
follow ``get_timer()`` deadlines exactly, as an event loop would.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import pytest
from connection_helpers import Link, connected_pair, drain, refused
from hypothesis import given, settings
from hypothesis import strategies as st

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ConnectionState,
    ErrorKind,
    HeartBeat,
    HeartBeatTimeout,
    Message,
    Send,
    ServerConnection,
    Subscribe,
)
from stomp_proto._heartbeat import SLACK_MS, negotiate

S = ConnectionState
START = 1000.0  # an arbitrary clock origin: the connection must not assume 0.0
Conn = ClientConnection | ServerConnection


# -- negotiation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("client", "server", "client_view"),
    [
        ((0, 0), (0, 0), (0, 0)),
        ((1000, 1000), (0, 0), (0, 0)),  # server neither sends nor wants: nothing at all
        ((0, 0), (1000, 1000), (0, 0)),  # client neither sends nor wants
        ((100, 0), (0, 200), (200, 0)),  # client -> server every MAX(cx, sy)
        ((0, 100), (300, 0), (0, 300)),  # server -> client every MAX(sx, cy)
        ((100, 0), (0, 0), (0, 0)),  # cx set but sy = 0: none
        ((0, 100), (0, 0), (0, 0)),  # cy set but sx = 0: none
        ((10, 20), (30, 40), (40, 30)),
        ((5000, 1), (1, 5000), (5000, 1)),
        ((1000, 1000), (1000, 1000), (1000, 1000)),
        ((0, 500), (1000, 0), (0, 1000)),  # as RabbitMQ rounds 500 ms up to 1 s
    ],
)
def test_negotiate_table(
    client: tuple[int, int], server: tuple[int, int], client_view: tuple[int, int]
) -> None:
    # 1.2 §Heart-beating: "if <cx> is 0 ... or <sy> is 0 ... then there will be none;
    # otherwise, there will be heart-beats every MAX(<cx>,<sy>) milliseconds".
    assert negotiate(client, server) == client_view
    # The server's view is the same agreement seen from the other end.
    assert negotiate(server, client) == client_view[::-1]


_ms = st.integers(min_value=0, max_value=100_000)


@given(cx=_ms, cy=_ms, sx=_ms, sy=_ms)
@settings(max_examples=100)
def test_negotiate_properties(cx: int, cy: int, sx: int, sy: int) -> None:
    send, expect = negotiate((cx, cy), (sx, sy))
    assert send == (max(cx, sy) if cx and sy else 0)
    assert expect == (max(sx, cy) if sx and cy else 0)
    assert negotiate((sx, sy), (cx, cy)) == (expect, send)


@pytest.mark.parametrize(
    ("client_hb", "server_hb", "client_view"),
    [((100, 0), (0, 200), (200, 0)), ((0, 100), (300, 0), (0, 300)), ((0, 0), (5, 5), (0, 0))],
)
def test_connections_agree_on_heartbeat(
    client_hb: tuple[int, int], server_hb: tuple[int, int], client_view: tuple[int, int]
) -> None:
    link = connected_pair("1.2", client_heartbeat=client_hb, server_heartbeat=server_hb)
    assert link.client.heartbeat == client_view
    assert link.server.heartbeat == client_view[::-1]


def test_missing_heartbeat_header_means_none() -> None:
    client = ClientConnection()
    client.send(Connect(host="h", heartbeat=(1000, 1000)))
    client.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
    drain(client)
    assert client.heartbeat == (0, 0)
    assert client.get_timer() is None


# -- the timer API ----------------------------------------------------------------------------


def test_no_timer_without_heartbeats() -> None:
    link = connected_pair("1.2")
    for conn in (link.client, link.server):
        assert conn.get_timer() is None
        assert conn.handle_timer(START) == b""
        assert conn.handle_timer(START + 10_000) == b""
        assert conn.next_event() is None
        assert conn.state is S.CONNECTED


def test_no_timer_before_handshake() -> None:
    client, server = ClientConnection(), ServerConnection()
    assert client.get_timer() is None and server.get_timer() is None
    server.receive_data(client.send(Connect(host="h", heartbeat=(100, 100))))
    assert client.get_timer() is None  # CONNECTED not received yet
    drain(server)
    assert server.get_timer() is None  # CONNECTED not sent yet
    data = server.send(Connected(heartbeat=(100, 100)))
    assert server.get_timer() == 0.0
    client.receive_data(data)
    assert client.get_timer() is None  # the state advances as events are consumed
    drain(client)
    assert client.get_timer() == 0.0


@dataclass
class Clock:
    """Drives one connection's timer: calls handle_timer at each deadline, in order."""

    conn: Conn
    now: float = START
    beats: list[float] = field(default_factory=list)
    timeout: HeartBeatTimeout | None = None
    timeout_at: float | None = None

    def start(self) -> None:
        assert self.conn.get_timer() == 0.0  # "call me now so I learn the time"
        assert self.conn.handle_timer(self.now) == b""
        deadline = self.conn.get_timer()
        assert deadline is not None and deadline > self.now

    def next_deadline(self) -> float | None:
        return self.conn.get_timer()

    def tick(self, *, reading: bool = True) -> bytes:
        """Advance to the next deadline and handle it."""
        deadline = self.conn.get_timer()
        assert deadline is not None
        assert deadline >= self.now
        self.now = deadline
        out = self.conn.handle_timer(self.now, reading=reading)
        assert out in (b"", b"\n")
        if out:
            self.beats.append(self.now)
        for event in drain(self.conn):
            if isinstance(event, HeartBeatTimeout):
                assert self.timeout is None
                self.timeout, self.timeout_at = event, self.now
        return out

    def run_until(self, end: float) -> None:
        while self.timeout is None:
            deadline = self.conn.get_timer()
            if deadline is None or deadline > end:
                return
            self.tick()


def pair(
    role: str, send_ms: int, expect_ms: int, tolerance: float = 1.5
) -> tuple[Link, Conn, Conn]:
    """A session where ``role``'s side sends every ``send_ms`` and expects every ``expect_ms``."""
    if role == "client":
        link = connected_pair(
            "1.2",
            client_heartbeat=(send_ms, expect_ms),
            server_heartbeat=(expect_ms, send_ms),
            tolerance=tolerance,
        )
        me, peer = link.client, link.server
    else:
        link = connected_pair(
            "1.2",
            client_heartbeat=(expect_ms, send_ms),
            server_heartbeat=(send_ms, expect_ms),
            tolerance=tolerance,
        )
        me, peer = link.server, link.client
    assert me.heartbeat == (send_ms, expect_ms)
    return link, me, peer


ROLES = ["client", "server"]


def allowed(expect_ms: int, tolerance: float) -> float:
    """Seconds of silence after which the peer counts as gone: the interval times the
    tolerance, and never less than the interval plus SLACK_MS."""
    return max(expect_ms * tolerance, expect_ms + SLACK_MS) / 1000


@pytest.mark.parametrize("role", ROLES)
def test_first_deadline_is_zero_then_real_deadlines(role: str) -> None:
    _, me, _ = pair(role, 1000, 0)
    clock = Clock(me)
    clock.start()
    # Half the send interval: 0.5 s after the first call.
    assert me.get_timer() == pytest.approx(START + 0.5)
    # Calling early does nothing and keeps the deadline.
    assert me.handle_timer(START + 0.1) == b""
    assert me.get_timer() == pytest.approx(START + 0.5)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("send_ms", [1000, 2500, 30])
def test_idle_sender_sends_eol_at_least_every_interval(role: str, send_ms: int) -> None:
    # 1.2 §Heart-beating: "if the sender has no real STOMP frame to send, it MUST send an EOL"
    # and "the sender MUST send new data ... at least every <n> milliseconds".
    _, me, _ = pair(role, send_ms, 0)
    clock = Clock(me)
    clock.start()
    clock.run_until(START + 20 * send_ms / 1000)
    interval = send_ms / 1000
    assert clock.beats, "no heart-beat sent"
    times = [START, *clock.beats]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert max(gaps) <= interval + 1e-9
    assert len(clock.beats) >= 19
    assert me.state is S.CONNECTED


@pytest.mark.parametrize("role", ROLES)
def test_no_eol_when_frames_are_sent(role: str) -> None:
    link, me, _ = pair(role, 1000, 0)
    if role == "client":
        busy = lambda: me.send(Send("/q", b"x"))  # noqa: E731
    else:
        link.c2s(Subscribe("/q", id="s"))
        busy = lambda: me.send(Message("/q", "m", subscription="s", body=b"x"))  # noqa: E731
    clock = Clock(me)
    clock.start()
    for _ in range(20):
        busy()
        assert clock.tick() == b""
    assert clock.beats == []
    # An explicit HeartBeat sent by the user counts as data too.
    for _ in range(5):
        assert me.send(HeartBeat()) == b"\n"
        assert clock.tick() == b""
    # Then idle again: EOLs resume.
    clock.tick()
    clock.tick()
    assert clock.beats


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("tolerance", [1.0, 1.5, 3.0])
@pytest.mark.parametrize("expect_ms", [1000, 400])
def test_silent_peer_times_out_after_expect_times_tolerance(
    role: str, tolerance: float, expect_ms: int
) -> None:
    # 1.2 §Heart-beating: the receiver MAY consider the connection dead after a window of at
    # least <n> ms without data, and SHOULD take an error margin (the tolerance).
    _, me, _ = pair(role, 0, expect_ms, tolerance)
    clock = Clock(me)
    clock.start()
    limit = allowed(expect_ms, tolerance)
    period = me.get_timer() - START  # type: ignore[operator]
    clock.run_until(START + 10 * limit)
    assert clock.timeout is not None and clock.timeout_at is not None
    silence = clock.timeout_at - START
    assert silence >= limit - 1e-9  # never before
    assert silence <= limit + period + 1e-9  # and at most one check late
    assert clock.timeout.silence == pytest.approx(silence)
    assert me.state is S.CLOSED
    assert me.get_timer() is None
    assert me.handle_timer(clock.now + 100) == b""
    refused(me, lambda: me.send(HeartBeat()), ErrorKind.CLOSED)  # used after close


@pytest.mark.parametrize("role", ROLES)
def test_peer_heartbeats_keep_the_session_alive(role: str) -> None:
    link, me, peer = pair(role, 0, 1000)
    clock = Clock(me)
    clock.start()
    feed = link.to_client if role == "client" else link.to_server
    for _ in range(50):
        clock.tick()
        feed(peer.send(HeartBeat()))
    assert clock.timeout is None
    assert me.state is S.CONNECTED


@pytest.mark.parametrize("role", ROLES)
def test_partial_frame_counts_as_life(role: str) -> None:
    # "any new data received over the network connection is an indication that the remote
    # end is alive" - even a frame that is not complete yet.
    _, me, _ = pair(role, 0, 1000)
    clock = Clock(me)
    clock.start()
    head = b"MESSAGE\n" if role == "client" else b"SEND\n"
    partial = head + b"destination:/q\nx-pad:" + b"a" * 40  # 30 bytes fed: no line ends badly
    for i in range(30):
        clock.tick()
        me.receive_data(partial[i % len(partial) : i % len(partial) + 1])
    assert clock.timeout is None
    assert me.state is S.CONNECTED


@pytest.mark.parametrize("role", ROLES)
def test_empty_data_is_not_life(role: str) -> None:
    _, me, _ = pair(role, 0, 1000)
    clock = Clock(me)
    clock.start()
    for _ in range(40):
        if clock.timeout is not None:
            break
        me.receive_data(b"")
        clock.tick()
    assert clock.timeout is not None


@pytest.mark.parametrize("role", ROLES)
def test_not_reading_suspends_the_silence_check(role: str) -> None:
    # handle_timer(now, reading=False): the caller stopped reading on purpose (back-pressure),
    # so data it does not read cannot count against the peer; its own EOLs are still due.
    _, me, _ = pair(role, 1000, 1000)
    clock = Clock(me)
    clock.start()
    period = me.get_timer() - START  # type: ignore[operator]
    while clock.now < START + 20:  # 20 s of silence, far past 1.5 s
        clock.tick(reading=False)
    assert clock.timeout is None
    assert me.state is S.CONNECTED
    assert len(clock.beats) >= 19  # heart-beats kept going out, one per interval
    paused_until = clock.now
    # Reading again: the silence counts from the last check made while not reading.
    clock.run_until(clock.now + 10)
    assert clock.timeout is not None and clock.timeout_at is not None
    assert clock.timeout_at - paused_until >= 1.5 - 1e-9
    assert clock.timeout_at - paused_until <= 1.5 + period + 1e-9


def test_both_directions_at_once() -> None:
    link = connected_pair("1.2", client_heartbeat=(1000, 1000), server_heartbeat=(1000, 1000))
    client, server = Clock(link.client), Clock(link.server)
    client.start()
    server.start()
    # Both sides follow their own deadlines on one shared clock and carry each other's EOLs.
    for _ in range(200):
        c_next, s_next = link.client.get_timer(), link.server.get_timer()
        assert c_next is not None and s_next is not None
        if c_next <= s_next:
            out = client.tick()
            if out:
                link.to_server(out)
            server.now = max(server.now, client.now)
        else:
            out = server.tick()
            if out:
                link.to_client(out)
            client.now = max(client.now, server.now)
    assert client.timeout is None and server.timeout is None
    assert client.beats and server.beats
    assert link.client.state is link.server.state is S.CONNECTED


# -- properties with random traffic -----------------------------------------------------------

_gaps = st.lists(st.floats(min_value=0.001, max_value=3.0), min_size=1, max_size=25)


@given(
    role=st.sampled_from(ROLES),
    send_ms=st.sampled_from([100, 1000, 1500, 4000]),
    send_gaps=_gaps,
)
@settings(max_examples=60)
def test_outgoing_gap_never_exceeds_interval(
    role: str, send_ms: int, send_gaps: list[float]
) -> None:
    """Frames sent at random times plus the EOLs handle_timer returns: no gap above send_ms."""
    _, me, _ = pair(role, send_ms, 0)
    clock = Clock(me)
    clock.start()
    frame_times = []
    t = START
    for gap in send_gaps:
        t += gap
        frame_times.append(t)
    end = frame_times[-1] + 3 * send_ms / 1000
    outgoing = [START]
    pending = list(frame_times)
    while True:
        deadline = me.get_timer()
        assert deadline is not None
        if pending and pending[0] < deadline:
            clock.now = pending.pop(0)
            me.send(HeartBeat())  # any outgoing data; a HeartBeat keeps the test version-free
            outgoing.append(clock.now)
            continue
        if deadline > end:
            break
        if clock.tick():
            outgoing.append(clock.now)
    gaps = [b - a for a, b in itertools.pairwise(outgoing)]
    assert max(gaps) <= send_ms / 1000 + 1e-9


@given(
    role=st.sampled_from(ROLES),
    expect_ms=st.sampled_from([100, 1000, 2500]),
    tolerance=st.sampled_from([1.0, 1.5, 2.0]),
    arrival_gaps=_gaps,
)
@settings(max_examples=60)
def test_timeout_never_early_and_never_much_late(
    role: str, expect_ms: int, tolerance: float, arrival_gaps: list[float]
) -> None:
    _, me, _ = pair(role, 0, expect_ms, tolerance)
    clock = Clock(me)
    clock.start()
    period = me.get_timer() - START  # type: ignore[operator]
    limit = allowed(expect_ms, tolerance)
    arrivals = []
    t = START
    for gap in arrival_gaps:
        t += gap
        arrivals.append(t)
    last = START
    pending = list(arrivals)
    while clock.timeout is None:
        deadline = me.get_timer()
        assert deadline is not None
        if pending and pending[0] < deadline:
            last = clock.now = pending.pop(0)
            me.receive_data(b"\n")
            continue
        # The session must be declared dead at most one check after limit + period.
        assert deadline - last <= limit + 2 * period + 1e-6, (deadline, last)
        clock.tick()
        if clock.timeout is None:
            continue
        assert clock.timeout_at is not None
        assert clock.timeout_at - last >= limit - 1e-9  # never early
        assert me.state is S.CLOSED


def _client_after(connected: bytes, tolerance: float | None = None) -> ClientConnection:
    client = ClientConnection(heartbeat_tolerance=tolerance)
    client.send(Connect(host="/", heartbeat=(4000, 4000)))
    client.receive_data(connected)
    event = client.next_event()
    assert event is not None and event.command == "CONNECTED"  # type: ignore[attr-defined]
    return client


def _silence_until_lost(client: ClientConnection) -> float:
    """Seconds of made-up time from the first check to the HeartBeatTimeout, with the
    broker silent all along (the connection is told the time at each of its deadlines)."""
    now = 1000.0
    client.handle_timer(now)
    while True:
        deadline = client.get_timer()
        assert deadline is not None
        client.handle_timer(deadline)
        event = client.next_event()
        if isinstance(event, HeartBeatTimeout):
            return deadline - now


def test_a_silent_broker_is_noticed_within_one_and_a_half_intervals() -> None:
    # 1.2 §Heart-beating: the receiver MAY consider the connection dead after a window of
    # at least <n> ms without data, and SHOULD be tolerant.  A client allows 1.25
    # intervals by default and notices within 1.5: 4 s beats, lost within 6 s.
    head = b"CONNECTED\nversion:1.2\nheart-beat:4000,4000\nserver:RabbitMQ/3.10\n\n\x00"
    client = _client_after(head)
    assert client.heartbeat_tolerance == 1.25
    lost_after = _silence_until_lost(client)
    assert 5.0 <= lost_after <= 6.0


def test_activemq_gets_the_wider_tolerance_unless_one_was_given() -> None:
    # ActiveMQ's write check skips a beat after any frame: its gaps reach two intervals.
    head = b"CONNECTED\nversion:1.2\nheart-beat:4000,4000\nserver:ActiveMQ/5.17.2\n\n\x00"
    client = _client_after(head)
    assert client.heartbeat_tolerance == 2.5
    assert 10.0 <= _silence_until_lost(client) <= 11.0
    chosen = _client_after(head, tolerance=1.5)
    assert chosen.heartbeat_tolerance == 1.5
    assert ServerConnection().heartbeat_tolerance == 2.5  # a broker stays lenient
