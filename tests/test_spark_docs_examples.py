"""Every Python example of ``docs/spark.rst`` runs as printed against the test RabbitMQ.

The examples give their connection options once, at the top, for the
RabbitMQ that ``scripts/start-brokers.sh`` starts (127.0.0.1:61613,
guest/guest), write under ``/tmp/stomp-spark``, and end on their own
(``trigger(availableNow=True)``).  They run here in document order, in one
process of their own (so they share one JVM, as a user's session would),
each from a fresh namespace.  Needs that RabbitMQ, pyspark and Java 17;
skipped without them, except under CI=true, where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from brokers import in_ci, real_broker
from test_spark_integration import _unavailable

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "spark.rst"
#: Where the examples write (they say so).
OUTPUT = Path("/tmp/stomp-spark")

RUNNER = """
import json, sys
for number, code in enumerate(json.load(open(sys.argv[1]))):
    print(f"-- example {number}", flush=True)
    exec(compile(code, f"docs/spark.rst, example {number}", "exec"), {"__name__": "__main__"})
print("-- every example ran", flush=True)
"""


def examples() -> list[str]:
    """The page's ``.. code-block:: python`` blocks, dedented."""
    text = PAGE.read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:   .*\n|\n)+)", text)
    return [re.sub(r"(?m)^   ", "", block) for block in blocks]


def test_the_examples_give_their_connection_options_once_at_the_top() -> None:
    found = examples()
    assert len(found) >= 9
    for code in found:
        if "format(" not in code or "stomp-capture" in code:
            continue  # no broker in it
        assert code.count("broker = {") == 1, code
        assert "127.0.0.1" in code and "61613" in code, code
        assert '.option("host"' not in code and '.option("port"' not in code, code


def test_every_example_runs_as_printed(tmp_path: Path) -> None:
    problem = _unavailable()
    if problem is not None:
        if in_ci():
            pytest.fail(f"CI=true and Spark cannot run: {problem}", pytrace=False)
        pytest.skip(problem)
    rabbitmq = real_broker("rabbitmq")
    if (rabbitmq.port, rabbitmq.login, rabbitmq.vhost) != (61613, "guest", "/"):
        pytest.skip(f"the examples need RabbitMQ on 127.0.0.1:61613, not {rabbitmq}")
    shutil.rmtree(OUTPUT, ignore_errors=True)
    code = tmp_path / "examples.json"
    code.write_text(json.dumps(examples()))
    runner = tmp_path / "run_examples.py"
    runner.write_text(RUNNER)
    env = {
        **os.environ,
        # What the page's "Setting up" asks for, before the first session starts.
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, str(runner), str(code)], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=840, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    assert "-- every example ran" in done.stdout
    # What the examples wrote is there: the stream copy read all it published, at least.
    assert any((OUTPUT / "orders-streams").glob("*.parquet")), output[-3000:]
    assert "CONNECT" in done.stdout  # the capture example's show()
