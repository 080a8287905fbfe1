"""The built distributions: the suite runs against the installed wheel, which holds the
whole package, and the sdist holds the tests.

``scripts/test.sh`` builds both (``python -m build``), installs the wheel into a venv of
its own and runs the suite there from ``tests/`` with ``STOMP_PROTO_TEST_INSTALLED=1``
and ``STOMP_PROTO_SDIST`` naming the sdist.  Run from a plain editable checkout, these
tests skip: there is no built distribution to look at.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from packaging_checks import ROOT, installed_location_problem, package_files

import stomp_proto

installed_only = pytest.mark.skipif(
    os.environ.get("STOMP_PROTO_TEST_INSTALLED") != "1",
    reason="runs against an installed wheel: scripts/test.sh sets STOMP_PROTO_TEST_INSTALLED=1",
)


@installed_only
def test_the_suite_imports_the_installed_package() -> None:
    assert installed_location_problem() is None
    # Subprocesses started as the CLI tests start them (same interpreter, same working
    # directory) import the same copy, not the checkout.
    out = subprocess.run(
        [sys.executable, "-c", "import stomp_proto; print(stomp_proto.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    assert Path(out).resolve() == Path(stomp_proto.__file__).resolve()
    assert not Path(out).resolve().is_relative_to(ROOT / "stomp_proto")


@installed_only
def test_the_wheel_holds_every_file_of_the_package() -> None:
    installed = package_files(Path(stomp_proto.__file__).resolve().parent)
    source = package_files(ROOT / "stomp_proto")
    assert installed == source
    assert "py.typed" in installed  # PEP 561: the type information ships


@installed_only
def test_the_wheel_installs_the_command_line() -> None:
    script = Path(sys.executable).parent / "stomp-proto"
    assert script.is_file(), f"no console script {script}"
    done = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "broker" in done.stdout


def tracked(directory: str) -> set[str]:
    done = subprocess.run(
        ["git", "ls-files", "--", directory],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(done.stdout.split())


@pytest.mark.skipif(
    "STOMP_PROTO_SDIST" not in os.environ,
    reason="scripts/test.sh names the built sdist in STOMP_PROTO_SDIST",
)
def test_the_sdist_holds_the_tests_and_the_docs() -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("the checkout is not a git work tree: its tracked files are unknown")
    with tarfile.open(os.environ["STOMP_PROTO_SDIST"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for directory in ("stomp_proto", "tests", "docs", "examples", "scripts", "benchmarks"):
        missing = tracked(directory) - names
        assert not missing, f"the sdist misses {sorted(missing)[:10]}"
    assert {"pyproject.toml", "README.rst", "CHANGELOG.rst", "PKG-INFO"} <= names
