"""Each version's grammar, decoded exactly and the same however the bytes are split.

Every case is decoded whole, one byte at a time and in a few other chunkings
(``helpers.decode``/``run``), and must give the same frames and the same error kind.
"""

from __future__ import annotations

import pytest
from helpers import bytewise, run, sized, whole

from stomp_proto import (
    ClientConnection,
    Connect,
    Connected,
    ErrorKind,
    Frame,
    FrameDecoder,
    FrameEncoder,
    LocalProtocolError,
    RemoteProtocolError,
    ServerConnection,
    Subscribe,
)

K = ErrorKind


def outcomes(data: bytes, version: str, *, strict: bool = True) -> set[tuple[object, ...]]:
    """The (events, error kind) of every chunking tried; one element if they all agree."""
    found = set()
    for chunker in (whole, bytewise, lambda d: sized(d, 2), lambda d: sized(d, 3)):
        out = run(chunker(data), version, strict=strict)  # type: ignore[arg-type]
        found.add((tuple(out.events), out.kind))
    return found


def only_error(data: bytes, version: str, *, strict: bool = True) -> ErrorKind | None:
    (result,) = outcomes(data, version, strict=strict)
    return result[1]  # type: ignore[return-value]


# -- a CR inside the 1.2 command line ------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"SE\rND\ndestination:/q\n\n\x00",
        b"SE\rND\r\ndestination:/q\r\n\r\n\x00",
        b"SEND\r\r\ndestination:/q\n\n\x00",
        b"\rSEND\ndestination:/q\n\n\x00",
    ],
)
def test_cr_inside_the_12_command_line_is_a_bad_command_however_split(data: bytes) -> None:
    # 1.2 §Augmented BNF: EOL = [CR] LF, command = client-command | server-command.
    # "SE\rND" is no command; the same error whole (it used to be BAD_HEADER) and byte by byte.
    assert only_error(data, "1.2") is K.BAD_COMMAND


def test_cr_inside_a_12_header_line_is_a_bad_header_however_split() -> None:
    # 1.2 §Value Encoding: a CR in a header must be escaped as \r.
    assert only_error(b"SEND\ndesti\rnation:/q\n\n\x00", "1.2") is K.BAD_HEADER


# -- commands per version --------------------------------------------------------------------


@pytest.mark.parametrize("command", [b"NACK", b"STOMP"])
def test_strict_10_decoder_refuses_nack_and_stomp(command: bytes) -> None:
    # 1.0 §Augmented BNF: client-command lists neither NACK nor STOMP (both came in 1.1).
    data = command + b"\nmessage-id:1\n\n\x00"
    assert only_error(data, "1.0") is K.BAD_COMMAND


@pytest.mark.parametrize("version", ["1.1", "1.2"])
@pytest.mark.parametrize("command", ["NACK", "STOMP"])
def test_11_and_12_decoders_accept_nack_and_stomp(version: str, command: str) -> None:
    # 1.1/1.2 §Augmented BNF: client-command has "NACK" and "STOMP".
    ((events, kind),) = outcomes(command.encode() + b"\nid:1\n\n\x00", version)
    assert kind is None and events == (Frame(command, (("id", "1"),)),)


def test_lenient_10_decoder_accepts_nack_and_stomp() -> None:
    # Lenient mode is for old and sloppy peers: it takes any command.
    ((events, kind),) = outcomes(b"NACK\nid:1\n\n\x00STOMP\n\n\x00", "1.0", strict=False)
    assert kind is None and [e.command for e in events] == ["NACK", "STOMP"]  # type: ignore[attr-defined]


def test_10_still_accepts_connect() -> None:
    # 1.0's client-command list omits CONNECT too, but its §Connecting defines it.
    ((events, kind),) = outcomes(b"CONNECT\nlogin:u\n\n\x00", "1.0")
    assert kind is None and len(events) == 1


@pytest.mark.parametrize("command", ["NACK", "STOMP"])
def test_10_encoder_refuses_nack_and_stomp(command: str) -> None:
    with pytest.raises(LocalProtocolError) as error:
        FrameEncoder("1.0").encode(Frame(command, (("id", "1"),)))
    assert error.value.kind is K.BAD_COMMAND


def test_nack_on_a_10_session_is_refused_by_the_decoder() -> None:
    server = ServerConnection()
    server.receive_data(b"CONNECT\nlogin:u\n\n\x00")
    server.next_event()
    server.send(Connected())
    server.receive_data(b"NACK\nmessage-id:1\n\n\x00")
    with pytest.raises(RemoteProtocolError) as error:
        server.next_event()
    assert error.value.kind is K.BAD_COMMAND
    assert error.value.event_hint is not None


# -- line endings per version --------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_before_12_a_line_holding_just_cr_is_a_header_line_without_colon(version: str) -> None:
    # 1.0/1.1 §Augmented BNF: lines end with LF only, and header = name ":" value.
    # "\r\n" after the headers is therefore a header line "\r", not the blank line.
    data = b"SEND\ndestination:/q\n\r\n\nbody\x00"
    assert only_error(data, version) is K.BAD_HEADER


@pytest.mark.parametrize("version", ["1.0", "1.1"])
def test_before_12_a_cr_only_line_fails_without_waiting_for_a_blank_line(version: str) -> None:
    # The peer thinks its frame is over (it ended its head with CRLF CRLF and a NUL): the
    # decoder must say so now, not wait for an LF LF that will never come.
    data = b"SEND\ndestination:/q\r\n\r\n\x00"
    for chunks in (whole(data), bytewise(data)):
        out = run(chunks, version, eof=False)  # type: ignore[arg-type]
        assert out.kind is K.BAD_HEADER, out.summary()


@pytest.mark.parametrize("version", ["1.0", "1.1", "1.2"])
@pytest.mark.parametrize(
    ("head", "kind"),
    [
        (b"SEND\ndestination:/q\x00", K.BAD_HEADER),
        (b"SEND\ndestination:/q\n\x00", K.BAD_HEADER),
        (b"SE\x00", K.BAD_COMMAND),
        (b"\x00", K.BAD_COMMAND),
    ],
)
def test_a_nul_in_an_unfinished_head_fails_at_once(
    version: str, head: bytes, kind: ErrorKind
) -> None:
    # A NUL ends the frame for the peer; no blank line will follow.
    for chunks in (whole(head), bytewise(head)):
        out = run(chunks, version, eof=False)  # type: ignore[arg-type]
        assert out.kind is kind, out.summary()
        assert not out.events


def test_12_still_ends_lines_with_crlf() -> None:
    # 1.2 §Augmented BNF: EOL = [CR] LF.
    ((events, kind),) = outcomes(b"SEND\r\ndestination:/q\r\n\r\nhi\x00", "1.2")
    assert kind is None and events == (Frame("SEND", (("destination", "/q"),), b"hi"),)


# -- bodies per command and version ----------------------------------------------------------


def test_10_subscribe_may_have_a_body() -> None:
    # 1.0 §SUBSCRIBE: "The body of the SUBSCRIBE command is ignored" - so it may have one.
    frame = Frame("SUBSCRIBE", (("destination", "/q"),), b"ignored")
    wire = FrameEncoder("1.0").encode(frame)
    decoder = FrameDecoder("1.0")
    decoder.receive_data(wire)
    decoded = decoder.next_frame()
    assert isinstance(decoded, Frame) and decoded.body == b"ignored"


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_11_and_12_subscribe_has_no_body(version: str) -> None:
    # 1.1/1.2 §Body: only SEND, MESSAGE and ERROR frames may have a body.
    with pytest.raises(LocalProtocolError) as error:
        FrameEncoder(version).encode(Frame("SUBSCRIBE", (("id", "0"),), b"x"))  # type: ignore[arg-type]
    assert error.value.kind is K.UNEXPECTED_BODY
    assert only_error(b"SUBSCRIBE\nid:0\ndestination:/q\n\nx\x00", version) is K.UNEXPECTED_BODY


def _client(version: str) -> ClientConnection:
    client = ClientConnection()
    client.send(Connect(host="/", accept_versions=(version,)))  # type: ignore[arg-type]
    client.receive_data(b"CONNECTED\nversion:" + version.encode() + b"\n\n\x00")
    client.next_event()
    return client


def test_client_connection_sends_a_10_subscribe_body() -> None:
    client = _client("1.0")
    data = client.send(Subscribe("/q", body=b"ignored"))
    assert data.endswith(b"\n\nignored\x00")
    assert "/q" in client.subscriptions


def test_client_connection_refuses_a_11_subscribe_body_and_changes_nothing() -> None:
    client = _client("1.1")
    with pytest.raises(LocalProtocolError) as error:
        client.send(Subscribe("/q", id="0", body=b"x"))
    assert error.value.kind is K.UNEXPECTED_BODY
    assert client.subscriptions == {}


def test_server_connection_reads_a_10_subscribe_body() -> None:
    server = ServerConnection()
    server.receive_data(b"CONNECT\n\n\x00")
    server.next_event()
    server.send(Connected())
    server.receive_data(b"SUBSCRIBE\ndestination:/q\n\nignored\x00")
    event = server.next_event()
    assert isinstance(event, Subscribe) and event.body == b"ignored"
