"""Typed events: one class per STOMP frame kind, plus the connection outcomes.

The same classes travel both ways, as in h11: what a client passes to
``ClientConnection.send`` is what ``ServerConnection.next_event`` returns on the
other side, and vice versa.  Each event holds the headers the specs give a
meaning to as typed fields; every other header (broker extensions such as
``persistent``, ``prefetch-count``, ``selector``, ``x-*``) is kept, in order, in
``headers`` and passed through untouched.

Which headers a frame needs depends on the protocol version (an ACK names
``message-id`` in 1.0, ``message-id`` and ``subscription`` in 1.1, ``id`` in
1.2), so the translation to and from frames takes the version and lives here,
next to the fields it reads: ``to_frame(version)`` and ``from_frame(frame, version)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar, Literal, TypeVar

from ._build import native
from ._checks import as_headers as _as_headers
from ._checks import wrong_type
from ._frame import VERSIONS, Frame, Version
from ._header_map import HeaderMap
from ._protocol_errors import ErrorKind, LocalProtocolError, ProtocolError

__all__ = [
    "Abort",
    "Ack",
    "AckMode",
    "Begin",
    "ClientEvent",
    "Commit",
    "Connect",
    "Connected",
    "ConnectionClosed",
    "Disconnect",
    "Error",
    "Event",
    "Headers",
    "HeartBeat",
    "HeartBeatTimeout",
    "Message",
    "Nack",
    "Receipt",
    "Send",
    "ServerEvent",
    "Subscribe",
    "Unsubscribe",
]

AckMode = Literal["auto", "client", "client-individual"]
ACK_MODES: tuple[AckMode, ...] = ("auto", "client", "client-individual")

#: The headers of an event that have no typed field: ``(name, value)`` pairs in
#: wire order (a name may repeat).  An event also takes a :class:`Mapping` or
#: any iterable of pairs and stores it as this tuple.
Headers = tuple[tuple[str, str], ...]

# Frame(...) without the checks of Frame.__new__ (see _frame.py).
_new_frame = tuple.__new__

_E = TypeVar("_E", bound="FrameEvent")
_A = TypeVar("_A", bound="_Settlement")
_T = TypeVar("_T", bound="_TransactionEvent")


class Event:
    """Base class of every event a connection sends or returns."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class HeartBeat(Event):
    """An end-of-line between frames: a sign of life (1.2 §Heart-beating)."""


HEARTBEAT = HeartBeat()


class FrameEvent(Event):
    """An event that is one STOMP frame on the wire.

    Built by hand, an event takes ``headers`` as a tuple of pairs, a
    :class:`Mapping` or any iterable of pairs, and a ``body`` as bytes, any
    bytes-like object or a ``str`` (sent as UTF-8; ``content_type`` then
    defaults to ``text/plain;charset=utf-8``, as the clients do).  Its
    ``repr`` hides a ``passcode`` and shows a long body by its first bytes and
    its length.
    """

    __slots__ = ()
    #: The frame's command (``"SEND"``, ``"MESSAGE"`` ...).
    command: ClassVar[str]
    #: Headers held in typed fields, not in ``headers``.
    _typed: ClassVar[frozenset[str]] = frozenset()
    #: Fields that must not be empty strings (a frame to nowhere).
    _not_empty: ClassVar[tuple[str, ...]] = ()
    #: Every frame event has it (a field of each subclass).
    headers: Headers

    def __post_init__(self) -> None:
        # Cheap for what the decoder builds (a tuple and bytes): two type checks.
        # getattr: compiled, ``self.headers`` would be checked to be the tuple it
        # is declared as, before this converts a user's mapping or list into one.
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = getattr(self, "headers")  # noqa: B009
        # A tuple's first element is looked at too: one pair given where a tuple
        # of pairs belongs, ("ab", "cd"), would be written as a:b and c:d.
        if type(headers) is not tuple or (headers and type(headers[0]) is not tuple):
            object.__setattr__(self, "headers", _as_headers(headers))
        body = getattr(self, "body", b"")
        if type(body) is not bytes:
            if isinstance(body, str):
                object.__setattr__(self, "body", body.encode("utf-8"))
                if getattr(self, "content_type", "") is None:
                    object.__setattr__(self, "content_type", "text/plain;charset=utf-8")
            elif isinstance(body, (bytearray, memoryview)):
                object.__setattr__(self, "body", bytes(body))
            else:
                raise wrong_type(
                    f"{type(self).__name__} body",
                    "bytes (or bytearray, memoryview) or str",
                    body,
                    "serialise it first, e.g. json.dumps(value)",
                )
        for name in self._not_empty:
            if getattr(self, name) == "":
                raise LocalProtocolError(
                    ErrorKind.MISSING_HEADER, f"{self.command} frame with an empty {name!r} header"
                )

    def __repr__(self) -> str:
        parts = []
        for name in _field_names(type(self)):
            value = getattr(self, name)
            if name == "passcode" and value is not None:
                shown = "'***'"
            elif name == "body" and len(value) > _BODY_SHOWN:
                shown = f"{value[:_BODY_SHOWN]!r}...<{len(value)} bytes>"
            else:
                shown = repr(value)
            parts.append(f"{name}={shown}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def to_frame(self, version: Version) -> Frame:
        """The frame that carries this event under ``version``.

        Raises :class:`LocalProtocolError` when a header that ``version``
        requires is missing.
        """
        return self._to_frame(version)

    @classmethod
    def from_frame(cls: type[_E], frame: Frame, version: Version) -> _E:
        """Read an event of this class from ``frame``, received under ``version``.

        Raises :class:`RemoteProtocolError` when a header that ``version``
        requires is missing or invalid.
        """
        if _native is not None:
            # The accelerated build reads the frequent events natively (the
            # same classes, every field set); None leaves the frame to the code below.
            event: _E | None = _native.event_from_frame(cls, frame, version)
            if event is not None:
                return event
        try:
            return cls._from_frame(frame, _Fields(frame, cls._typed), version)
        except LocalProtocolError as exc:  # the checks are shared with sending
            raise as_remote(exc) from None

    def _to_frame(self, version: Version) -> Frame:
        raise NotImplementedError

    @classmethod
    def _from_frame(cls: type[_E], frame: Frame, fields: _Fields, version: Version) -> _E:
        raise NotImplementedError


_C = TypeVar("_C", bound=type[FrameEvent])


def _wire(
    command: str | None = None,
    *,
    typed: tuple[str, ...] | None = None,
    not_empty: tuple[str, ...] | None = None,
) -> Callable[[_C], _C]:
    """Set an event class's wire constants (``command``, ``_typed``, ``_not_empty``).

    Set after ``@dataclass``, so that the class body holds the fields alone.
    """

    def wire(cls: _C) -> _C:
        if command is not None:
            cls.command = command
        if typed is not None:
            cls._typed = frozenset(typed)
        if not_empty is not None:
            cls._not_empty = not_empty
        return cls

    return wire


#: How many bytes of a body a repr shows.
_BODY_SHOWN = 32


def _field_names(cls: type) -> tuple[str, ...]:
    fields = _FIELDS.get(cls)
    if fields is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        fields = _FIELDS[cls] = (names, frozenset(names))
    return fields[0]


def evolve(event: _E, **changes: object) -> _E:
    """A copy of ``event`` with ``changes``: :func:`dataclasses.replace`, made cheap.

    Every field is carried over by name from the class's own field list, so a
    field added later is never dropped; ``__init__`` is skipped (the values
    came from a valid event, the changes from the connection's books), which
    is what makes this several times faster than ``replace`` - it runs on
    every ACK a broker receives.
    """
    cls = type(event)
    names = _field_names(cls)
    known = _FIELDS[cls][1]
    if not changes.keys() <= known:
        unknown = sorted(changes.keys() - known)
        raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}")
    copy = object.__new__(cls)
    for name in names:
        object.__setattr__(copy, name, changes[name] if name in changes else getattr(event, name))
    return copy


#: Per event class: its field names in order, and as a set.
_FIELDS: dict[type, tuple[tuple[str, ...], frozenset[str]]] = {}


class _Fields:
    """First-wins access to a received frame's typed headers."""

    __slots__ = ("command", "extra", "values")

    def __init__(self, frame: Frame, typed: frozenset[str]) -> None:
        self.command = frame.command
        # One pass (this runs for every frame received): the typed headers and
        # content-length, first wins, go to ``values``; the rest, in wire order,
        # to ``extra``.  content-length belongs to the codec.
        values: dict[str, str] = {}
        extra: list[tuple[str, str]] = []
        for pair in frame.headers:
            name = pair[0]
            if name in typed or name == "content-length":
                if name not in values:
                    values[name] = pair[1]
            else:
                extra.append(pair)
        self.values = values
        self.extra: Headers = tuple(extra)

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def require(self, name: str) -> str:
        value = self.values.get(name)
        if value is None:
            raise _missing(f"{self.command} frame without {_a(name)} header")
        return value


def _missing(message: str) -> LocalProtocolError:
    """A required header is missing or invalid (Remote once it reaches a receiving path)."""
    return LocalProtocolError(ErrorKind.MISSING_HEADER, message)


def _require(value: str | None, command: str, name: str) -> str:
    if value is None:
        raise _missing(f"{command} frame needs {_a(name)} header")
    return value


def _a(name: str) -> str:
    """``name`` quoted, after the article it takes: "an 'id'", "a 'message-id'"."""
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name!r}"


def _frame(
    command: str, typed: list[tuple[str, str | None]], extra: Headers, body: bytes = b""
) -> Frame:
    # Typed headers first, in a fixed order, skipping unset ones; then the rest.
    headers = tuple((k, v) for k, v in typed if v is not None) + extra
    # The event checked its fields: no need for Frame()'s checks.
    return _new_frame(Frame, (command, headers, body))


def parse_heartbeat(value: str | None) -> tuple[int, int]:
    """Read a ``heart-beat`` header; a missing one means ``0,0`` (1.2 §Heart-beating)."""
    if value is None:
        return (0, 0)
    first, comma, second = value.partition(",")
    if not (
        comma and first.isascii() and first.isdigit() and second.isascii() and second.isdigit()
    ):
        raise _missing(f"invalid heart-beat header {value[:40]!r}")
    if len(first) > 9 or len(second) > 9:
        raise _missing(f"heart-beat interval too large in {value[:40]!r}")
    return (int(first), int(second))


def _check_heartbeat(heartbeat: tuple[int, int]) -> str:
    x, y = heartbeat
    if x < 0 or y < 0 or x > 999_999_999 or y > 999_999_999:
        raise LocalProtocolError(ErrorKind.BAD_HEADER, f"invalid heart-beat {heartbeat!r}")
    return f"{x},{y}"


# -- client frames -------------------------------------------------------------


@_wire("CONNECT", typed=("accept-version", "host", "login", "passcode", "heart-beat"))
@dataclass(frozen=True, slots=True, repr=False)
class Connect(FrameEvent):
    """CONNECT (or STOMP): open a session.

    ``accept_versions`` lists the versions the client speaks; a received CONNECT
    without ``accept-version`` offers 1.0 only.  ``heartbeat`` is
    ``(can send every ms, wants to receive every ms)``, 0 meaning never.
    """

    #: The virtual host (``host`` header); required from 1.1, often ``"/"``.
    host: str | None = None
    #: The protocol versions offered (``accept-version``).
    accept_versions: tuple[Version, ...] = VERSIONS
    #: The user name (``login`` header).
    login: str | None = None
    #: The password (``passcode`` header); hidden in the ``repr``.
    passcode: str | None = None
    #: ``(can send every ms, wants to receive every ms)``; 0 means never.
    heartbeat: tuple[int, int] = (0, 0)
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()
    #: ``"STOMP"`` sends the 1.2 STOMP frame instead of CONNECT.
    frame_command: Literal["CONNECT", "STOMP"] = "CONNECT"

    def _to_frame(self, version: Version) -> Frame:
        versions = self.accept_versions
        if self.frame_command == "STOMP" and versions == ("1.0",):
            raise LocalProtocolError(
                ErrorKind.BAD_VERSION, "the STOMP frame needs STOMP 1.1 or later; use CONNECT"
            )
        # A 1.0-only client sends no accept-version: that is what 1.0 servers expect.
        accept = None if versions == ("1.0",) else ",".join(versions)
        if accept is not None and self.host is None:
            raise _missing(
                "CONNECT for STOMP 1.1 or later needs a 'host' header: pass host=, the "
                "virtual host (often '/'), or accept_versions=('1.0',)"
            )
        heartbeat = None if self.heartbeat == (0, 0) else _check_heartbeat(self.heartbeat)
        return _frame(
            self.frame_command,
            [
                ("accept-version", accept),
                ("host", self.host),
                ("login", self.login),
                ("passcode", self.passcode),
                ("heart-beat", heartbeat),
            ],
            self.headers,
        )

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Connect:
        accept = fields.get("accept-version")
        if accept is None:
            versions: tuple[Version, ...] = ("1.0",)
        else:
            # Unknown versions (say "2.0") are simply not ones we can pick.  Nor
            # is " 1.1": values are never trimmed (1.2 §Value Encoding), and
            # RabbitMQ and ActiveMQ also read "1.0, 1.1" as 1.0 alone.
            offered = set(accept.split(","))
            versions = tuple(v for v in VERSIONS if v in offered)
        return cls(
            host=fields.get("host"),
            accept_versions=versions,
            login=fields.get("login"),
            passcode=fields.get("passcode"),
            heartbeat=parse_heartbeat(fields.get("heart-beat")),
            headers=fields.extra,
            frame_command="STOMP" if frame.command == "STOMP" else "CONNECT",
        )


@_wire(
    "SEND",
    typed=("destination", "content-type", "transaction", "receipt"),
    not_empty=("destination",),
)
@dataclass(frozen=True, slots=True, repr=False)
class Send(FrameEvent):
    """SEND: publish ``body`` to ``destination``.

    ``content_length=False`` leaves out the ``content-length`` header (ActiveMQ
    then delivers a text message); received, it tells whether the frame had one.
    """

    #: Where the message goes: a queue, topic or exchange name.
    destination: str
    #: The message; a ``str`` given here is encoded as UTF-8.
    body: bytes = b""
    #: The ``content-type`` header: the MIME type of ``body``.
    content_type: str | None = None
    #: The transaction this belongs to (``None``: outside any).
    transaction: str | None = None
    #: Ask the peer to confirm with a RECEIPT naming this id (``None``: no receipt).
    receipt: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()
    #: Send a ``content-length`` header (received: whether there was one).
    content_length: bool = True

    def _to_frame(self, version: Version) -> Frame:
        return _frame(
            "SEND",
            [
                ("destination", self.destination),
                ("content-type", self.content_type),
                ("transaction", self.transaction),
                ("receipt", self.receipt),
            ],
            self.headers,
            self.body,
        )

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Send:
        return cls(
            destination=fields.require("destination"),
            body=frame.body,
            content_type=fields.get("content-type"),
            transaction=fields.get("transaction"),
            receipt=fields.get("receipt"),
            headers=fields.extra,
            content_length="content-length" in fields.values,
        )


@_wire("SUBSCRIBE", typed=("destination", "id", "ack", "receipt"), not_empty=("destination",))
@dataclass(frozen=True, slots=True, repr=False)
class Subscribe(FrameEvent):
    """SUBSCRIBE: receive messages sent to ``destination`` (``id`` required from 1.1).

    ``body`` is allowed in STOMP 1.0 only, whose §SUBSCRIBE says "The body of
    the SUBSCRIBE command is ignored"; from 1.1 a SUBSCRIBE has none.
    """

    #: Where to receive messages from.
    destination: str
    #: The subscription id, unique within the session (required from 1.1).
    id: str | None = None
    #: The acknowledgement mode: ``auto``, ``client`` or ``client-individual``.
    ack: AckMode = "auto"
    #: Ask the peer to confirm with a RECEIPT naming this id (``None``: no receipt).
    receipt: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()
    #: Allowed in STOMP 1.0 only (and ignored by the server).
    body: bytes = b""

    @property
    def key(self) -> str:
        """What identifies the subscription: its id, or in 1.0 without one its destination."""
        return self.id if self.id is not None else self.destination

    def _to_frame(self, version: Version) -> Frame:
        if version != "1.0":
            _require(self.id, "SUBSCRIBE", "id")
        _check_ack_mode(self.ack, version)
        return _frame(
            "SUBSCRIBE",
            [
                ("destination", self.destination),
                ("id", self.id),
                ("ack", None if self.ack == "auto" else self.ack),
                ("receipt", self.receipt),
            ],
            self.headers,
            self.body,
        )

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Subscribe:
        ack = fields.get("ack") or "auto"
        mode = _check_ack_mode(ack, version)
        return cls(
            destination=fields.require("destination"),
            id=fields.get("id") if version == "1.0" else fields.require("id"),
            ack=mode,
            receipt=fields.get("receipt"),
            headers=fields.extra,
            body=frame.body,
        )


def _check_ack_mode(ack: str, version: Version) -> AckMode:
    # 1.0 §SUBSCRIBE knows auto and client only; client-individual came in 1.1.
    for mode in ACK_MODES:
        if ack == mode and not (mode == "client-individual" and version == "1.0"):
            return mode
    raise LocalProtocolError(
        ErrorKind.BAD_HEADER, f"ack mode {ack[:40]!r} is not valid in STOMP {version}"
    )


@_wire("UNSUBSCRIBE", typed=("id", "destination", "receipt"))
@dataclass(frozen=True, slots=True, repr=False)
class Unsubscribe(FrameEvent):
    """UNSUBSCRIBE: end the subscription ``id`` (1.0 also allows a ``destination``)."""

    #: The id of the subscription to end.
    id: str | None = None
    #: In 1.0, the destination of a subscription made without an id.
    destination: str | None = None
    #: Ask the peer to confirm with a RECEIPT naming this id (``None``: no receipt).
    receipt: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()

    @property
    def key(self) -> str | None:
        """The subscription this ends, as :attr:`Subscribe.key` names it."""
        return self.id if self.id is not None else self.destination

    def _to_frame(self, version: Version) -> Frame:
        if version != "1.0" or self.destination is None:
            _require(self.id, "UNSUBSCRIBE", "id")
        return _frame(
            "UNSUBSCRIBE",
            [("id", self.id), ("destination", self.destination), ("receipt", self.receipt)],
            self.headers,
        )

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Unsubscribe:
        if version != "1.0" or fields.get("destination") is None:
            fields.require("id")
        return cls(
            id=fields.get("id"),
            destination=fields.get("destination"),
            receipt=fields.get("receipt"),
            headers=fields.extra,
        )


@_wire(typed=("id", "message-id", "subscription", "transaction", "receipt"))
@dataclass(frozen=True, slots=True, repr=False)
class _Settlement(FrameEvent):
    """What ACK and NACK share: the fields that name a delivery, and their wire rules."""

    #: The MESSAGE's ``ack`` header: what names the message in 1.2.
    id: str | None = None
    #: The MESSAGE's ``message-id``: what names the message in 1.0 and 1.1.
    message_id: str | None = None
    #: The subscription the message came on (sent in 1.1).
    subscription: str | None = None
    #: The transaction this belongs to (``None``: outside any).
    transaction: str | None = None
    #: Ask the peer to confirm with a RECEIPT naming this id (``None``: no receipt).
    receipt: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()
    #: Not sent: filled in by a receiving :class:`ServerConnection` with every
    #: delivery this frame settles.
    covered: tuple[str, ...] = ()

    @classmethod
    def of(
        cls: type[_A],
        message: Message,
        *,
        transaction: str | None = None,
        receipt: str | None = None,
    ) -> _A:
        """The (negative) acknowledgement of ``message``, for any version.

        ``transaction`` and ``receipt`` become the frame's headers of those
        names: the id of an open transaction, and a receipt id to be answered.
        """
        if not isinstance(message, Message):
            raise wrong_type(
                f"{cls.__name__}.of() message",
                "the Message to settle",
                message,
                "pass the Message received",
            )
        return cls(
            id=message.ack,
            message_id=message.message_id,
            subscription=message.subscription,
            transaction=transaction,
            receipt=receipt,
        )

    def _to_frame(self, version: Version) -> Frame:
        typed: list[tuple[str, str | None]]
        if version == "1.2":
            typed = [("id", _require(self.id, self.command, "id"))]
        else:
            typed = [("message-id", _require(self.message_id, self.command, "message-id"))]
            if version == "1.1":
                typed.append(
                    ("subscription", _require(self.subscription, self.command, "subscription"))
                )
            elif self.subscription is not None:
                typed.append(("subscription", self.subscription))
        typed += [("transaction", self.transaction), ("receipt", self.receipt)]
        return _frame(self.command, typed, self.headers)

    @classmethod
    def _from_frame(cls: type[_A], frame: Frame, fields: _Fields, version: Version) -> _A:
        if version == "1.2":
            fields.require("id")
        else:
            fields.require("message-id")
            if version == "1.1":
                fields.require("subscription")
        return cls(
            id=fields.get("id"),
            message_id=fields.get("message-id"),
            subscription=fields.get("subscription"),
            transaction=fields.get("transaction"),
            receipt=fields.get("receipt"),
            headers=fields.extra,
        )


@_wire("ACK")
@dataclass(frozen=True, slots=True, repr=False)
class Ack(_Settlement):
    """ACK: the client consumed a message (fields and headers: see below).

    Which header names the message depends on the version: ``message-id``
    (1.0), ``message-id`` and ``subscription`` (1.1), ``id`` - the MESSAGE's
    ``ack`` header - (1.2).  :meth:`of` fills all three from a received
    :class:`Message`, and the connection writes the ones its version needs.

    ``covered`` is not sent: a receiving :class:`ServerConnection` fills it with
    every delivery this frame settles, named as above - more than one for a
    cumulative ACK on a ``client`` subscription.
    """


@_wire("NACK")
@dataclass(frozen=True, slots=True, repr=False)
class Nack(_Settlement):
    """NACK (1.1 and later): the client did not consume a message; fields as :class:`Ack`.

    A sibling of :class:`Ack`, not a kind of it: ``isinstance(nack, Ack)`` is false.
    """


@_wire(typed=("transaction", "receipt"))
@dataclass(frozen=True, slots=True, repr=False)
class _TransactionEvent(FrameEvent):
    #: The transaction's id.
    transaction: str
    #: Ask the peer to confirm with a RECEIPT naming this id (``None``: no receipt).
    receipt: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()

    def _to_frame(self, version: Version) -> Frame:
        return _frame(
            self.command,
            [("transaction", self.transaction), ("receipt", self.receipt)],
            self.headers,
        )

    @classmethod
    def _from_frame(cls: type[_T], frame: Frame, fields: _Fields, version: Version) -> _T:
        return cls(
            transaction=fields.require("transaction"),
            receipt=fields.get("receipt"),
            headers=fields.extra,
        )


@_wire("BEGIN")
@dataclass(frozen=True, slots=True, repr=False)
class Begin(_TransactionEvent):
    """BEGIN: start the transaction ``transaction``."""


@_wire("COMMIT")
@dataclass(frozen=True, slots=True, repr=False)
class Commit(_TransactionEvent):
    """COMMIT: make the sends and acks of ``transaction`` take effect."""


@_wire("ABORT")
@dataclass(frozen=True, slots=True, repr=False)
class Abort(_TransactionEvent):
    """ABORT: drop the sends and acks of ``transaction``."""


@_wire("DISCONNECT", typed=("receipt",))
@dataclass(frozen=True, slots=True, repr=False)
class Disconnect(FrameEvent):
    """DISCONNECT: end the session; with ``receipt``, gracefully (1.2 §DISCONNECT)."""

    #: Asks for a RECEIPT once the server has processed everything before.
    receipt: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()

    def _to_frame(self, version: Version) -> Frame:
        return _frame("DISCONNECT", [("receipt", self.receipt)], self.headers)

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Disconnect:
        return cls(receipt=fields.get("receipt"), headers=fields.extra)


# -- server frames -------------------------------------------------------------


@_wire("CONNECTED", typed=("version", "heart-beat", "session", "server"))
@dataclass(frozen=True, slots=True, repr=False)
class Connected(FrameEvent):
    """CONNECTED: the server accepted the session.

    A server may leave ``version`` as ``None``: its connection fills in the
    version it negotiated.  Received, a CONNECTED without ``version`` means 1.0.
    """

    #: The version the server chose; ``None`` when sent means the negotiated one.
    version: Version | None = None
    #: ``(will send every ms, wants to receive every ms)``; 0 means never.
    heartbeat: tuple[int, int] = (0, 0)
    #: A session id the server may give.
    session: str | None = None
    #: The server's name and version (``server`` header).
    server: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()

    def _to_frame(self, version: Version) -> Frame:
        # 1.0 servers send no version header, and 1.0 clients expect none.
        return _frame(
            "CONNECTED",
            [
                (
                    "version",
                    None if (self.version or version) == "1.0" else (self.version or version),
                ),
                ("heart-beat", _check_heartbeat(self.heartbeat)),
                ("session", self.session),
                ("server", self.server),
            ],
            self.headers,
        )

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Connected:
        value = fields.get("version") or "1.0"
        chosen = next((v for v in VERSIONS if v == value.strip()), None)
        if chosen is None:
            raise LocalProtocolError(
                ErrorKind.BAD_VERSION, f"server chose unknown version {value!r}"
            )
        return cls(
            version=chosen,
            heartbeat=parse_heartbeat(fields.get("heart-beat")),
            session=fields.get("session"),
            server=fields.get("server"),
            headers=fields.extra,
        )


@_wire(
    "MESSAGE",
    typed=("destination", "message-id", "subscription", "ack", "content-type"),
    not_empty=("destination",),
)
@dataclass(frozen=True, slots=True, repr=False)
class Message(FrameEvent):
    """MESSAGE: a message delivered for a subscription.

    ``ack`` is the value a 1.2 ACK or NACK must name (present for client and
    client-individual subscriptions).  ``unknown_subscription`` is set by a
    client connection when the subscription is not one it made - RabbitMQ
    delivers replies to ``/temp-queue/`` destinations that way.
    """

    #: Where the message was sent.
    destination: str
    #: The broker's id for the message (``message-id``).
    message_id: str
    #: The subscription it was delivered for (``None`` if a 1.0 server sent none).
    subscription: str | None = None
    #: The message, as bytes.
    body: bytes = b""
    #: The ``ack`` header: what a 1.2 ACK or NACK must name.
    ack: str | None = None
    #: The ``content-type`` header: the MIME type of ``body``.
    content_type: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()
    #: Whether the frame had a ``content-length`` header (sent: write one).
    content_length: bool = True
    #: Set by a :class:`ClientConnection` for a subscription it did not make
    #: (RabbitMQ's ``/temp-queue/`` replies).
    unknown_subscription: bool = False

    @property
    def key(self) -> str:
        """The subscription this belongs to, as :attr:`Subscribe.key` names it.

        Its ``subscription`` header; in 1.0, where that header is optional, the
        destination when it is absent.  An empty ``subscription`` is an id like
        any other (the one rule, for client, broker and adapters alike).
        """
        return self.subscription if self.subscription is not None else self.destination

    @property
    def all_headers(self) -> HeaderMap:
        """Every header of the message by name, the typed ones too.

        ``destination``, ``message-id``, ``subscription``, ``ack``,
        ``content-type`` and ``content-length`` (those present) come first, then
        :attr:`headers` in wire order.  A repeated name keeps all its values
        (:meth:`HeaderMap.getall`); a lookup finds the first, as STOMP 1.2 says
        only the first of repeated header entries counts.  :attr:`headers`
        stays the pairs without a typed field.
        """
        typed = (
            ("destination", self.destination),
            ("message-id", self.message_id),
            ("subscription", self.subscription),
            ("ack", self.ack),
            ("content-type", self.content_type),
            ("content-length", str(len(self.body)) if self.content_length else None),
        )
        present = tuple((name, value) for name, value in typed if value is not None)
        return HeaderMap(present + self.headers)

    def get(self, name: str, default: str | None = None) -> str | None:
        """The value of the header ``name`` (typed ones too, as :attr:`all_headers`
        gives them); ``default`` when the message has none."""
        return self.all_headers.get(name, default)

    def _to_frame(self, version: Version) -> Frame:
        if version != "1.0":
            _require(self.subscription, "MESSAGE", "subscription")
        return _frame(
            "MESSAGE",
            [
                ("destination", self.destination),
                ("message-id", self.message_id),
                ("subscription", self.subscription),
                ("ack", self.ack),
                ("content-type", self.content_type),
            ],
            self.headers,
            self.body,
        )

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Message:
        return cls(
            destination=fields.require("destination"),
            message_id=fields.require("message-id"),
            subscription=fields.get("subscription")
            if version == "1.0"
            else fields.require("subscription"),
            body=frame.body,
            ack=fields.get("ack"),
            content_type=fields.get("content-type"),
            headers=fields.extra,
            content_length="content-length" in fields.values,
        )


@_wire("RECEIPT", typed=("receipt-id",))
@dataclass(frozen=True, slots=True, repr=False)
class Receipt(FrameEvent):
    """RECEIPT: the server processed the client frame that asked for ``receipt_id``.

    What that promises is the server's: the embedded broker keeps messages in
    memory only, so its RECEIPT for a SEND means "accepted into memory", lost
    if the broker stops (see :ref:`broker-durability`).
    """

    #: The ``receipt`` of the client frame this confirms.
    receipt_id: str
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()

    def _to_frame(self, version: Version) -> Frame:
        return _frame("RECEIPT", [("receipt-id", self.receipt_id)], self.headers)

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Receipt:
        return cls(receipt_id=fields.require("receipt-id"), headers=fields.extra)


@_wire("ERROR", typed=("message", "receipt-id", "content-type"))
@dataclass(frozen=True, slots=True, repr=False)
class Error(FrameEvent):
    """ERROR: the server reports a problem and closes the connection.

    ``message`` is the short description, ``body`` the details;
    ``receipt_id`` names the client frame it is about, when that frame asked
    for a receipt.
    """

    #: The short description (``message`` header).
    message: str | None = None
    #: The details, as bytes.
    body: bytes = b""
    #: The ``receipt`` of the client frame the error is about, if it asked for one.
    receipt_id: str | None = None
    #: The ``content-type`` header: the MIME type of ``body``.
    content_type: str | None = None
    #: Every other header, ``(name, value)`` pairs in wire order (see :data:`Headers`).
    headers: Headers = ()

    def _to_frame(self, version: Version) -> Frame:
        return _frame(
            "ERROR",
            [
                ("message", self.message),
                ("receipt-id", self.receipt_id),
                ("content-type", self.content_type),
            ],
            self.headers,
            self.body,
        )

    @classmethod
    def _from_frame(cls, frame: Frame, fields: _Fields, version: Version) -> Error:
        return cls(
            message=fields.get("message"),
            body=frame.body,
            receipt_id=fields.get("receipt-id"),
            content_type=fields.get("content-type"),
            headers=fields.extra,
        )


# -- connection outcomes ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectionClosed(Event):
    """The peer ended the stream (``receive_data(None)``) and every frame before it was read."""


@dataclass(frozen=True, slots=True)
class HeartBeatTimeout(Event):
    """Nothing arrived from the peer for longer than the heart-beat deadline.

    ``silence`` is how long (seconds) nothing had arrived, as of the timer call
    that noticed it.  The connection is closed: drop the transport.
    """

    #: How long (seconds) nothing had arrived, when the timer noticed.
    silence: float


# -- the peer's errors -------------------------------------------------------------
#
# Here rather than in _errors with the rest of the family: ``event_hint`` is an Error
# event, and from_frame above raises it, so this module and _errors would import each
# other.  _errors re-exports both names.


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow.

    ``event_hint`` is filled in by :class:`ServerConnection`: the ERROR event
    to send to the peer before closing the connection, as the specs ask of
    servers (like wsproto's ``event_hint``).  It is ``None`` when raised by the
    codec or a client connection.
    """

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        *,
        event_hint: Error | None = None,
        limit: str | None = None,
    ) -> None:
        super().__init__(kind, message, limit=limit)
        #: The ERROR event to send before closing (server side), or ``None``.
        self.event_hint = event_hint


def as_remote(error: LocalProtocolError) -> RemoteProtocolError:
    """``error``, found in what the peer sent instead of in what we were asked to send.

    Inside, every check raises :class:`LocalProtocolError`, whichever side the
    frame came from; the receiving paths (``FrameEvent.from_frame`` and a
    connection's ``next_event``) turn it into this, once, as h11 does.
    """
    return RemoteProtocolError(error.kind, error.message, limit=error.limit)


ClientEvent = (
    Connect | Send | Subscribe | Unsubscribe | Ack | Nack | Begin | Commit | Abort | Disconnect
)
ServerEvent = Connected | Message | Receipt | Error

#: Which event class reads each command's frames.
EVENT_FOR_COMMAND: dict[str, type[FrameEvent]] = {
    "CONNECT": Connect,
    "STOMP": Connect,
    "SEND": Send,
    "SUBSCRIBE": Subscribe,
    "UNSUBSCRIBE": Unsubscribe,
    "ACK": Ack,
    "NACK": Nack,
    "BEGIN": Begin,
    "COMMIT": Commit,
    "ABORT": Abort,
    "DISCONNECT": Disconnect,
    "CONNECTED": Connected,
    "MESSAGE": Message,
    "RECEIPT": Receipt,
    "ERROR": Error,
}

# The native twin (stomp_proto/_events_native.pyx), or None: the pure build.
# Looked up last: it imports the classes above.
_native = native("_events_native")
