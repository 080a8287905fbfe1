"""The native fast path and the pure code, side by side in one process, on random streams.

Runs where the accelerated build is loaded (each accelerated run of scripts/test.sh,
or after ``scripts/build_accelerated.py --inplace``); skipped on the pure build.  The
pure side is the same process with the native hooks switched off (:func:`pure_core`),
which is what a build without the extension module runs.  Each stream - the
structure-aware fuzz streams: valid frames of every command and version, mutated,
with snippets spliced in - goes through the decoder, a server and a client, fed whole,
byte by byte and in random chunks, and every trace must be identical: each frame or
event, each error's type, kind, limit and message, each byte sent back.
tests/test_accelerated_build.py compares the two builds as installed, in two
processes, over the fuzz corpora.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator

import pytest
from build_probe import Trace, consume, decode, serve
from fuzzing.properties import Case
from fuzzing.sessions import client_script, server_script
from fuzzing.streams import random_cuts, recipe_stream
from helpers import pure_core
from hypothesis import given
from hypothesis import strategies as st

import stomp_proto
from stomp_proto import _decoder, _encoder, _events

pytestmark = pytest.mark.skipif(
    stomp_proto.BUILD != "accelerated", reason="the native fast path is not loaded"
)

configs = st.integers(0, 255)
# The recipe steps of tests/test_split_independence.py: no long repeats, so that
# feeding byte by byte stays quick.
steps = st.integers(0, 255).filter(lambda b: not (b & 7 == 5 and b >> 3 >= 30))
recipes = st.lists(steps, max_size=24).map(bytes)


def feedings(stream: bytes, seed: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    return [
        [stream],
        [stream[i : i + 1] for i in range(len(stream))],
        list(random_cuts(rng, stream)),
    ]


def same_traces(run: Callable[[list[bytes]], Trace], stream: bytes, seed: int) -> None:
    for chunks in feedings(stream, seed):
        native = run(chunks)
        with pure_core():
            pure = run(chunks)
        assert native == pure


def test_pure_core_switches_every_hook_off() -> None:
    with pure_core():
        decoder = stomp_proto.FrameDecoder()
        conn = stomp_proto.ClientConnection()
        assert decoder._fast is None
        assert conn._fast_receive is None and conn._fast_send is None
        assert conn._fast_events is None and conn._fast_send_parts is None
        assert _events._native is None and _encoder._native is None
    assert stomp_proto.FrameDecoder()._fast is not None


@given(config=configs, recipe=recipes, seed=st.integers(0, 2**16))
def test_decoder_native_and_pure_agree(config: int, recipe: bytes, seed: int) -> None:
    data = bytes([config, 0]) + recipe
    case = Case.from_bytes(data)
    stream = recipe_stream(recipe, case.version, data)[:20000]
    same_traces(lambda chunks: decode(case, chunks), stream, seed)


@given(config=configs, recipe=recipes, seed=st.integers(0, 2**16))
def test_server_native_and_pure_agree(config: int, recipe: bytes, seed: int) -> None:
    data = bytes([config, 0]) + recipe
    case = Case.from_bytes(data)
    stream = client_script(recipe, case.version, data)[:20000]
    same_traces(lambda chunks: serve(case, chunks, session=True), stream, seed)


@given(config=configs, recipe=recipes, seed=st.integers(0, 2**16))
def test_client_native_and_pure_agree(config: int, recipe: bytes, seed: int) -> None:
    data = bytes([config, 0]) + recipe
    case = Case.from_bytes(data)
    stream = server_script(recipe, case.version, data)[:20000]
    same_traces(lambda chunks: consume(case, chunks, session=True), stream, seed)


# Short streams for every split: each reaches a place where the native decoder stops
# and resumes (a head or a body in pieces), or hands over to the pure code (an error
# or a limit reached in pieces, the end of the stream inside a frame).  Under the
# limits below: lines of 24 bytes, 3 headers, heads of 72 bytes, bodies of 16.
SPLIT_LIMITS = stomp_proto.Limits(
    max_line_length=24, max_headers=3, max_head_size=72, max_body_size=16
)
SPLIT_STREAMS = [
    b"MESSAGE\nk:v\ncontent-length:3\n\na\x00b\x00\n",
    b"SEND\ndestination:/q\n\nhello\x00\r\n\nACK\nid:1\n\n\x00",
    b"MESSAGE\r\na:b\r\n\r\nxy\x00",
    b"SEND\na:\\c\\n\\\\\n\nb\x00",
    b"SEND\ncontent-length:2\n\nabc\x00",  # no NUL after the declared body
    b"SEND\ncontent-length:20\n\nabc",  # over max_body_size, body still arriving
    b"SEND\n\n0123456789abcdefXYZ\x00",  # no content-length, past max_body_size
    b"SUBSCRIBE\nid:1\n\nbody\x00",  # a body where none may be
    b"SEND\nno colon here\n\n\x00",
    b"SEND\n:empty-name\n\n\x00",
    b"SEND\nname:a value that is far too long\n\n\x00",
    b"SEND\na:1\nb:2\nc:3\nd:4\n\n\x00",  # one header too many
    b"SEND\na:1\x00\n\n\x00",  # a NUL in the head
    b"FOO\n\n\x00",
    b"MESSAGE\n" + b"h:" + b"v" * 20 + b"\n" + b"i:" + b"w" * 20 + b"\n" + b"j:x\n\n\x00",
    b"SEND\ncontent-length:4\n\nab",  # the stream ends inside the body
    b"SEND\na:b",  # the stream ends inside the head
    b"\r",
    b"SEND\na:b\rc\n\n\x00",
    b"CONNECTED\nversion:1.2\n\n\x00",
    # Lines of blanks: lenient mode's blank line (the head ends there), also
    # while it grows; a blank-led header line; blanks before the command.
    b"SEND\n \t \r\nbody\x00",
    b"SEND\n  k:v\n\t\n\x00\n",
    b"  \nSEND\nk:v\n \n\x00",
]


def split_trace(
    version: str, verbatim: bool, chunks: list[bytes], limits: stomp_proto.Limits = SPLIT_LIMITS
) -> Trace:
    """What a decoder returns for ``chunks``, and its marks after each chunk."""
    decoder = stomp_proto.FrameDecoder(version, strict=not verbatim, limits=limits)
    if verbatim:
        decoder._keep_text()  # the lenient server's decoder
    trace: Trace = []
    try:
        for chunk in [*chunks, None]:
            decoder.receive_data(chunk)
            while (item := decoder.next_frame()) is not None:
                trace.append(repr(item))
            # The pure decoder's own marks: the native code must leave them as it would.
            trace.append(
                repr(
                    [
                        getattr(decoder, name)
                        for name in (
                            "_pos",
                            "_scan",
                            "_line_start",
                            "_head_lines",
                            "_command",
                            "_headers",
                            "_content_length",
                            "_body_limit",
                            "_body_start",
                            "_blank_lf",
                        )
                    ]
                )
            )
    except stomp_proto.RemoteProtocolError as exc:
        trace.append(f"raised {exc.kind} {exc.limit} {exc}")
    return trace


def every_split(stream: bytes) -> Iterator[list[bytes]]:
    """The stream whole, byte by byte, cut once anywhere and cut twice anywhere."""
    yield [stream]
    yield [stream[i : i + 1] for i in range(len(stream))]
    for i in range(len(stream) + 1):
        yield [stream[:i], stream[i:]]
        for j in range(i, len(stream) + 1):
            yield [stream[:i], stream[i:j], stream[j:]]


@pytest.mark.parametrize("stream", SPLIT_STREAMS, ids=range(len(SPLIT_STREAMS)))
@pytest.mark.parametrize(
    ("version", "verbatim"), [("1.0", False), ("1.1", False), ("1.2", False), ("1.2", True)]
)
def test_decoder_native_and_pure_agree_in_every_split(
    stream: bytes, version: str, verbatim: bool
) -> None:
    for chunks in every_split(stream):
        native = split_trace(version, verbatim, chunks)
        with pure_core():
            pure = split_trace(version, verbatim, chunks)
        assert native == pure, chunks


# Limits have no upper bound, and the native decoder clamps each where it enters C (to
# 2**60 - 1 on 64 bits): under limits around that bound and past what a C integer
# holds, every split gives the same frames, errors and marks (the body limit the pure
# code would hold included) - also where the pure code reads the head and the native
# code the body (19 and 20 digits of content-length, lenient heads in pieces).
HUGE = 2**60 - 1
UNBOUNDED_LIMITS = {
    "2**64 body and frame": stomp_proto.Limits(max_body_size=2**64, max_frame_size=2**64),
    "every limit 2**64": stomp_proto.Limits(*(2**64,) * 5),
    "around the clamp": stomp_proto.Limits(
        max_line_length=HUGE + 1, max_headers=HUGE, max_head_size=HUGE - 1,
        max_body_size=HUGE, max_frame_size=HUGE + 1,
    ),
    "C's largest and one past": stomp_proto.Limits(
        max_body_size=2**63, max_frame_size=2**63 - 1, max_head_size=80
    ),
    "a small body, a huge frame": stomp_proto.Limits(max_body_size=4, max_frame_size=10**20),
}  # fmt: skip
UNBOUNDED_STREAMS = [
    b"SEND\ncontent-length:0000000000000000005\n\nhello\x00\n",
    b"SEND\ncontent-length:99999999999999999999\n\nab",
    b"SEND\ncontent-length:18446744073709551615\n\nab",
    b"SEND\ncontent-length:999999999999999999\n\nab",  # 18 digits: the native code's
    b"  \nSEND\ncontent-length:5\n\nhello\x00",
    b"\t\r\nSEND\nk:v\n\nbody\x00\n",
    SPLIT_STREAMS[0], SPLIT_STREAMS[1], SPLIT_STREAMS[6], SPLIT_STREAMS[20],
]  # fmt: skip


@pytest.mark.parametrize("limits", list(UNBOUNDED_LIMITS))
@pytest.mark.parametrize("stream", UNBOUNDED_STREAMS, ids=range(len(UNBOUNDED_STREAMS)))
@pytest.mark.parametrize("verbatim", [False, True], ids=["strict", "lenient server"])
def test_unbounded_limits_native_and_pure_agree_in_every_split(
    limits: str, stream: bytes, verbatim: bool
) -> None:
    chosen = UNBOUNDED_LIMITS[limits]
    splits = [[stream], [stream[i : i + 1] for i in range(len(stream))]]
    splits += [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    splits += [[stream[:i], stream[i:j], stream[j:]] for i in range(0, len(stream), 3)
               for j in range(i, len(stream) + 1)]  # fmt: skip
    for chunks in splits:
        native = split_trace("1.2", verbatim, chunks, chosen)
        with pure_core():
            pure = split_trace("1.2", verbatim, chunks, chosen)
        assert native == pure, chunks


# Large bodies: a body of _LARGE_BODY bytes or more, with a content-length, leaves
# the buffer while it arrives (the native decoder moves it into a reservation of its
# own as soon as its head is read; the pure one once that many bytes of it are in).
# Whatever the split, both builds give the same frames, errors, marks and ``buffered``
# count - also when the version changes while such a body arrives, which puts what
# was received back into the buffer.
LARGE = _decoder._LARGE_BODY


def _large(size: int, after: bytes = b"\x00\n") -> tuple[bytes, bytes]:
    """A MESSAGE whose body of ``size`` bytes holds NULs and every byte value, and what
    follows the body (its NUL, a heart-beat): the head and the rest."""
    head = b"MESSAGE\ndestination:/q\ncontent-length:%d\n\n" % size
    return head, (bytes(range(256)) * (size // 256 + 1))[:size] + after


LARGE_STREAMS = {
    # name: (head, rest, what follows)
    "under the threshold": (*_large(LARGE - 1), b"SEND\n\nx\x00"),
    "at the threshold": (*_large(LARGE), b"SEND\ncontent-length:1\n\ny\x00"),
    "three times it, twice": (*_large(3 * LARGE + 5), b"".join(_large(LARGE + 1))),
    "no NUL after the body": (*_large(LARGE + 1, b"X"), b""),
    "the stream ends in the body": (_large(2 * LARGE)[0], _large(2 * LARGE)[1][:LARGE], b""),
}


def large_trace(
    verbatim: bool, chunks: list[bytes], switch_after: int | None = None
) -> list[object]:
    """What a decoder returns for ``chunks`` (bodies as digests), with its marks and
    ``buffered`` after each chunk; the version goes from 1.2 to 1.1 after chunk
    ``switch_after``."""
    decoder = stomp_proto.FrameDecoder("1.2", strict=not verbatim)
    if verbatim:
        decoder._keep_text()
    trace: list[object] = []
    try:
        for index, chunk in enumerate([*chunks, None]):
            decoder.receive_data(chunk)
            while (item := decoder.next_frame()) is not None:
                if isinstance(item, stomp_proto.Frame):
                    digest = hashlib.sha256(item.body).hexdigest()
                    trace.append((item.command, item.headers, len(item.body), digest))
                else:
                    trace.append(repr(item))
            if index == switch_after:
                decoder.version = "1.1"
            # Offsets from the frame's start: the builds may hold a large body
            # in the buffer or not, for a while, and count offsets differently then.
            pos = decoder._pos
            marks = (decoder._scan, decoder._line_start, decoder._body_start)
            relative = (mark - pos for mark in marks)
            trace.append((decoder.buffered, decoder._command, decoder._content_length, *relative))
    except stomp_proto.RemoteProtocolError as exc:
        trace.append(f"raised {exc.kind} {exc.limit} {exc}")
    return trace


def large_splits(head: bytes, rest: bytes, stream: bytes) -> Iterator[list[bytes]]:
    """The stream whole; cut once and twice at every place where the body's route
    may change (around its start, the threshold, its end, the next frame); in reads
    of TCP and socket sizes; and at random."""
    start = len(head)
    places = sorted(
        {
            offset
            for at in (1, start - 1, start, start + LARGE, len(head + rest) - 2, len(stream) - 1)
            for offset in (at - 1, at, at + 1)
            if 0 < offset < len(stream)
        }
    )
    yield [stream]
    for i, first in enumerate(places):
        yield [stream[:first], stream[first:]]
        for second in places[i + 1 :]:
            yield [stream[:first], stream[first:second], stream[second:]]
    for size in (1460, 4096, LARGE - 1, LARGE, LARGE + 1):
        yield [stream[i : i + size] for i in range(0, len(stream), size)]
    yield list(random_cuts(random.Random(len(stream)), stream))


@pytest.mark.parametrize("name", list(LARGE_STREAMS))
@pytest.mark.parametrize("verbatim", [False, True], ids=["strict", "lenient server"])
def test_large_bodies_native_and_pure_agree_in_every_split(name: str, verbatim: bool) -> None:
    head, rest, after = LARGE_STREAMS[name]
    stream = head + rest + after
    for chunks in large_splits(head, rest, stream):
        for switch_after in (None, 0, len(chunks) // 2):
            native = large_trace(verbatim, chunks, switch_after)
            with pure_core():
                pure = large_trace(verbatim, chunks, switch_after)
            assert native == pure, ([len(chunk) for chunk in chunks], switch_after)


def test_a_large_body_fed_byte_by_byte_agrees() -> None:
    head, rest = _large(LARGE + 3)
    data = head + rest
    chunks = [data[i : i + 1] for i in range(len(data))]
    native = large_trace(False, chunks)
    with pure_core():
        assert large_trace(False, chunks) == native


def test_the_native_decoder_takes_a_large_body_out_of_the_buffer_at_its_head() -> None:
    # The native route: no rescan of the body while it arrives, one copy of each
    # byte after the head's read (the pure route waits for LARGE bytes first).
    head, rest = _large(4 * LARGE)
    decoder = stomp_proto.FrameDecoder("1.2")
    decoder.receive_data(head + rest[:10])
    assert decoder.next_frame() is None
    assert type(decoder._big).__name__ == "BodyReservation"
    assert bytes(decoder._buf) == head
    for i in range(10, len(rest), 1000):
        decoder.receive_data(rest[i : i + 1000])
    frame = decoder.next_frame()
    assert isinstance(frame, stomp_proto.Frame) and frame.body == rest[:-2]
    assert decoder._big is None


@pytest.mark.parametrize(
    "head",
    [
        b"SEND\ndestination:/q\nk:" + b"v" * 300 + b"\n",
        b"  \nSEND\nk:v\n",  # a line of blanks before the command
        b"SEND\nk:v\n \t\r \t\r",  # a blank line of blanks, growing
    ],
    ids=["long value", "blanks before the command", "line of blanks"],
)
def test_the_native_decoder_reads_a_lenient_head_in_pieces_itself(
    head: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The lenient server's head fed byte by byte (a broker's client trickling in):
    # the native scanner checks each piece as the pure _check_partial_head would,
    # with no call to it (it handed every piece over, and a trickling lenient head
    # cost more than on the pure build).  The frames and marks agree: see above.
    calls: list[int] = []
    check = _decoder.FrameDecoder._check_partial_head

    def counted(self: _decoder.FrameDecoder, end: int, window: int) -> None:
        calls.append(end)
        check(self, end, window)

    monkeypatch.setattr(_decoder.FrameDecoder, "_check_partial_head", counted)
    decoder = stomp_proto.FrameDecoder("1.2", strict=False)
    decoder._keep_text()
    data = head + b"\nbody\x00"
    frames = []
    for i in range(len(data)):
        decoder.receive_data(data[i : i + 1])
        frames += list(decoder)
    assert [f.body for f in frames if isinstance(f, stomp_proto.Frame)] == [b"body"]
    assert calls == []
    with pure_core():
        decoder = stomp_proto.FrameDecoder("1.2", strict=False)
        decoder._keep_text()
        for i in range(len(data)):
            decoder.receive_data(data[i : i + 1])
            list(decoder)
    assert len(calls) > len(head) // 2  # (the pure build's route, counted)


def test_decoder_reuses_the_previous_frames_header_objects_only_for_the_same_text() -> None:
    # A broker repeats names and many values frame after frame; the native decoder
    # takes the previous frame's objects again where the text at the same place is
    # the same, and nowhere else (1.2 §Value Encoding: an escaped header is read
    # from its escapes, whatever the previous frame held).
    frames = [
        b"MESSAGE\nsubscription:range\nx-key:k1\nx-note:gr\xc3\xbc\xc3\x9fe\n\n\x00",
        b"MESSAGE\nsubscription:range\nx-key:k2\nx-note:gr\xc3\xbc\xc3\x9fe\n\n\x00",
        b"MESSAGE\nx-key:range\nsubscription:k2\n\n\x00",  # the same texts, moved
        b"MESSAGE\nx-key:a\\cb\nsubscription:k2\n\n\x00",  # escaped: a:b
        b"MESSAGE\nx-key:a\\\\cb\nsubscription:k\n\n\x00",  # a\\cb, not a:b
        b"MESSAGE\nx-key\nsubscription:k\n\n\x00",  # no colon: the pure code's error
    ]
    stream = b"".join(frames)

    def frames_of(chunks: list[bytes]) -> list[object]:
        decoder = stomp_proto.FrameDecoder("1.2")
        found: list[object] = []
        try:
            for chunk in chunks:
                decoder.receive_data(chunk)
                while (item := decoder.next_frame()) is not None:
                    found.append(item)
        except stomp_proto.RemoteProtocolError as exc:
            found.append(f"raised {exc}")
        return found

    native = frames_of([stream])
    first, second = native[0], native[1]
    assert isinstance(first, stomp_proto.Frame) and isinstance(second, stomp_proto.Frame)
    assert second.headers[0] is first.headers[0]  # subscription:range, the same pair
    assert second.headers[1][0] is first.headers[1][0]  # x-key: the name only
    assert second.headers[1][1] == "k2"
    assert [h for f in native[2:5] for h in f.headers] == [  # type: ignore[union-attr]
        ("x-key", "range"), ("subscription", "k2"),
        ("x-key", "a:b"), ("subscription", "k2"),
        ("x-key", "a\\cb"), ("subscription", "k"),
    ]  # fmt: skip
    splits = [[stream], [stream[i : i + 1] for i in range(len(stream))]]
    splits += [[stream[:i], stream[i:]] for i in range(len(stream) + 1)]
    for chunks in splits:
        got = frames_of(chunks)
        with pure_core():
            assert got == frames_of(chunks), chunks


SETTLE_IDS = ["a0", "T_sub-1@@session-x@@12", "a:b", "a\\b", "a\nb", "a\rb", "é", "x" * 300, ""]


def settle_trace(ident: str) -> list[object]:
    """The bytes of the ACK, then of the NACK, of a MESSAGE whose ``ack`` header is
    ``ident`` (or the error), in a 1.2 session on a client-individual subscription."""
    client, server = stomp_proto.ClientConnection(), stomp_proto.ServerConnection()
    server.receive_data(client.send(stomp_proto.Connect(host="/", accept_versions=("1.2",))))
    server.next_event()
    client.receive_data(server.send(stomp_proto.Connected(session="s")))
    client.next_event()
    subscribe = stomp_proto.Subscribe("/q", id="s1", ack="client-individual")
    server.receive_data(client.send(subscribe))
    server.next_event()
    trace: list[object] = []
    for settle in (client.ack, client.nack):
        message = stomp_proto.Message("/q", message_id="m", subscription="s1", ack=ident)
        client.receive_data(server.send(message))
        try:
            data = settle(client.next_event())  # type: ignore[arg-type]
        except (TypeError, stomp_proto.LocalProtocolError) as exc:
            trace.append(f"{type(exc).__name__}: {exc}")
            return trace
        trace.append(data)
        server.receive_data(data)  # the server takes it: the id may be delivered again
        trace.append(repr(server.next_event()))
    return trace


@pytest.mark.parametrize("ident", SETTLE_IDS, ids=lambda ident: repr(ident)[:12])
def test_settle_native_and_pure_agree_for_every_kind_of_id(ident: str) -> None:
    # The accelerated build writes an ACK whose id needs no escape at once, and
    # gives any other to the encoder (1.2 §Value Encoding: \\, \n, \r and : escaped).
    native = settle_trace(ident)
    with pure_core():
        assert settle_trace(ident) == native
    if ident == "a0":
        assert native[0::2] == [b"ACK\nid:a0\n\n\x00", b"NACK\nid:a0\n\n\x00"]
