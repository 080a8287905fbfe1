"""Round-trip a few STOMP frames through the stomp_proto codec.

For every protocol version this program encodes some frames with
:class:`stomp_proto.FrameEncoder`, glues the bytes into one stream, and feeds
that stream to a :class:`stomp_proto.FrameDecoder` in deliberately awkward
chunk sizes, printing every frame or heart-beat that comes out.  It finishes
by feeding the decoder some malformed input to show how a peer's mistake is
reported.

Run it with ``bash scripts/demo.sh`` (or ``python examples/codec_roundtrip.py``
inside the project's virtual environment).
"""

from __future__ import annotations

from collections.abc import Iterator

from stomp_proto import (
    Frame,
    FrameDecoder,
    FrameEncoder,
    HeartBeat,
    RemoteProtocolError,
    Version,
)

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")

# Chunk sizes cycled through while feeding the decoder; chosen so that chunk
# boundaries fall in the middle of commands, headers, escapes and bodies.
CHUNK_SIZES = (1, 2, 3, 5, 8, 13)


def sample_frames(version: Version) -> list[Frame | HeartBeat]:
    """Frames to send through the codec for one protocol version."""
    # STOMP 1.0 has no header escaping, so a value containing ':' or a
    # newline cannot be written there; keep the 1.0 value representable.
    tricky_value = "plain value" if version == "1.0" else "a:b\\c\nnext line"
    return [
        HeartBeat(),
        Frame.make(
            "SEND",
            {"destination": "/queue/demo", "x-note": tricky_value},
            body="héllo wörld".encode(),
        ),
        Frame.make(
            "MESSAGE",
            [
                ("destination", "/queue/demo"),
                ("message-id", "42"),
                ("subscription", "0"),
                ("content-type", "application/octet-stream"),
            ],
            body=b"\x00binary\x00body\xff",
        ),
        HeartBeat(),
        Frame.make("RECEIPT", {"receipt-id": "r-1"}),
    ]


def chunks(data: bytes) -> Iterator[bytes]:
    """Split *data* into pieces of varying, awkward sizes."""
    pos = 0
    index = 0
    while pos < len(data):
        size = CHUNK_SIZES[index % len(CHUNK_SIZES)]
        yield data[pos : pos + size]
        pos += size
        index += 1


def describe(item: Frame | HeartBeat) -> str:
    """A one-line, human readable summary of a decoded item."""
    if isinstance(item, HeartBeat):
        return "heart-beat"
    headers = ", ".join(f"{name}={value!r}" for name, value in item.headers)
    return f"{item.command} [{headers}] body={item.body!r}"


def roundtrip(version: Version) -> None:
    encoder = FrameEncoder(version)
    decoder = FrameDecoder(version)
    frames = sample_frames(version)

    wire = b"".join(encoder.encode(frame) for frame in frames)
    print(f"--- STOMP {version}: {len(frames)} items, {len(wire)} bytes on the wire")
    # The SEND frame shows the version's header escaping (none in 1.0).
    print(f"    SEND encodes to {encoder.encode(frames[1])!r}")

    received: list[Frame | HeartBeat] = []
    for piece in chunks(wire):
        decoder.receive_data(piece)
        received.extend(decoder)  # drains whatever is complete so far
    decoder.receive_data(None)  # end of stream
    received.extend(decoder)

    for item in received:
        print("   ", describe(item))

    # The encoder adds content-length to frames with a body, so compare
    # commands, the headers the caller gave, and bodies.
    assert len(received) == len(frames), "every item should come back"
    for sent, got in zip(frames, received, strict=True):
        if isinstance(sent, HeartBeat):
            assert isinstance(got, HeartBeat)
            continue
        assert isinstance(got, Frame)
        assert got.command == sent.command
        assert got.body == sent.body
        for name, value in sent.headers:
            assert got.get(name) == value, (name, got.get(name), value)
    print("    round trip OK")


def show_remote_error() -> None:
    print("--- malformed input")
    decoder = FrameDecoder("1.2")
    # "\t" is not a STOMP 1.2 header escape, so a strict decoder rejects it.
    decoder.receive_data(b"SEND\ndestination:/queue/a\\tb\n\nbody\x00")
    try:
        decoder.next_frame()
    except RemoteProtocolError as err:
        print(f"    RemoteProtocolError kind={err.kind.name}: {err}")
    else:
        raise AssertionError("the decoder accepted an undefined escape")


def main() -> None:
    for version in VERSIONS:
        roundtrip(version)
    show_remote_error()


if __name__ == "__main__":
    main()
