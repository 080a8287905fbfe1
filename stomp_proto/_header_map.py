"""A frame's headers read by name: :class:`HeaderMap`.

Events keep the headers without a typed field as ``(name, value)`` pairs in wire
order (:data:`~stomp_proto.Headers`): that is what they are on the wire, a name
may repeat, and code that iterates the pairs keeps working.  A :class:`HeaderMap`
is the read-by-name view over pairs, for :attr:`Message.all_headers
<stomp_proto.Message.all_headers>` and :meth:`Message.get
<stomp_proto.Message.get>`: lookups find the first value of a repeated header,
as STOMP 1.2 §Repeated Header Entries says only the first is significant, and
the repeated values are all kept (:meth:`HeaderMap.getall`, :attr:`HeaderMap.pairs`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TypeVar, overload

__all__ = ["HeaderMap"]

_T = TypeVar("_T")


class HeaderMap(Mapping[str, str]):
    """Read-only headers by name; the first value of a repeated name wins.

    ``len()`` and iteration count each name once, in the order first seen;
    :meth:`getall` gives every value of a name and :attr:`pairs` every pair,
    repeated ones included, in order.
    """

    __slots__ = ("_first", "_pairs")

    def __init__(self, pairs: tuple[tuple[str, str], ...]) -> None:
        first: dict[str, str] = {}
        for name, value in pairs:
            first.setdefault(name, value)
        self._first = first
        self._pairs = pairs

    def __getitem__(self, name: str) -> str:
        return self._first[name]

    def __iter__(self) -> Iterator[str]:
        """Each name once, in the order first seen (:attr:`pairs` for the pairs)."""
        return iter(self._first)

    def __len__(self) -> int:
        return len(self._first)

    def __contains__(self, name: object) -> bool:
        return name in self._first

    @overload
    def get(self, name: str, /) -> str | None: ...
    @overload
    def get(self, name: str, default: str, /) -> str: ...
    @overload
    def get(self, name: str, default: _T, /) -> str | _T: ...

    def get(self, name: str, default: object = None, /) -> object:
        """The first value of ``name``; ``default`` when there is none."""
        return self._first.get(name, default)

    def getall(self, name: str) -> list[str]:
        """Every value of ``name``, in wire order (empty when there is none)."""
        return [value for key, value in self._pairs if key == name]

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Every header as ``(name, value)``, repeated ones included, in order."""
        return self._pairs

    def __repr__(self) -> str:
        return f"HeaderMap({self._pairs!r})"
