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
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent.parent), str(HERE.parent)]

from fuzzing.properties import Case  # noqa: E402

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
    for target in ("decoder", "server", "client"):
        print(target, len(list((CORPUS / target).iterdir())), "seeds")


_SERVER = {b"CONNECTED", b"MESSAGE", b"RECEIPT", b"ERROR"}

if __name__ == "__main__":
    main()
