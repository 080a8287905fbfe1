"""Riding out a broker restart: each call to RabbitMQ retried, with a bounded backoff.

A Kafka source or sink rides out a short broker outage through its client's
retries; these are the ones of ``stomp-streams`` and ``stomp``, both sources
and sinks.  What is retried is what a restart looks like from a client
(RabbitMQ 3.10 stopped and started again on the same data):

* while the broker stops: a broken pipe or reset, the connection lost;
* while it is down: the connection refused;
* for a second or so after it is back: ``NOT_FOUND - home node '...' of
  durable queue '...' is down or inaccessible`` for a stream or durable
  queue not yet restored;
* now and then under load, RabbitMQ 3.10's STOMP plugin closes a connection
  with ``Processing error`` when a stream delivers before the plugin has
  registered the new subscription.
* a broker that says it is shutting down as it stops (the embedded broker's
  ERROR ``broker shutting down``);
* two tasks declaring the same new stream at once (every write task of a
  sink declares the streams its rows go to): RabbitMQ refuses the one that
  loses the race with ``PRECONDITION_FAILED - ... does not have a replica on
  the local node`` until the winner's stream is up, and the next try finds it.

A wrong login, a stream that does not exist, a certificate that does not
verify, or a read that times out while the broker is up fail at once.
Retries wait :data:`FIRST_DELAY`, doubling up to :data:`MAX_DELAY`; each is
logged at WARNING with the broker's host and port and the reason.  A run of
failures with no success in between ends the call with
:class:`BrokerUnavailableError`, naming the broker, once the ``retryTimeout``
option's seconds have passed since the run's first failure.
"""

from __future__ import annotations

import logging
import ssl
import time
from collections.abc import Callable
from typing import TypeVar

from .._client._errors import BrokerError, ConnectionLost, reason
from ._options import ConnectionSettings

__all__ = ["BrokerUnavailableError", "Retry", "retryable", "retrying"]

log = logging.getLogger("stomp_proto.spark")

#: Seconds before the first retry; each further one waits twice as long, up to MAX_DELAY.
FIRST_DELAY = 0.1
MAX_DELAY = 5.0
#: What the broker says when a retry helps: a stream not yet back after a restart,
#: RabbitMQ 3.10's STOMP plugin losing a race with a stream's first delivery, a stop,
#: a stream that another connection is declaring at the same moment.
PASSING_ERRORS = (
    "is down or inaccessible",
    "Processing error",
    "shutting down",
    "does not have a replica on the local node",
)

T = TypeVar("T")


class BrokerUnavailableError(ConnectionError):
    """The broker could not be reached for longer than ``retryTimeout`` allows."""


def retryable(exc: BaseException) -> bool:
    """True for a failure that a broker restart causes and that trying again can mend."""
    if isinstance(exc, (TimeoutError, ssl.SSLCertVerificationError, BrokerUnavailableError)):
        return False
    if isinstance(exc, (ConnectionLost, OSError)):
        return True
    # A BrokerError, or the MissingStreamError made of one, keeps the broker's words.
    text = str(exc)
    return isinstance(exc, (BrokerError, RuntimeError)) and any(m in text for m in PASSING_ERRORS)


class Retry:
    """The retries of one call: :meth:`failed` after each failure, :meth:`succeeded` after
    progress (a range read that got messages), which starts the bound afresh."""

    def __init__(
        self, settings: ConnectionSettings, what: str, *, source: str = "stomp-streams"
    ) -> None:
        self.settings = settings
        #: What is retried, for the log and the error: "<source>: <what>".
        self.what = f"{source}: {what}"
        self.failures = 0
        self._first: float | None = None

    def succeeded(self) -> None:
        self.failures = 0
        self._first = None

    def failed(self, exc: BaseException) -> None:
        """Wait before the next try, or raise: ``exc`` itself when trying again cannot help,
        :class:`BrokerUnavailableError` once ``retryTimeout`` seconds have passed."""
        bound = self.settings.retry_timeout
        if not retryable(exc) or bound <= 0:
            raise exc
        now = time.monotonic()
        if self._first is None:
            self._first = now
        broker = self.settings.broker
        spent = now - self._first
        if spent >= bound:
            raise BrokerUnavailableError(
                f"{self.what}: the broker at {broker} failed for {spent:.1f} s "
                f"({self.failures + 1} tries; retryTimeout={bound:g} s): {reason(exc)}"
            ) from exc
        self.failures += 1
        delay = min(FIRST_DELAY * 2 ** (self.failures - 1), MAX_DELAY, bound - spent)
        log.warning(
            "%s: broker %s: %s; retry %d in %.1f s (for up to %g s: retryTimeout)",
            self.what, broker, reason(exc), self.failures, delay, bound,
        )  # fmt: skip
        time.sleep(delay)

    def call(self, attempt: Callable[[], T]) -> T:
        """``attempt()``, tried again after each failure that :meth:`failed` allows."""
        while True:
            try:
                return attempt()
            except Exception as exc:  # failed() re-raises what it cannot mend
                self.failed(exc)


def retrying(
    settings: ConnectionSettings,
    what: str,
    call: Callable[[], T],
    *,
    source: str = "stomp-streams",
) -> T:
    """``call()``, tried again after each failure that :class:`Retry` allows."""
    return Retry(settings, what, source=source).call(call)
