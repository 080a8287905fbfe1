"""Who may send to and subscribe to which destinations: per-login patterns, as in RabbitMQ.

RabbitMQ gives each user three regular expressions per virtual host -
configure, write, read - matched against resource names.  The embedded broker
has no virtual hosts and creates destinations on first use, so it keeps two:
``write`` (SEND to the destination) and ``read`` (SUBSCRIBE to it).  A pattern
must match the whole destination (:func:`re.fullmatch`); ``""`` matches none
and ``".*"`` every one.  A login without an entry may do neither.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, TypedDict

__all__ = ["AccessRules", "Permissions", "load_permissions"]


class Permissions(TypedDict, total=False):
    """What one login may do: a pattern each of destinations; a missing one matches none."""

    #: Destinations the login may SEND to (a regular expression for the whole name).
    write: str
    #: Destinations the login may SUBSCRIBE to.
    read: str


class AccessRules:
    """``permissions`` compiled: whether a login may write to or read a destination."""

    __slots__ = ("_patterns",)

    def __init__(self, permissions: Mapping[str, Permissions]) -> None:
        self._patterns: dict[str, dict[str, re.Pattern[str]]] = {}
        for login, allowed in permissions.items():
            unknown = set(allowed) - {"write", "read"}
            if unknown:
                raise ValueError(f"permissions of {login!r}: unknown {sorted(unknown)}")
            compiled = {}
            for access in ("write", "read"):
                pattern: object = allowed.get(access, "")
                if not isinstance(pattern, str):
                    raise ValueError(f"permissions of {login!r}: {access} must be a pattern")
                try:
                    compiled[access] = re.compile(pattern)
                except re.error as exc:
                    raise ValueError(
                        f"permissions of {login!r}: bad {access} pattern: {exc}"
                    ) from None
            self._patterns[login] = compiled

    def allows(self, login: str | None, access: Literal["write", "read"], destination: str) -> bool:
        patterns = self._patterns.get(login) if login is not None else None
        return patterns is not None and patterns[access].fullmatch(destination) is not None


def load_permissions(path: str | Path) -> dict[str, Permissions]:
    """The permissions in the TOML file ``path``: a table per login with ``write`` and
    ``read`` patterns, for ``BrokerCore(permissions=...)``.

    ::

        [ann]
        write = "/queue/orders"
        read = "/queue/.*|/topic/prices"

    Raises :class:`ValueError` for a file that is not that.
    """
    try:
        document = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: {exc}") from None
    permissions: dict[str, Permissions] = {}
    for login, table in document.items():
        if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
            raise ValueError(f"{path}: [{login}] must be a table of write and read patterns")
        permissions[login] = Permissions(**table)  # type: ignore[typeddict-item]
    AccessRules(permissions)  # checks every entry
    return permissions
