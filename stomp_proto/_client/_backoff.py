"""The reconnect schedule, :class:`Backoff`: a value the options, URLs and clients share."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass

from .._checks import check_number, is_int, wrong_type

__all__ = ["Backoff"]


@dataclass(frozen=True, slots=True)
class Backoff:
    """Reconnect schedule: waits grow from ``initial`` by ``factor`` up to ``maximum``.

    Each wait is spread by up to ``jitter`` (a fraction) so that many clients
    do not return at once.  ``attempts=None`` retries forever.

    The waits grow while attempts fail: a broker that is down is tried less and
    less often, at most once every ``maximum`` seconds.  They start over after
    any session that stayed up ``held_after`` seconds: on a flapping link
    (cuts every few seconds, the broker up) every cut is followed by a short
    wait, and a client still connects at most once per ``held_after`` seconds.
    A session shorter than that (a broker that accepts and then drops, or
    refuses what the client restores) counts as a failed attempt.
    ``error_attempts`` bounds how many times in a row the client comes back
    after the broker ended the session (or refused the login) with an ERROR;
    after that the :class:`BrokerError` ends the client.  That count starts
    over after a session that stayed up ``reset_after`` seconds.
    """

    #: The first wait, in seconds.
    initial: float = 0.1
    #: The longest wait, in seconds.
    maximum: float = 30.0
    #: Each wait is this many times the one before.
    factor: float = 2.0
    #: How far (a fraction) each wait is spread either way, at random.
    jitter: float = 0.1
    #: How many times to try in a row; ``None``: forever.
    attempts: int | None = None
    #: Seconds a session must stay up for the count of ERROR endings to start over.
    reset_after: float = 10.0
    #: How many sessions in a row the broker may end with an ERROR.
    error_attempts: int = 3
    #: Seconds a session must stay up for the waits to start over from ``initial``.
    held_after: float = 1.0

    def __post_init__(self) -> None:
        for name in ("initial", "maximum", "factor", "jitter", "reset_after", "held_after"):
            check_number(f"Backoff.{name}", getattr(self, name), minimum=0.0)
        for name in ("attempts", "error_attempts"):
            value = getattr(self, name)
            if value is None and name == "attempts":
                continue
            if not is_int(value):
                raise wrong_type(f"Backoff.{name}", "an int", value)
            if value < 0:
                raise ValueError(f"Backoff.{name} must not be negative, not {value!r}")
        if self.factor < 1.0:
            raise ValueError(f"Backoff.factor must be at least 1, not {self.factor!r}")
        if self.jitter >= 1.0:
            raise ValueError(f"Backoff.jitter must be below 1 (a fraction), not {self.jitter!r}")
        if self.maximum < self.initial:
            raise ValueError(
                f"Backoff.maximum ({self.maximum!r}) must be at least initial ({self.initial!r})"
            )

    def delays(self) -> Iterator[float]:
        """The waits of one run of the schedule, in seconds (jitter applied)."""
        delay = self.initial
        for _ in itertools.count() if self.attempts is None else range(self.attempts):
            yield delay * (1 + random.uniform(-self.jitter, self.jitter))
            delay = min(delay * self.factor, self.maximum)
