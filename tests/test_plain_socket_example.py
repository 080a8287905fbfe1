"""The "Writing an adapter" example runs: a real socket, both halves of the session."""

from __future__ import annotations

import functools
import importlib.util
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    Error,
    Event,
    HeartBeatTimeout,
    Receipt,
    RemoteProtocolError,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_plain_socket_client_against_plain_socket_server() -> None:
    server = load("plain_socket_server")
    client = load("plain_socket_client")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        thread = threading.Thread(target=server.serve_one, args=(listener,), daemon=True)
        thread.start()
        bodies = client.main("127.0.0.1", port)
        thread.join(timeout=10)
    assert bodies == [b"hello 0", b"hello 1", b"hello 2"]
    assert not thread.is_alive()


def test_plain_socket_client_sends_each_frame_at_once() -> None:
    # Nagle's algorithm holds a frame back while an earlier one is unacknowledged;
    # the peer delays that ACK, so a frame could wait tens of milliseconds.
    client = load("plain_socket_client")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        plain = client.PlainSocketClient(*listener.getsockname())
        with plain.sock:
            assert plain.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)


# -- the server side of the guide: every point it makes, run -------------------------

CONNECT = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"


@contextmanager
def serving(target: Callable[[socket.socket], None]) -> Iterator[tuple[str, int]]:
    """A listener on a free port with ``target(listener)`` serving it in a thread."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        thread = threading.Thread(target=target, args=(listener,), daemon=True)
        thread.start()
        yield listener.getsockname()
        thread.join(timeout=10)
        assert not thread.is_alive()


def read_to_end(sock: socket.socket, client: ClientConnection) -> list[Event]:
    """Every event until the server closes (a reset ends it too: then it is in the list)."""
    events: list[Any] = []
    try:
        while chunk := sock.recv(65536):
            client.receive_data(chunk)
            events.extend(client)
    except OSError as exc:
        events.append(exc)
    return events


def bad_frame_with_two_megabytes_behind(address: tuple[str, int]) -> list[Event]:
    """CONNECT, a good SEND with a receipt, a bad frame and 2 MB of SENDs behind it,
    written by one thread while this one reads: what comes back."""
    # Lenient: the SENDs are written raw (pipelined before CONNECTED), so the
    # client's books do not know the receipt it gets back.
    client = ClientConnection(strict=False)
    data = client.send(Connect(host="/"))
    data += b"SEND\ndestination:/queue/a\nreceipt:good\n\nok\x00"
    # The NUL must follow the content-length bytes (1.2 §Frames); here it does not.
    data += b"SEND\ndestination:/queue/a\ncontent-length:1\n\nxy\x00"
    data += (b"SEND\ndestination:/queue/a\n\n" + b"z" * 65536 + b"\x00") * 32
    with socket.create_connection(address) as sock:

        def write() -> None:
            with suppress(OSError):  # the server may be gone before all of it is written
                sock.sendall(data)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        events = read_to_end(sock, client)
        writer.join(10)
    return events


def test_serve_one_answers_the_good_frame_and_its_error_arrives() -> None:
    server = load("plain_socket_server")
    with serving(server.serve_one) as address:
        events = bad_frame_with_two_megabytes_behind(address)
    assert [type(e) for e in events] == [Connected, Receipt, Error], events
    error = events[-1]
    assert isinstance(error, Error) and error.message is not None and "NUL" in error.message


def test_selectors_server_error_arrives() -> None:
    module = load("selectors_server")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        server = module.SelectorsServer(listener)
        thread = threading.Thread(target=server.run, args=(1,), daemon=True)
        thread.start()
        events = bad_frame_with_two_megabytes_behind(listener.getsockname())
        thread.join(timeout=10)
    assert [type(e) for e in events] == [Connected, Receipt, Error], events
    assert [type(e) for e in server.endings] == [RemoteProtocolError]


def test_plain_socket_client_against_selectors_server_with_heartbeats() -> None:
    module = load("selectors_server")
    client = load("plain_socket_client")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        server = module.SelectorsServer(listener, heartbeat=(50, 50))
        thread = threading.Thread(target=server.run, args=(1,), daemon=True)
        thread.start()
        bodies = client.main(*listener.getsockname())
        thread.join(timeout=10)
    assert not thread.is_alive()
    assert bodies == [b"hello 0", b"hello 1", b"hello 2"]
    assert [type(e) for e in server.endings] == [Receipt]  # DISCONNECT's: a clean end


def test_selectors_server_ends_a_silent_client_by_heartbeat_timeout() -> None:
    module = load("selectors_server")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        server = module.SelectorsServer(listener, heartbeat=(0, 20))
        thread = threading.Thread(target=server.run, args=(1,), daemon=True)
        thread.start()
        client = ClientConnection()
        with socket.create_connection(listener.getsockname()) as sock:
            # Promises a beat every 20 ms, then says nothing (1.2 §Heart-beating).
            sock.sendall(client.send(Connect(host="/", heartbeat=(20, 0))))
            events = read_to_end(sock, client)
        thread.join(timeout=10)
    assert [type(e) for e in events] == [Connected]
    assert [type(e) for e in server.endings] == [HeartBeatTimeout]


@pytest.mark.parametrize("strict", [True, False])
def test_stomppy_default_connection_and_a_strict_server(strict: bool) -> None:
    """stomp.py's default ``stomp.Connection`` (STOMP 1.1) sends no ``host``: refused
    by a strict server (1.1 §CONNECT: host is REQUIRED), let in with ``strict=False``."""
    stomp = pytest.importorskip("stomp")
    server = load("plain_socket_server")
    connected, ended = threading.Event(), threading.Event()
    errors: list[Any] = []

    class Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_connected(self, frame: Any) -> None:
            connected.set()

        def on_error(self, frame: Any) -> None:
            errors.append(frame)

        def on_disconnected(self) -> None:
            ended.set()

    with serving(functools.partial(server.serve_one, strict=strict)) as address:
        conn = stomp.Connection([address])
        conn.set_listener("recorder", Listener())
        conn.connect(wait=False)
        if strict:
            assert ended.wait(10), "the server did not close"
        else:
            assert connected.wait(10), "the server did not let stomp.py in"
            conn.disconnect(receipt="bye")
    assert connected.is_set() is not strict
    if strict:
        assert len(errors) == 1 and "host" in errors[0].headers["message"]
    else:
        assert errors == []
