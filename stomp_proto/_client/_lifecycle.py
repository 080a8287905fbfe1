"""A client's life as operations see it: its state, a log line and a hook call at each
change, the counts, and the error it ends with when it gives up.

Every adapter reports the same moments (an attempt begins, a session is up, a session
is lost, an attempt failed, the client gave up, it was closed) to one
:class:`Lifecycle`; what each moment means - the next state, what is logged to the
``stomp_proto.client.sessions`` logger, what the ``on_state_change`` hook is told - is decided
here once.  Sans-IO like the rest of the client core: the adapters pass the time.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from .._public import present_as
from ._errors import BrokerError, ClientError, ReconnectExhausted, reason

__all__ = [
    "ClientState",
    "ClientStats",
    "Lifecycle",
    "SessionEvent",
    "SessionEventHook",
    "SessionHook",
    "StateHook",
]

#: Sessions' ups and downs: INFO for each new session and failed attempt, WARNING for a
#: lost session, ERROR when the client gives up.  Its own logger, below the clients'
#: ``stomp_proto.client``, so that operations can route or silence it alone.
log = logging.getLogger("stomp_proto.client.sessions")


class ClientState(enum.Enum):
    """Where a client stands; :attr:`AsyncClient.state` and the ``on_state_change`` hook
    give it."""

    #: The first connect is under way.
    CONNECTING = "connecting"
    #: A session is up: calls go through.
    CONNECTED = "connected"
    #: The session was lost and the client is coming back (``reconnect=``): calls
    #: wait up to ``timeout`` for the next session.
    RECONNECTING = "reconnecting"
    #: Closed by the application (``close()``, ``disconnect()``, the ``with`` block).
    CLOSED = "closed"
    #: Over for good: the session was lost with no reconnect asked for, the reconnect
    #: schedule was spent (:class:`~stomp_proto.ReconnectExhausted`), or the broker
    #: kept refusing (:class:`~stomp_proto.BrokerError`).
    FAILED = "failed"


@dataclass(slots=True)
class ClientStats:
    """Counts of one client's life (:attr:`AsyncClient.stats`), for monitoring.

    One object for the client's whole life, updated in place: read it whenever.
    """

    #: Connection attempts made (the one that connected first included).
    attempts: int = 0
    #: Sessions that reached CONNECTED.
    sessions: int = 0
    #: Of those, the ones after the first: successful reconnects.
    reconnects: int = 0
    #: Sessions lost (the connection dropped, heart-beats stopped, an ERROR ended it).
    lost: int = 0
    #: SEND frames written (in every session; one in a transaction counts when written).
    sent: int = 0
    #: MESSAGE frames received from the broker (buffered for a subscription or not).
    received: int = 0
    #: ACK frames written (one held back to go out with later frames counts at once).
    acked: int = 0
    #: NACK frames written, counted as the ACKs.
    nacked: int = 0


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """A moment of a client's sessions, for the ``on_session`` hook and
    ``client.session_events()``."""

    #: ``"connected"`` (the first session is up), ``"lost"`` (a session ended
    #: without the application asking), ``"reconnected"`` (a later session is
    #: up, its subscriptions restored) or ``"gave_up"`` (no more attempts: the
    #: client has failed for good).
    kind: Literal["connected", "lost", "reconnected", "gave_up"]
    #: The ``(host, port)`` of the broker it happened with.
    broker: tuple[str, int]
    #: What ended the session (``"lost"``) or the client (``"gave_up"``); else None.
    error: ClientError | None = None
    #: Sessions the client has had so far (the one now up included).
    sessions: int = 0


#: The ``on_session`` hook: called with each :class:`SessionEvent`, in the client's own
#: task or thread; like ``on_state_change`` it must not block, and what it raises is
#: logged, not propagated.
SessionEventHook = Callable[[SessionEvent], object]

#: The ``on_state_change`` hook: called with the new state and, for RECONNECTING and
#: FAILED, the error behind it.  It runs in the client's own task or thread: it must
#: not block, and what it raises is logged, not propagated.
StateHook = Callable[[ClientState, ClientError | None], object]


class SessionHook(Protocol):
    """The sessions' part of :class:`~stomp_proto.TracingHook`: told as sessions come
    and go, to count them as metrics."""

    def session_up(self, broker: tuple[str, int], reconnect: bool) -> None:
        """A session with ``broker`` (``(host, port)``) is up; ``reconnect``: it is not
        the client's first."""
        ...

    def session_lost(self, broker: tuple[str, int], error: ClientError) -> None:
        """The session with ``broker`` was lost with ``error``."""
        ...


class Lifecycle:
    """One client's state, counts and the last failure at each broker address."""

    __slots__ = (
        "_began",
        "_brokers",
        "_hook",
        "_listeners",
        "_on_session",
        "_reasons",
        "_retries",
        "_sessions",
        "state",
        "stats",
    )

    def __init__(
        self,
        current: Callable[[], tuple[str, int]],
        hook: StateHook | None,
        sessions: SessionHook | None = None,
        on_session: SessionEventHook | None = None,
    ) -> None:
        self._on_session = on_session
        #: What ``client.session_events()`` iterators registered: told each event,
        #: then None once the client is over.
        self._listeners: list[Callable[[SessionEvent | None], None]] = []
        #: Where the client stands.
        self.state = ClientState.CONNECTING
        self.stats = ClientStats()
        self._brokers = current  # the address in use (or being tried)
        self._hook = hook
        self._sessions = sessions
        #: The reason of the last failure at each address, in the order first seen.
        self._reasons: dict[tuple[str, int], str] = {}
        self._began: float | None = None
        #: Attempts since the last session came up.
        self._retries = 0

    def attempt(self, now: float) -> None:
        """An attempt at the current address begins."""
        self._began = now
        self._retries += 1
        self.stats.attempts += 1

    def failed(self, exc: BaseException, timeout: float | None = None) -> None:
        """The attempt at the current address failed with ``exc``."""
        address = self._brokers()
        why = reason(exc, timeout)
        self._reasons[address] = why
        log.info("attempt %d at %s:%d failed: %s", self._retries, *address, why)

    def connected(self, now: float) -> None:
        """A session is up (CONNECTED came, its subscriptions were sent again)."""
        took = 0.0 if self._began is None else now - self._began
        self.stats.sessions += 1
        if self.stats.sessions > 1:
            self.stats.reconnects += 1
        host, port = self._brokers()
        log.info(
            "session %d with %s:%d up (attempt %d, %.3f s)",
            self.stats.sessions,
            host,
            port,
            self._retries,
            took,
        )
        self._retries = 0
        self._reasons.clear()
        if self._sessions is not None:
            self._sessions.session_up((host, port), self.stats.sessions > 1)
        self._change(ClientState.CONNECTED, None)
        kind: Literal["connected", "reconnected"]
        kind = "reconnected" if self.stats.sessions > 1 else "connected"
        self._tell(SessionEvent(kind, (host, port), None, self.stats.sessions))

    def lost(self, error: ClientError, *, again: bool) -> None:
        """The session was lost with ``error``; ``again``: the client reconnects."""
        address = self._brokers()
        why = reason(error)
        self._reasons[address] = why
        self.stats.lost += 1
        log.warning(
            "session with %s:%d lost: %s%s", *address, why, "; reconnecting" if again else ""
        )
        if self._sessions is not None:
            self._sessions.session_lost(address, error)
        self._change(ClientState.RECONNECTING if again else ClientState.FAILED, error)
        self._tell(SessionEvent("lost", address, error, self.stats.sessions))
        if not again:
            self._tell(None)

    def gave_up(self, error: ClientError) -> ClientError:
        """The client stops reconnecting after ``error``: the error it ends with.

        A broker that kept refusing ends it with its :class:`BrokerError`; a spent
        schedule with a :class:`ReconnectExhausted` naming every address tried.
        """
        ending: ClientError
        if isinstance(error, BrokerError):
            ending = error
        else:
            ending = ReconnectExhausted(self._retries, tuple(self._reasons.items()))
            ending.__cause__ = error
        log.error("gave up: %s", ending)
        self._change(ClientState.FAILED, ending)
        self._tell(SessionEvent("gave_up", self._brokers(), ending, self.stats.sessions))
        self._tell(None)
        return ending

    def listen(self, listener: Callable[[SessionEvent | None], None]) -> None:
        """Tell ``listener`` each event from now on, then None once the client is over
        (at once if it is over already)."""
        if self.state in (ClientState.CLOSED, ClientState.FAILED):
            listener(None)
            return
        self._listeners.append(listener)

    def unlisten(self, listener: Callable[[SessionEvent | None], None]) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _tell(self, event: SessionEvent | None) -> None:
        """``event`` to the hook and the listeners (None: the end, to the listeners)."""
        if event is not None and self._on_session is not None:
            try:
                self._on_session(event)
            except Exception:  # the application's bug must not stop the client
                log.exception("the on_session hook raised on %s", event.kind)
        for listener in list(self._listeners):
            listener(event)
        if event is None:
            self._listeners.clear()

    def closed(self) -> None:
        """The application closed the client."""
        self._tell(None)
        if self.state is ClientState.FAILED:
            return  # it was over already; closing it changes nothing
        if self.stats.sessions == 0:
            # A first-connect attempt that failed is closed without a word: the
            # application never had this client.
            self.state = ClientState.CLOSED
            return
        self._change(ClientState.CLOSED, None)

    def _change(self, state: ClientState, error: ClientError | None) -> None:
        if state is self.state:
            return
        self.state = state
        if self._hook is not None:
            try:
                self._hook(state, error)
            except Exception:  # the application's bug must not stop the client
                log.exception("the on_state_change hook raised")


present_as("stomp_proto", ClientState, ClientStats, SessionEvent)
