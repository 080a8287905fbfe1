"""A proxy in front of the embedded broker that breaks one rule of the specs at a time.

Used by ``test_checker.py`` to judge the checker: each mutation must turn
the cases that test the broken clause FAILED (or NON-STRICT), and the proxy
without a mutation must leave a clean run clean.  Frames are read with the
checker's tolerant reader and forwarded byte for byte unless the mutation
rewrites them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from stomp_check import RawFrame
from stomp_check._wire import FrameReader, unescape

Rewrite = Callable[[RawFrame], bytes | None]


def _encode(frame: RawFrame, headers: list[tuple[str, str]] | None = None) -> bytes:
    lines = [frame.command] + [
        f"{k}:{v}" for k, v in (frame.headers if headers is None else headers)
    ]
    return ("\n".join(lines) + "\n\n").encode() + frame.body + b"\x00\n"


def _without(*names: str, commands: tuple[str, ...] = ()) -> Rewrite:
    def rewrite(frame: RawFrame) -> bytes:
        if commands and frame.command not in commands:
            return frame.raw
        return _encode(frame, [(k, v) for k, v in frame.headers if k not in names])

    return rewrite


def _unescaped(frame: RawFrame) -> bytes:
    if frame.command == "CONNECTED":
        return frame.raw
    return _encode(frame, [(k, unescape(v, "1.2") or v) for k, v in frame.headers])


def _version(frame: RawFrame) -> bytes:
    if frame.command != "CONNECTED":
        return frame.raw
    return _encode(frame, [(k, "1.0" if k == "version" else v) for k, v in frame.headers])


def _individual(frame: RawFrame) -> bytes:
    if frame.command != "SUBSCRIBE":
        return frame.raw
    return _encode(
        frame,
        [(k, "client-individual" if (k, v) == ("ack", "client") else v) for k, v in frame.headers],
    )


def _trimmed(frame: RawFrame) -> bytes:
    if frame.command != "SEND":
        return frame.raw
    return _encode(frame, [(k.strip(), v.strip()) for k, v in frame.headers])


def _drop(command: str) -> Rewrite:
    return lambda frame: None if frame.command == command else frame.raw


#: name -> (rewrite of client frames, rewrite of broker frames, options)
MUTATIONS: dict[str, dict[str, Any]] = {
    "none": {},
    "no-escaping": {"out": _unescaped},
    "no-receipts": {"out": _drop("RECEIPT")},
    "no-error-before-close": {"out": _drop("ERROR")},
    "error-without-close": {"keep_open": True},
    "no-heart-beats": {"beats": False},
    "wrong-version": {"out": _version},
    "no-subscription-ack": {"out": _without("subscription", "ack", commands=("MESSAGE",))},
    "content-length-ignored": {"in": _without("content-length", commands=("SEND",))},
    "client-acks-individual": {"in": _individual},
    "transactions-ignored": {"in": _without("transaction", commands=("SEND", "ACK", "NACK"))},
    "crlf-refused": {"crlf_refused": True},
    "trimmed-values": {"in": _trimmed},
}


async def _pump(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    rewrite: Rewrite | None,
    beats: bool,
    refuse_crlf: asyncio.StreamWriter | None,
) -> None:
    frames = FrameReader()
    while data := await reader.read(65536):
        out = bytearray()
        for item in frames.feed(data, 0.0):
            if not isinstance(item, RawFrame):
                if beats:
                    out += b"\n"
                continue
            if refuse_crlf is not None and item.crlf:
                refuse_crlf.write(b"ERROR\nmessage:CRLF is not supported\n\n\x00")
                await refuse_crlf.drain()
                refuse_crlf.close()
                writer.close()
                return
            forwarded = rewrite(item) if rewrite else item.raw
            if forwarded is not None:
                out += forwarded
        if out:
            try:
                writer.write(bytes(out))
                await writer.drain()
            except ConnectionError:
                return


@contextmanager
def mutated_broker(upstream: int, mutation: str) -> Iterator[int]:
    """A proxy to the broker on ``upstream`` applying ``mutation``; yields its port."""
    options = MUTATIONS[mutation]
    ready = threading.Event()
    state: dict[str, Any] = {}

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        # Connections still open when the proxy stops end quietly: a handler cancelled
        # at the end of asyncio.run made 3.11's StreamReaderProtocol log a traceback.
        with contextlib.suppress(asyncio.CancelledError, ConnectionError):
            await proxy(client_r, client_w)
        client_w.close()

    async def proxy(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        broker_r, broker_w = await asyncio.open_connection("127.0.0.1", upstream)
        inbound = asyncio.create_task(
            _pump(
                client_r,
                broker_w,
                options.get("in"),
                True,
                client_w if options.get("crlf_refused") else None,
            )
        )
        try:
            await _pump(broker_r, client_w, options.get("out"), options.get("beats", True), None)
            if options.get("keep_open"):
                with contextlib.suppress(Exception):
                    await inbound  # the broker closed; the client's side stays open
        finally:
            inbound.cancel()
            broker_w.close()

    async def serve() -> None:
        stop = asyncio.Event()
        state["stop"], state["loop"] = stop, asyncio.get_running_loop()
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        state["port"] = server.sockets[0].getsockname()[1]
        ready.set()
        async with server:
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    if not ready.wait(10):
        raise RuntimeError("the mutating proxy did not start")
    try:
        yield int(state["port"])
    finally:
        state["loop"].call_soon_threadsafe(state["stop"].set)
        thread.join(10)


def faulty_echo_client(port: int, fault: str, sessions: int = 200) -> None:
    """The echo script on a raw socket, with one client fault (for check-client's judge).

    ``raw-headers``: header values echoed as written, escapes not decoded;
    ``last-repeated``: of a repeated header, the last is echoed;
    ``cut-at-nul``: bodies end at the first NUL (content-length ignored).
    """
    import socket

    from stomp_check._wire import build

    for _ in range(sessions):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            return
        reader = FrameReader()
        version = "1.2"
        sock.sendall(build("CONNECT", [("accept-version", "1.0,1.1,1.2"), ("host", "/")]))
        try:
            while data := sock.recv(65536):
                for frame in reader.feed(data, 0.0):
                    if not isinstance(frame, RawFrame):
                        continue
                    if frame.command == "ERROR":
                        if frame.get("message") == "check-client done":
                            sock.close()
                            return
                    elif frame.command == "CONNECTED":
                        version = frame.get("version") or "1.0"
                        sock.sendall(
                            build(
                                "SUBSCRIBE",
                                [("destination", "/queue/check"), ("id", "1")],
                                version=version,
                            )
                        )
                    elif frame.command == "MESSAGE":
                        sock.sendall(_faulty_echo(frame, fault, version))
        except OSError:
            pass
        sock.close()


def _faulty_echo(frame: RawFrame, fault: str, version: Any) -> bytes:
    from stomp_check._wire import build

    pairs = [(k, v) for k, v in frame.headers if k.startswith("x-")]
    if fault == "raw-headers":
        headers = pairs  # written back as they came: the escapes get escaped again
    else:
        decoded: dict[str, str] = {}
        for k, v in pairs:
            value = unescape(v, version) or v
            if fault == "last-repeated":
                decoded[k] = value
            else:
                decoded.setdefault(k, value)
        headers = list(decoded.items())
    body = frame.body.split(b"\x00")[0] if fault == "cut-at-nul" else frame.body
    return build("SEND", [("destination", "/queue/echo"), *headers], body, version=version)
