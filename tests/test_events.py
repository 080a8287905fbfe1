"""Typed events: ``to_frame(version)`` and ``from_frame(frame, version)`` for every frame kind.

The headers each version requires come from the specs' frame sections (1.0 §Client Commands /
§Server Frames, 1.1 and 1.2 §Client Frames / §Server Frames, 1.2 §Connecting).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from connection_helpers import VERSIONS, connected_pair
from hypothesis import assume, given
from hypothesis import strategies as st

from stomp_proto import (
    Abort,
    Ack,
    Begin,
    ClientConnection,
    Commit,
    Connect,
    Connected,
    ConnectionClosed,
    Disconnect,
    Error,
    ErrorKind,
    Event,
    Frame,
    FrameDecoder,
    FrameEncoder,
    FrameEvent,
    HeartBeat,
    HeartBeatTimeout,
    LocalProtocolError,
    Message,
    Nack,
    Receipt,
    RemoteProtocolError,
    Send,
    Subscribe,
    Unsubscribe,
    Version,
)

#: Broker extension headers that must pass through untouched and in order.
EXTRA = (
    ("persistent", "true"),
    ("prefetch-count", "10"),
    ("selector", "color = 'red'"),
    ("x-custom", "b"),
    ("x-custom", "a"),  # repeated: kept, in order
    ("priority", "4"),
)


def fields_of(event: Event) -> dict[str, Any]:
    return {f.name: getattr(event, f.name) for f in dataclasses.fields(event)}  # type: ignore[arg-type]


def wire(frame: Frame, version: Version, *, content_length: bool = True) -> Frame:
    """``frame`` after a trip through the codec of ``version``."""
    data = FrameEncoder(version).encode(frame, content_length=content_length)
    decoder = FrameDecoder(version)
    decoder.receive_data(data)
    got = decoder.next_frame()
    assert isinstance(got, Frame)
    return got


def roundtrip(event: FrameEvent, version: Version) -> FrameEvent:
    cls = type(event)
    content_length = getattr(event, "content_length", True)
    return cls.from_frame(wire(event.to_frame(version), version, content_length=content_length),
                          version)  # fmt: skip


def local_missing(event: FrameEvent, version: Version) -> LocalProtocolError:
    with pytest.raises(LocalProtocolError) as info:
        event.to_frame(version)
    assert info.value.kind is ErrorKind.MISSING_HEADER, repr(info.value)
    return info.value


def remote_missing(cls: type[FrameEvent], frame: Frame, version: Version) -> None:
    with pytest.raises(RemoteProtocolError) as info:
        cls.from_frame(frame, version)
    assert info.value.kind is ErrorKind.MISSING_HEADER, repr(info.value)


# -- general shape -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        Connect(host="h"),
        Send("/q"),
        Subscribe("/q", id="1"),
        Unsubscribe(id="1"),
        Ack(id="1"),
        Nack(id="1"),
        Begin("t"),
        Commit("t"),
        Abort("t"),
        Disconnect(),
        Connected(),
        Message("/q", "m", subscription="1"),
        Receipt("r"),
        Error(),
        HeartBeat(),
        ConnectionClosed(),
        HeartBeatTimeout(1.0),
    ],
)
def test_events_are_frozen_slotted_values(event: Event) -> None:
    assert isinstance(event, Event)
    assert not hasattr(event, "__dict__")
    with pytest.raises((AttributeError, TypeError)):
        event.some_field = 1  # type: ignore[attr-defined]
    assert event == type(event)(**fields_of(event))
    hash(event)


def test_command_names() -> None:
    expected = {
        Connect: "CONNECT", Send: "SEND", Subscribe: "SUBSCRIBE", Unsubscribe: "UNSUBSCRIBE",
        Ack: "ACK", Nack: "NACK", Begin: "BEGIN", Commit: "COMMIT", Abort: "ABORT",
        Disconnect: "DISCONNECT", Connected: "CONNECTED", Message: "MESSAGE",
        Receipt: "RECEIPT", Error: "ERROR",
    }  # fmt: skip
    for cls, command in expected.items():
        assert cls.command == command
        assert issubclass(cls, FrameEvent)
    # Siblings on one private base, as Begin, Commit and Abort are.
    assert not issubclass(Nack, Ack) and not issubclass(Ack, Nack)
    assert Ack.__mro__[1] is Nack.__mro__[1]


# -- CONNECT (1.2 §CONNECT or STOMP Frame, §Protocol Negotiation) -------------------------------


def test_connect_default_offers_every_version_and_needs_host() -> None:
    frame = Connect(host="broker").to_frame("1.0")
    assert frame.command == "CONNECT"
    assert frame.get("accept-version") == "1.0,1.1,1.2"
    assert frame.get("host") == "broker"
    # Optional headers are left out when not set; no heart-beat header for (0, 0).
    assert [k for k, _ in frame.headers] == ["accept-version", "host"]


@pytest.mark.parametrize("versions", [("1.1",), ("1.2",), ("1.0", "1.1"), ("1.0", "1.1", "1.2")])
def test_connect_offering_11_or_later_requires_host(versions: tuple[Version, ...]) -> None:
    # 1.1 §CONNECT / 1.2 §CONNECT: clients MUST set accept-version and host.
    local_missing(Connect(accept_versions=versions), "1.0")


def test_connect_10_only_sends_no_accept_version_and_no_host_needed() -> None:
    # 1.0 servers know no accept-version; a missing one means 1.0 (1.2 §Protocol Negotiation).
    frame = Connect(accept_versions=("1.0",), login="u", passcode="p").to_frame("1.0")
    assert frame.get("accept-version") is None
    assert frame.get("host") is None
    assert frame.headers == (("login", "u"), ("passcode", "p"))


def test_connect_heartbeat_and_stomp_command() -> None:
    event = Connect(host="h", heartbeat=(100, 2500), frame_command="STOMP", headers=EXTRA)
    frame = event.to_frame("1.2")
    assert frame.command == "STOMP"
    assert frame.get("heart-beat") == "100,2500"
    assert frame.headers[-len(EXTRA) :] == EXTRA


@pytest.mark.parametrize("heartbeat", [(-1, 0), (0, -5), (1_000_000_000, 0)])
def test_connect_invalid_heartbeat_refused(heartbeat: tuple[int, int]) -> None:
    with pytest.raises(LocalProtocolError):
        Connect(host="h", heartbeat=heartbeat).to_frame("1.2")


def test_connect_from_frame_without_accept_version_means_10() -> None:
    # 1.2 §Protocol Negotiation: "If the accept-version header is missing, it means that the
    # client only supports version 1.0 of the protocol."
    event = Connect.from_frame(Frame("CONNECT", (("login", "u"),)), "1.0")
    assert event.accept_versions == ("1.0",)
    assert event.host is None
    assert event.login == "u"
    assert event.heartbeat == (0, 0)  # missing heart-beat = 0,0 (1.2 §Heart-beating)


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("1.0,1.1,2.0", ("1.0", "1.1")),  # the spec's own example: 2.0 is simply not ours
        ("1.2", ("1.2",)),
        ("1.2,1.1", ("1.1", "1.2")),
        ("2.0", ()),
    ],
)
def test_connect_from_frame_accept_version(header: str, expected: tuple[str, ...]) -> None:
    frame = Frame("CONNECT", (("accept-version", header), ("host", "h")))
    assert Connect.from_frame(frame, "1.0").accept_versions == expected


def test_connect_from_frame_stomp_command_and_extras() -> None:
    frame = Frame(
        "STOMP",
        (("accept-version", "1.2"), ("x-a", "1"), ("host", "h"), ("heart-beat", "5,7"), *EXTRA),
    )
    event = Connect.from_frame(frame, "1.0")
    assert event.frame_command == "STOMP"
    assert event.heartbeat == (5, 7)
    assert event.headers == (("x-a", "1"), *EXTRA)


@pytest.mark.parametrize("value", ["5", "a,b", "1,2,3", "-1,0", ",", "1234567890,0"])
def test_connect_from_frame_bad_heartbeat(value: str) -> None:
    frame = Frame("CONNECT", (("accept-version", "1.2"), ("host", "h"), ("heart-beat", value)))
    with pytest.raises(RemoteProtocolError):
        Connect.from_frame(frame, "1.0")


# -- CONNECTED (1.2 §CONNECTED Frame) ---------------------------------------------------------


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_connected_version_filled_from_argument(version: Version) -> None:
    frame = Connected(session="s", server="srv/1").to_frame(version)
    assert frame.get("version") == version
    assert frame.get("session") == "s"
    assert frame.get("server") == "srv/1"


def test_connected_10_has_no_version_header() -> None:
    # 1.0 CONNECTED has no version header (1.0 §CONNECT), and 1.0 clients expect none.
    assert Connected().to_frame("1.0").get("version") is None
    assert Connected(version="1.0").to_frame("1.2").get("version") is None


def test_connected_from_frame_without_version_is_10() -> None:
    event = Connected.from_frame(Frame("CONNECTED", (("session", "s"),)), "1.0")
    assert event.version == "1.0"
    assert event.session == "s"
    assert event.heartbeat == (0, 0)


def test_connected_from_frame_unknown_version() -> None:
    with pytest.raises(RemoteProtocolError) as info:
        Connected.from_frame(Frame("CONNECTED", (("version", "2.0"),)), "1.0")
    assert info.value.kind is ErrorKind.BAD_VERSION


def test_connected_from_frame_heartbeat_and_extras() -> None:
    frame = Frame(
        "CONNECTED",
        (("server", "RabbitMQ/3.10.8"), ("x-b", "2"), ("heart-beat", "1000,0"), ("version", "1.1")),
    )
    event = Connected.from_frame(frame, "1.0")
    assert (event.version, event.heartbeat, event.server) == ("1.1", (1000, 0), "RabbitMQ/3.10.8")
    assert event.headers == (("x-b", "2"),)


# -- SEND (1.2 §SEND) -----------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_send_to_frame(version: Version) -> None:
    event = Send(
        "/queue/a",
        b"hello",
        content_type="text/plain",
        transaction="tx",
        receipt="r",
        headers=EXTRA,
    )
    frame = event.to_frame(version)
    assert frame.command == "SEND"
    assert frame.body == b"hello"
    assert frame.headers == (
        ("destination", "/queue/a"),
        ("content-type", "text/plain"),
        ("transaction", "tx"),
        ("receipt", "r"),
        *EXTRA,
    )
    assert roundtrip(event, version) == event


def test_send_from_frame_needs_destination() -> None:
    # 1.2 §SEND: "It has one REQUIRED header, destination".
    for version in VERSIONS:
        remote_missing(Send, Frame("SEND", (("x", "y"),), b"b"), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_send_content_length_flag_received(version: Version) -> None:
    with_cl = Frame("SEND", (("destination", "/q"), ("content-length", "2"), ("x-a", "1")), b"hi")
    event = Send.from_frame(with_cl, version)
    assert event.content_length is True
    assert event.headers == (("x-a", "1"),)  # content-length never in .headers
    without = Frame("SEND", (("destination", "/q"), ("x-a", "1")), b"hi")
    assert Send.from_frame(without, version).content_length is False


@pytest.mark.parametrize("version", VERSIONS)
def test_send_content_length_false_omits_header(version: Version) -> None:
    # ActiveMQ delivers a SEND without content-length as a text message.
    link = connected_pair(version)
    data = link.client.send(Send("/q", b"text body", content_length=False))
    assert b"content-length" not in data
    [got] = link.to_server(data)
    assert isinstance(got, Send)
    assert got.body == b"text body"
    assert got.content_length is False
    data = link.client.send(Send("/q", b"bytes body"))
    assert b"content-length:10\n" in data
    [got] = link.to_server(data)
    assert isinstance(got, Send) and got.content_length is True


def test_send_content_length_in_headers_is_not_duplicated() -> None:
    # A content-length passed in ``headers`` is the codec's business: it is recomputed.
    event = Send("/q", b"abc", headers=(("content-length", "99"),))
    got = roundtrip(event, "1.2")
    assert isinstance(got, Send)
    assert got.body == b"abc" and got.headers == ()


# -- SUBSCRIBE (1.2 §SUBSCRIBE id Header, §SUBSCRIBE ack Header; 1.0 §SUBSCRIBE) --------------


def test_subscribe_10_id_optional_and_key() -> None:
    event = Subscribe("/queue/a")
    frame = event.to_frame("1.0")
    assert frame.headers == (("destination", "/queue/a"),)  # ack:auto is the default: not sent
    assert event.key == "/queue/a"
    assert Subscribe("/queue/a", id="s1").key == "s1"
    assert Subscribe.from_frame(frame, "1.0") == event


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_subscribe_id_required_from_11(version: Version) -> None:
    # 1.1/1.2 §SUBSCRIBE id Header: "an id header MUST be included".
    local_missing(Subscribe("/queue/a"), version)
    remote_missing(Subscribe, Frame("SUBSCRIBE", (("destination", "/queue/a"),)), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_subscribe_needs_destination(version: Version) -> None:
    remote_missing(Subscribe, Frame("SUBSCRIBE", (("id", "1"),)), version)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("ack", ["auto", "client", "client-individual"])
def test_subscribe_ack_modes(version: Version, ack: str) -> None:
    event = Subscribe("/q", id="s1", ack=ack, receipt="r", headers=EXTRA)  # type: ignore[arg-type]
    if version == "1.0" and ack == "client-individual":
        # 1.0 §SUBSCRIBE: "The valid values for ack are auto ... and client."
        with pytest.raises(LocalProtocolError) as info:
            event.to_frame(version)
        assert info.value.kind is ErrorKind.BAD_HEADER
        frame = Frame("SUBSCRIBE", (("destination", "/q"), ("ack", ack)))
        with pytest.raises(RemoteProtocolError):
            Subscribe.from_frame(frame, version)
        return
    frame = event.to_frame(version)
    assert frame.get("ack") == (None if ack == "auto" else ack)
    assert frame.headers[-len(EXTRA) :] == EXTRA
    assert roundtrip(event, version) == event


@pytest.mark.parametrize("version", VERSIONS)
def test_subscribe_from_frame_missing_ack_is_auto_and_bad_ack_refused(version: Version) -> None:
    frame = Frame("SUBSCRIBE", (("destination", "/q"), ("id", "1")))
    assert Subscribe.from_frame(frame, version).ack == "auto"
    bad = Frame("SUBSCRIBE", (("destination", "/q"), ("id", "1"), ("ack", "sometimes")))
    with pytest.raises(RemoteProtocolError):
        Subscribe.from_frame(bad, version)


def test_subscribe_extra_headers_untouched() -> None:
    frame = Frame(
        "SUBSCRIBE",
        (("prefetch-count", "1"), ("destination", "/q"), ("selector", "a > 1"), ("id", "7"),
         ("x-queue-type", "quorum"), ("ack", "client"), ("activemq.prefetchSize", "5")),
    )  # fmt: skip
    event = Subscribe.from_frame(frame, "1.2")
    assert event.headers == (
        ("prefetch-count", "1"),
        ("selector", "a > 1"),
        ("x-queue-type", "quorum"),
        ("activemq.prefetchSize", "5"),
    )
    assert (event.destination, event.id, event.ack) == ("/q", "7", "client")


# -- UNSUBSCRIBE (1.0 §UNSUBSCRIBE: id or destination; 1.1+: id) ------------------------------


def test_unsubscribe_10_by_destination() -> None:
    event = Unsubscribe(destination="/queue/a")
    assert event.key == "/queue/a"
    frame = event.to_frame("1.0")
    assert frame.headers == (("destination", "/queue/a"),)
    assert Unsubscribe.from_frame(frame, "1.0") == event


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_unsubscribe_id_required_from_11(version: Version) -> None:
    local_missing(Unsubscribe(destination="/queue/a"), version)
    remote_missing(Unsubscribe, Frame("UNSUBSCRIBE", (("destination", "/q"),)), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_unsubscribe_needs_something(version: Version) -> None:
    local_missing(Unsubscribe(), version)
    remote_missing(Unsubscribe, Frame("UNSUBSCRIBE", ()), version)
    event = Unsubscribe(id="s1", receipt="r", headers=EXTRA)
    assert roundtrip(event, version) == event


# -- ACK / NACK (1.0 §ACK: message-id; 1.1 §ACK: message-id + subscription; 1.2 §ACK: id) -----

MESSAGE = Message("/queue/a", "mid-1", subscription="sub-1", ack="ack-1", body=b"x")


@pytest.mark.parametrize("cls", [Ack, Nack])
@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("1.0", (("message-id", "mid-1"), ("subscription", "sub-1"))),
        ("1.1", (("message-id", "mid-1"), ("subscription", "sub-1"))),
        ("1.2", (("id", "ack-1"),)),
    ],
)
def test_ack_of_message_headers_per_version(
    cls: type[Ack], version: Version, expected: tuple[tuple[str, str], ...]
) -> None:
    event = cls.of(MESSAGE, transaction="tx", receipt="r")
    assert (event.id, event.message_id, event.subscription) == ("ack-1", "mid-1", "sub-1")
    frame = event.to_frame(version)
    assert frame.command == cls.command
    assert frame.headers == (*expected, ("transaction", "tx"), ("receipt", "r"))


def test_ack_10_without_subscription() -> None:
    # A 1.0 subscription without id: the MESSAGE has no subscription, nor does the ACK.
    message = Message("/queue/a", "mid-1")
    assert Ack.of(message).to_frame("1.0").headers == (("message-id", "mid-1"),)


@pytest.mark.parametrize("cls", [Ack, Nack])
def test_ack_required_headers_per_version(cls: type[Ack]) -> None:
    local_missing(cls(subscription="s", id="a"), "1.0")  # no message-id
    local_missing(cls(message_id="m", id="a"), "1.1")  # no subscription
    local_missing(cls(subscription="s", id="a"), "1.1")  # no message-id
    local_missing(cls(message_id="m", subscription="s"), "1.2")  # no id
    remote_missing(cls, Frame(cls.command, (("subscription", "s"),)), "1.0")
    remote_missing(cls, Frame(cls.command, (("message-id", "m"),)), "1.1")
    remote_missing(cls, Frame(cls.command, (("message-id", "m"), ("subscription", "s"))), "1.2")


@pytest.mark.parametrize("cls", [Ack, Nack])
@pytest.mark.parametrize("version", VERSIONS)
def test_ack_roundtrip_and_covered_not_sent(cls: type[Ack], version: Version) -> None:
    event = cls.of(MESSAGE, transaction="tx")
    with_covered = dataclasses.replace(event, covered=("x", "y"))
    assert with_covered.to_frame(version) == event.to_frame(version)
    if cls is Nack and version == "1.0":
        # 1.0 §Augmented BNF has no NACK: the 1.0 encoder refuses the frame.
        with pytest.raises(LocalProtocolError):
            FrameEncoder(version).encode(event.to_frame(version))
        return
    got = roundtrip(event, version)
    assert type(got) is cls
    assert got.covered == ()
    assert got.transaction == "tx"
    if version == "1.2":
        assert got.id == "ack-1"
    else:
        assert got.message_id == "mid-1" and got.subscription == "sub-1"


def test_ack_extras_pass_through() -> None:
    frame = Frame("ACK", (("id", "a"), ("x-reason", "poison"), ("requeue", "false")))
    event = Ack.from_frame(frame, "1.2")
    assert event.headers == (("x-reason", "poison"), ("requeue", "false"))
    assert event.to_frame("1.2") == frame


# -- BEGIN / COMMIT / ABORT / DISCONNECT ----------------------------------------------------


@pytest.mark.parametrize("cls", [Begin, Commit, Abort])
@pytest.mark.parametrize("version", VERSIONS)
def test_transaction_frames(cls: type[Begin], version: Version) -> None:
    event = cls("tx-1", receipt="r", headers=(("x-a", "1"),))
    frame = event.to_frame(version)
    assert frame == Frame(cls.command, (("transaction", "tx-1"), ("receipt", "r"), ("x-a", "1")))
    assert cls.from_frame(frame, version) == event
    # "The transaction header is REQUIRED" (1.2 §BEGIN/§COMMIT/§ABORT).
    remote_missing(cls, Frame(cls.command, (("receipt", "r"),)), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_disconnect(version: Version) -> None:
    assert Disconnect().to_frame(version) == Frame("DISCONNECT")
    event = Disconnect(receipt="77", headers=(("x-a", "1"),))
    assert roundtrip(event, version) == event


# -- MESSAGE (1.2 §MESSAGE; 1.0 MESSAGE has no subscription) ---------------------------------


@pytest.mark.parametrize("version", ["1.1", "1.2"])
def test_message_subscription_required_from_11(version: Version) -> None:
    local_missing(Message("/q", "m"), version)
    remote_missing(Message, Frame("MESSAGE", (("destination", "/q"), ("message-id", "m"))), version)


def test_message_10_without_subscription() -> None:
    frame = Frame("MESSAGE", (("destination", "/q"), ("message-id", "m")), b"hi")
    event = Message.from_frame(frame, "1.0")
    assert event.subscription is None and event.ack is None
    assert event.content_length is False
    assert event.to_frame("1.0") == frame


@pytest.mark.parametrize("version", VERSIONS)
def test_message_requires_destination_and_message_id(version: Version) -> None:
    remote_missing(Message, Frame("MESSAGE", (("message-id", "m"), ("subscription", "s"))), version)
    remote_missing(Message, Frame("MESSAGE", (("destination", "/q"), ("subscription", "s"))),
                   version)  # fmt: skip


@pytest.mark.parametrize("version", VERSIONS)
def test_message_extras_and_content_length(version: Version) -> None:
    frame = Frame(
        "MESSAGE",
        (("subscription", "s"), ("destination", "/q"), ("message-id", "m"),
         ("redelivered", "false"), ("content-length", "4"), ("ack", "a1"), ("expires", "0"),
         ("x-rep", "first"), ("x-rep", "second"), ("content-type", "text/plain")),
        b"body",
    )  # fmt: skip
    event = Message.from_frame(frame, version)
    assert (event.destination, event.message_id, event.subscription, event.ack) == (
        "/q", "m", "s", "a1",
    )  # fmt: skip
    assert event.content_type == "text/plain"
    assert event.content_length is True
    assert event.unknown_subscription is False
    assert event.headers == (
        ("redelivered", "false"),
        ("expires", "0"),
        ("x-rep", "first"),
        ("x-rep", "second"),
    )
    assert roundtrip(event, version) == event


def test_message_repeated_typed_header_first_wins() -> None:
    # 1.2 §Repeated Header Entries: only the first value is used.
    frame = Frame(
        "MESSAGE",
        (("destination", "/a"), ("message-id", "m"), ("subscription", "s"), ("destination", "/b")),
    )
    assert Message.from_frame(frame, "1.2").destination == "/a"


# -- RECEIPT / ERROR --------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_receipt(version: Version) -> None:
    event = Receipt("message-12345", headers=(("x-a", "1"),))
    assert event.to_frame(version).headers == (("receipt-id", "message-12345"), ("x-a", "1"))
    assert roundtrip(event, version) == event
    remote_missing(Receipt, Frame("RECEIPT", ()), version)


@pytest.mark.parametrize("version", VERSIONS)
def test_error(version: Version) -> None:
    # 1.2 §ERROR: message header, optional body, receipt-id of the frame it is about.
    event = Error(
        message="malformed frame received",
        body=b"details\n",
        receipt_id="message-12345",
        content_type="text/plain",
        headers=(("version", "1.2,2.1"),),
    )
    frame = event.to_frame(version)
    assert frame.headers == (
        ("message", "malformed frame received"),
        ("receipt-id", "message-12345"),
        ("content-type", "text/plain"),
        ("version", "1.2,2.1"),
    )
    assert roundtrip(event, version) == event
    assert Error.from_frame(Frame("ERROR"), version) == Error()


# -- properties: extra headers pass through every event kind untouched -------------------------

_SAFE = st.text(
    st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=":\\"),
    min_size=1,
    max_size=8,
)
_TYPED = {
    "destination", "id", "ack", "receipt", "message-id", "subscription", "transaction",
    "content-type", "content-length", "receipt-id", "message", "accept-version", "host",
    "login", "passcode", "heart-beat", "version", "session", "server",
}  # fmt: skip
_extra_headers = st.lists(
    st.tuples(_SAFE.filter(lambda n: n not in _TYPED), _SAFE), max_size=5
).map(tuple)

_SAMPLES: list[FrameEvent] = [
    Connect(host="h"),
    Connected(),
    Send("/q", b"b"),
    Subscribe("/q", id="1"),
    Unsubscribe(id="1"),
    Ack.of(MESSAGE),
    Nack.of(MESSAGE),
    Begin("t"),
    Commit("t"),
    Abort("t"),
    Disconnect(receipt="r"),
    Message("/q", "m", subscription="s", body=b"b"),
    Receipt("r"),
    Error(message="m"),
]


@given(
    event=st.sampled_from(_SAMPLES),
    extra=_extra_headers,
    version=st.sampled_from(VERSIONS),
)
def test_extra_headers_roundtrip_in_order(
    event: FrameEvent, extra: tuple[tuple[str, str], ...], version: Version
) -> None:
    assume(not (isinstance(event, Nack) and version == "1.0"))  # no NACK in 1.0
    event = dataclasses.replace(event, headers=extra)  # type: ignore[type-var]
    if isinstance(event, Connected):
        event = Connected(version=version, headers=extra)
    got = roundtrip(event, version)
    assert got.headers == extra  # type: ignore[attr-defined]
    assert got.to_frame(version) == event.to_frame(version)
    if not isinstance(event, (Ack, Nack)):  # they carry only what the version names
        assert got == event


def test_connect_event_is_what_server_reads() -> None:
    # The same classes travel both ways (h11 style): what the client sends is what the
    # server's next_event returns.
    client = ClientConnection()
    event = Connect(host="h", login="guest", passcode="guest", heartbeat=(10, 20), headers=EXTRA)
    data = client.send(event)
    decoder = FrameDecoder("1.0")
    decoder.receive_data(data)
    frame = decoder.next_frame()
    assert isinstance(frame, Frame)
    assert Connect.from_frame(frame, "1.0") == event


def test_evolve_carries_every_field_of_every_event() -> None:
    # The connection copies events with evolve() (a server's ACK gets its
    # ``covered``): every field must come across, including any added later.
    from stomp_proto._events import EVENT_FOR_COMMAND, Ack, evolve

    for cls in set(EVENT_FOR_COMMAND.values()):
        fields = dataclasses.fields(cls)
        missing = dataclasses.MISSING
        values = {
            f.name: "x" for f in fields if f.default is missing and f.default_factory is missing
        }
        event = cls(**values)
        copy = evolve(event)
        assert copy == event and copy is not event
        for field in fields:
            assert getattr(copy, field.name) == getattr(event, field.name)
    ack = Ack(id="1", headers=(("a", "b"),))
    changed = evolve(ack, covered=("1",), subscription="s")
    assert changed == dataclasses.replace(ack, covered=("1",), subscription="s")
    with pytest.raises(TypeError, match="colour"):
        evolve(ack, colour="red")


def _received_message(head: bytes, version: Version = "1.2") -> Message:
    """The Message a client connection makes of ``head`` (a MESSAGE frame without
    its body and NUL) after a CONNECTED of ``version``."""
    conn = ClientConnection()
    conn.send(Connect(host="/", accept_versions=(version,)))
    conn.receive_data(f"CONNECTED\nversion:{version}\n\n\x00".encode())
    conn.next_event()
    conn.receive_data(head + b"\n\nhi\x00")
    event = conn.next_event()
    assert isinstance(event, Message)
    return event


def test_message_headers_read_by_name_first_value_wins() -> None:
    """1.2 §Repeated Header Entries: only the first value of a repeated header is
    significant; all_headers keeps every value, and message.headers stays pairs."""
    message = _received_message(
        b"MESSAGE\ndestination:/queue/a\nmessage-id:7\nsubscription:s\nack:k\n"
        b"x-tag:first\nx-tag:second\ncontent-length:2\ncorrelation-id:c1"
    )
    headers = message.all_headers
    assert headers["destination"] == "/queue/a" and headers["message-id"] == "7"
    assert headers["subscription"] == "s" and headers["ack"] == "k"
    assert headers["x-tag"] == "first" and headers.getall("x-tag") == ["first", "second"]
    assert headers["content-length"] == "2"
    assert list(headers) == [
        "destination",
        "message-id",
        "subscription",
        "ack",
        "content-length",
        "x-tag",
        "correlation-id",
    ]
    assert len(headers) == 7 and "x-tag" in headers and "x-missing" not in headers
    assert ("x-tag", "second") in headers.pairs
    assert message.get("correlation-id") == "c1" and message.get("message-id") == "7"
    assert message.get("x-missing") is None and message.get("x-missing", "d") == "d"
    # The pairs without a typed field, as before: code iterating them still works.
    assert message.headers == (("x-tag", "first"), ("x-tag", "second"), ("correlation-id", "c1"))
    assert dict(headers)["x-tag"] == "first"


def test_message_all_headers_of_a_1_0_message_without_subscription() -> None:
    message = _received_message(b"MESSAGE\ndestination:/queue/a\nmessage-id:7", "1.0")
    assert "subscription" not in message.all_headers
    assert "content-length" not in message.all_headers  # the frame had none
    assert message.get("destination") == "/queue/a"
