"""Failed logins per client address, bounded in rate: the broker's answer to guessing passcodes.

Each address has a bucket of :data:`LOGIN_BURST` tokens that fills at ``rate``
tokens a second; a failed login takes one.  While an address's bucket is
empty, its next CONNECT waits - it is not checked, so nothing is learnt from
it - until a token is back.  An address whose logins succeed is never slowed;
one guessing passcodes gets ``rate`` answers a second (after the first
:data:`LOGIN_BURST`), however many connections it opens.  No clock is read
here: the caller passes the time, as to ``Session.handle_timer``.
"""

from __future__ import annotations

__all__ = ["LOGIN_BURST", "MAX_ADDRESSES", "LoginThrottle"]

#: Failed logins an address may make at once before it is slowed down.
LOGIN_BURST = 10
#: Addresses remembered at most; beyond, the ones whose bucket is full again are forgotten,
#: then the longest unchanged.
MAX_ADDRESSES = 10_000


class LoginThrottle:
    """Failed logins per client address: :data:`LOGIN_BURST` at once, then ``rate`` a second."""

    __slots__ = ("_buckets", "rate")

    def __init__(self, rate: float) -> None:
        if not rate > 0:
            raise ValueError("the failed-login rate must be positive")
        #: Failed logins per second an address may go on making, after its burst.
        self.rate = rate
        # address -> (tokens, at what time they were so many), oldest change first
        self._buckets: dict[str, tuple[float, float]] = {}

    def __repr__(self) -> str:
        return f"<LoginThrottle {self.rate}/s, {len(self._buckets)} address(es)>"

    def _tokens(self, address: str, now: float) -> float:
        tokens, since = self._buckets.get(address, (LOGIN_BURST, now))
        return min(float(LOGIN_BURST), tokens + max(0.0, now - since) * self.rate)

    def ready_at(self, address: str, now: float) -> float:
        """When a login from ``address`` may be checked: ``now``, or later while it is slowed."""
        tokens = self._tokens(address, now)
        return now if tokens >= 1 else now + (1 - tokens) / self.rate

    def failed(self, address: str, now: float) -> None:
        """A login from ``address`` failed at ``now``: it takes a token."""
        tokens = self._tokens(address, now) - 1
        self._buckets.pop(address, None)
        self._buckets[address] = (tokens, now)
        if len(self._buckets) > MAX_ADDRESSES:
            self._forget(now)

    def _forget(self, now: float) -> None:
        for address in [a for a in self._buckets if self._tokens(a, now) >= LOGIN_BURST]:
            del self._buckets[address]
        while len(self._buckets) > MAX_ADDRESSES:
            del self._buckets[next(iter(self._buckets))]
