"""Chaos with brokers as processes: killed (``kill -9``), frozen (``SIGSTOP``) and hung
(a port that takes connections and never answers), on every adapter.

One client is given four addresses: a broker A, a hung port, a broker B and a broker
C, and goes through what operations meet:

* A is killed: the client moves on, skips the hung port within ``connect_timeout``
  (not the whole ``timeout``) and carries on with B;
* B is frozen: the send waiting for its receipt raises a TimeoutError that says what
  timed out and after how long, the client leaves B (``failover_on_timeout``) within
  the receipt ``timeout``, long before heart-beats would give up on it, and carries on
  with C;
* C is killed too: nothing answers any more, and the client gives up with
  :class:`ReconnectExhausted`, naming each address with its last reason.

And the ``stomp_proto.client.sessions`` log says each of those: the lost sessions at
WARNING with the address and the reason, the new sessions at INFO with the address,
the attempt and the time, the give-up at ERROR.  A first connect skips a hung port
within ``connect_timeout`` too.

The times asserted leave seconds of margin (a loaded machine is slow), yet each is
well under what the client took before these bounds: a hung port cost a reconnect
the whole ``timeout``, and a frozen broker was left only when heart-beats gave up
(2.5 heart-beat intervals of 10 s).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from adapter_harness import (
    Backoff,
    ClientState,
    ConnectionLost,
    Harness,
    ReconnectExhausted,
    on_every_adapter,
)
from chaos import broker_processes, hung_listener
from helpers import LogRecords

pytestmark = [pytest.mark.filterwarnings("error")]

#: Seconds for one connect attempt to one address.
CONNECT_TIMEOUT = 1.0
#: Seconds for a receipt (and, before connect_timeout, for a reconnect attempt).
TIMEOUT = 5.0
#: Seconds of slack on each bound: the client's own work, the brokers' start, the load.
MARGIN = 3.0
#: Every address once, then the client gives up; each new session starts the count over.
SCHEDULE = Backoff(initial=0.05, maximum=0.1, jitter=0.0, attempts=4, held_after=0.0)


async def _send_until_confirmed(h: Harness, client: Any, destination: str, body: bytes) -> None:
    """Send with a receipt until one is confirmed: a send in flight as the broker died
    fails with ConnectionLost (and is sent again)."""
    deadline = time.monotonic() + TIMEOUT + 2 * MARGIN
    while True:
        try:
            await client.send(destination, body, receipt=True)
            return
        except ConnectionLost:
            if time.monotonic() > deadline:
                raise
            await h.sleep(0.01)


def _print_log(log: LogRecords) -> None:
    """The session log as a console handler prints it (``pytest -rA`` shows it, with
    the times and errors printed before it)."""
    form = logging.Formatter("%(levelname)-7s %(message)s")
    print("\n".join(form.format(record) for record in log.records))


def _address(address: tuple[str, int]) -> str:
    return f"{address[0]}:{address[1]}"


@on_every_adapter(versions=(None,), timeout=90)
async def test_killed_frozen_and_hung_brokers(h: Harness) -> None:
    queue = f"/queue/chaos-processes-{h.adapter}"
    sessions = LogRecords("stomp_proto.client.sessions", level=logging.DEBUG)
    with broker_processes(3) as (a, b, c), hung_listener() as hung, sessions.installed() as log:
        hosts = [a.address, hung, b.address, c.address]
        # A first connect that meets the hung port first skips it within connect_timeout
        # (a share of timeout would be 10 s here).
        began = time.monotonic()
        async with h.connect(
            None, hosts=[hung, c.address], timeout=20.0, connect_timeout=CONNECT_TIMEOUT
        ) as first:
            took = time.monotonic() - began
            assert first.broker == c.address
        assert took < CONNECT_TIMEOUT + MARGIN, took
        timed_out = "the connect attempt timed out after 1 s (waiting for CONNECTED)"
        assert log.lines(logging.INFO)[0] == f"attempt 1 at {_address(hung)} failed: {timed_out}"
        log.records.clear()

        async with h.connect(
            None,
            hosts=hosts,
            timeout=TIMEOUT,
            connect_timeout=CONNECT_TIMEOUT,
            reconnect=SCHEDULE,
        ) as client:
            await client.send(queue, b"on A", receipt=True)
            assert client.broker == a.address

            # A killed: the hung port is skipped within connect_timeout, and B takes over.
            a.kill()
            killed = time.monotonic()
            await _send_until_confirmed(h, client, queue, b"on B")
            recovered = time.monotonic() - killed
            assert client.broker == b.address
            assert recovered < CONNECT_TIMEOUT + MARGIN, recovered

            # B frozen: the receipt times out, and the client leaves B for C at once.
            b.freeze()
            frozen = time.monotonic()
            with pytest.raises(TimeoutError) as caught:
                await client.send(queue, b"to frozen B", receipt=True)
            assert str(caught.value) == (
                f"the RECEIPT of SEND to {queue} from {_address(b.address)} timed out "
                f"after 5 s (the client leaves that broker)"
            )
            await _send_until_confirmed(h, client, queue, b"on C")
            left = time.monotonic() - frozen
            assert client.broker == c.address
            assert left < TIMEOUT + MARGIN, left

            # C killed too: A is dead, the port hung, B frozen; the client gives up.
            c.kill()
            deadline = time.monotonic() + 4 * CONNECT_TIMEOUT + 2 * MARGIN
            while client.state is not ClientState.FAILED and time.monotonic() < deadline:
                await h.sleep(0.05)
            assert client.state is ClientState.FAILED
            with pytest.raises(ReconnectExhausted) as gave_up:
                await client.send(queue, b"too late", receipt=True)
        error = gave_up.value
        assert isinstance(error, ConnectionLost)
        assert error.attempts == 4
        refused = "[Errno 111] Connection refused"
        assert dict(error.reasons) == {
            a.address: refused,
            hung: timed_out,
            b.address: timed_out,
            c.address: refused,
        }
        roles = {"A": a.address, "hung": hung, "B": b.address, "C": c.address}
        print(", ".join(f"{name} {_address(address)}" for name, address in roles.items()))
        print(f"first connect to [hung, C]: connected to C in {took:.2f} s")
        print(f"A killed: confirmed by B {recovered:.2f} s later (the hung port skipped)")
        print(f"B frozen: {type(caught.value).__name__}: {caught.value}")
        print(f"B frozen: confirmed by C {left:.2f} s later")
        print(f"C killed: {type(error).__name__}: {error}")
        _print_log(log)

    # What operations read: one line per loss, per session, and the give-up.
    warnings = log.lines(logging.WARNING)
    assert len(warnings) == 3, warnings
    for line, broker in zip(warnings, (a, b, c), strict=True):
        assert line.startswith(f"session with {_address(broker.address)} lost: "), line
        assert line.endswith("; reconnecting"), line
    assert "lost: no RECEIPT within 5 s: the broker does not answer;" in warnings[1]
    infos = log.lines(logging.INFO)
    ups = [line for line in infos if line.startswith("session ")]
    assert [line.split(" (")[0] for line in ups] == [
        f"session 1 with {_address(a.address)} up",
        f"session 2 with {_address(b.address)} up",
        f"session 3 with {_address(c.address)} up",
    ]
    assert ups[1].startswith(f"session 2 with {_address(b.address)} up (attempt 2, ")
    assert f"attempt 1 at {_address(hung)} failed: {timed_out}" in infos
    assert log.lines(logging.ERROR) == [f"gave up: {error}"]
