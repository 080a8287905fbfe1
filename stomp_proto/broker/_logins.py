"""Who may log in to the embedded broker, and what each login may do.

:class:`Logins` owns the broker's admission state: the ``users`` and their
passcodes, the ``permissions`` of each login, the failed-login throttle, and
how many sessions each login has open (``max_connections_per_login``).
A module of its own so that :class:`~stomp_proto.broker.BrokerCore` asks one
object each question a CONNECT, SEND or SUBSCRIBE raises about its login,
and counts the sessions in one place.  It takes plain values (a login, an
address, the time), not sessions: the core decides what a refusal sends.
"""

from __future__ import annotations

import hmac
from collections import Counter
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from ._access import AccessRules, Permissions
from ._throttle import LoginThrottle

__all__ = ["Logins"]


class Logins:
    """The logins admitted, their permissions, the failed-login throttle, the sessions open."""

    __slots__ = ("_access", "_open", "_users", "max_per_login", "throttle")

    def __init__(
        self,
        users: Mapping[str, str] | None,
        permissions: Mapping[str, Permissions] | None,
        failed_login_rate: float | None,
        max_per_login: int,
    ) -> None:
        if failed_login_rate is not None and not failed_login_rate > 0:
            raise ValueError("failed_login_rate must be positive, or None")
        self._users = dict(users) if users is not None else None
        self._access = AccessRules(permissions) if permissions is not None else None
        #: The failed-login throttle (``failed_login_rate``), or None.
        self.throttle = LoginThrottle(failed_login_rate) if failed_login_rate else None
        #: The most sessions one login may have open.
        self.max_per_login = max_per_login
        #: Sessions past CONNECTED, by login (sessions without one are not counted).
        self._open: Counter[str] = Counter()

    @property
    def users(self) -> Mapping[str, str] | None:
        """The logins admitted and their passcodes; ``None`` when anyone is let in."""
        return MappingProxyType(self._users) if self._users is not None else None

    @property
    def checked(self) -> bool:
        """Whether a CONNECT's login and passcode are checked (``users`` is set)."""
        return self._users is not None

    def authenticate(self, login: str | None, passcode: str | None) -> bool:
        """Whether ``users`` admits ``login`` with ``passcode`` (anyone, without ``users``).

        In constant time whether or not the login exists.
        """
        if self._users is None:
            return True
        expected = self._users.get(login) if login is not None else None
        # Compare even for an unknown user, so that timing does not tell which users exist.
        reference = (expected if expected is not None else "\x00no such user").encode()
        matches = hmac.compare_digest((passcode or "").encode(), reference)
        return matches and expected is not None

    def ready_at(self, address: str | None, now: float | None) -> float:
        """When the throttle lets ``address`` try a login (``now`` if it may)."""
        if self.throttle is None or now is None or address is None:
            return now or 0.0
        return self.throttle.ready_at(address, now)

    def failed(self, address: str | None, now: float | None) -> None:
        """A login from ``address`` failed at ``now``: the throttle counts it."""
        if self.throttle is not None and address and now is not None:
            self.throttle.failed(address, now)

    def full(self, login: str) -> bool:
        """Whether ``login`` has as many sessions open as it may."""
        return self._open[login] >= self.max_per_login

    def opened(self, login: str) -> None:
        """A session of ``login`` is CONNECTED."""
        self._open[login] += 1

    def closed(self, login: str) -> None:
        """A session :meth:`opened` for ``login`` has ended."""
        self._open[login] -= 1
        if not self._open[login]:
            del self._open[login]

    def allows(self, login: str | None, access: Literal["write", "read"], destination: str) -> bool:
        """Whether ``login`` may ``access`` ``destination`` (anyone, without ``permissions``)."""
        return self._access is None or self._access.allows(login, access, destination)
