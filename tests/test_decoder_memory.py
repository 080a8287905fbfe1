"""Memory follows what arrives, not what is declared.

1.2 §Size Limits lets a server refuse bodies over its limit, but a body under
the limit (64 MiB by default) may be *declared* by any peer that then sends
little of it.  The decoder's memory must follow the bytes received: a head
declaring 64 MiB and 1 KiB of body costs about 1 KiB.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable

from stomp_proto import Connect, Connected, Frame, FrameDecoder, FrameEncoder, ServerConnection

MiB = 1024 * 1024
DECLARED = 64 * MiB
HEAD = f"SEND\ndestination:/queue/a\ncontent-length:{DECLARED}\n\n".encode()
SENT = 1024


def allocated_by(build: Callable[[], list[object]]) -> tuple[int, list[object]]:
    """Bytes still allocated after ``build`` (what the objects it returns hold)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = build()
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return after - before, kept


def test_many_decoders_declaring_64_mib_hold_what_they_received() -> None:
    count = 200
    body = b"x" * SENT

    def build() -> list[object]:
        decoders = []
        for _ in range(count):
            decoder = FrameDecoder("1.2")
            decoder.receive_data(HEAD)
            assert decoder.next_frame() is None
            decoder.receive_data(body)
            assert decoder.next_frame() is None
            decoders.append(decoder)
        return decoders

    used, decoders = allocated_by(build)
    fed = count * (len(HEAD) + SENT)
    # Each decoder holds its ~1.1 KiB and its own small objects; far from 64 MiB each.
    assert used < 3 * fed, (used, fed)
    assert all(d.buffered == len(HEAD) + SENT for d in decoders)  # type: ignore[attr-defined]


def test_many_server_connections_declaring_64_mib_hold_what_they_received() -> None:
    count = 100
    connect = FrameEncoder("1.0").encode(
        Frame("CONNECT", (("accept-version", "1.2"), ("host", "/")))
    )

    def build() -> list[object]:
        servers = []
        for _ in range(count):
            server = ServerConnection()
            server.receive_data(connect)
            assert isinstance(server.next_event(), Connect)
            server.send(Connected())
            server.receive_data(HEAD + b"y" * SENT)
            assert server.next_event() is None
            servers.append(server)
        return servers

    gc.collect()
    baseline, _ = allocated_by(lambda: [_bare_server(connect) for _ in range(count)])
    used, servers = allocated_by(build)
    fed = count * (len(HEAD) + SENT)
    assert used - baseline < 3 * fed, (used, baseline, fed)
    assert all(s.buffered == len(HEAD) + SENT for s in servers)  # type: ignore[attr-defined]


def _bare_server(connect: bytes) -> ServerConnection:
    server = ServerConnection()
    server.receive_data(connect)
    server.next_event()
    server.send(Connected())
    return server


def test_the_reservation_grows_with_the_body_received() -> None:
    # A body past the large-body threshold, trickled in 4 KiB reads: at every
    # point the decoder holds at most about four times what arrived (the reservation
    # grows 4x at a time, never past the declared length).
    read = bytes(range(256)) * 16
    gc.collect()
    tracemalloc.start()
    try:
        decoder = FrameDecoder("1.2")
        decoder.receive_data(HEAD)
        assert decoder.next_frame() is None
        received = 0
        for _ in range(200):  # 800 KiB of the 64 MiB
            decoder.receive_data(read)
            received += len(read)
            assert decoder.next_frame() is None
            current = tracemalloc.get_traced_memory()[0]
            assert current <= 4 * received + 128 * 1024, (current, received)
    finally:
        tracemalloc.stop()
    assert decoder.buffered == len(HEAD) + received


def test_a_large_body_fed_in_reads_arrives_whole_and_exact() -> None:
    size = 3 * MiB + 17
    body = bytes(range(251)) * (size // 251) + b"\x00" * (size % 251)
    wire = f"MESSAGE\ncontent-length:{size}\n\n".encode() + body + b"\x00\n"
    for read in (1000, 64 * 1024, 1 << 20):
        decoder = FrameDecoder("1.2")
        frames = []
        for i in range(0, len(wire), read):
            decoder.receive_data(wire[i : i + read])
            frames.extend(decoder)
        assert [len(f.body) for f in frames if isinstance(f, Frame)] == [size]
        assert next(f for f in frames if isinstance(f, Frame)).body == body
