"""Build the committed seed corpus in tests/fuzzing/corpus/<target>/.

    python tests/fuzzing/make_corpus.py [SPEC_DIR]

Seeds, each in the fuzz input format of ``properties.Case``:

* the example frames of the STOMP 1.0, 1.1 and 1.2 specifications (indented
  blocks ending in ``^@``, read from ``SPEC_DIR/stomp-specification-<v>.md``;
  default ``/work/shared/specs``, skipped when absent);
* the broker sessions the interop tests captured (tests/vectors/captured): the
  client side feeds the server target, the server side (after its CONNECTED)
  the client target, and both the decoder target;
* each under its own version: strict and whole, and lenient in random chunks.

The file names are stable (a hash of the content), so re-running the script
changes nothing unless a source changed.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from fuzzing.properties import TARGETS, Case  # noqa: E402

CAPTURED = HERE.parent / "vectors" / "captured"
CORPUS = HERE / "corpus"
SPEC_VERSIONS = ("1.0", "1.1", "1.2")
# An indented example block (4 spaces) whose last line ends in ^@.
_EXAMPLE = re.compile(r"((?:^    [^\n]*\n|^\n)*?^    [^\n]*\^@)", re.MULTILINE)


def spec_examples(spec_dir: Path) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {}
    for version in SPEC_VERSIONS:
        path = spec_dir / f"stomp-specification-{version}.md"
        if not path.exists():
            continue
        frames = []
        for block in _EXAMPLE.findall(path.read_text(encoding="utf-8")):
            lines = [line[4:] for line in block.strip("\n").split("\n")]
            text = "\n".join(lines).replace("^@", "\0")
            if text.split("\n", 1)[0].isupper():
                frames.append(text.encode("utf-8"))
        found[version] = frames
    return found


def after_first_frame(stream: bytes) -> bytes:
    return stream[stream.index(b"\0") + 1 :] if b"\0" in stream else b""


def write(target: str, fuzz_input: bytes) -> None:
    name = hashlib.sha1(fuzz_input).hexdigest()[:16]
    (CORPUS / target / name).write_bytes(fuzz_input)


def variants(stream: bytes, version: str, target: str, ack_modes: tuple[int, ...] = (0,)) -> None:
    # Strict and whole; lenient and in chunks of 1 to 8 bytes.
    for strict, chunk_seed in ((True, 0), (False, 7)):
        for ack_mode in ack_modes:
            write(
                target,
                Case.encode(
                    stream,
                    version=version,  # type: ignore[arg-type]
                    strict=strict,
                    ack_mode=ack_mode,
                    chunk_seed=chunk_seed,
                ),
            )


def main() -> None:
    spec_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/work/shared/specs")
    for target in ("decoder", "server", "client"):
        (CORPUS / target).mkdir(parents=True, exist_ok=True)
    for version, frames in spec_examples(spec_dir).items():
        for frame in frames:
            variants(frame, version, "decoder")
        variants(b"".join(frames), version, "decoder")
        client_frames = [f for f in frames if f.split(b"\n", 1)[0] not in _SERVER]
        server_frames = [f for f in frames if f.split(b"\n", 1)[0] in _SERVER - {b"CONNECTED"}]
        variants(b"".join(client_frames), version, "server")
        variants(b"".join(server_frames), version, "client", (0, 1))
    index = json.loads((CAPTURED / "index.json").read_text())
    for key, capture in sorted(index["captures"].items()):
        version = capture["version"]
        client = (CAPTURED / f"{key}.client.bin").read_bytes()
        server = (CAPTURED / f"{key}.server.bin").read_bytes()
        variants(client, version, "decoder")
        variants(server, version, "decoder")
        variants(client, version, "server")
        variants(after_first_frame(server), version, "client", (0, 1))
    deep_seeds()
    differential_seeds()
    unbounded_seeds()
    for target in TARGETS:
        print(target, len(list((CORPUS / target).iterdir())), "seeds")


def deep_seeds() -> None:
    """Recipes for the structure-aware targets (fuzzing.streams, fuzzing.sessions).

    Per version and mode: short random recipes, sessions that run every step
    kind in order, and long streams - a frame repeated to megabytes, then
    damaged - so that the first executions already go deep.
    """
    rng = random.Random(13)
    for target in ("stream", "server_session", "client_session"):
        (CORPUS / target).mkdir(parents=True, exist_ok=True)
        steps = 8 if target == "stream" else 16
        for version in SPEC_VERSIONS:
            for strict in (True, False):
                for _ in range(4):
                    recipe = bytes(rng.randrange(256) for _ in range(rng.randrange(4, 48)))
                    write(
                        target,
                        Case.encode(
                            recipe,
                            version=version,
                            strict=strict,  # type: ignore[arg-type]
                            chunk_seed=rng.randrange(1, 256),
                        ),
                    )
                # Every step kind once, in order, with a small argument.
                every = bytes(kind | (1 << (3 if steps == 8 else 4)) for kind in range(steps))
                write(target, Case.encode(every * 3, version=version, strict=strict, chunk_seed=5))  # type: ignore[arg-type]
                # A long stream: frames repeated to megabytes (the repeat step's largest
                # argument), then more frames, a mutation and data after it.
                if target == "stream":
                    long = bytes([0 | (3 << 3), 7, 5 | (31 << 3), 4 | (2 << 3), 7, 3])
                else:
                    long = (
                        bytes([1, 2, 11 | (15 << 4), 0, 10 | (1 << 4), 1])
                        if target == ("server_session")
                        else bytes([0, 7 | (15 << 4), 3, 4, 6 | (2 << 4), 0])
                    )
                if strict:  # one per version: each takes seconds under instrumentation
                    write(target, Case.encode(long, version=version, chunk_seed=9))  # type: ignore[arg-type]
                elif target == "stream":
                    # Default limits and large bodies (the decoder's large-body path),
                    # one of them damaged, then repeated.
                    big = bytes(
                        [7 | (30 << 3), 7 | (29 << 3), 4 | (3 << 3), 7 | (31 << 3), 5 | (3 << 3)]
                    )
                    write(
                        target,
                        Case.encode(
                            big,
                            version=version,
                            strict=True,  # type: ignore[arg-type]
                            default_limits=True,
                            chunk_seed=11,
                        ),
                    )


def differential_seeds() -> None:
    """Scripts for the differential target (fuzzing.differential): the decoder and
    server seeds under default limits, then client sessions and encoder runs from
    fixed random scripts."""
    (CORPUS / "differential").mkdir(parents=True, exist_ok=True)
    for scenario, target in ((0, "decoder"), (2, "server")):
        for path in sorted((CORPUS / target).iterdir())[::3]:
            case = path.read_bytes()
            if len(case) < 4096:
                # scenario, config, default limits (an odd byte), chunking seed, stream
                write("differential", bytes([scenario, case[0], 1, *case[1:2]]) + case[2:])
    rng = random.Random(36)
    for scenario in (1, 3, 4) * 10:
        write("differential", bytes([scenario]) + rng.randbytes(rng.randint(16, 400)))
    # Escaped headers, to the decoder (1.1, 1.2) and to a lenient server.
    escaped = b"SEND\ndestination:/a\\cb\nx\\\\y:z\\n\\r\n\nbody\x00"
    for scenario, config in ((0, 1), (0, 2), (2, 2), (2, 6)):
        connect = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00" if scenario == 2 else b""
        write("differential", bytes([scenario, config, 1, 0]) + connect + escaped)
    # A 1.2 client session: subscribe client-individual, receive a MESSAGE, take it
    # and ack or nack it plainly (the native settle step), then iterate on.
    for settle in (1, 0):
        session = [3, 2, 1, 0, 0, 1, 0, 0, 0, 4, 0, 0, 1, 0, 2, 104, 105, 6, 0, 7, 0, settle, 0, 0]
        write("differential", bytes([*session, 6, 3, 4, 3, 0, 2, 6, 1]))


def unbounded_seeds() -> None:
    """Scripts for the unbounded target (the differential one under limits up to and
    past 2**64): heads that the pure code reads and whose bodies come later - long
    content-lengths, blank lines before a lenient server's command - to the decoder
    and to a server, whole and in pieces, under each pick of limits."""
    (CORPUS / "unbounded").mkdir(parents=True, exist_ok=True)
    frames = [
        b"SEND\ndestination:/q\ncontent-length:0000000000000000005\n\nhello\x00",
        b"SEND\ndestination:/q\ncontent-length:18446744073709551615\n\nab",
        b"SEND\ndestination:/q\ncontent-length:999999999999999999\n\nabc\x00",
        b"  \nSEND\ndestination:/q\ncontent-length:5\n\nhello\x00",
        b"\r\n\t\nSEND\ndestination:/q\n\nno length\x00\n",
        b"SEND\ndestination:/q\n \t\nblank line of blanks\x00",
    ]
    connect = b"CONNECT\naccept-version:1.2\nhost:/\n\n\x00"
    # Five limit bytes (each picks one of differential.UNBOUNDED), then the chunking.
    picks = [bytes([5, 5, 5, 0, 0]), bytes([1, 2, 3, 1, 2]), bytes([0, 0, 0, 3, 4]),
             bytes([4, 6, 5, 7, 6]), bytes([3, 3, 3, 2, 1])]  # fmt: skip
    for n, frame in enumerate(frames):
        for limits in picks[n % 2 :: 2]:
            for chunking in (0, 3, 17):
                # the decoder (strict 1.2: config 2), then a lenient server (config 4)
                write("unbounded", bytes([0, 2, *limits, chunking]) + frame)
                write("unbounded", bytes([2, 4, *limits, chunking]) + connect + frame + frame)
    rng = random.Random(64)
    for scenario in (3, 4) * 3:
        write("unbounded", bytes([scenario]) + rng.randbytes(rng.randint(16, 300)))


_SERVER = {b"CONNECTED", b"MESSAGE", b"RECEIPT", b"ERROR"}

if __name__ == "__main__":
    main()
