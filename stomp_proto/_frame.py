"""The frame model: what one STOMP frame is, independent of any version's wire rules."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple, TypeVar, overload

from ._checks import as_headers, wrong_type

__all__ = [
    "BODY_COMMANDS",
    "CLIENT_COMMANDS",
    "COMMANDS",
    "COMMANDS_BY_VERSION",
    "SERVER_COMMANDS",
    "UNESCAPED_COMMANDS",
    "VERSIONS",
    "Frame",
    "Version",
]

Version = Literal["1.0", "1.1", "1.2"]
"""A STOMP protocol version, as written in ``accept-version`` and ``version`` headers."""

VERSIONS: tuple[Version, ...] = ("1.0", "1.1", "1.2")

CLIENT_COMMANDS = frozenset(
    {
        "CONNECT",
        "STOMP",
        "SEND",
        "SUBSCRIBE",
        "UNSUBSCRIBE",
        "BEGIN",
        "COMMIT",
        "ABORT",
        "ACK",
        "NACK",
        "DISCONNECT",
    }
)
SERVER_COMMANDS = frozenset({"CONNECTED", "MESSAGE", "RECEIPT", "ERROR"})
COMMANDS = CLIENT_COMMANDS | SERVER_COMMANDS

#: The commands of each version.  1.0 §Augmented BNF lists no NACK and no STOMP
#: (both came in 1.1); its ``client-command`` list also omits CONNECT, which
#: the 1.0 text defines (§Connecting), so CONNECT is kept.
COMMANDS_BY_VERSION: dict[Version, frozenset[str]] = {
    "1.0": COMMANDS - {"NACK", "STOMP"},
    "1.1": COMMANDS,
    "1.2": COMMANDS,
}

#: 1.1/1.2 §Body: only these frames may carry a body.
BODY_COMMANDS = frozenset({"SEND", "MESSAGE", "ERROR"})

#: 1.2 §Value Encoding: CONNECT and CONNECTED headers are never escaped, so that
#: a 1.0 peer can read them.  The STOMP frame is not exempt: only servers of
#: 1.1 and later understand it, and they unescape its headers.
UNESCAPED_COMMANDS = frozenset({"CONNECT", "CONNECTED"})

#: The type of ``Frame.get``'s default: whatever the caller passes.
Default = TypeVar("Default")


class Frame(NamedTuple):
    """One STOMP frame: a command, its headers in wire order, and a body.

    ``headers`` keeps every entry as sent, repeats included; lookups by name
    return the first entry, as the specs require ("Repeated Header Entries").
    Header names and values are ``str`` (decoded and unescaped); the body is
    raw ``bytes``.

    >>> from stomp_proto import Frame
    >>> f = Frame("MESSAGE", (("foo", "World"), ("foo", "Hello")), b"")
    >>> f.get("foo")
    'World'
    >>> f.get_all("foo")
    ['World', 'Hello']
    """

    #: The command: ``"SEND"``, ``"MESSAGE"`` ... (``"CONNECT"`` and the rest).
    command: str
    #: ``(name, value)`` pairs in wire order, repeats included.
    headers: tuple[tuple[str, str], ...] = ()
    #: The body, raw bytes (empty when the frame has none).
    body: bytes = b""

    @classmethod
    def make(
        cls,
        command: str,
        headers: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        body: bytes | str = b"",
    ) -> Frame:
        """Build a frame of ``command``, ``headers`` and ``body``.

        ``headers`` is a mapping or an iterable of ``(name, value)`` pairs; they
        keep their order.  Names and values must be ``str`` (as in the events:
        nothing is converted silently).  ``body`` is the raw bytes (empty by
        default); a ``str`` is encoded as UTF-8.
        """
        if not isinstance(command, str):
            raise wrong_type("Frame.make() command", "a str such as 'SEND'", command)
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif not isinstance(body, (bytes, bytearray, memoryview)):
            raise wrong_type("Frame.make() body", "bytes or str", body)
        return cls(command, as_headers(headers), bytes(body))

    @overload
    def get(self, name: str) -> str | None: ...
    @overload
    def get(self, name: str, default: Default) -> str | Default: ...
    def get(self, name: str, default: object = None) -> object:
        """The value of the first header called ``name``, or ``default``."""
        for key, value in self.headers:
            if key == name:
                return value
        return default

    def get_all(self, name: str) -> list[str]:
        """Every value of the headers called ``name``, in wire order."""
        return [value for key, value in self.headers if key == name]

    def header_map(self) -> dict[str, str]:
        """The headers as a dict in which the first of repeated entries wins."""
        first: dict[str, str] = {}
        for key, value in self.headers:
            first.setdefault(key, value)
        return first


def check_fields(headers: object, body: object) -> None:
    """TypeError unless ``headers`` is a tuple of pairs and ``body`` is bytes.

    Cheap checks: of the pairs only the first is looked at, which finds one pair
    given where a tuple of pairs belongs (``("ab", "cd")`` would otherwise be
    written as two headers, ``a:b`` and ``c:d``).  The rest of a wrong frame
    (later pairs that are not pairs of str, an unknown command) is the
    encoder's to refuse.
    """
    if type(headers) is not tuple:
        raise wrong_type(
            "Frame headers",
            "a tuple of (name, value) pairs",
            headers,
            "Frame.make(command, headers, body) takes a mapping",
        )
    if headers and type(headers[0]) is not tuple:
        raise wrong_type(
            "each header",
            "a (name, value) pair",
            headers[0],
            "a single header is ((name, value),)",
        )
    if type(body) is not bytes and not isinstance(body, (bytearray, memoryview)):
        raise wrong_type("Frame body", "bytes", body, "Frame.make() encodes a str as UTF-8")


_namedtuple_new = Frame.__new__
_tuple_new = tuple.__new__


def _checked_new(
    cls: type[Frame], command: str, headers: tuple[tuple[str, str], ...] = (), body: bytes = b""
) -> Frame:
    # Frame("SEND", {"a": "b"}) would otherwise make a frame that get() cannot read
    # and that fails only when encoded.  NamedTuple allows no __new__ in the class
    # body, hence this one set below.  The decoders and the events build their
    # frames with tuple.__new__, without it, so it costs them nothing.  The common
    # case is tested inline and the tuple made here, as the generated __new__ makes
    # it: no call more per frame than before the check.
    if (
        type(headers) is not tuple
        or type(body) is not bytes
        or (headers and type(headers[0]) is not tuple)
    ):
        check_fields(headers, body)
    return _tuple_new(cls, (command, headers, body))


_checked_new.__doc__ = _namedtuple_new.__doc__
Frame.__new__ = _checked_new  # type: ignore[assignment, method-assign]
