"""Chaos: each client through a fault-injecting proxy to the embedded broker.

A producer sends numbered messages with receipts, a consumer acknowledges
them one by one, both with reconnects on, while the proxy (tests/chaos.py)
cuts the connections (RST, FIN, mid-frame), stalls them and slows them.
Asserted: no message with a receipt is lost; every wait that failed ended in
ConnectionLost (or its HeartBeatLost), never a hang or another exception; and
nothing is left after the clients close: no task or reader thread (the
harness checks), no proxied socket, no broker session.

``scripts/chaos.sh`` runs the same workload for minutes, against RabbitMQ too
(test_chaos_rabbitmq.py), and prints the table of the results.
"""

from __future__ import annotations

import json
import os

import pytest
from adapter_harness import HOST, Harness, on_every_adapter
from chaos import ChaosResult, inject, start_proxy, workload

pytestmark = [pytest.mark.filterwarnings("error")]

#: Seconds of faults per client; scripts/chaos.sh sets more.
SECONDS = float(os.environ.get("STOMP_CHAOS_SECONDS", "12"))
SEED = int(os.environ.get("STOMP_CHAOS_SEED", "20"))
#: Seconds the producer waits after each confirmed send.  The faults need traffic in
#: flight, not all the CPU there is: paced, a client still confirms 500-800 messages
#: through 9-19 faults (3,000-3,500 unpaced) in half the CPU time, which the tests
#: beside it get.  scripts/chaos.sh sets 0 (as fast as each client goes).
PACE = float(os.environ.get("STOMP_CHAOS_PACE", "0.002"))


def record(result: ChaosResult, broker: str) -> None:
    """Append the result's row to $STOMP_CHAOS_RESULTS (scripts/chaos.sh reads it)."""
    path = os.environ.get("STOMP_CHAOS_RESULTS")
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(json.dumps({"broker": broker, **result.row()}) + "\n")


def check(result: ChaosResult) -> None:
    assert result.faults, "no fault was injected"
    assert result.confirmed, "nothing was confirmed"
    assert not result.lost, f"confirmed but never delivered: {sorted(result.lost)[:20]}"
    assert set(result.errors) <= {"ConnectionLost", "HeartBeatLost"}, result.errors


@on_every_adapter(versions=(None,), timeout=SECONDS + 60)
async def test_chaos_embedded_broker(h: Harness) -> None:
    broker = await h.start_broker(heartbeat=(200, 200))
    proxy = await start_proxy(h, broker.port)
    port = proxy.port

    async def chaos() -> list:  # type: ignore[type-arg]
        return await h.on_service(inject(proxy, SECONDS, seed=SEED), timeout=SECONDS + 30)

    # A 1 s timeout: a reconnect attempt that meets a stall times out (and
    # must leave nothing behind); heart-beats of 200 ms notice a stall first.
    result = await workload(
        h,
        port,
        f"/queue/chaos-{h.adapter}",
        seconds=SECONDS,
        chaos=chaos,
        timeout=1.0,
        pace=PACE,
    )
    record(result, "embedded")
    check(result)
    for _ in range(100):  # the broker notices the last DISCONNECTs
        if await h.sessions(broker) == 0:
            break
        await h.sleep(0.05)
    assert await h.sessions(broker) == 0
    assert await h.on_service(proxy.wait_closed()) == 0


@on_every_adapter(versions=(None,), timeout=SECONDS + 60)
async def test_chaos_with_failover_across_two_addresses(h: Harness) -> None:
    # Two addresses of one broker (as a cluster behind two load balancers, with
    # shared queues): faults on both at once, and the clients go round the list.
    broker = await h.start_broker(heartbeat=(200, 200))
    proxies = [await start_proxy(h, broker.port), await start_proxy(h, broker.port)]

    async def chaos() -> list:  # type: ignore[type-arg]
        runs = [
            h.on_service(inject(proxy, SECONDS, seed=SEED + n), timeout=SECONDS + 30)
            for n, proxy in enumerate(proxies)
        ]
        return [fault for faults in await h.gather(*runs) for fault in faults]

    hosts = [(HOST, proxy.port) for proxy in proxies]
    result = await workload(
        h,
        None,
        f"/queue/chaos-failover-{h.adapter}",
        seconds=SECONDS,
        chaos=chaos,
        timeout=1.0,
        pace=PACE,
        hosts=hosts,
    )
    record(result, "embedded, failover")
    check(result)
    # Both addresses carried sessions: the clients moved between them.
    assert all(proxy.accepted >= 2 for proxy in proxies), [p.accepted for p in proxies]
    for proxy in proxies:
        assert await h.on_service(proxy.wait_closed()) == 0
