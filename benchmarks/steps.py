"""Time the sans-IO receive path step by step, on the pure and the accelerated build.

    python benchmarks/steps.py              # both builds, each in its own process
    python benchmarks/steps.py --one        # only the stomp_proto this process imports

Per MESSAGE of 100 B with six headers (20,000 of them, best of five): decoding the
frame (FrameDecoder), decoding it and building its event in a ClientConnection
(``receive_data`` and ``next_event``), and acknowledging it (``ClientConnection.ack``:
the event, the checks, the encoding).  No sockets: this is what the core costs a
client per message, whatever the I/O.

With the ``otel`` extra, a second row: a consumer that takes each message, acks it
and sends one (the core's part of those calls), with ``tracing=Tracing()`` but no
OpenTelemetry SDK configured against no tracing at all - the hook calls a client
makes, with what they cost when nothing records - as a ratio within the run (in
CPU time).

The accelerated copy is made by ``scripts/build_accelerated.py --target`` in a
temporary directory; the pure one is this checkout with ``STOMP_PROTO_NO_EXTENSIONS=1``
(pure even after an in-place build).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
COUNT = 20_000
REPEATS = 5


def measure() -> str:
    import stomp_proto
    from stomp_proto import ClientConnection, Connect, FrameDecoder, Message, Send, Subscribe

    frame = (
        b"MESSAGE\ndestination:/queue/a\nmessage-id:m-%d\nsubscription:0\nack:a-%d\n"
        b"content-type:text/plain\ncontent-length:100\n\n" + b"x" * 100 + b"\x00"
    )
    stream = b"".join(frame % (i, i) for i in range(COUNT))

    def decode() -> tuple[float, float]:
        decoder = FrameDecoder("1.2")
        started = time.perf_counter()
        decoder.receive_data(stream)
        for _ in decoder:
            pass
        return time.perf_counter() - started, 0.0

    def session() -> tuple[float, float]:
        conn = ClientConnection()
        conn.send(Connect(host="/"))
        conn.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
        conn.next_event()
        conn.send(Subscribe("/queue/a", id="0", ack="client-individual"))
        started = time.perf_counter()
        conn.receive_data(stream)
        messages = [event for event in conn if isinstance(event, Message)]
        received = time.perf_counter()
        for message in messages:
            conn.ack(message)
        return received - started, time.perf_counter() - received

    def consume(tracing: Any) -> float:
        """Take, ack and send per message, with the hook calls a client makes when
        given ``tracing`` (None: none); seconds for them all."""
        conn = ClientConnection()
        conn.send(Connect(host="/"))
        conn.receive_data(b"CONNECTED\nversion:1.2\n\n\x00")
        conn.next_event()
        conn.send(Subscribe("/queue/a", id="0", ack="client-individual"))
        conn.receive_data(stream)
        broker = ("127.0.0.1", 61613)
        reply = Send("/queue/b", b"y" * 100)
        # This process's CPU time: the two variants alternate on a machine that may be
        # busy, and other processes' turns must count for neither.
        started = time.process_time()
        for event in conn:
            if tracing is None:
                conn.ack(event)
                conn.send(reply)
                continue
            tracing.received(event, broker, "1.2", time.time_ns())
            with tracing.settling(event, False, broker, "1.2"):
                conn.ack(event)
            with tracing.sending(reply, broker, "1.2") as traced:
                conn.send(traced)
        return time.process_time() - started

    decoding = min(decode()[0] for _ in range(REPEATS))
    runs = [session() for _ in range(REPEATS)]
    events = min(run[0] for run in runs)
    acks = min(run[1] for run in runs)
    per = 1e6 / COUNT
    build = getattr(stomp_proto, "BUILD", "pure")
    row = (
        f"{build:<9} decode {decoding * per:5.2f} us   "
        f"decode + event {events * per:5.2f} us   ack {acks * per:5.2f} us   (per message)"
    )
    try:
        from stomp_proto.tracing import Tracing
    except ImportError:
        return row + f"\n{build:<9} tracing: no otel extra"
    tracing = Tracing()  # and no SDK: nothing records
    plain: list[float] = []
    traced: list[float] = []
    for _ in range(REPEATS):  # alternating, so that both see the same machine
        plain.append(consume(None))
        traced.append(consume(tracing))
    off, on = min(plain) * per, min(traced) * per
    return row + (
        f"\n{build:<9} take + ack + send: no tracing {off:5.2f} us   "
        f"Tracing(), no SDK {on:5.2f} us   (+{on - off:4.2f} us, x{on / off:4.2f} per message)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--one", action="store_true", help="only the build this process has")
    args = parser.parse_args()
    if args.one:
        print(measure())
        return 0
    accelerated = Path(tempfile.mkdtemp(prefix="stomp-proto-steps-"))
    try:
        build = [sys.executable, str(ROOT / "scripts" / "build_accelerated.py"), "--target"]
        subprocess.run([*build, str(accelerated)], check=True, stdout=subprocess.DEVNULL)
        for root in (ROOT, accelerated, ROOT, accelerated):  # twice, alternating
            env = {**os.environ, "PYTHONPATH": str(root)}
            env.pop("STOMP_PROTO_NO_EXTENSIONS", None)
            if root == ROOT:
                env["STOMP_PROTO_NO_EXTENSIONS"] = "1"
            subprocess.run([sys.executable, __file__, "--one"], env=env, check=True)
    finally:
        shutil.rmtree(accelerated, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
