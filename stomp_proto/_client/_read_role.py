"""The threads client's read role: which thread reads the socket for the others.

One thread at a time holds the role (leader and followers): it waits on the
socket and acts on what came.  A thread that needs data takes the role while
it is free; while another holds it, it waits as a *follower* and is woken
when something arrived for it, or when the role became free and it should
take it.  The background thread (the *keeper*) takes the role only when it
stayed free for :data:`IDLE_READ` seconds, and keeps time while nobody reads.
When an event loop reads for the client (it watches the socket and calls the
client's ``pump()`` when it is readable), the background thread only reads
what the loop left for :data:`LOOP_IDLE_READ` seconds, without waiting, so
that what arrives is read on the loop's thread, with no hand-off.

:class:`ReadRole` owns the hub lock and all the state of the role: who
reads, how often the role was taken (the epoch), the followers, whether the
current session may be read, how it ended, whether reading is paused by a
full buffer.  The buffers and every wait of the client are guarded by the
same lock, so that a follower can never miss its wake-up.  It does no I/O:
the reading itself, and keeping time, are the client's callables.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from .._errors import ErrorKind, LocalProtocolError
from .._events import Event, Message
from ._errors import ClientError

__all__ = ["IDLE_READ", "LOOP_IDLE_READ", "Follower", "ReadRole", "Waiter", "waits_on_itself"]

#: Seconds the read role must stay free before the background thread takes it
#: (unless a heart-beat or held acknowledgements are due sooner).  Threads that
#: need data read for themselves; the background thread only reads for nobody.
IDLE_READ = 0.05
#: The same while an event loop reads for the client: the background thread then
#: reads only what the loop left unread that long (its thread is busy: a long task),
#: or when a timer is due, so that heart-beats are still heard.
LOOP_IDLE_READ = 1.0


class Follower(Protocol):
    """A waiting thread's object (a subscription, a receipt wait), as the read role sees it."""

    def _needs_data(self) -> bool:
        """Whether a thread waits on it for data that is not there yet (under the hub lock)."""

    def _wake(self) -> None:
        """Wake one thread waiting on it (under the hub lock)."""


class ReadRole:
    """The read role of one client, and the hub lock that guards it.

    ``read(wait)`` is the client's one read step (for the role's holder):
    wait up to ``wait`` seconds for data, feed it, act on the events.
    Methods and attributes noted "under the lock" expect :attr:`lock` held.
    """

    __slots__ = (
        "_followers",
        "_keeper",
        "_keeper_parked",
        "_read",
        "closed",
        "connected",
        "ending",
        "epoch",
        "freed_at",
        "live",
        "lock",
        "loop_reads",
        "overflowing",
        "reader_ident",
        "reading",
    )

    def __init__(self, read: Callable[[float | None], None]) -> None:
        #: The hub lock: the read role, the buffers and every wait.
        self.lock = threading.Lock()
        #: Where the background thread waits while it does not read.
        self._keeper = threading.Condition(self.lock)
        self._read = read
        #: Whether some thread holds the read role, and which (its ident).
        self.reading = False
        self.reader_ident: int | None = None
        #: How many times the read role was taken (the background thread reads
        #: only when it stayed free for a while).
        self.epoch = 0
        #: Whether the current stream may be read: a session is on it and has not ended.
        self.live = False
        #: How the current session ended, for the background thread: (whether
        #: it got CONNECTED, why it ended).
        self.ending: tuple[bool, ClientError] | None = None
        #: Whether the current session got CONNECTED.
        self.connected = False
        #: Whether the client is closed (set by its close(), under its state lock).
        self.closed = False
        #: Subscriptions with messages that did not fit: nobody reads meanwhile.
        self.overflowing = 0
        #: Objects that threads wait on for data, oldest first (see hand_on).
        self._followers: dict[Follower, None] = {}
        #: Whether the background thread waits for the read role to be freed.
        self._keeper_parked = False
        #: When the read role was last let go (the background thread reads
        #: once it stayed free for IDLE_READ).
        self.freed_at = float("-inf")
        #: Whether an event loop reads for the client (see LOOP_IDLE_READ).
        self.loop_reads = False

    def condition(self) -> threading.Condition:
        """A condition on the hub lock, for one kind of wait."""
        return threading.Condition(self.lock)

    # -- taking and letting go (any thread) ------------------------------------------

    def may_lead(self) -> bool:
        """Whether the read role can be taken now (under the lock)."""
        return (
            not self.reading
            and self.live
            and not self.overflowing
            and self.ending is None
            and not self.closed
        )

    def lead(self) -> None:
        """Take the read role (under the lock, after may_lead)."""
        self.reading = True
        self.reader_ident = threading.get_ident()
        self.epoch += 1

    def take(self, timeout: float | None) -> bool:
        """Take the read role for this thread (the lock not held): at once when it
        is free.  While another thread holds it, wait up to ``timeout`` seconds for
        it to be let go, then return False without taking it: what that thread read
        may be what the caller wants, so the caller looks before it reads.  False at
        once when nobody may read (no live session, a full buffer, closed) or when
        ``timeout`` is 0."""
        with self.lock:
            if self.reads_here():
                raise waits_on_itself()
            if self.may_lead():
                self.lead()
                return True
            if not self.reading or timeout == 0:
                return False
            turn = _Turn(self)
            self.follow(turn)
            try:
                turn.cond.wait(timeout)
            finally:
                self.unfollow(turn)
            self.hand_on()
            return False

    def read(self, wait: float | None) -> None:
        """Read once as the role's holder (taken with lead), then let the role go."""
        try:
            self._read(wait)
        finally:
            self.release()

    def release(self) -> None:
        """Let the read role go (the lock not held)."""
        with self.lock:
            self.reading = False
            self.reader_ident = None
            self.freed_at = time.monotonic()
            self.hand_on()
            if self.closed:
                self._keeper.notify_all()  # close() waits for the reading to stop

    def reads_here(self) -> bool:
        """Whether this thread holds the read role (it is in an inline ``on_message``)."""
        return self.reading and self.reader_ident == threading.get_ident()

    def hand_on(self) -> None:
        """The read role may be free: wake one thread that needs data to take it,
        else the background thread if it waits for that (under the lock)."""
        if self.reading:
            return
        if self.may_lead():
            for follower in self._followers:
                if follower._needs_data():
                    follower._wake()
                    return
        if self._keeper_parked:
            self._keeper.notify()

    def wake_keeper(self) -> None:
        """A timer came nearer (a held acknowledgement): the background thread, if it
        waits, looks again at when to wake (the lock not held)."""
        with self.lock:
            if not self.reading:
                self._keeper.notify()

    def follow(self, follower: Follower) -> None:
        """``follower`` has a thread waiting on it for data (under the lock)."""
        self._followers[follower] = None

    def unfollow(self, follower: Follower) -> None:
        """No thread waits on ``follower`` any more (under the lock)."""
        self._followers.pop(follower, None)

    # -- back-pressure (under the lock) ----------------------------------------------

    def overflow_began(self) -> None:
        """A subscription's buffer overflowed: nobody reads until it has room."""
        self.overflowing += 1

    def overflow_ended(self) -> None:
        """A subscription's overflow is gone (taken, or dropped)."""
        self.overflowing -= 1
        if not self.overflowing:
            self.hand_on()  # reading may resume

    # -- sessions --------------------------------------------------------------------

    def session_began(self) -> None:
        """A new stream may be read (under the lock): nobody reads it yet."""
        self.connected = False
        self.freed_at = float("-inf")  # nobody reads yet: the background thread may
        self.live = True

    def end_session(self, error: ClientError) -> None:
        """The session is over (under the lock); the background thread takes over."""
        if self.ending is None and self.live:
            self.ending = (self.connected, error)
        self.live = False
        self._keeper.notify_all()

    def stop(self) -> None:
        """The client closes: nobody may read any more, the background thread ends."""
        with self.lock:
            self.live = False
            self._keeper.notify_all()

    def wait_unread(self) -> None:
        """Wait until nobody holds the read role (after stop)."""
        with self.lock:
            while self.reading:
                self._keeper.wait()

    # -- the background thread -------------------------------------------------------

    def keep(
        self,
        next_wake: Callable[[], float | None],
        keep_time: Callable[[bool], None],
    ) -> tuple[bool, ClientError] | None:
        """Keep the current session until it ends (how it ended), or the client closes (None).

        Read while nobody else needs to; keep time while nobody reads:
        ``next_wake()`` is how long a reader may wait (see the client's timers),
        ``keep_time(reading)`` handles the timers without reading (``reading``:
        whether reading goes on, that is, it is not paused).
        """
        seen = -1  # the epoch at the last look: unchanged and busy, the holder waits on the socket
        while True:
            with self.lock:
                if self.ending is not None:
                    ended, self.ending = self.ending, None
                    return ended
                if self.closed:
                    return None
                now = time.monotonic()
                free_for = now - self.freed_at
                idle_read = IDLE_READ
                timer_due = False
                if self.loop_reads:
                    idle_read = LOOP_IDLE_READ
                    # A timer (a heart-beat check) is due: what the broker sent is
                    # read first, or a busy loop's thread would make it look silent.
                    due = next_wake()
                    timer_due = due is not None and due <= 0
                # Before CONNECTED nobody streams: read whenever the role is free.
                lead = self.may_lead() and (
                    free_for >= idle_read or not self.connected or timer_due
                )
                if lead:
                    self.lead()
                else:
                    idle = self.epoch == seen
                    seen = self.epoch
                    paused = self.overflowing > 0
                    wait: float | None
                    if self.reading and idle and not paused:
                        wait = None  # the holder keeps time; wake when it lets go
                    elif self.reading:
                        wait = IDLE_READ
                    else:  # nobody reads: keep time meanwhile
                        wait = next_wake()
                        if not paused:
                            left = idle_read - free_for
                            wait = left if wait is None else min(wait, left)
                    self._keeper_parked = wait is None or paused
                    try:
                        self._keeper.wait(wait)
                    finally:
                        self._keeper_parked = False
                    keeping = self.live and not self.reading
                    paused = self.overflowing > 0
                    # What comes is the loop's to read: keep time (heart-beats out,
                    # held acknowledgements written) without counting what is unread
                    # against the broker; a due check is read for on the next turn.
                    loop_left = self.loop_reads and self.may_lead()
            if lead:
                try:
                    while True:
                        # What the event loop left unread, without waiting: what
                        # comes next is the loop's to read.
                        leave = self.loop_reads and self.connected
                        self._read(0.0 if leave else None)
                        with self.lock:
                            if leave or self._followers or not self.live or self.overflowing:
                                break
                finally:
                    self.release()
                continue
            if keeping:
                keep_time(not paused and not loop_left)


class _Turn:
    """A thread that waits for the read role itself (see ReadRole.take), as a follower."""

    __slots__ = ("cond",)

    def __init__(self, role: ReadRole) -> None:
        self.cond = role.condition()

    def _needs_data(self) -> bool:
        return True

    def _wake(self) -> None:
        self.cond.notify()


class Waiter:
    """One thread waits for an answer from the broker (a receipt, CONNECTED).

    The waiting thread reads for itself while nobody else does.
    """

    __slots__ = ("_cond", "_done", "_error", "_role", "_value")

    def __init__(self, role: ReadRole) -> None:
        self._role = role
        self._cond = role.condition()
        self._done = False
        self._value: Event | Message | None = None
        self._error: BaseException | None = None

    def _needs_data(self) -> bool:
        return not self._done

    def _wake(self) -> None:
        self._cond.notify()

    def _settle(self, value: Event | Message | None, error: BaseException | None) -> None:
        """Complete the wait (under the hub lock); the first answer wins."""
        if not self._done:
            self._done = True
            self._value = value
            self._error = error
            self._cond.notify_all()

    def set_result(self, value: Event | Message) -> None:
        with self._role.lock:
            self._settle(value, None)

    def set_exception(self, error: BaseException) -> None:
        with self._role.lock:
            self._settle(None, error)

    def wait(self, timeout: float | None) -> Event | Message | None:
        """The answer; a bare TimeoutError after ``timeout`` seconds, which the caller
        words (it knows what it waited for)."""
        role = self._role
        deadline = None if timeout is None else time.monotonic() + timeout
        waited = False
        while True:
            with role.lock:
                if self._done:
                    if waited:
                        role.hand_on()
                    break
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    if waited:
                        role.hand_on()
                    raise TimeoutError
                if not role.may_lead():
                    if role.reads_here():
                        raise waits_on_itself()
                    role.follow(self)
                    try:
                        self._cond.wait(wait)
                    finally:
                        role.unfollow(self)
                    waited = True
                    continue
                role.lead()
            role.read(wait)
        if self._error is not None:
            raise self._error
        return self._value


def waits_on_itself() -> LocalProtocolError:
    """The error of a wait for the broker on the thread that holds the read role."""
    return LocalProtocolError(
        ErrorKind.BAD_STATE,
        "an inline on_message cannot wait for the broker (a receipt, a message): "
        "the thread that calls it is the one that reads",
    )
