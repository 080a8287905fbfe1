"""Time bounds that hold on a loaded machine: a measured load factor, bounded commands.

Most waits in the suite end on what they wait for (a frame, a port, a log line);
some must be bounded by a time - a child process, a broker restart, a whole
scenario.  A bound that holds on an idle machine is exceeded when the cores are
busy with other work (a shared CI runner, a laptop building something): a
``rabbitmqctl`` call that takes 0.8 s idle took 6 s beside two CPU-bound loops,
and a fixed 15 s bound fired under more.  So such a bound is written as
``scaled(seconds)``: ``seconds`` on an idle machine, times :func:`load_factor`.

The load factor is measured once per test process (the first time it is asked
for, at collection): a short CPU-bound loop is timed both on the wall clock and
on the thread's CPU clock.  On an idle machine the two agree (factor 1); when
other processes compete for the cores, the wall clock runs ahead of the CPU
time the loop got, by as much as the machine is oversubscribed - a ratio that
does not depend on how fast the machine is.  The system's one-minute load
average per core is taken too, when higher (it sees load that comes and goes
around the moment of the loop).  The factor is capped at :data:`MAX_FACTOR`,
so that a test that hangs still ends in a bounded time;
``STOMP_TEST_LOAD_FACTOR`` sets it instead (``1`` on a machine known to be idle).

:func:`run_command` runs a child process on the running asyncio loop within a
scaled bound, and on time-out kills and reaps it before raising - a child left
running would outlive the loop, and asyncio's child watcher would then fail
whichever test runs when it exits ("Loop ... that handles pid ... is closed").

Like ``helpers``, this module is imported by name (``tests/`` is on ``sys.path``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import statistics
import time
from collections.abc import Mapping, Sequence

__all__ = [
    "MAX_FACTOR",
    "bound_text",
    "load_factor",
    "run_command",
    "scaled",
]

#: The largest factor a bound is scaled by (a hung test still ends).
MAX_FACTOR = 10.0
#: CPU seconds of each of the three calibration rounds.
_ROUND = 0.05


def _calibration_round() -> float:
    """Wall-clock seconds over CPU seconds of a short CPU-bound loop (1: the loop had a core)."""
    wall_start, cpu_start = time.perf_counter(), time.thread_time()
    while time.thread_time() - cpu_start < _ROUND:
        sum(range(2000))
    return (time.perf_counter() - wall_start) / max(time.thread_time() - cpu_start, 1e-9)


def _per_core_load() -> float:
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except OSError:  # no load average on this system
        return 0.0


@functools.cache
def load_factor() -> float:
    """How much slower than on an idle machine a bounded wait may be here (1 to MAX_FACTOR).

    Measured once per process; ``STOMP_TEST_LOAD_FACTOR`` overrides it.
    """
    given = os.environ.get("STOMP_TEST_LOAD_FACTOR", "").strip()
    if given:
        return max(float(given), 1.0)
    measured = statistics.median(_calibration_round() for _ in range(3))
    return round(min(max(measured, _per_core_load(), 1.0), MAX_FACTOR), 2)


def scaled(seconds: float) -> float:
    """``seconds`` (the bound on an idle machine) times the load factor."""
    return seconds * load_factor()


def bound_text(seconds: float) -> str:
    """The scaled bound as a time-out message states it: ``"45 s (15 s x load factor 3.0)"``."""
    factor = load_factor()
    if factor == 1.0:
        return f"{seconds:g} s (load factor 1)"
    return f"{seconds * factor:.0f} s ({seconds:g} s x load factor {factor:g})"


async def run_command(
    args: Sequence[str],
    *,
    what: str,
    seconds: float,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run ``args`` on the running asyncio loop within ``scaled(seconds)``; its stdout.

    ``what`` names the command in failures.  A non-zero exit raises
    AssertionError with the command's stderr.  On time-out (or cancellation) the
    child and everything it started in its session are killed and the child is
    reaped before the error is raised: nothing outlives the call.  (A daemon the
    command starts in a session of its own, as scripts/brokers/start-*.sh do, is
    not touched.)
    """
    process = await asyncio.create_subprocess_exec(
        *args,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
        env=None if env is None else {**os.environ, **env},
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), scaled(seconds))
    except BaseException as exc:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        if isinstance(exc, TimeoutError):
            raise TimeoutError(
                f"{what}: still running after {bound_text(seconds)}; killed"
            ) from None
        raise
    if process.returncode != 0:
        raise AssertionError(
            f"{what} failed (exit {process.returncode}): {err.decode(errors='replace').strip()}"
        )
    return out.decode(errors="replace")
