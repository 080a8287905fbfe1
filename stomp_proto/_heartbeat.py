"""Heart-beats: negotiation (1.2 §Heart-beating) and deadlines without a clock.

The connection never reads a clock.  It only learns the time when its user
calls ``handle_timer(now)``; between calls it merely notes *whether* anything
was sent or received.  That is enough when the checks are frequent enough:

* Sending: the checks run at least every half interval.  Data noted in the
  window between two checks went out after the first of them, so that check's
  time bounds the last send from below; a check sends an EOL when nothing went
  out in its window and the next check would come more than half the interval
  after that bound.  The gap between two sends stays under half the interval
  plus a check period, so never over the interval - what the spec asks of a
  sender, with room for a late timer - and an idle connection sends an EOL
  about every half interval, as before.
* Receiving: the peer is declared dead once nothing has arrived for the
  negotiated interval times ``tolerance``.  As arrival is only noted at the
  next check, the silence is measured from that check: the peer is never
  declared dead early.  Checks for it come every eighth of the interval, so
  the silence at the moment it is declared is below ``tolerance + 1/4``
  intervals (one check late to notice the last data, one to notice the
  deadline): with a client's 1.25, within 1.5 intervals.  The silence allowed
  is never less than the interval plus :data:`SLACK_MS`, whatever the
  tolerance: a short interval (100 ms) must not make a scheduling stall of a
  busy machine (some tens of ms) a lost session.

Times are seconds (any monotonic clock the caller likes, e.g. ``loop.time()``);
intervals on the wire are milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SLACK_MS", "HeartBeatTimer", "negotiate"]

#: Milliseconds of silence allowed beyond the interval, at least (see above).
SLACK_MS = 100


def negotiate(ours: tuple[int, int], theirs: tuple[int, int]) -> tuple[int, int]:
    """Return ``(send_every_ms, expect_every_ms)`` for one side; 0 means none.

    ``ours`` and ``theirs`` are the two ``heart-beat`` headers as
    ``(can send every, wants to receive every)``.  Beats flow one way every
    MAX(sender can, receiver wants) when neither is 0 (1.2 §Heart-beating).
    """
    can_send, want_receive = ours
    they_can_send, they_want_receive = theirs
    send = max(can_send, they_want_receive) if can_send and they_want_receive else 0
    expect = max(they_can_send, want_receive) if they_can_send and want_receive else 0
    return send, expect


@dataclass(slots=True)
class HeartBeatTimer:
    """Decides when to send an EOL and when the peer counts as gone."""

    send_ms: int
    expect_ms: int
    tolerance: float
    #: The time of the previous check; None before the first one.
    last_check: float | None = None
    #: When data from the peer was last noticed (at a check).
    heard_at: float = 0.0
    sent_since_check: bool = False
    received_since_check: bool = False
    #: A time at or before which data last went out (a check's, or a beat's).
    sent_mark: float = 0.0
    #: ``last_check + period``, set by each check.
    _deadline: float | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def active(self) -> bool:
        return bool(self.send_ms or self.expect_ms)

    @property
    def period(self) -> float:
        """Seconds between checks: half the sending interval, an eighth of the
        receiving one (whichever is shorter, of those in force)."""
        intervals = [ms for ms in (self.send_ms, self.expect_ms / 4) if ms]
        return min(intervals) / 2000.0

    @property
    def allowed_ms(self) -> float:
        """Milliseconds of silence after which the peer counts as gone."""
        return max(self.expect_ms * self.tolerance, self.expect_ms + SLACK_MS)

    def next_deadline(self) -> float | None:
        # Asked before every wait for data, so once per read in every client:
        # the deadline is kept from the last check rather than worked out again.
        if self.last_check is None:
            return 0.0 if self.active else None  # "now": the first check learns the time
        return self.last_check + self.period if self._deadline is None else self._deadline

    def check(self, now: float, reading: bool = True) -> tuple[bool, float | None]:
        """Run a check at ``now``: (send an EOL?, silence in seconds if the peer is gone).

        ``reading=False`` means the caller has stopped reading on purpose
        (back-pressure): unread data cannot be seen, so silence is not counted.
        """
        if self.last_check is None:
            self.last_check = self.heard_at = self.sent_mark = now
            self._deadline = now + self.period
            self.sent_since_check = self.received_since_check = False
            return False, None
        if now < self.last_check + self.period:
            return False, None  # called early: nothing is due
        if self.sent_since_check:
            self.sent_mark = self.last_check
        # Due when nothing went out in the window just ended and the next check, a
        # period on, would leave more than half the interval since the last send
        # (a hair's allowance for sums of float periods): half, so that a late
        # timer never stretches a gap past the interval.
        period = self.period
        beat = (
            bool(self.send_ms)
            and not self.sent_since_check
            and now - self.sent_mark > self.send_ms / 2000.0 - period + 1e-9
        )
        if beat:
            self.sent_mark = now
        if self.received_since_check or not reading:
            self.heard_at = now
        silence = now - self.heard_at
        gone = bool(self.expect_ms) and silence * 1000.0 >= self.allowed_ms
        self.last_check = now
        self._deadline = now + period
        self.sent_since_check = False
        self.received_since_check = False
        return beat, silence if gone else None
