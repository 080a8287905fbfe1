"""Failover: the brokers a client may use, which one it uses, and the first connect.

Every adapter asks the same two things, and they are answered here once:

* :class:`Brokers` - the addresses in the order the client tries them (as
  given, or shuffled once with ``randomize``), and the one in use.  Each new
  connection (:meth:`ClientCore.new_connection`, called by every reconnect)
  moves on to the next address, so a lost session comes back on the next
  broker of the list, round and round, on the client's :class:`Backoff`.
* :class:`FirstConnect` - the first connect tries each address in turn, all
  within ``timeout``: each attempt gets ``connect_timeout``, or an equal share
  of the time left when that is less, so that an address that swallows packets
  cannot use up the time of the others.
  It fails only when every address failed, and then says why for each.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable, Iterator

from .._errors import ProtocolError
from ._errors import ClientError, ConnectionLost, reason
from ._lifecycle import log
from ._options import Address, ConnectOptions

__all__ = ["Brokers", "FirstConnect"]


class Brokers:
    """The addresses one client tries, in order, and the one in use.

    :attr:`options` are the client's options aimed at the current address
    (what the adapters open their stream with).
    """

    __slots__ = ("_base", "_index", "_order", "options")

    def __init__(self, options: ConnectOptions) -> None:
        order = list(options.hosts)
        if options.randomize:
            random.shuffle(order)  # once: then round the list like any other order
        self._order: tuple[Address, ...] = tuple(order)
        self._base = options
        self._index = 0
        self.options = self._aimed()

    def __len__(self) -> int:
        return len(self._order)

    @property
    def current(self) -> Address:
        """The address in use (or being tried)."""
        return self._order[self._index]

    def advance(self) -> None:
        """Move on to the next address (after the last, the first)."""
        if len(self._order) > 1:
            self._index = (self._index + 1) % len(self._order)
            self.options = self._aimed()

    def _aimed(self) -> ConnectOptions:
        host, port = self.current
        base = self._base
        if (host, port) == (base.host, base.port):
            return base
        return dataclasses.replace(base, host=host, port=port)


class FirstConnect:
    """The first connect's walk through the addresses (see the module's docstring).

    An adapter makes one client per attempt (nothing of a failed attempt is
    left to reuse), all sharing :attr:`brokers`::

        first = FirstConnect(options, clock)
        for wait, timeout in first.attempts():
            sleep(wait)
            client = Client(options, first.brokers)
            try:
                client._open(timeout)
            except BaseException as exc:
                client.close()
                first.failed(exc)   # re-raises what is not a connection failure
                continue
            return client
        raise first.error()
    """

    __slots__ = ("_clock", "_failures", "_timeout", "brokers", "options", "rounds")

    def __init__(self, options: ConnectOptions, clock: Callable[[], float]) -> None:
        self.options = options
        self.brokers = Brokers(options)
        self._clock = clock
        self._failures: list[tuple[Address, BaseException, float | None]] = []
        #: The current attempt's timeout (how long a timed-out one waited).
        self._timeout: float | None = None
        #: Rounds through the addresses begun (more than one with ``retry_first_connect``).
        self.rounds = 0

    def attempts(self) -> Iterator[tuple[float, float | None]]:
        """``(wait first, timeout)`` of each attempt, one per address; the brokers point
        at it.

        With ``retry_first_connect``, a round in which every address failed is
        followed by another after the next wait of the ``reconnect`` schedule, each
        round with the whole ``timeout``, until the schedule is spent.
        """
        backoff = self.options.reconnect if self.options.retry_first_connect else None
        delays = iter(()) if backoff is None else backoff.delays()
        wait = 0.0
        while True:
            self.rounds += 1
            total = self.options.timeout
            deadline = None if total is None else self._clock() + total
            for left in range(len(self.brokers), 0, -1):
                if self._failures:
                    self.brokers.advance()
                self._timeout = self._bound(deadline, left)
                yield wait, self._timeout
                wait = 0.0
            next_wait = next(delays, None)
            if next_wait is None:
                return
            wait = next_wait

    def _bound(self, deadline: float | None, left: int) -> float | None:
        """Seconds for the next attempt: ``connect_timeout``, or less when ``left``
        attempts must share what remains of ``timeout`` (until ``deadline``)."""
        bound = self.options.attempt_timeout
        if deadline is None:
            return bound
        share = max(0.0, deadline - self._clock()) / left
        return share if bound is None else min(bound, share)

    def failed(self, exc: BaseException) -> None:
        """The attempt at the current address failed with ``exc``; re-raised unless it
        is a failure to connect (cancellation, KeyboardInterrupt, a bug go through)."""
        if not isinstance(exc, (ClientError, OSError, TimeoutError, ProtocolError)):
            raise exc
        self._failures.append((self.brokers.current, exc, self._timeout))
        host, port = self.brokers.current
        why = reason(exc, self._timeout)
        log.info("attempt %d at %s:%d failed: %s", len(self._failures), host, port, why)

    def error(self) -> BaseException:
        """The error of a first connect where every address failed."""
        if len(self._failures) == 1:
            (host, port), exc, timeout = self._failures[0]
            if isinstance(exc, ClientError) and not isinstance(exc, ConnectionLost):
                return exc  # a BrokerError (a refused login) stays one
            why = reason(exc, timeout)
            error: ClientError = ConnectionLost(f"cannot connect to {host}:{port}: {why}")
        elif self.rounds > 1:  # retried: the last reason at each address
            last = {address: reason(exc, timeout) for address, exc, timeout in self._failures}
            reasons = "; ".join(f"{host}:{port}: {why}" for (host, port), why in last.items())
            error = ConnectionLost(
                f"cannot connect in {len(self._failures)} attempts ({self.rounds} rounds): "
                f"{reasons}"
            )
        else:
            reasons = "; ".join(
                f"{host}:{port}: {reason(exc, timeout)}"
                for (host, port), exc, timeout in self._failures
            )
            error = ConnectionLost(
                f"cannot connect to any of {len(self._failures)} brokers: {reasons}"
            )
        error.__cause__ = self._failures[-1][1]
        return error
