"""One outcome however the bytes are split (a socket may cut anywhere): a property over many
streams.

The streams are the structure-aware fuzz streams (``tests/fuzzing/streams.py``,
``sessions.py``): valid frames of every command and version, mutated, repeated,
with snippets spliced in.  Each is fed whole, one byte at a time and at random
split points; every feeding must return the same frames (or events) and end
with the same error kind - to the decoder, a server connection and a client
connection alike.
"""

from __future__ import annotations

import itertools
import random

from fuzzing.properties import Case, Outcome, _consume, _decode, _serve
from fuzzing.sessions import client_script, server_script
from fuzzing.streams import random_cuts, recipe_stream
from hypothesis import given, settings
from hypothesis import strategies as st

from stomp_proto import Limits
from stomp_proto._decoder import _LARGE_BODY

configs = st.integers(0, 255)
# Steps of the recipe; the repeat step's long runs (arguments 30, 31) are left out here,
# so that byte-by-byte feeding stays quick: the fuzz harnesses cover megabyte streams.
steps = st.integers(0, 255).filter(lambda b: not (b & 7 == 5 and b >> 3 >= 30))
recipes = st.lists(steps, max_size=24).map(bytes)


def feedings(stream: bytes, seed: int) -> list[list[bytes]]:
    rng = random.Random(seed)
    return [
        [stream],
        [stream[i : i + 1] for i in range(len(stream))],
        list(random_cuts(rng, stream)),
        [stream[i : i + 7] for i in range(0, len(stream), 7)],
    ]


def assert_all_equal(outcomes: list[Outcome]) -> None:
    first = outcomes[0]
    for other in outcomes[1:]:
        assert other.kind == first.kind, (first.kind, other.kind)
        assert other == first


@given(config=configs, recipe=recipes, seed=st.integers(0, 2**16))
def test_decoder_gives_one_outcome_however_split(config: int, recipe: bytes, seed: int) -> None:
    fuzz_input = bytes([config, 0]) + recipe
    case = Case.from_bytes(fuzz_input)
    stream = recipe_stream(recipe, case.version, fuzz_input)[:20000]
    assert_all_equal(
        [
            _decode(chunks, case.version, case.strict, case.limits)
            for chunks in feedings(stream, seed)
        ]
    )


@given(config=configs, recipe=recipes, seed=st.integers(0, 2**16))
def test_server_connection_gives_one_outcome_however_split(
    config: int, recipe: bytes, seed: int
) -> None:
    fuzz_input = bytes([config, 0]) + recipe
    case = Case.from_bytes(fuzz_input)
    stream = client_script(recipe, case.version, fuzz_input)[:20000]
    assert_all_equal([_serve(chunks, case) for chunks in feedings(stream, seed)])


@given(config=configs, recipe=recipes, seed=st.integers(0, 2**16))
def test_client_connection_gives_one_outcome_however_split(
    config: int, recipe: bytes, seed: int
) -> None:
    fuzz_input = bytes([config, 0]) + recipe
    case = Case.from_bytes(fuzz_input)
    stream = server_script(recipe, case.version, fuzz_input)[:20000]
    assert_all_equal([_consume(chunks, case) for chunks in feedings(stream, seed)])


# Large bodies (a content-length of _LARGE_BODY bytes or more) leave the decoder's
# buffer while they arrive, at a point that depends on the split: cut anywhere, the
# frames and the error are the same, and so they are fed whole.
LARGE = _LARGE_BODY


@settings(max_examples=30, deadline=None)
@given(
    size=st.one_of(st.integers(LARGE - 2, LARGE + 2), st.integers(LARGE, 3 * LARGE)),
    strict=st.booleans(),
    after=st.sampled_from([b"\x00\n", b"\x00", b"X", b""]),
    cuts=st.lists(st.integers(0, 3 * LARGE + 100), max_size=6),
)
def test_large_bodies_give_one_outcome_however_split(
    size: int, strict: bool, after: bytes, cuts: list[int]
) -> None:
    body = (bytes(range(256)) * (size // 256 + 1))[:size]
    stream = (
        b"MESSAGE\ndestination:/q\ncontent-length:%d\n\n" % size
        + body
        + after
        + b"SEND\ncontent-length:1\n\nx\x00"
    )
    places = [0, *sorted({cut for cut in cuts if cut < len(stream)}), len(stream)]
    feedings = [
        [stream],
        [stream[i:j] for i, j in itertools.pairwise(places) if i < j],
        [stream[i : i + 1460] for i in range(0, len(stream), 1460)],
        [stream[i : i + LARGE] for i in range(0, len(stream), LARGE)],
    ]
    outcomes = [_decode(chunks, "1.2", strict, Limits()) for chunks in feedings]
    assert_all_equal(outcomes)
    if after.startswith(b"\x00"):
        assert [len(getattr(event, "body", b"")) for event in outcomes[0].events][:1] == [size]
