"""The benchmark scripts still run and still check what they measure.

Each script runs in its ``--quick`` mode as a subprocess, as a user would run
it.  Only correctness is asserted - every library moved every message, our
codec decoded every workload right, the figures exist - never a speed: timings
on a shared machine are for benchmarks/, not for tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"

pytestmark = pytest.mark.timeout(240)


def run_benchmark(script: str, tmp_path: Path, *args: str) -> dict[str, Any]:
    result_file = tmp_path / f"{script}.json"
    completed = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--quick", "--json", str(result_file), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
    results: dict[str, Any] = json.loads(result_file.read_text())
    return results


def test_codec_benchmark(tmp_path: Path) -> None:
    results = run_benchmark("codec.py", tmp_path)
    ours = [row for row in results["rows"] if row["codec"] == "stomp_proto"]
    assert ours and all(row["ok"] and not row["problems"] for row in ours)
    # Every peer was timed beside us (a missing one would make the ratios lie).
    assert {row["codec"] for row in results["rows"]} >= {"stomp_proto", "stomp.py", "stompman"}
    memory = results["memory"]["stomp_proto"]
    assert memory["big_body_peak_bytes"] >= memory["big_body_bytes"]
    assert {target["name"] for target in results["targets"]}


def test_end_to_end_benchmark(tmp_path: Path) -> None:
    svg = tmp_path / "e2e.svg"
    results = run_benchmark(
        "e2e.py", tmp_path, "--brokers", "embedded", "--sizes", "100", "--svg", str(svg)
    )
    rows = results["rows"]
    clients = {row["client"] for row in rows}
    assert clients == {"asyncio", "trio", "threads", "stomp.py", "stompman"}
    assert {row["ack"] for row in rows} == {"auto", "client-individual"}
    for row in rows:
        assert row["ok"], row
        assert row["msgs_per_s"] > 0 and row["cpu_per_100k"] > 0
        assert row["latency_samples"] > 0 and row["p50_ms"] <= row["p99_ms"]
    assert svg.read_text().lstrip().startswith("<svg")


def test_embedded_broker_benchmark(tmp_path: Path) -> None:
    results = run_benchmark("broker.py", tmp_path)
    assert [row["n"] for row in results["throughput"]] == [1, 10, 100]
    assert all(row["msgs_per_s"] > 0 for row in results["throughput"])
    assert results["memory"]["bytes_per_connection"] > 0
