"""The subscriptions of one client and all their state, across reconnects.

:class:`Registry` is the one owner of what the client knows of each
subscription: whether it is open, the receipt of its SUBSCRIBE while that is
awaited, whether the broker knows it, which were left on the current
connection, and which restored ones the broker has yet to confirm.  The
adapters' subscription objects (the *handles*) hold only their SUBSCRIBE and
their buffer; :class:`~stomp_proto._client._core.ClientCore` keeps the registry
and asks it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from .._events import Subscribe
from ._errors import ClientError

__all__ = ["LEFT_REMEMBERED", "Handle", "Registry"]

#: Subscriptions left on one connection that the registry remembers, so that
#: messages still on their way to them are dropped, not taken for strangers'.
LEFT_REMEMBERED = 1024


class Handle(Protocol):
    """What the registry needs of an adapter's subscription object."""

    _event: Subscribe

    def _end(self, error: ClientError | None) -> None:
        """No more messages: after those buffered, end cleanly or raise ``error``.

        Also wakes the adapter's reader if it waits for room in the buffer: a
        message for an ended subscription is dropped.
        """


S = TypeVar("S", bound=Handle)


class Registry(Generic[S]):
    """The open subscriptions by key, and the state of each (see the module)."""

    __slots__ = ("_active", "_awaited", "_left", "_restoring", "open")

    def __init__(self) -> None:
        #: Open subscriptions by key, each the adapter's handle for it.
        self.open: dict[str, S] = {}
        #: The receipt id of each handle's SUBSCRIBE while that is awaited.
        self._awaited: dict[S, str] = {}
        #: The handles the broker knows (their SUBSCRIBE was confirmed, no UNSUBSCRIBE yet).
        self._active: set[S] = set()
        #: Subscriptions left on the current connection, by key (see :meth:`left`).
        self._left: dict[str, S] = {}
        #: Restored subscriptions whose SUBSCRIBE the broker has not yet
        #: confirmed, by receipt id, oldest first.
        self._restoring: dict[str, S] = {}

    def new_connection(self) -> None:
        """A new transport: nothing is left on it, nothing restored yet."""
        self._left.clear()
        self._restoring.clear()

    def subscribing(self, handle: S, receipt: str) -> None:
        """Register ``handle`` before its SUBSCRIBE (asking for ``receipt``) goes out."""
        self.open[handle._event.key] = handle
        self._awaited[handle] = receipt

    def subscribe_done(self, handle: S, *, ok: bool) -> None:
        """The SUBSCRIBE was confirmed (``ok``) or failed: it is then forgotten."""
        self._awaited.pop(handle, None)
        if ok:
            self._active.add(handle)
        else:
            self.open.pop(handle._event.key, None)

    def leaving(self, handle: S) -> bool:
        """Forget ``handle``; whether the broker knew it (an UNSUBSCRIBE is then due).

        Messages already on their way to it are dropped (:meth:`left` still finds it).
        """
        key = handle._event.key
        self.open.pop(key, None)
        self._awaited.pop(handle, None)  # (no RECEIPT nor MESSAGE can settle it now)
        if handle not in self._active:
            return False
        self._active.discard(handle)
        left = self._left
        left[key] = handle
        if len(left) > LEFT_REMEMBERED:
            del left[next(iter(left))]
        return True

    def left(self, key: str) -> S | None:
        """The handle left on this connection under ``key``, if any."""
        return self._left.get(key)

    def confirmed_by_message(self, handle: S) -> str | None:
        """A MESSAGE came for ``handle``: the receipt of its SUBSCRIBE that this
        settles, if one was awaited (it is then no longer)."""
        awaited = self._awaited
        if not awaited:
            return None
        receipt = awaited.pop(handle, None)
        if receipt is not None:
            self._restoring.pop(receipt, None)
        return receipt

    def restore(self, next_id: Callable[[str], str]) -> list[Subscribe]:
        """The SUBSCRIBE events that re-establish every open subscription, each
        asking for a receipt (an id from ``next_id``) that the registry awaits."""
        events = []
        for handle in self.open.values():
            receipt = next_id("restore")
            self._awaited[handle] = receipt
            self._restoring[receipt] = handle
            events.append(dataclasses.replace(handle._event, receipt=receipt))
        return events

    def restoring(self) -> bool:
        """Whether a restored subscription waits for the broker's confirmation."""
        return bool(self._restoring)

    def restored(self, receipt: str) -> bool:
        """Whether the RECEIPT ``receipt`` confirms a restored subscription (it is
        then no longer awaited)."""
        handle = self._restoring.pop(receipt, None)
        if handle is None:
            return False
        self._awaited.pop(handle, None)
        return True

    def refused(self, receipt: str | None) -> S | None:
        """An ERROR came while restored subscriptions wait: the one it refused
        (``receipt``, the ERROR's ``receipt-id``, names it; else the oldest),
        now forgotten, or None when none waits.

        Brokers answer frames in order, so the refused one is the one the
        ERROR's ``receipt-id`` names (ActiveMQ, the embedded broker), else the
        oldest still unconfirmed (RabbitMQ sends no ``receipt-id``).
        """
        restoring = self._restoring
        if not restoring:
            return None
        if receipt not in restoring:
            receipt = next(iter(restoring))
        handle = restoring.pop(receipt)
        restoring.clear()
        self.open.pop(handle._event.key, None)
        self._awaited.pop(handle, None)
        self._active.discard(handle)
        return handle

    def finish(self) -> list[S]:
        """Forget every open subscription; their handles, to end."""
        handles = list(self.open.values())
        self.open.clear()
        for handle in handles:
            self._active.discard(handle)
            self._awaited.pop(handle, None)
        return handles
