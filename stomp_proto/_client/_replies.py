"""Request/reply of one client: where replies go, and which request each answers.

:class:`Replies` owns it all: the reply destination (a ``/temp-queue/`` name of
the client's own), the subscription keys whose messages are replies, the
requests waiting and those that ended.  :class:`~._core.ClientCore` keeps one;
the adapters' ``request()`` and readers ask it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping

from .._checks import as_headers
from .._errors import LocalProtocolError
from .._events import Message, Subscribe
from .._protocol_errors import ErrorKind
from ._registry import LEFT_REMEMBERED

__all__ = ["CORRELATION_ID", "REPLY_TO", "TEMP_QUEUE", "Replies"]

#: Destinations under which RabbitMQ makes a temporary queue of the SEND's
#: connection when one is named by ``reply-to``: replies to it come as MESSAGEs
#: for a subscription the client never made, whose id is that destination.  On
#: ActiveMQ the client subscribes to one; on the embedded broker it is a queue.
TEMP_QUEUE = "/temp-queue/"

#: The headers by which a request names where its reply goes and which it is.
REPLY_TO = "reply-to"
CORRELATION_ID = "correlation-id"


def _correlation(message: Message) -> str | None:
    """The first ``correlation-id`` of ``message`` (1.2 §Repeated Header Entries)."""
    for name, value in message.headers:
        if name == CORRELATION_ID:
            return value
    return None


class Replies:
    """The request/reply state of one client, across reconnects (see the module).

    ``ids`` is the client's counter, shared with its other ids.
    """

    __slots__ = ("_answered", "_ids", "_requests", "_token", "channels", "reply_to")

    def __init__(self, ids: Iterator[int]) -> None:
        self._ids = ids
        #: Where this client's requests ask for replies (None before the first).
        self.reply_to: str | None = None
        #: Subscription keys whose messages are replies: the reply subscription, or
        #: RabbitMQ's id for its temporary queue.  Never strangers.
        self.channels: set[str] = set()
        #: Requests waiting for a reply: correlation id -> the adapter's waiter key.
        self._requests: dict[str, str] = {}
        #: Correlation ids of requests that ended (a late reply is no stranger's).
        self._answered: dict[str, None] = {}
        #: Makes this client's reply destination and correlation ids its own.
        self._token = secrets.token_hex(6)

    def destination(
        self, server: str | None, subscribe: Callable[[str], Subscribe]
    ) -> tuple[str, Subscribe | None]:
        """Where replies go, and the SUBSCRIBE (made by ``subscribe``) the client must
        send first, if any; ``server``: the CONNECTED ``server`` header (see
        :meth:`~._core.ClientCore.reply_destination`)."""
        if self.reply_to is not None:
            return self.reply_to, None
        self.reply_to = reply_to = f"{TEMP_QUEUE}stomp_proto-replies-{self._token}"
        if (server or "").startswith("RabbitMQ/"):
            self.channels.add(reply_to)  # RabbitMQ's subscription id is the name
            return reply_to, None
        event = subscribe(reply_to)
        self.channels.add(event.key)
        return reply_to, event

    def failed(self, event: Subscribe) -> None:
        """The reply subscription ``event`` was refused: the next request tries again."""
        self.channels.discard(event.key)
        self.reply_to = None

    def started(
        self, headers: Mapping[str, str] | Iterable[tuple[str, str]] | None, reply_to: str
    ) -> tuple[tuple[tuple[str, str], ...], str, str]:
        """A request begins: its headers (``headers`` with ``reply-to`` and
        ``correlation-id``), its correlation id and the adapter's key for its waiter."""
        pairs = as_headers(headers) if headers else ()
        for name, _ in pairs:
            if name in (REPLY_TO, CORRELATION_ID):
                raise LocalProtocolError(
                    ErrorKind.BAD_HEADER,
                    f"request() sets the {name!r} header itself; use send() to set your own",
                )
        correlation = f"{self._token}-{next(self._ids)}"
        key = f"reply {correlation}"
        self._requests[correlation] = key
        return (*pairs, (REPLY_TO, reply_to), (CORRELATION_ID, correlation)), correlation, key

    def ended(self, correlation: str) -> None:
        """The request ``correlation`` has its reply, or stopped waiting."""
        self._requests.pop(correlation, None)
        self._answered[correlation] = None
        if len(self._answered) > LEFT_REMEMBERED:
            del self._answered[next(iter(self._answered))]

    def key(self, message: Message) -> str | None:
        """The waiter key of the request ``message`` replies to, if one waits."""
        if not self._requests:
            return None
        correlation = _correlation(message)
        return None if correlation is None else self._requests.get(correlation)

    def late(self, message: Message) -> bool:
        """Whether ``message`` replies to a request that has ended (timed out)."""
        return bool(self._answered) and _correlation(message) in self._answered
