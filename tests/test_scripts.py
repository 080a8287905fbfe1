"""The set-up scripts wait for the package manager instead of failing.

On a fresh machine another apt-get (unattended upgrades, a cloud-init step, a
second set-up script) often runs for a minute or two.  apt-get fails at once with
"Could not get lock" when another one holds the lock of the package lists, and
waits for the dpkg locks only when told to.  So every apt-get the project's scripts
run goes through ``scripts/apt-get.sh``, which waits for all of apt's locks.

The lock tests hold apt's real lock files as another apt-get would: apt and dpkg
take fcntl() record locks (``fcntl.lockf`` here), which ``flock`` does not see.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue

import pytest
from packaging_checks import ROOT

APT_GET_SH = ROOT / "scripts" / "apt-get.sh"

# A line that runs apt-get (as opposed to a message that tells the user to run it):
# the command starts the line, possibly after "if" and "$SUDO".
APT_COMMAND = re.compile(r"^\s*(?:if\s+)?(?:\$SUDO\s+)?apt-get\s+(update|install)\b")


def shell_scripts() -> list[Path]:
    return sorted((ROOT / "scripts").glob("*.sh")) + sorted(
        (ROOT / "scripts" / "brokers").glob("*.sh")
    )


def test_every_script_runs_apt_get_through_the_waiting_helper() -> None:
    direct, through_helper = [], []
    for script in shell_scripts():
        if script == APT_GET_SH:
            continue
        text = script.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0]
            if APT_COMMAND.search(code):
                direct.append(f"{script.relative_to(ROOT)}:{number}")
        if "apt-get.sh" in text:
            through_helper.append(script.name)
    assert direct == [], f"apt-get run without scripts/apt-get.sh: {direct}"
    # Every script that installs packages, so that the check above is not vacuous.
    assert set(through_helper) >= {
        "_venv.sh",
        "ensure-chromium.sh",
        "ensure-java.sh",
        "ensure-node.sh",
        "ensure-toolchain.sh",
        "install-brokers.sh",
    }, through_helper


needs_root_and_apt = pytest.mark.skipif(
    sys.platform != "linux"
    or os.geteuid() != 0
    or shutil.which("apt-get") is None
    or not Path("/var/lib/dpkg/lock-frontend").exists(),
    reason="holding apt's locks needs root on a Debian-like system with apt-get",
)

#: Each lock apt takes, and the cheapest apt-get call that needs it: ``check`` takes
#: the dpkg locks and changes nothing; only ``update`` takes the package lists' lock.
LOCKS = [
    ("/var/lib/dpkg/lock-frontend", ["check"]),
    ("/var/lib/dpkg/lock", ["check"]),
    ("/var/lib/apt/lists/lock", ["update", "-qq"]),
]

HOLDER = """
import fcntl, sys
with open(sys.argv[1], "w") as lock:
    fcntl.lockf(lock, fcntl.LOCK_EX)
    print("held", flush=True)
    sys.stdin.read()  # until the test closes our stdin
"""


@needs_root_and_apt
@pytest.mark.parametrize(("lock", "command"), LOCKS, ids=[lock for lock, _ in LOCKS])
def test_apt_get_sh_waits_for_a_held_lock_then_succeeds(lock: str, command: list[str]) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, lock],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    helper = None
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # The hold is real: apt-get alone gives up at once.
        alone = subprocess.run(
            ["apt-get", "-o", "DPkg::Lock::Timeout=0", *command],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert alone.returncode != 0
        assert f"Could not get lock {lock}" in alone.stderr

        helper = subprocess.Popen(
            ["bash", str(APT_GET_SH), *command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # apt-get and all, killed together if the test fails
        )
        said = Queue[str]()
        stderr = helper.stderr
        assert stderr is not None
        threading.Thread(target=lambda: [said.put(line) for line in stderr], daemon=True).start()
        waiting = f"waiting for {lock}, held by process {holder.pid} (python"
        lines: list[str] = []
        deadline = time.monotonic() + 60
        # Another apt-get on the machine may come first in what the helper says.
        while not lines or waiting not in lines[-1]:
            try:
                lines.append(said.get(timeout=1))
            except Empty:
                if helper.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"apt-get.sh did not say {waiting!r}: {lines}")
        time.sleep(2)
        assert helper.poll() is None, "apt-get.sh went ahead while the lock was held"

        assert holder.stdin is not None
        holder.stdin.close()  # the other apt-get is done
        assert helper.wait(timeout=240) == 0, [*lines, *said.queue]
    finally:
        for process in (helper, holder):
            if process is not None and process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def test_every_test_marked_serial_exists() -> None:
    # A renamed module or test would silently leave the serial pass and run in parallel.
    from conftest import SERIAL, SERIAL_LANE

    # A lane is given to serial tests only, each a lane that scripts/test.sh runs (a
    # test named in no lane is "shared"), and scripts/test.sh runs no lane left empty.
    lanes = re.search(r"^LANES=\(([^)]*)\)$", (ROOT / "scripts/test.sh").read_text(), re.M)
    assert lanes is not None
    assert {*SERIAL_LANE.values(), "shared"} == set(lanes.group(1).split())
    missing = []
    for entry in {*SERIAL, *SERIAL_LANE}:
        module, _, name = entry.partition("::")
        if module not in SERIAL and entry not in SERIAL:
            missing.append(entry)
        path = ROOT / "tests" / f"{module}.py"
        if not path.is_file() or (name and f"def {name}(" not in path.read_text()):
            missing.append(entry)
    assert missing == []
    assert len(SERIAL) >= 10


def test_bench_sh_refuses_a_checkout_holding_a_native_build_made_in_place(tmp_path: Path) -> None:
    # The pure build's rows import the stomp_proto beside benchmarks/: with a module
    # built in place there they would measure the accelerated build, or fail.
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bench.sh", tmp_path / "scripts" / "bench.sh")
    (tmp_path / "stomp_proto").mkdir()
    (tmp_path / "stomp_proto" / "_decoder_native.cpython-311-x86_64-linux-gnu.so").touch()
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "bench.sh"), "--quick"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "native build made in place" in done.stderr
    assert "scripts/build_accelerated.py --clean" in done.stderr


def test_fuzz_sh_prints_its_help_and_refuses_an_unknown_target(tmp_path: Path) -> None:
    # A copy that fails if it gets as far as fuzzing: --help, and a target or an
    # option it does not know, must stop before (they once fuzzed a target called
    # "--help" for ten minutes).
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "fuzz.sh", tmp_path / "scripts" / "fuzz.sh")
    script = str(tmp_path / "scripts" / "fuzz.sh")
    env = {**os.environ, "PYTHON": "/bin/false"}
    for flag in ("--help", "-h"):
        done = subprocess.run(
            ["bash", script, flag], capture_output=True, text=True, timeout=30, check=False, env=env
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Fuzz the decoder"), done.stdout[:200]
        assert "bash scripts/fuzz.sh --help" in done.stdout and "unbounded" in done.stdout
        assert "#" not in done.stdout.split("\n", 1)[0] and "set -euo" not in done.stdout
    for args, message in (
        (["--hlep"], "unknown option --hlep"),
        (["decodr"], "no fuzz target decodr"),
        (["--long", "60", "decoder", "strem"], "no fuzz target strem"),
        (["decoder", "ten"], "SECONDS must be a whole number"),
    ):
        done = subprocess.run(
            ["bash", script, *args], capture_output=True, text=True, timeout=30, check=False,
            env=env,
        )  # fmt: skip
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, done.stderr
    assert not (tmp_path / ".fuzz").exists()  # nothing started
