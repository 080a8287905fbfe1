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
