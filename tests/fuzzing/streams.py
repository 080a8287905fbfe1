"""Structure-aware fuzz streams: many valid frames of every command and version, mutated.

A fuzz input is read as a *recipe* (:func:`recipe_stream`): two bytes of
configuration (as in :class:`fuzzing.properties.Case`), then one byte per
step, each naming what to append to the stream - a valid frame of a given
command, heart-beats, a mutation of the previous piece, a run of copies of it
(how a short input grows into a stream of megabytes), or a raw snippet.  So the
coverage-guided fuzzer steers the *structure* (which frames, in which order,
where the damage is), while the details - header names and values, escapes,
bodies, where a mutation lands - come from a random generator seeded by the
input, the same for the same input.

The same builders make the sessions of :mod:`fuzzing.sessions` and the
streams of the split-independence tests (``tests/test_split_independence.py``).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from stomp_proto import Frame, FrameEncoder, LocalProtocolError, Version
from stomp_proto._frame import BODY_COMMANDS, COMMANDS_BY_VERSION, UNESCAPED_COMMANDS

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")

#: Every command, in a fixed order (the recipe names them by index).
ALL_COMMANDS: tuple[str, ...] = (
    "CONNECT", "STOMP", "CONNECTED", "SEND", "SUBSCRIBE", "UNSUBSCRIBE", "ACK", "NACK",
    "BEGIN", "COMMIT", "ABORT", "DISCONNECT", "MESSAGE", "RECEIPT", "ERROR",
)  # fmt: skip

NAMES = (
    "destination", "id", "ack", "receipt", "receipt-id", "message-id", "subscription",
    "transaction", "content-type", "content-length", "version", "accept-version", "host",
    "heart-beat", "session", "message", "login", "passcode", "x", "foo",
)  # fmt: skip

#: Bytes and fragments that stress framing, escaping and limits.
SNIPPETS = (
    b"\n", b"\r\n", b"\r", b"\x00", b"\\", b":", b"\\c", b"\\r", b"\\n", b"\\t", b"\\\\",
    b"content-length:", b"content-length:3\n", b"content-length:99999999999\n", b"\n\n",
    b"\r\n\r\n", b"send\n", b"SE\rND\n", b"\xc3", b"\xff", b"\xe6\x97", b" ", b"\t", b"NACK\n",
    b"STOMP\n", b"\x00\n\n",
)  # fmt: skip

INTERESTING = (0, 10, 13, 58, 92, 32, 9, 0xFF, 0xC3, 0x80, ord("A"), ord("0"))


def _text(rng: random.Random, escaped: bool) -> str:
    """A header name or value; with escapes, any text (the encoder escapes it)."""
    n = rng.choice((0, 1, 3, 8, 20))
    pool = "abcXYZ019-/._ \t" + (":\\\n\r\u00e9\u65e5\U0001f600" if escaped else "\u00e9")
    return "".join(rng.choice(pool) for _ in range(n))


#: Size of the large bodies a recipe can ask for: past the decoder's 64 KiB
#: large-body threshold (reached with the default limits only).
LARGE_BODY = 80 * 1024


def valid_frame(
    rng: random.Random, version: Version, command: str, *, large: bool = False
) -> bytes:
    """The bytes of a valid ``command`` frame of ``version`` (written by our encoder).

    Headers are random, typed or not; bodies (where the version allows one)
    are random, with or without a content-length; in 1.2, some heads use CRLF.
    A command the version does not have (NACK, STOMP in 1.0) is written by the
    1.1 encoder: the decoder must refuse it.
    """
    if command not in COMMANDS_BY_VERSION[version]:
        version = "1.1"
    escaped = version != "1.0" and command not in UNESCAPED_COMMANDS
    headers = []
    for _ in range(rng.choice((0, 1, 2, 3, 6))):
        name = rng.choice(NAMES) if rng.random() < 0.7 else _text(rng, escaped) or "n"
        if name == "content-length":
            continue
        headers.append((name, _text(rng, escaped)))
    body = b""
    if large:
        body = rng.randbytes(LARGE_BODY + rng.randrange(4 * LARGE_BODY))
    elif command in BODY_COMMANDS or (version == "1.0" and command == "SUBSCRIBE"):
        size = rng.choice((0, 1, 5, 16, 300))
        body = rng.choice((b"hello", b"a\x00b", b"\n\r\n", rng.randbytes(size)))
    content_length = b"\x00" in body or rng.random() < 0.7
    encoder = FrameEncoder(version)
    try:
        data = encoder.encode(Frame(command, tuple(headers), body), content_length=content_length)
    except LocalProtocolError:
        data = encoder.encode(Frame(command, (), body))
    if version == "1.2" and rng.random() < 0.3:
        head, _, rest = data.partition(b"\n\n")
        data = head.replace(b"\n", b"\r\n") + b"\r\n\r\n" + rest
    return data


def mutate(rng: random.Random, piece: bytes, count: int = 1) -> bytes:
    """``piece`` with ``count`` byte-level mutations: flips, inserts, deletes, splices."""
    data = bytearray(piece)
    for _ in range(count):
        pos = rng.randrange(len(data) + 1)
        op = rng.randrange(6)
        if op == 0 and pos < len(data):
            data[pos] = rng.randrange(256)
        elif op == 1:
            data.insert(pos, rng.choice(INTERESTING))
        elif op == 2 and pos < len(data):
            del data[pos : pos + rng.choice((1, 1, 2, 8))]
        elif op == 3:
            data[pos:pos] = rng.choice(SNIPPETS)
        elif op == 4 and data:
            # Duplicate a slice (repeated headers, lines, digits).
            a = rng.randrange(len(data))
            data[pos:pos] = data[a : a + rng.choice((1, 4, 16, 64))]
        elif op == 5 and pos < len(data):
            data[pos] = rng.choice(INTERESTING)
    return bytes(data)


#: Largest stream a recipe builds: over a megabyte, within the default head and
#: frame limits' reach, and still a fraction of a second per execution.
MAX_STREAM = 1280 * 1024
#: Most copies one repeat step makes (100,000 heart-beats, or trailing frames).
MAX_COPIES = 100_000


def repeats(arg: int) -> int:
    """How many copies a repeat step with argument ``arg`` (0-31) makes.

    Mostly a few (fast executions), 4096 for 30 and as many as fit in
    :data:`MAX_STREAM` for 31: the long streams, megabytes of frames.
    """
    if arg == 31:
        return MAX_COPIES
    if arg == 30:
        return 4096
    return 2 ** (arg % 8)


def recipe_stream(recipe: bytes, version: Version, seed: bytes) -> bytes:
    """The stream a recipe describes (see the module docstring).

    Step bytes: ``b % 8`` picks the action, ``b >> 3`` its argument.

    * 0-2: a valid frame (command ``ALL_COMMANDS[arg % 15]``; the version's
      grammar may not have it - then the decoder must refuse it);
    * 3: ``arg % 4 + 1`` heart-beat EOLs (LF, or CRLF);
    * 4: mutate the previous piece (``arg % 4 + 1`` mutations);
    * 5: repeat the previous piece (see :func:`repeats`);
    * 6: a snippet;
    * 7: a valid frame of a random command of the version; with an argument
      of 28 or more, a MESSAGE with a body of 80 to 400 KiB.
    """
    rng = random.Random(seed)
    pieces: list[bytes] = []
    size = 0
    commands = sorted(COMMANDS_BY_VERSION[version])
    for step in recipe:
        action, arg = step & 7, step >> 3
        if action <= 2:
            piece = valid_frame(rng, version, ALL_COMMANDS[arg % len(ALL_COMMANDS)])
        elif action == 3:
            piece = (b"\r\n" if rng.random() < 0.3 else b"\n") * (arg % 4 + 1)
        elif action == 4:
            if not pieces:
                continue
            last = pieces.pop()
            size -= len(last)
            piece = mutate(rng, last, arg % 4 + 1)
        elif action == 5:
            if not pieces:
                continue
            last = pieces[-1]
            times = min(repeats(arg), max(0, MAX_STREAM - size) // max(len(last), 1))
            piece = last * times
        elif action == 6:
            piece = SNIPPETS[arg % len(SNIPPETS)]
        elif arg >= 28:
            piece = valid_frame(rng, version, "MESSAGE", large=True)
        else:
            piece = valid_frame(rng, version, rng.choice(commands))
        if size + len(piece) > MAX_STREAM:
            break
        pieces.append(piece)
        size += len(piece)
    return b"".join(pieces)


def random_cuts(rng: random.Random, data: bytes) -> Iterator[bytes]:
    """``data`` in random chunks: runs of single bytes, small and large pieces."""
    pos = 0
    n = len(data)
    while pos < n:
        kind = rng.random()
        if kind < 0.3:
            size = 1
        elif kind < 0.8:
            size = rng.randint(1, 64)
        else:
            size = rng.randint(1, 1 << 16)
        yield data[pos : pos + size]
        pos += size
