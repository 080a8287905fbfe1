"""The benchmark suite still runs and still checks what it measures.

``scripts/bench.sh --quick`` runs as a subprocess, as a user would run it.
Only correctness is asserted - every library moved every message, our codec
decoded every workload right, the figures and charts exist - never a speed:
timings on a shared machine are for benchmarks/, not for tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ``scripts/bench.sh --quick`` run, the documented command, into a temporary folder.

    It uses this interpreter (``PYTHON``) and starts no broker; RabbitMQ rows
    run when the test run already has one (``RABBITMQ_STOMP_*``).
    """
    out = tmp_path_factory.mktemp("bench")
    completed = subprocess.run(
        ["bash", str(ROOT / "scripts" / "bench.sh"), "--quick", "--out", str(out)],
        cwd=ROOT,
        env={**os.environ, "PYTHON": sys.executable, "STOMP_BROKERS": "none"},
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    return out


def load(results: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((results / name).read_text())
    return data


def test_codec_benchmark(results: Path) -> None:
    codec = load(results, "codec.json")
    ours = [row for row in codec["rows"] if row["codec"] == "stomp_proto"]
    assert ours and all(row["ok"] and not row["problems"] for row in ours)
    # Every peer was timed beside us (a missing one would make the ratios lie).
    assert {row["codec"] for row in codec["rows"]} >= {"stomp_proto", "stomp.py", "stompman"}
    memory = codec["memory"]["stomp_proto"]
    assert memory["big_body_peak_bytes"] >= memory["big_body_bytes"]
    assert {target["name"] for target in codec["targets"]}
    assert (results / "benchmarks-codec.svg").read_text().lstrip().startswith("<svg")


def test_end_to_end_benchmark(results: Path) -> None:
    rows = load(results, "e2e.json")["rows"]
    embedded = [row for row in rows if row["broker"] == "embedded"]
    clients = {
        "asyncio",
        "uvloop",
        "trio",
        "threads",
        "bare",
        "stomppy",
        "floor",
        "stomp.py",
        "stompman",
    }
    assert {row["client"] for row in embedded} == clients
    assert {row["ack"] for row in embedded} == {"auto", "client-individual"}
    assert {row["size"] for row in embedded} == {100, 4096}
    for row in rows:
        assert row["ok"], row
        assert row["msgs_per_s"] > 0 and row["cpu_per_100k"] > 0
        assert row["latency_samples"] > 0 and row["p50_ms"] <= row["p99_ms"]
    assert (results / "benchmarks-e2e.svg").read_text().lstrip().startswith("<svg")


def test_embedded_broker_benchmark(results: Path) -> None:
    broker = load(results, "broker.json")
    assert [row["n"] for row in broker["throughput"]] == [1, 10, 100]
    assert all(row["msgs_per_s"] > 0 for row in broker["throughput"])
    assert broker["memory"]["bytes_per_connection"] > 0


def test_codec_comparison_with_another_checkout(tmp_path: Path) -> None:
    """``codec.py --against DIR``: both builds timed, one row per workload, a JSON report.

    Then DIR's decoder is made to drop each frame's first header, and the
    comparison's correctness check is seen to catch the other build too
    (exit status 2).
    """
    other = tmp_path / "other"
    shutil.copytree(ROOT / "stomp_proto", other / "stomp_proto")
    out = tmp_path / "comparison.json"
    command = [sys.executable, str(ROOT / "benchmarks" / "codec.py"), "--quick", "--rounds", "2"]
    completed = subprocess.run(
        [*command, "--against", str(other), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    rows = json.loads(out.read_text())["rows"]
    assert {row["group"] for row in rows} == {"decode", "encode"}
    assert all(row["here_s"] and row["there_s"] and row["change"] is not None for row in rows)
    assert "rows more than 5% slower here:" in completed.stdout

    decoder = other / "stomp_proto" / "_decoder.py"
    source = decoder.read_text()
    broken = source.replace("headers = header_pairs(fields)", "headers = header_pairs(fields)[1:]")
    assert broken != source
    decoder.write_text(broken)
    completed = subprocess.run(
        [*command, "--against", str(other)], capture_output=True, text=True, timeout=280
    )
    assert completed.returncode == 2, completed.stdout[-3000:] + completed.stderr[-3000:]


def test_websocket_fanout_benchmark(tmp_path: Path) -> None:
    """``fanout.py --quick``: 5 WebSocket subscribers on each of our two servers, every
    message delivered to every one, the figures written."""
    out = tmp_path / "fanout.json"
    completed = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fanout.py"), "--quick", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    fanout = json.loads(out.read_text())
    assert [(row["target"], row["subscribers"]) for row in fanout["rows"]] == [
        ("asgi", 5),
        ("broker", 5),
    ]
    for run in fanout["runs"]:
        assert run["ok"], run
        assert run["deliveries"] == run["expected"] == 5 * run["messages"]
        assert run["deliveries_per_s"] > 0 and run["rss_idle"] > 0
        assert run["burst_p50_ms"] <= run["burst_p99_ms"]
