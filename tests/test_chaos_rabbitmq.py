"""Chaos against RabbitMQ: the workload of test_chaos.py through the fault-injecting
proxy, to the RabbitMQ that scripts/start-brokers.sh runs (a failure under
CI=true when it is not there, see tests/brokers.py).

Heart-beats are 1 s here (RabbitMQ rounds them to whole seconds), so a stall
must pass 2.5 s to be noticed; the stalls run up to 3.5 s.  Messages are sent
``persistent`` to a durable queue, so that they outlive a broker restart.

``scripts/chaos.sh`` runs it for minutes against a RabbitMQ of its own, which
it also restarts under load ($STOMP_CHAOS_RESTART: the command that does it).
"""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest
from adapter_harness import Harness, on_every_adapter
from brokers import real_broker
from chaos import ChaosProxy, Fault, inject, workload
from test_chaos import SECONDS, SEED, check, record

pytestmark = [pytest.mark.filterwarnings("error")]

#: A command that restarts the broker (scripts/chaos.sh sets it); none: no restarts.
RESTART = os.environ.get("STOMP_CHAOS_RESTART", "")


async def restart_broker() -> None:
    process = await asyncio.create_subprocess_exec("bash", "-c", RESTART)
    assert await process.wait() == 0, f"{RESTART!r} failed"


@on_every_adapter(versions=(None,), timeout=SECONDS + 180)
async def test_chaos_rabbitmq(h: Harness) -> None:
    broker = real_broker("rabbitmq")
    proxy = ChaosProxy(broker.port)
    port = await h.on_service(proxy.start())

    async def chaos() -> list[Fault]:
        faults = inject(
            proxy,
            SECONDS,
            seed=SEED,
            stall=(1.0, 3.5),
            restart=restart_broker if RESTART else None,
        )
        return await h.on_service(faults, timeout=SECONDS + 120)

    result = await workload(
        h,
        port,
        f"/queue/chaos-{h.adapter}-{uuid.uuid4().hex[:8]}",
        seconds=SECONDS,
        chaos=chaos,
        heartbeat=(1000, 1000),
        timeout=4.0,
        drain=60.0,
        send_headers={"persistent": "true"},
        **broker.options(),
    )
    record(result, "rabbitmq")
    check(result)
    assert proxy.open_connections == 0
    await h.on_service(proxy.close())
