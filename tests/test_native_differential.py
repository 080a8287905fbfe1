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

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from build_probe import Trace, consume, decode, serve
from fuzzing.properties import Case
from fuzzing.sessions import client_script, server_script
from fuzzing.streams import random_cuts, recipe_stream
from hypothesis import given
from hypothesis import strategies as st

import stomp_proto
from stomp_proto import _connection, _decoder, _encoder, _events

pytestmark = pytest.mark.skipif(
    stomp_proto.BUILD != "accelerated", reason="the native fast path is not loaded"
)

configs = st.integers(0, 255)
# The recipe steps of tests/test_split_independence.py: no long repeats, so that
# feeding byte by byte stays quick.
steps = st.integers(0, 255).filter(lambda b: not (b & 7 == 5 and b >> 3 >= 30))
recipes = st.lists(steps, max_size=24).map(bytes)


@contextmanager
def pure_core() -> Iterator[None]:
    """The pure build inside this process: every native hook switched off."""
    with pytest.MonkeyPatch.context() as patch:
        for module in (_decoder, _encoder, _events, _connection):
            patch.setattr(module, "_native", None)
        patch.setattr(_connection.ClientConnection, "_fast_receive", None)
        patch.setattr(_connection.ClientConnection, "_fast_send", None)
        patch.setattr(_connection.ClientConnection, "_fast_events", None)
        yield


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
        assert conn._fast_events is None
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
