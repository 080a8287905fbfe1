"""Shared helpers for the session-layer tests (ClientConnection / ServerConnection).

Like ``helpers``, this module is imported by name: pytest puts ``tests/`` on ``sys.path``.

* :func:`snapshot` captures everything a user can observe on a connection, so that tests can
  check that a refused ``send`` changed nothing;
* :func:`connected_pair` runs a handshake between a client and a server wired back to back;
* :class:`Link` moves bytes from one side to the other (whole or one byte at a time), checking
  that whatever one side produces decodes on the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pytest

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ErrorKind,
    Event,
    Frame,
    FrameDecoder,
    HeartBeat,
    LocalProtocolError,
    RemoteProtocolError,
    ServerConnection,
    Version,
)

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")
HB = HeartBeat()

Conn = ClientConnection | ServerConnection


def snapshot(conn: Conn, extra_keys: Iterable[str] = ()) -> dict[str, Any]:
    """Everything observable about ``conn``: compare two snapshots to detect any change.

    ``pending_acks`` is read for every open subscription and for ``extra_keys`` (keys of
    subscriptions that were closed, or that a test is about to try).
    """
    keys = set(conn.subscriptions) | set(extra_keys)
    snap: dict[str, Any] = {
        "state": conn.state,
        "version": conn.version,
        "heartbeat": conn.heartbeat,
        "timer": conn.get_timer(),
        "subscriptions": conn.subscriptions,
        "transactions": conn.transactions,
        "pending_acks": {k: conn.pending_acks(k) for k in sorted(keys)},
    }
    if isinstance(conn, ClientConnection):
        snap["pending_receipts"] = conn.pending_receipts
    else:
        snap["negotiated_version"] = conn.negotiated_version
    return snap


def drain(conn: Conn) -> list[Event]:
    """Every event available now (``list(conn)``, spelled out for clarity)."""
    events = []
    while (event := conn.next_event()) is not None:
        events.append(event)
    return events


def frames_only(events: Iterable[Event]) -> list[Event]:
    """``events`` without heart-beats."""
    return [e for e in events if not isinstance(e, HeartBeat)]


def decode_all(data: bytes, version: Version) -> list[Frame | HeartBeat]:
    """Decode ``data`` with a plain codec of ``version``; raises on any decoding error."""
    decoder = FrameDecoder(version)
    decoder.receive_data(data)
    out = []
    while (item := decoder.next_frame()) is not None:
        out.append(item)
    return out


@dataclass
class Link:
    """Carries bytes between a client and a server; one byte at a time if ``bytewise``.

    Every chunk one side emits is also recorded in ``wire`` as ``(sender, bytes)``.
    """

    client: ClientConnection
    server: ServerConnection
    bytewise: bool = False
    wire: list[tuple[str, bytes]] = field(default_factory=list)

    def _feed(self, conn: Conn, data: bytes) -> list[Event]:
        events: list[Event] = []
        if self.bytewise:
            for i in range(len(data)):
                conn.receive_data(data[i : i + 1])
                events += drain(conn)
        else:
            conn.receive_data(data)
            events += drain(conn)
        return events

    def to_server(self, data: bytes) -> list[Event]:
        """Feed client bytes to the server; the server's events (heart-beats removed)."""
        self.wire.append(("client", data))
        return frames_only(self._feed(self.server, data))

    def to_client(self, data: bytes) -> list[Event]:
        """Feed server bytes to the client; the client's events (heart-beats removed)."""
        self.wire.append(("server", data))
        return frames_only(self._feed(self.client, data))

    def c2s(self, event: Event) -> list[Event]:
        """The client sends ``event``; returns what the server reads."""
        return self.to_server(self.client.send(event))

    def s2c(self, event: Event) -> list[Event]:
        """The server sends ``event``; returns what the client reads."""
        return self.to_client(self.server.send(event))

    def c2s_one(self, event: Event) -> Event:
        got = self.c2s(event)
        assert len(got) == 1, got
        return got[0]

    def s2c_one(self, event: Event) -> Event:
        got = self.s2c(event)
        assert len(got) == 1, got
        return got[0]


def connected_pair(
    version: Version | None = None,
    *,
    client_versions: tuple[Version, ...] | None = None,
    server_versions: tuple[Version, ...] = VERSIONS,
    client_heartbeat: tuple[int, int] = (0, 0),
    server_heartbeat: tuple[int, int] = (0, 0),
    strict: bool = True,
    bytewise: bool = False,
    tolerance: float = 1.5,
) -> Link:
    """A client and a server that have completed the handshake.

    ``version`` (if given) is the only version the client offers, so it is the one agreed.
    """
    if client_versions is None:
        client_versions = (version,) if version is not None else VERSIONS
    client = ClientConnection(strict=strict, heartbeat_tolerance=tolerance)
    server = ServerConnection(
        versions=server_versions, strict=strict, heartbeat_tolerance=tolerance
    )
    link = Link(client, server, bytewise=bytewise)
    connect = Connect(host="localhost", accept_versions=client_versions, heartbeat=client_heartbeat)
    got = link.c2s_one(connect)
    assert isinstance(got, Connect)
    reply = link.s2c_one(Connected(heartbeat=server_heartbeat, session="sess-1", server="test/1"))
    assert isinstance(reply, Connected)
    if version is not None:
        assert client.version == server.version == version
    return link


def refused(
    conn: Conn,
    call: Callable[[], object],
    kind: ErrorKind | tuple[ErrorKind, ...] | None = None,
    extra_keys: Iterable[str] = (),
) -> LocalProtocolError:
    """Assert ``call()`` raises LocalProtocolError and leaves ``conn`` exactly as it was."""
    keys = tuple(extra_keys)
    before = snapshot(conn, keys)
    with pytest.raises(LocalProtocolError) as info:
        call()
    assert snapshot(conn, keys) == before, "a refused call changed the connection"
    if kind is not None:
        kinds = kind if isinstance(kind, tuple) else (kind,)
        assert info.value.kind in kinds, repr(info.value)
    return info.value


def remote_error(
    conn: Conn, data: bytes | None = None, kind: ErrorKind | None = None
) -> RemoteProtocolError:
    """Feed ``data`` (if any) and assert that reading events raises RemoteProtocolError."""
    if data is not None:
        conn.receive_data(data)
    with pytest.raises(RemoteProtocolError) as info:
        drain(conn)
    if kind is not None:
        assert info.value.kind is kind, repr(info.value)
    return info.value
