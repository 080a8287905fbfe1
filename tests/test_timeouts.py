"""tests/timeouts.py: the load factor, scaled bounds, and commands that end within theirs."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import timeouts
from timeouts import bound_text, load_factor, run_command, scaled


def test_the_load_factor_is_measured_once_and_bounded() -> None:
    factor = load_factor()
    assert 1.0 <= factor <= timeouts.MAX_FACTOR
    assert load_factor() == factor  # cached for the process
    assert scaled(3.0) == 3.0 * factor


def test_the_environment_sets_the_load_factor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STOMP_TEST_LOAD_FACTOR", "2.5")
    load_factor.cache_clear()
    try:
        assert load_factor() == 2.5
        assert scaled(4.0) == 10.0
        assert bound_text(4.0) == "10 s (4 s x load factor 2.5)"
    finally:
        monkeypatch.delenv("STOMP_TEST_LOAD_FACTOR")
        load_factor.cache_clear()


def test_a_calibration_round_sees_no_load_where_it_runs_alone() -> None:
    # Wall clock over CPU time: never below 1 (the CPU clock cannot run ahead).
    assert timeouts._calibration_round() >= 0.99


def test_a_command_gives_its_output_and_a_failure_its_stderr() -> None:
    async def main() -> None:
        assert await run_command(["echo", "hello"], what="echo", seconds=30) == "hello\n"
        with pytest.raises(AssertionError, match=r"the failing one failed \(exit 3\): why"):
            await run_command(
                ["sh", "-c", "echo why >&2; exit 3"], what="the failing one", seconds=30
            )

    asyncio.run(main())


def test_a_command_past_its_bound_is_killed_with_what_it_started_and_reaped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STOMP_TEST_LOAD_FACTOR", "1")
    load_factor.cache_clear()
    pids = tmp_path / "pids"
    # A shell that starts a grandchild, as the broker scripts do, and waits for it.
    script = f"sleep 60 & echo $$ $! > {pids}; wait"

    async def main() -> None:
        started = time.monotonic()
        with pytest.raises(TimeoutError) as caught:
            await run_command(["sh", "-c", script], what="the sleeper", seconds=0.5)
        assert time.monotonic() - started < 30
        assert str(caught.value) == "the sleeper: still running after 0.5 s (load factor 1); killed"

    try:
        asyncio.run(main())
    finally:
        load_factor.cache_clear()
    shell, sleeper = (int(pid) for pid in pids.read_text().split())
    # The shell was reaped (no zombie left), and its child was killed with it.
    with pytest.raises(ChildProcessError):
        os.waitpid(shell, os.WNOHANG)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{sleeper}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{sleeper}").exists() or "Z" in _state(sleeper)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return "gone"
