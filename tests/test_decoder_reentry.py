"""A finalizer that feeds the decoder while it reads a frame: refused, the frame kept whole.

Reading a frame of many headers allocates many objects, so a garbage collection can
start in the middle of it and run finalizers (``__del__``).  One that called
``receive_data`` on the same decoder used to move the buffer under the reader: the
native scanner then read freed memory (a crash), and the pure code returned wrong
frames.  Each case runs in a subprocess, so that a crash fails the test instead of
ending the test run; it runs on the build loaded here and on the pure build.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys

import pytest
from helpers import pure_core

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


def run_on(build: str, script: str, *args: str) -> str:
    """The output of ``script`` run in a subprocess on ``build`` (a crash fails the test)."""
    env = dict(os.environ)
    env.pop("STOMP_PROTO_NO_EXTENSIONS", None)
    if build == "pure":
        env["STOMP_PROTO_NO_EXTENSIONS"] = "1"
    result = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


@pytest.mark.parametrize("build", builds())
@pytest.mark.parametrize("action", ["receive_data", "next_frame", "version"])
def test_decoder_refuses_calls_from_a_finalizer_run_while_it_reads(build: str, action: str) -> None:
    got_build, messages, refused, message = run_on(build, SCRIPT, action).split(" ", 3)
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


# receive_data runs Python code too: a collection started by one of its allocations
# runs finalizers, and a bytes-like subclass runs its own methods.  A call that fed the
# decoder from there, while a large body arrives, used to write that body's bytes
# twice: a 100,002-byte body for content-length:100000 (pure build), or ValueError
# "more bytes than the declared length" (accelerated).  It is refused, naming
# receive_data, and the data being taken in is taken once.
LENGTH = 100_000
HEAD = b"SEND\ndestination:/q\ncontent-length:%d\n\n" % LENGTH


class Feeding(bytearray):
    """Data whose length, asked by receive_data, feeds the decoder first (a hook)."""

    calls: list[str]

    def __len__(self) -> int:
        try:
            self.decoder.receive_data(b"zz")  # type: ignore[attr-defined]
            self.calls.append("taken")
        except stomp_proto.LocalProtocolError as exc:
            assert exc.kind is stomp_proto.ErrorKind.BAD_STATE, exc
            self.calls.append(str(exc))
        return bytearray.__len__(self)


@pytest.mark.parametrize("build", builds())
def test_receive_data_refuses_a_call_made_while_it_takes_a_large_body(build: str) -> None:
    with pure_core() if build == "pure" else contextlib.nullcontext():
        decoder = stomp_proto.FrameDecoder()
        decoder.receive_data(HEAD + b"a" * 70_000)
        assert decoder.next_frame() is None
        assert decoder._need  # the large-body route: receive_data writes into the body
        rest = Feeding(b"b" * (LENGTH - 70_000) + b"\x00SEND\n\nnext\x00")
        rest.decoder, rest.calls = decoder, []  # type: ignore[attr-defined]
        decoder.receive_data(rest)
        frames = list(decoder)
    assert rest.calls and all("while the decoder is taking in data" in c for c in rest.calls)
    assert "receive_data called" in rest.calls[0] and "during receive_data" in rest.calls[0]
    body = frames[0].body  # type: ignore[union-attr]
    assert len(body) == LENGTH and body == b"a" * 70_000 + b"b" * (LENGTH - 70_000)
    assert frames[1] == stomp_proto.Frame("SEND", (), b"next")


# The same from a garbage collection's finalizer, as it happens: a body of 100,000
# bytes in two reads, the second longer than what is missing, and a collection at each
# allocation with a finalizer that feeds the decoder when it runs inside receive_data.
GC_SCRIPT = r"""
import gc, sys
import stomp_proto
from stomp_proto import ErrorKind, FrameDecoder, LocalProtocolError

LENGTH = 100_000
head = b"SEND\ndestination:/q\ncontent-length:%d\n\n" % LENGTH
inside, refused, taken = 0, [], 0

class Feeder:
    def __init__(self, decoder):
        self.cycle, self.decoder = self, decoder
    def __del__(self):
        global inside, taken
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "receive_data":
            frame = frame.f_back
        if frame is None:
            return  # not run inside receive_data: nothing to show
        inside += 1
        try:
            self.decoder.receive_data(b"zz")
            taken += 1
        except LocalProtocolError as exc:
            assert exc.kind is ErrorKind.BAD_STATE, exc
            refused.append(str(exc))

bodies = set()
for threshold in range(1, 8):
    for _ in range(10):
        decoder = FrameDecoder()
        decoder.receive_data(head + b"a" * 70_000)
        assert decoder.next_frame() is None
        rest = b"b" * (LENGTH - 70_000) + b"\x00"
        for _ in range(5):
            Feeder(decoder)
        gc.set_threshold(threshold)
        try:
            decoder.receive_data(rest)
        finally:
            gc.set_threshold(700)
        frame = decoder.next_frame()
        while frame is None or not hasattr(frame, "body"):
            frame = decoder.next_frame()
        bodies.add(len(frame.body))
gc.collect()
print(stomp_proto.BUILD, sorted(bodies), inside, taken, refused[0] if refused else "")
"""


@pytest.mark.parametrize("build", builds())
def test_a_finalizer_that_feeds_the_decoder_during_receive_data_is_refused(build: str) -> None:
    got_build, bodies, inside, taken, message = run_on(build, GC_SCRIPT).split(" ", 4)
    assert got_build == build
    # Every body is as long as its content-length.
    assert bodies == f"[{LENGTH}]"
    if sys.version_info < (3, 12):
        # 3.11 collects inside allocations, receive_data's among them: the finalizer
        # ran there, and every call it made was refused.  (3.12 and later collect
        # where the interpreter checks for pending work, which includes the entry of
        # receive_data, before it has read or changed anything: a call made there
        # comes before it, and is taken whole.)
        assert int(inside) > 0
        assert taken == "0"
        assert message.startswith("receive_data called while the decoder is taking in data")
