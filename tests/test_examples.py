"""The programs shown on the per-framework docs pages run against the embedded broker."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio

from stomp_proto.broker import Broker

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXPECTED = [b"message 0", b"message 1", b"message 2", b"in a transaction", b"delivered on COMMIT"]


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_with_broker(program: str) -> list[bytes]:
    async def scenario() -> list[bytes]:
        async with Broker("127.0.0.1", 0) as broker:
            module = load(program)
            async with asyncio.timeout(30):
                if program == "asyncio_example":
                    result: list[bytes] = await module.main(broker.port)
                elif program == "trio_example":
                    result = await asyncio.to_thread(trio.run, module.main, broker.port)
                else:
                    result = await asyncio.to_thread(module.main, broker.port)
            return result

    return asyncio.run(scenario())


@pytest.mark.parametrize("program", ["asyncio_example", "trio_example", "threads_example"])
def test_framework_example_runs(program: str) -> None:
    assert run_with_broker(program) == EXPECTED
