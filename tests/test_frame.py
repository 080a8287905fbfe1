"""The frame model (Frame, HeartBeat), Limits defaults and the error classes."""

from __future__ import annotations

import dataclasses

import pytest

import stomp_proto
from stomp_proto import (
    ErrorKind,
    Frame,
    HeartBeat,
    Limits,
    LocalProtocolError,
    ProtocolError,
    RemoteProtocolError,
)

REPEATED = Frame("MESSAGE", (("foo", "World"), ("bar", "x"), ("foo", "Hello")), b"")


def test_public_names_are_exported() -> None:
    for name in (
        "Frame", "HeartBeat", "Limits", "ErrorKind", "ProtocolError", "LocalProtocolError",
        "RemoteProtocolError", "FrameDecoder", "FrameEncoder", "Version",
    ):  # fmt: skip
        assert name in stomp_proto.__all__, name
        assert hasattr(stomp_proto, name), name


def test_frame_defaults_to_no_headers_and_empty_body() -> None:
    frame = Frame("DISCONNECT")
    assert frame.command == "DISCONNECT"
    assert frame.headers == ()
    assert frame.body == b""


def test_get_returns_first_of_repeated_headers() -> None:
    """1.2 §Repeated Header Entries: 'The value of the foo header is just World'."""
    assert REPEATED.get("foo") == "World"


def test_get_missing_header_returns_none() -> None:
    assert REPEATED.get("nope") is None


def test_get_missing_header_returns_given_default() -> None:
    assert REPEATED.get("nope", "dflt") == "dflt"


def test_get_present_header_ignores_default() -> None:
    assert REPEATED.get("bar", "dflt") == "x"


def test_get_empty_value_is_not_replaced_by_default() -> None:
    frame = Frame("SEND", (("empty", ""),))
    assert frame.get("empty", "dflt") == ""


def test_get_is_case_sensitive() -> None:
    """1.2 §STOMP Frames: 'All commands and header names ... are case sensitive'."""
    assert REPEATED.get("FOO") is None


def test_get_all_returns_every_value_in_wire_order() -> None:
    assert REPEATED.get_all("foo") == ["World", "Hello"]


def test_get_all_missing_header_is_empty_list() -> None:
    assert REPEATED.get_all("nope") == []


def test_header_map_first_entry_wins() -> None:
    """1.2 §Repeated Header Entries: only the first entry is the header's value."""
    assert REPEATED.header_map() == {"foo": "World", "bar": "x"}


def test_header_map_of_no_headers_is_empty() -> None:
    assert Frame("DISCONNECT").header_map() == {}


def test_make_from_dict_keeps_insertion_order() -> None:
    frame = Frame.make("SEND", {"destination": "/queue/a", "receipt": "r1"}, b"hi")
    assert frame == Frame("SEND", (("destination", "/queue/a"), ("receipt", "r1")), b"hi")


def test_make_from_pairs_keeps_repeats_and_order() -> None:
    frame = Frame.make("MESSAGE", [("foo", "World"), ("foo", "Hello")])
    assert frame.headers == (("foo", "World"), ("foo", "Hello"))


def test_make_from_generator_of_pairs() -> None:
    frame = Frame.make("SEND", ((f"h{i}", str(i)) for i in range(3)))
    assert frame.headers == (("h0", "0"), ("h1", "1"), ("h2", "2"))


def test_make_headers_are_a_tuple_of_tuples() -> None:
    frame = Frame.make("SEND", [("a", "1")])
    assert frame.headers == (("a", "1"),)
    assert isinstance(frame.headers, tuple)
    assert all(isinstance(h, tuple) for h in frame.headers)


def test_make_defaults() -> None:
    assert Frame.make("DISCONNECT") == Frame("DISCONNECT", (), b"")


def test_make_equals_direct_construction() -> None:
    assert Frame.make("ERROR", {"message": "m"}, b"x") == Frame("ERROR", (("message", "m"),), b"x")


def test_frames_with_different_header_order_differ() -> None:
    """Headers keep wire order, so order is part of a frame's identity."""
    a = Frame.make("SEND", [("a", "1"), ("b", "2")])
    b = Frame.make("SEND", [("b", "2"), ("a", "1")])
    assert a != b


def test_heartbeats_are_equal() -> None:
    assert HeartBeat() == HeartBeat()


def test_heartbeats_hash_equal() -> None:
    assert hash(HeartBeat()) == hash(HeartBeat())
    assert len({HeartBeat(), HeartBeat()}) == 1


def test_heartbeat_is_not_a_frame() -> None:
    assert HeartBeat() != Frame("SEND")
    assert not isinstance(HeartBeat(), Frame)


def test_heartbeat_is_frozen() -> None:
    with pytest.raises((dataclasses.FrozenInstanceError, AttributeError, TypeError)):
        HeartBeat().x = 1  # type: ignore[attr-defined]


def test_limits_defaults() -> None:
    limits = Limits()
    assert limits.max_line_length == 65536
    assert limits.max_headers == 1000
    assert limits.max_head_size == 1048576
    assert limits.max_body_size == 67108864
    assert limits.max_frame_size == 68157440


def test_limits_is_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Limits().max_headers = 5  # type: ignore[misc]


def test_limits_accept_custom_values() -> None:
    limits = Limits(max_line_length=10, max_headers=2)
    assert (limits.max_line_length, limits.max_headers) == (10, 2)
    assert limits.max_body_size == Limits().max_body_size


def test_error_kinds_exist() -> None:
    names = {k.name for k in ErrorKind}
    assert {
        "BAD_COMMAND", "BAD_HEADER", "BAD_ESCAPE", "BAD_ENCODING", "BAD_CONTENT_LENGTH",
        "MISSING_NUL", "UNEXPECTED_BODY", "TOO_LARGE", "TRUNCATED", "BAD_STATE",
        "MISSING_HEADER", "BAD_VERSION", "CLOSED",
    } <= names  # fmt: skip


def test_error_hierarchy() -> None:
    assert issubclass(ProtocolError, Exception)
    assert issubclass(LocalProtocolError, ProtocolError)
    assert issubclass(RemoteProtocolError, ProtocolError)
    assert not issubclass(LocalProtocolError, RemoteProtocolError)
    assert not issubclass(RemoteProtocolError, LocalProtocolError)
