"""Encoder and decoder agree: encode -> concatenate with heart-beats -> split anywhere -> decode
gives back exactly the frames and heart-beats, in order, for every version."""

from __future__ import annotations

import pytest
from helpers import cut, run, without_content_length
from hypothesis import given
from hypothesis import strategies as st
from strategies import VERSIONS, Item, frames, streams, unrepresentable

from stomp_proto import Frame, FrameEncoder, HeartBeat, LocalProtocolError, Version


def normal(event: object) -> object:
    """A decoded event without its content-length header (whose position the API leaves
    open), plus the content-length values found."""
    if isinstance(event, Frame):
        return (event.command, without_content_length(event), event.body,
                event.get_all("content-length"))  # fmt: skip
    return event


def expected_of(item: Item) -> object:
    frame = item.frame
    if isinstance(frame, HeartBeat):
        return frame
    lengths = [str(len(frame.body))] if frame.body and item.content_length else []
    return (frame.command, frame.headers, frame.body, lengths)


def encode_stream(version: Version, items: list[Item]) -> tuple[bytes, list[object]]:
    encoder = FrameEncoder(version)
    wire = bytearray()
    expected: list[object] = []
    for item in items:
        if isinstance(item.frame, HeartBeat):
            out = encoder.encode(item.frame)
        else:
            out = encoder.encode(item.frame, content_length=item.content_length)
        wire += out
        expected.append(expected_of(item))
        if isinstance(item.frame, Frame):
            # EOLs the encoder may put after the NUL are heart-beats to the decoder.
            trailer = out[out.rindex(b"\x00") + 1 :]
            expected.extend([HeartBeat()] * trailer.count(b"\n"))
    return bytes(wire), expected


@pytest.mark.parametrize("version", VERSIONS)
@given(data=st.data())
def test_roundtrip_stream(version: Version, data: st.DataObject) -> None:
    items = data.draw(streams(version), label="items")
    wire, expected = encode_stream(version, items)
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=20), label="cuts")
    out = run(cut(wire, cuts), version)
    assert out.error is None, (out.error, wire)
    assert [normal(e) for e in out.events] == expected


@pytest.mark.parametrize("version", VERSIONS)
@given(item=st.data())
def test_roundtrip_single_frame_bytewise(version: Version, item: st.DataObject) -> None:
    it = item.draw(frames(version))
    wire, expected = encode_stream(version, [it])
    out = run([wire[i : i + 1] for i in range(len(wire))], version)
    assert out.error is None, (out.error, wire)
    assert [normal(e) for e in out.events] == expected


@pytest.mark.parametrize("version", VERSIONS)
@given(data=st.data())
def test_reencoding_a_decoded_frame_is_identical(version: Version, data: st.DataObject) -> None:
    """encode(decode(encode(f))) == encode(f): the decoder loses nothing the encoder wrote."""
    item = data.draw(frames(version))
    assert isinstance(item.frame, Frame)
    encoder = FrameEncoder(version)
    wire = encoder.encode(item.frame, content_length=item.content_length)
    out = run([wire], version)
    assert out.error is None, out.error
    decoded = [e for e in out.events if isinstance(e, Frame)]
    assert len(decoded) == 1
    assert encoder.encode(decoded[0], content_length=item.content_length) == wire


@given(case=unrepresentable())
def test_unrepresentable_frames_are_refused(case: tuple[Version, Frame, bool]) -> None:
    version, frame, content_length = case
    with pytest.raises(LocalProtocolError):
        FrameEncoder(version).encode(frame, content_length=content_length)
