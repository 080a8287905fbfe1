"""Steps many cases share: a message sent to oneself, a user header judged, a sentinel."""

from __future__ import annotations

from ._case import Outcome, Probe, describe
from ._wire import RawFrame, Wire, build


def roundtrip(
    p: Probe,
    headers: list[tuple[str, str]],
    body: bytes = b"",
    *,
    raw: bytes | None = None,
    chunk: int | None = None,
    eol: bytes = b"\n",
    content_length: bool | None = None,
) -> tuple[Wire, RawFrame | None]:
    """Subscribe to a fresh queue, SEND to it; the MESSAGE (or ERROR, or None) that comes.

    ``raw`` replaces the SEND frame by those bytes (``{dest}`` is replaced by
    the queue's name) for frames too odd to build.
    """
    wire = p.session()
    destination = p.queue()
    p.subscribe(wire, destination)
    if raw is not None:
        wire.send(raw.replace(b"{dest}", destination.encode()), chunk=chunk)
    else:
        data = build(
            "SEND",
            [("destination", destination), *headers],
            body,
            version=p.version,
            eol=eol,
            content_length=content_length,
        )
        wire.send(data, chunk=chunk)
    return wire, wire.expect("MESSAGE")


def user_header(p: Probe, name: str, value: str) -> Outcome:
    """A user header survives the trip unchanged (MUST pass through, decoded right)."""
    _wire, got = roundtrip(p, [(name, value)], b"x")
    if got is None or got.command != "MESSAGE":
        return p.broken(f"no MESSAGE came: {describe(got) if got else 'nothing'}")
    seen = got.decoded_headers(p.version)
    if seen.get(name) == value:
        return p.ok(f"{name!r} arrived as {value!r}")
    close = {k: v for k, v in seen.items() if k.strip() == name.strip()}
    return p.broken(f"sent {name!r}={value!r}; the MESSAGE had {close or 'no such header'}")


def nothing_before_sentinel(p: Probe, wire: Wire, destination: str) -> tuple[bool, str]:
    """Send a sentinel to ``destination`` (subscribed on ``wire``): is it the first MESSAGE?"""
    p.frame(wire, "SEND", [("destination", destination), ("x-sentinel", "yes")], b"sentinel")
    got = wire.expect("MESSAGE")
    if got is None or got.command != "MESSAGE":
        return False, "the sentinel never came: " + (describe(got) if got else "nothing")
    if got.body == b"sentinel":
        return True, "the sentinel came first"
    return False, f"a message came before the sentinel: body {got.body[:60]!r}"


# -- heart-beats -------------------------------------------------------------------
#
# The sender MUST send data at least every <n> ms; the receiver SHOULD be tolerant
# and take an error margin into account.  The checker is the receiver: a gap of
# up to <n> plus its margin is on time (OK), a longer one breaks the MUST (FAILED).
# There is no NON-STRICT margin: the SHOULD binds the receiver, not the sender.


def beat_margin(interval: float) -> float:
    """The checker's error margin, in ms, for beats every ``interval`` ms."""
    return max(500.0, interval / 2)


def beat_window(p: Probe, interval: float) -> float | None:
    """Seconds to watch three intervals and the margin; None when over 5 x ``--timeout``.

    Two intervals at least, so that one late beat cannot hide; a third, so that a
    sender whose timer drifts against the session shows its worst gap.
    """
    window = (3 * interval + beat_margin(interval)) / 1000
    return window if window <= 5 * p.timeout else None


def too_long(p: Probe, interval: float) -> Outcome:
    """UNIMPLEMENTED: the interval is too long to observe within the run's bounds."""
    return p.absent(
        f"the interval, {interval:.0f} ms, is too long to observe within 5 x --timeout "
        f"({5 * p.timeout:g} s): raise --timeout to judge it"
    )


def judge_gap(p: Probe, interval: float, worst: float) -> Outcome:
    """OK when the longest gap (ms) is within the interval and the margin, else broken."""
    limit = interval + beat_margin(interval)
    return p.check(
        worst <= limit,
        f"interval {interval:.0f} ms, longest gap {worst:.0f} ms (on time: up to {limit:.0f} ms)",
        ok=f"interval {interval:.0f} ms, longest gap {worst:.0f} ms",
    )
