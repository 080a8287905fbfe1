"""The fuzz properties (tests/fuzzing/properties.py) run by hypothesis, and every committed
fuzz input replayed: the seed corpus, and each crash a fuzzer found (a regression test).

scripts/fuzz.sh runs the same properties under atheris when it is installed; without it,
this module is what runs them, with more examples (``HYPOTHESIS_PROFILE=fuzz``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzzing.properties import TARGETS, Case
from hypothesis import given
from hypothesis import strategies as st
from strategies import SNIPPETS, fuzz_streams

FUZZING = Path(__file__).resolve().parent / "fuzzing"
CORPUS = FUZZING / "corpus"
REGRESSIONS = FUZZING / "regressions"


def _inputs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/*") if p.is_file() and p.parent.name in TARGETS)


def test_every_target_has_a_seed_corpus() -> None:
    for target in TARGETS:
        seeds = list((CORPUS / target).iterdir())
        assert len(seeds) >= 20, f"{target}: only {len(seeds)} seeds"


@pytest.mark.parametrize("path", _inputs(REGRESSIONS), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_regression(path: Path) -> None:
    """Each input a fuzzer once crashed on: fixed, and kept fixed."""
    TARGETS[path.parent.name](path.read_bytes())


def test_seed_corpus() -> None:
    paths = _inputs(CORPUS)
    assert paths
    for path in paths:
        TARGETS[path.parent.name](path.read_bytes())


# The hypothesis side: the same input format, built from a config byte, a chunking
# seed and a stream (noise, spliced valid frames, or a mutated seed).
configs = st.integers(0, 255)
chunk_seeds = st.one_of(st.just(0), st.integers(1, 255))


@st.composite
def mutated_seeds(draw: st.DrawFn, target: str) -> bytes:
    seeds = sorted((CORPUS / target).iterdir())
    raw = bytearray(draw(st.sampled_from(seeds)).read_bytes()[2:])
    for _ in range(draw(st.integers(0, 6))):
        pos = draw(st.integers(0, len(raw)))
        op = draw(st.sampled_from(["flip", "insert", "delete", "splice"]))
        if op == "insert":
            raw.insert(pos, draw(st.sampled_from([0, 10, 13, 58, 92, 32, 0xFF, 0xC3, 65])))
        elif op == "splice":
            raw[pos:pos] = draw(st.sampled_from(SNIPPETS))
        elif pos < len(raw):
            if op == "flip":
                raw[pos] = draw(st.integers(0, 255))
            else:
                del raw[pos]
    return bytes(raw)


def streams_for(target: str) -> st.SearchStrategy[bytes]:
    return st.one_of(st.binary(max_size=300), fuzz_streams, mutated_seeds(target))


@pytest.mark.parametrize("target", sorted(TARGETS))
@given(data=st.data())
def test_property(target: str, data: st.DataObject) -> None:
    stream = data.draw(streams_for(target), label="stream")
    fuzz_input = bytes([data.draw(configs), data.draw(chunk_seeds)]) + stream
    TARGETS[target](fuzz_input)


def test_case_format_round_trips() -> None:
    for version in ("1.0", "1.1", "1.2"):
        for strict in (True, False):
            encoded = Case.encode(b"xy", version=version, strict=strict, ack_mode=2, chunk_seed=9)
            case = Case.from_bytes(encoded)
            assert (case.version, case.strict, case.ack_mode) == (version, strict, 2)
            assert case.stream == b"xy" and case.chunk_seed == 9
            assert b"".join(case.chunks()) == b"xy"


# The crashes the fuzzers found, as plain tests too (their inputs are in regressions/).


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize("head", [b"CONNECT\n\x00:\n\n", b"SEND\nde\x00st:/q\n\n", b"\x00\n\n"])
def test_nul_in_a_frame_head_is_refused(strict: bool, head: bytes) -> None:
    """A NUL in a head would split the frame for peers that frame on NUL: refused."""
    from stomp_proto import ErrorKind, FrameDecoder, RemoteProtocolError

    decoder = FrameDecoder("1.2", strict=strict)
    decoder.receive_data(head + b"\x00")
    with pytest.raises(RemoteProtocolError) as error:
        decoder.next_frame()
    assert error.value.kind in (ErrorKind.BAD_HEADER, ErrorKind.BAD_COMMAND)


def test_error_hint_for_an_odd_lenient_command_can_be_sent() -> None:
    from stomp_proto import RemoteProtocolError, ServerConnection

    conn = ServerConnection(strict=False)
    conn.receive_data(b"x\x01y\n\n\x00")
    with pytest.raises(RemoteProtocolError) as error:
        conn.next_event()
    hint = error.value.event_hint
    # A lenient server reads the command as sent (no upper-casing).
    assert hint is not None and "'x\\x01y'" in hint.message
    assert conn.send(hint).startswith(b"ERROR\n")


def test_the_deep_harnesses_bound_the_stack() -> None:
    """The stack-depth invariant can fail: recursion past the allowance is an error."""
    from fuzzing.properties import STACK_ALLOWANCE, _BoundedStack

    def recurse(n: int) -> int:
        return 0 if n == 0 else 1 + recurse(n - 1)

    with _BoundedStack():
        assert recurse(STACK_ALLOWANCE // 2) == STACK_ALLOWANCE // 2
        with pytest.raises(RecursionError):
            recurse(STACK_ALLOWANCE * 2)


def test_the_deep_harnesses_reach_a_megabyte() -> None:
    """The committed seeds of the structure-aware targets include streams over 1 MB."""
    from fuzzing.sessions import client_script, server_script
    from fuzzing.streams import recipe_stream

    builders = {"stream": recipe_stream, "server_session": client_script,
                "client_session": server_script}  # fmt: skip
    for target, build in builders.items():
        sizes = []
        for path in (CORPUS / target).iterdir():
            data = path.read_bytes()
            sizes.append(len(build(data[2:], Case.from_bytes(data).version, data)))
        assert max(sizes) > 1_000_000, (target, max(sizes))


def test_the_differential_target_fails_where_the_builds_differ(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It compares two packages: the pure twin beside the one installed, and one
    changed (its encoder) makes the seeds fail."""
    from fuzzing.differential import pure_twin

    import stomp_proto

    twin = pure_twin()
    assert twin.BUILD == "pure" and twin.FrameEncoder is not stomp_proto.FrameEncoder
    seeds = [path.read_bytes() for path in sorted((CORPUS / "differential").iterdir())]
    for seed in seeds:
        TARGETS["differential"](seed)
    encode = stomp_proto.FrameEncoder.encode
    monkeypatch.setattr(
        stomp_proto.FrameEncoder, "encode", lambda *args, **kw: encode(*args, **kw) + b"\n"
    )
    with pytest.raises(AssertionError, match="builds differ"):
        for seed in seeds:
            TARGETS["differential"](seed)
