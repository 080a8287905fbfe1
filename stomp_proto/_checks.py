"""Checks of what a caller passes in: the wrong type is a TypeError that says what fits.

Events are checked once, where they are sent (:func:`check_event`, called by
``send()`` before any byte is made), never where they are built: the decoder
builds an event for every frame it receives, from values it has already
checked, and must not pay for a second look.  Constructors and the few other
entry points check their arguments with the small helpers below.

A wrong type raises :class:`TypeError`; a value of the right type that the
protocol cannot carry raises :class:`LocalProtocolError` (or ``ValueError``
for plain numbers such as a negative limit).  Every message names the
argument and says what would fit.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping

from ._limits import Limits
from ._protocol_errors import ErrorKind, LocalProtocolError

#: An event's other headers: ``(name, value)`` pairs of str, in wire order.
Headers = tuple[tuple[str, str], ...]

__all__ = [
    "as_headers",
    "check_bool",
    "check_data",
    "check_event",
    "check_limits",
    "check_number",
    "describe",
    "is_int",
    "wrong_type",
]

_NONE = type(None)


def describe(value: object) -> str:
    """``value`` for an error message: its type, and a short repr."""
    if value is None:
        return "None"
    shown = repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"{type(value).__name__} {shown}"


def wrong_type(argument: str, expected: str, value: object, fix: str = "") -> TypeError:
    """The TypeError for ``argument``: what it must be, what it was, and how to fix it."""
    text = f"{argument} must be {expected}, not {describe(value)}"
    return TypeError(f"{text}; {fix}" if fix else text)


def is_int(value: object) -> bool:
    """An int that is not a bool (``isinstance``: ``type() is`` misreads bools compiled)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_bool(argument: str, value: object) -> None:
    if not isinstance(value, bool):
        raise wrong_type(argument, "True or False", value)


def check_number(argument: str, value: object, *, minimum: float | None = None) -> None:
    """A real number (an int or a float, not a bool, not NaN), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise wrong_type(argument, "a number", value)
    if math.isnan(value):
        raise ValueError(f"{argument} must be a number, not NaN")
    if minimum is not None and value < minimum:
        raise ValueError(f"{argument} must be at least {minimum:g}, not {value!r}")


def check_limits(argument: str, value: object) -> None:
    if value is not None and not isinstance(value, Limits):
        raise wrong_type(
            argument, "a Limits or None", value, "pass Limits(max_body_size=...) for other bounds"
        )


def check_data(value: object) -> None:
    """What ``receive_data`` takes: bytes or another bytes-like object, or None."""
    if type(value) is not bytes and not isinstance(value, (bytearray, memoryview, _NONE)):
        raise wrong_type(
            "receive_data() data",
            "bytes, bytearray or memoryview (None: the stream ended)",
            value,
            "pass the bytes read from the socket" + (", encoded" if isinstance(value, str) else ""),
        )


def as_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> Headers:
    """``headers`` (a mapping or pairs) as a tuple of pairs of str; TypeError if they are not."""
    if isinstance(headers, (str, bytes)) or not isinstance(headers, (Mapping, Iterable)):
        raise wrong_type(
            "headers", "a mapping or (name, value) pairs", headers, "such as {'persistent': 'true'}"
        )
    items = headers.items() if isinstance(headers, Mapping) else headers
    pairs = []
    for item in items:
        if type(item) is not tuple:
            if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
                raise wrong_type("each header", "a (name, value) pair", item)
            item = tuple(item)
        if len(item) != 2:
            raise wrong_type("each header", "a (name, value) pair", item)
        name, value = item
        if not isinstance(name, str) or not isinstance(value, str):
            raise wrong_type(
                f"header {name!r}", "a str name with a str value", value, "convert it with str()"
            )
        pairs.append((name, value))
    return tuple(pairs)


# -- events ------------------------------------------------------------------------

#: What an event field may hold, by the kind of its default: a field without
#: one is a required str, one that defaults to None an optional str.  (Read from
#: the defaults, not the annotations: a compiled build does not keep those.)
_BY_DEFAULT: dict[type, tuple[tuple[type, ...], str]] = {
    type(dataclasses.MISSING): ((str,), "a str"),
    _NONE: ((str, _NONE), "a str or None"),
    str: ((str,), "a str"),
    bool: ((bool,), "True or False"),
    tuple: ((tuple,), "a tuple"),
}
#: Converted (and refused) by FrameEvent.__post_init__ already.
_CONVERTED = frozenset({"body", "headers"})

#: What fits, for the fields users most often get wrong.
_FIXES = {
    "destination": "the queue or topic, such as '/queue/a'",
    "heartbeat": "(can send every ms, wants every ms), such as (10000, 10000); (0, 0) for none",
    "accept_versions": "such as ('1.1', '1.2')",
    "ack": "one of 'auto', 'client', 'client-individual'",
}

_Check = tuple[str, tuple[type, ...], str]
_CHECKS: dict[type, tuple[_Check, ...]] = {}


def event_checks(cls: type) -> tuple[_Check, ...]:
    """``(field, types it may hold, how to say so)`` for each field of event class ``cls``."""
    checks = _CHECKS.get(cls)
    if checks is None:
        found = []
        for field in dataclasses.fields(cls):
            if field.name not in _CONVERTED:
                kinds, expected = _BY_DEFAULT[type(field.default)]  # a new kind needs an entry
                found.append((field.name, kinds, expected))
        checks = _CHECKS[cls] = tuple(found)
    return checks


def check_event(event: object) -> None:
    """Raise TypeError (or LocalProtocolError) if a field of ``event`` cannot be sent.

    One ``isinstance`` per field: it runs for every frame sent.
    """
    cls = type(event)
    checks = _CHECKS.get(cls)
    if checks is None:
        checks = event_checks(cls)
    for name, kinds, expected in checks:
        value = getattr(event, name)
        if not isinstance(value, kinds):
            raise _field_error(cls.__name__, name, expected, value)
    heartbeat = getattr(event, "heartbeat", (0, 0))
    if heartbeat != (0, 0):
        _check_pair(cls.__name__, heartbeat)
    for name in ("accept_versions", "covered"):
        values = getattr(event, name, ())
        if values and not all(isinstance(value, str) for value in values):
            raise _field_error(cls.__name__, name, "a tuple of str", values)
    command = getattr(event, "frame_command", "CONNECT")
    if command != "CONNECT" and command != "STOMP":
        raise LocalProtocolError(
            ErrorKind.BAD_COMMAND,
            f"Connect.frame_command must be 'CONNECT' or 'STOMP', not {command!r}",
        )


def _check_pair(owner: str, heartbeat: object) -> None:
    if not (type(heartbeat) is tuple and len(heartbeat) == 2 and all(is_int(x) for x in heartbeat)):
        raise _field_error(owner, "heartbeat", "a pair of ints", heartbeat)


def _field_error(owner: str, name: str, expected: str, value: object) -> TypeError:
    return wrong_type(f"{owner}.{name}", expected, value, _FIXES.get(name, ""))
