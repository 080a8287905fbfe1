"""What a wheel build of the checkout gives, with and without a working C compiler.

Every wheel build (``pip install .``, an install from the sdist, ``python -m build``)
goes through hatch_build.py: the native fast path is compiled in where it can be; where
it cannot, the wheel is the pure ``py3-none-any`` one and one line says why and how to
get the fast build - on stderr, and in the wheel, where ``stomp-proto --version`` reads
it.  ``STOMP_PROTO_NO_EXTENSIONS`` skips the compile; ``STOMP_PROTO_ACCELERATE=1`` makes
a failed one an error.  Each case builds a wheel of the checkout with ``python -m build
--no-isolation`` (this interpreter's hatchling, Cython and setuptools: no download), a
broken compiler being ``CC``.  Skipped where hatchling, build, Cython or setuptools is
missing - except under ``CI=true``, where that fails.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from stomp_proto._build import NATIVE_MODULES

ROOT = Path(__file__).resolve().parent.parent
NOTE = "extra_metadata/native-build.txt"

if os.environ.get("CI") != "true":
    for module in ("hatchling", "build", "Cython", "setuptools"):
        pytest.importorskip(module)

pytestmark = pytest.mark.timeout(600)


def python(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` with this interpreter, run to completion (bounded), output kept."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=540,
        check=False,
    )


def build_wheel(out: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], Path | None]:
    """Build a wheel of the checkout into ``out`` under ``env``; the run and the wheel."""
    environ = {**os.environ, **env}
    for name in ("STOMP_PROTO_NO_EXTENSIONS", "STOMP_PROTO_ACCELERATE", "CC"):
        if name not in env:
            environ.pop(name, None)
    done = python(
        *("-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), "."),
        cwd=ROOT,
        env=environ,
    )
    wheels = list(out.glob("*.whl"))
    return done, (wheels[0] if len(wheels) == 1 else None)


def our_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("stomp-proto: ")]


def wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def installed_version_line(wheel: Path, target: Path) -> str:
    """``stomp-proto --version`` of ``wheel`` installed alone into ``target``."""
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index"),
            *("--target", str(target), str(wheel)),
        ],
        check=True,
        timeout=300,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("STOMP_PROTO_NO_EXTENSIONS", None)
    # -P: the working directory (the checkout's stomp_proto) stays off sys.path.
    done = python("-P", "-m", "stomp_proto", "--version", cwd=target, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("compiler", "reason"),
    [
        ("/bin/false", "the C build failed"),
        ("stomp-proto-no-such-cc", "no C compiler (stomp-proto-no-such-cc)"),
    ],
)
def test_without_a_working_compiler_the_wheel_is_pure_and_says_why(
    tmp_path: Path, compiler: str, reason: str
) -> None:
    done, wheel = build_wheel(tmp_path / "dist", CC=compiler)
    assert done.returncode == 0, done.stderr[-3000:]
    assert wheel is not None and wheel.name.endswith("-py3-none-any.whl")
    (line,) = our_lines(done.stderr)
    assert f"native fast path not built ({reason}" in line
    assert "pure-Python build" in line
    assert "install a C compiler and the Python headers" in line
    names = wheel_names(wheel)
    assert not [name for name in names if name.endswith((".so", ".pyd"))]
    assert len([name for name in names if name.endswith(NOTE)]) == 1
    # The installed copy repeats the reason where a user asks which build runs.
    version = installed_version_line(wheel, tmp_path / "site")
    assert version.startswith("stomp-proto ")
    assert f"(pure build: native fast path not built ({reason}" in version


def test_no_extensions_skips_the_build(tmp_path: Path) -> None:
    done, wheel = build_wheel(tmp_path / "dist", STOMP_PROTO_NO_EXTENSIONS="1")
    assert done.returncode == 0, done.stderr[-3000:]
    assert wheel is not None and wheel.name.endswith("-py3-none-any.whl")
    assert our_lines(done.stderr) == [
        "stomp-proto: STOMP_PROTO_NO_EXTENSIONS is set: pure-Python build"
    ]
    names = wheel_names(wheel)
    assert not [name for name in names if name.endswith((".so", ".pyd", NOTE))]


def test_accelerate_makes_a_failed_compile_an_error(tmp_path: Path) -> None:
    done, wheel = build_wheel(tmp_path / "dist", CC="/bin/false", STOMP_PROTO_ACCELERATE="1")
    assert done.returncode != 0
    assert wheel is None
    assert "native build failed" in done.stderr


@pytest.mark.skipif(
    not shutil.which((sysconfig.get_config_var("CC") or "cc").split()[0]),
    reason="no C compiler",
)
def test_with_a_compiler_the_wheel_holds_the_native_module(tmp_path: Path) -> None:
    done, wheel = build_wheel(tmp_path / "dist")
    assert done.returncode == 0, done.stderr[-3000:]
    assert wheel is not None
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert wheel.name.split("-")[2:4] == [python, python]
    names = wheel_names(wheel)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for twin in NATIVE_MODULES:
        assert f"stomp_proto/{twin}{suffix}" in names
    assert not [name for name in names if name.endswith(NOTE)]
    assert our_lines(done.stderr) == []
    version = installed_version_line(wheel, tmp_path / "site")
    assert version.endswith("(accelerated build)")
