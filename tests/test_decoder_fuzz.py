"""FrameDecoder on arbitrary input: it may only raise RemoteProtocolError, it behaves the same
whatever the chunking, and it never buffers much more than its limits allow."""

from __future__ import annotations

import contextlib

import pytest
from helpers import ALL_COMMANDS, BODY_COMMANDS, cut
from hypothesis import given
from hypothesis import strategies as st
from strategies import SNIPPETS, chunkings, fuzz_streams

from stomp_proto import (
    ErrorKind,
    Frame,
    FrameDecoder,
    HeartBeat,
    Limits,
    LocalProtocolError,
    RemoteProtocolError,
    Version,
)

MODES = [(v, s) for v in ("1.0", "1.1", "1.2") for s in (True, False)]
MODE_IDS = [f"{v}-{'strict' if s else 'lenient'}" for v, s in MODES]

SMALL = Limits(
    max_line_length=48, max_headers=6, max_head_size=160, max_body_size=96, max_frame_size=200
)
SLACK = 16
BOUND = min(SMALL.max_frame_size, SMALL.max_head_size + SMALL.max_body_size) + SLACK


def check_event(event: object, strict: bool, version: Version) -> None:
    assert isinstance(event, Frame | HeartBeat), event
    if isinstance(event, HeartBeat):
        return
    assert type(event.command) is str and event.command
    assert type(event.headers) is tuple
    for pair in event.headers:
        assert type(pair) is tuple and len(pair) == 2
        name, value = pair
        assert type(name) is str and name
        assert type(value) is str
    assert type(event.body) is bytes
    if strict:
        assert event.command in ALL_COMMANDS
        if version != "1.0" and event.command not in BODY_COMMANDS:
            assert event.body == b""
    else:
        assert event.command == event.command.upper()


def fuzz_run(
    data: bytes, cuts: list[int], version: Version, strict: bool, limits: Limits | None
) -> tuple[list[object], ErrorKind | None]:
    """Feed ``data`` cut at ``cuts``, then end the stream; anything but RemoteProtocolError
    escaping is a failure (pytest reports it with its traceback)."""
    decoder = FrameDecoder(version, strict=strict, limits=limits)
    events: list[object] = []
    bound = None if limits is None else BOUND
    try:
        for chunk in [*cut(data, cuts), None]:
            decoder.receive_data(chunk)
            while (event := decoder.next_frame()) is not None:
                check_event(event, strict, version)
                events.append(event)
            if bound is not None:
                assert decoder.buffered <= bound, (decoder.buffered, bound)
    except RemoteProtocolError as exc:
        # The failure sticks: next_frame re-raises, receive_data is refused.
        with pytest.raises(RemoteProtocolError) as again:
            decoder.next_frame()
        assert again.value.kind is exc.kind
        with pytest.raises(LocalProtocolError):
            decoder.receive_data(b"x")
        return events, exc.kind
    # Stream ended cleanly: nothing more comes out.
    assert decoder.next_frame() is None
    return events, None


@pytest.mark.parametrize(("version", "strict"), MODES, ids=MODE_IDS)
@given(data=st.data())
def test_arbitrary_bytes(version: Version, strict: bool, data: st.DataObject) -> None:
    raw = data.draw(st.binary(max_size=300), label="raw")
    cuts = data.draw(chunkings(raw), label="cuts")
    fuzz_run(raw, cuts, version, strict, SMALL)


@pytest.mark.parametrize(("version", "strict"), MODES, ids=MODE_IDS)
@given(data=st.data())
def test_frames_mixed_with_noise(version: Version, strict: bool, data: st.DataObject) -> None:
    raw = data.draw(fuzz_streams, label="raw")
    cuts = data.draw(chunkings(raw), label="cuts")
    fuzz_run(raw, cuts, version, strict, SMALL)


@pytest.mark.parametrize(("version", "strict"), MODES, ids=MODE_IDS)
@given(data=st.data())
def test_outcome_is_chunking_independent(
    version: Version, strict: bool, data: st.DataObject
) -> None:
    raw = data.draw(st.one_of(fuzz_streams, st.binary(max_size=200)), label="raw")
    cuts = data.draw(chunkings(raw), label="cuts")
    whole = fuzz_run(raw, [], version, strict, SMALL)
    split = fuzz_run(raw, cuts, version, strict, SMALL)
    assert split == whole


@pytest.mark.parametrize(("version", "strict"), MODES, ids=MODE_IDS)
@given(data=st.data())
def test_mutated_valid_stream(version: Version, strict: bool, data: st.DataObject) -> None:
    """Valid frames with a few bytes flipped, inserted or deleted."""
    raw = bytearray(b"".join(data.draw(st.lists(st.sampled_from(SNIPPETS[:5]), max_size=6))))
    for _ in range(data.draw(st.integers(0, 4))):
        op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
        pos = data.draw(st.integers(0, len(raw)))
        byte = data.draw(st.sampled_from([0, 10, 13, 58, 92, 32, 0xFF, 0xC3, 65]))
        if op == "insert":
            raw.insert(pos, byte)
        elif raw and pos < len(raw):
            if op == "flip":
                raw[pos] = byte
            else:
                del raw[pos]
    cuts = data.draw(chunkings(bytes(raw)))
    fuzz_run(bytes(raw), cuts, version, strict, SMALL)


@pytest.mark.parametrize(("version", "strict"), MODES, ids=MODE_IDS)
@given(data=st.data())
def test_default_limits_never_leak_other_exceptions(
    version: Version, strict: bool, data: st.DataObject
) -> None:
    raw = data.draw(fuzz_streams)
    fuzz_run(raw, data.draw(chunkings(raw)), version, strict, None)


@given(raw=st.binary(max_size=200), version=st.sampled_from(["1.0", "1.1", "1.2"]))
def test_version_switch_mid_stream_never_leaks_other_exceptions(raw: bytes, version: str) -> None:
    decoder = FrameDecoder("1.2", strict=True, limits=SMALL)
    with contextlib.suppress(RemoteProtocolError):
        decoder.receive_data(raw[: len(raw) // 2])
        list(decoder)
        decoder.version = version  # type: ignore[assignment]
        decoder.receive_data(raw[len(raw) // 2 :])
        list(decoder)
        decoder.receive_data(None)
        list(decoder)
