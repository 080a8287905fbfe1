"""A finalizer that feeds the decoder while it reads a frame: refused, the frame kept whole.

Reading a frame of many headers allocates many objects, so a garbage collection can
start in the middle of it and run finalizers (``__del__``).  One that called
``receive_data`` on the same decoder used to move the buffer under the reader: the
native scanner then read freed memory (a crash), and the pure code returned wrong
frames.  Each case runs in a subprocess, so that a crash fails the test instead of
ending the test run; it runs on the build loaded here and on the pure build.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import stomp_proto

# A frame of 800 long header lines follows a small frame in each read, so that the
# decoder's read position is past the buffer's start (feeding it compacts the
# buffer) and the buffer is large (growing it moves it).  A collection runs every
# 100 allocations; before each read a new garbage cycle holds a finalizer that feeds
# the decoder.
SCRIPT = r"""
import gc, sys
import stomp_proto
from stomp_proto import ErrorKind, Frame, FrameDecoder, Limits, LocalProtocolError

decoder = FrameDecoder("1.2", limits=Limits(max_headers=2000))
refused = []
fed = []

class Feeder:
    def __init__(self):
        self.cycle = self
    def __del__(self):
        action = sys.argv[1]
        try:
            if action == "receive_data":
                decoder.receive_data(b"\n" * 300_000)
            elif action == "next_frame":
                decoder.next_frame()
            else:
                decoder.version = "1.1"
            fed.append(action)
        except LocalProtocolError as exc:
            assert exc.kind is ErrorKind.BAD_STATE, exc
            refused.append(str(exc))

head = b"MESSAGE\n" + b"".join(b"h%d:%s\n" % (i, b"v" * 200) for i in range(800))
stream = b"SEND\n\n\x00" + head + b"\nbody\x00"
gc.set_threshold(100)
messages = 0
for _ in range(20):
    Feeder()
    decoder.receive_data(stream)
    while (item := decoder.next_frame()) is not None:
        if isinstance(item, Frame) and item.command == "MESSAGE":
            assert len(item.headers) == 800 and item.body == b"body", item.headers[:2]
            assert item.headers[799] == ("h799", "v" * 200)
            messages += 1
gc.set_threshold(700)
print(stomp_proto.BUILD, messages, len(refused) > 0, refused[0] if refused else "")
"""


def builds() -> list[str]:
    return ["pure", "accelerated"] if stomp_proto.BUILD == "accelerated" else ["pure"]


@pytest.mark.parametrize("build", builds())
@pytest.mark.parametrize("action", ["receive_data", "next_frame", "version"])
def test_decoder_refuses_calls_from_a_finalizer_run_while_it_reads(build: str, action: str) -> None:
    env = dict(os.environ)
    env.pop("STOMP_PROTO_NO_EXTENSIONS", None)
    if build == "pure":
        env["STOMP_PROTO_NO_EXTENSIONS"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, action],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    got_build, messages, refused, message = result.stdout.split(" ", 3)
    assert got_build == build
    # Every frame came out whole.
    assert messages == "20"
    if sys.version_info >= (3, 12):
        # CPython 3.12 and later collect only where the interpreter checks for pending
        # work, never inside an allocation: the native scanner (no Python code) is
        # never interrupted, and whether a check falls inside the pure reader depends
        # on the interpreter (3.12 does, 3.13 not).  The frames above are the guarantee.
        return
    # The finalizer did run during a read, and was refused.
    assert refused == "True"
    assert "while the decoder is reading a frame" in message
