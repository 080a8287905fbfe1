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

import random

from fuzzing.properties import Case, Outcome, _consume, _decode, _serve
from fuzzing.sessions import client_script, server_script
from fuzzing.streams import random_cuts, recipe_stream
from hypothesis import given
from hypothesis import strategies as st

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
