"""Build the accelerated stomp_proto: the pure package plus its native fast path.

    python scripts/build_accelerated.py --inplace     # _*_native.*.so beside the sources
    python scripts/build_accelerated.py --clean       # remove what --inplace built
    python scripts/build_accelerated.py --target DIR  # copy stomp_proto to DIR and build it there
    python scripts/build_accelerated.py --wheel dist/stomp_proto-*-py3-none-any.whl
                                                      # its accelerated wheel, beside it

The native code is five Cython modules, each the twin of a pure module
(``stomp_proto/_decoder_native.pyx`` beside ``_decoder.py``, and the events', the
encoder's, the connection's and a Spark read task's; ``stomp_proto._build`` lists them
in NATIVE_MODULES),
sharing ``_native_shared.pxd``; each is compiled to C and then to one extension
module, ``stomp_proto/_decoder_native.<abi>.so`` and so on.  Every other module stays
the Python source: each pure module picks its twin at import
(``stomp_proto._build.native``) and runs its own code for whatever the twin leaves to
it, so after ``--inplace`` the whole package - tests included - runs accelerated, and
after ``--clean`` it is pure Python again.
``--target`` leaves the working tree alone (the benchmarks use it to time both
builds in one run).  ``--wheel`` takes the pure wheel that ``python -m build`` made,
adds the extension module and writes a wheel tagged for this interpreter and
platform (``stomp_proto-VERSION-cp311-cp311-linux_x86_64.whl``, say): a local build,
not a manylinux one.  hatch_build.py calls :func:`toolchain_problem` and :func:`build`
on every wheel build (``pip install .``, ``python -m build``, cibuildwheel), and
scripts/build_wheels.sh repairs its wheels to manylinux ones.

Needs Cython and setuptools (``pip install cython setuptools``) and a C compiler with
the Python headers (``scripts/ensure-toolchain.sh`` installs gcc and python3-dev from
Debian).  The generated C and the object files go to a temporary directory.
"""

from __future__ import annotations

import argparse
import ast
import base64
import hashlib
import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "stomp_proto"


def _native_modules() -> tuple[str, ...]:
    """stomp_proto._build.NATIVE_MODULES, read from the source (this script imports
    nothing from the package it builds)."""
    tree = ast.parse((ROOT / PACKAGE / "_build.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "NATIVE_MODULES" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, tuple)
            return value
    raise SystemExit("stomp_proto/_build.py has no NATIVE_MODULES")


#: The native modules, as paths under stomp_proto/ without ".pyx".
MODULES = _native_modules()

# Bounds checks stay on (the .pyx says so in its header as well): this parses
# hostile input.  -O2 and no -ffast-math: nothing here is floating point.
_SETUP = """
import sys
from Cython.Build import cythonize
from setuptools import Extension, setup

names, temp = sys.argv[1].split(","), sys.argv[2]
extensions = [
    Extension("stomp_proto." + name, ["stomp_proto/" + name + ".pyx"], extra_compile_args=["-O2"])
    for name in names
]
setup(
    name="stomp_proto_accelerated",
    ext_modules=cythonize(extensions, build_dir=temp, language_level=3, quiet=True, nthreads=2),
    script_args=["build_ext", "--inplace", "--build-temp", temp, "--build-lib", temp, "-j", "2"],
)
"""


class NativeBuildError(RuntimeError):
    """The native build failed; the message ends with the compiler's last output."""


#: What to do when the compiler or the headers are missing, or the compile fails.
COMPILER_REMEDY = (
    "install a C compiler and the Python headers (Debian: apt-get install gcc python3-dev)"
)


class ToolchainProblem(NamedTuple):
    missing: str  #: what this interpreter lacks, in a few words
    remedy: str  #: what to do about it


def toolchain_problem() -> ToolchainProblem | None:
    """What this interpreter lacks to build MODULES, and the remedy, or None.

    Asked before a build that may fall back to the pure package, so that the fallback
    can say why; a compiler that is there but fails is found by the build itself.
    """
    for module in ("Cython", "setuptools"):
        if importlib.util.find_spec(module) is None:
            # pip installs both into the build's own environment, unless told not to.
            return ToolchainProblem(
                f"{module} is not installed",
                "install Cython and setuptools (or build without --no-build-isolation)",
            )
    # setuptools compiles with $CC when it is set, else with the compiler Python was built with.
    command = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    if not command or shutil.which(command[0]) is None:
        name = command[0] if command else "CC is empty"
        return ToolchainProblem(f"no C compiler ({name})", COMPILER_REMEDY)
    include = sysconfig.get_paths()["include"]
    if not Path(include, "Python.h").is_file():
        return ToolchainProblem(f"no Python headers (no Python.h in {include})", COMPILER_REMEDY)
    return None


def built_files(root: Path) -> list[Path]:
    """Extension modules built for MODULES under ``root`` (any Python version, any ABI)."""
    package = root / PACKAGE
    found = [
        path
        for name in MODULES
        for pattern in (f"{name}.*.so", f"{name}.*.pyd")
        for path in package.glob(pattern)
    ]
    return sorted(path for path in found if path.is_file())


def clean(root: Path) -> list[Path]:
    removed = built_files(root)
    for path in removed:
        path.unlink()
    return removed


def build(root: Path, *, quiet: bool = True) -> list[Path]:
    """Compile MODULES of ``root/stomp_proto`` in place; return the extension files."""
    clean(root)
    with tempfile.TemporaryDirectory(prefix="stomp-proto-native-") as temp:
        result = subprocess.run(
            [sys.executable, "-c", _SETUP, ",".join(MODULES), temp],
            cwd=root,
            capture_output=quiet,
            text=True,
            check=False,
        )
    if result.returncode:
        output = (result.stdout or "") + (result.stderr or "")
        raise NativeBuildError(f"native build failed (exit {result.returncode})\n{output[-4000:]}")
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    missing = [m for m in MODULES if not (root / PACKAGE / f"{m}{suffix}").exists()]
    if missing:
        raise NativeBuildError(f"native build did not produce {missing}")
    return built_files(root)


def copy_package(target: Path) -> Path:
    """Copy the package sources (no caches, no built modules) to ``target``; return it."""
    destination = target / PACKAGE
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(
        ROOT / PACKAGE,
        destination,
        ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.c"),
    )
    return target


def wheel_tag() -> str:
    """The tag of a wheel holding extension modules for this interpreter."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = python + ("t" if sysconfig.get_config_var("Py_GIL_DISABLED") else "")
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{python}-{abi}-{platform}"


def _record_line(root: Path, path: Path) -> str:
    data = path.read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path.relative_to(root).as_posix()},sha256={digest},{len(data)}"


def accelerate_wheel(pure: Path, out_dir: Path, *, quiet: bool = True) -> Path:
    """Add the extension modules to the pure wheel ``pure``; return the platform wheel written."""
    name, version, *_ = pure.name.split("-")
    tag = wheel_tag()
    with tempfile.TemporaryDirectory(prefix="stomp-proto-wheel-") as work:
        root = Path(work)
        with zipfile.ZipFile(pure) as archive:
            archive.extractall(root)
        build(root, quiet=quiet)
        dist_info = root / f"{name}-{version}.dist-info"
        # hatch_build.py's word on why the pure wheel is pure no longer holds.
        (dist_info / "extra_metadata" / "native-build.txt").unlink(missing_ok=True)
        metadata = (dist_info / "WHEEL").read_text().splitlines()
        metadata = [
            line.replace("true", "false") if line.startswith("Root-Is-Purelib:") else line
            for line in metadata
            if not line.startswith("Tag:")
        ]
        (dist_info / "WHEEL").write_text("\n".join([*metadata, f"Tag: {tag}"]) + "\n")
        record = dist_info / "RECORD"
        files = sorted(p for p in root.rglob("*") if p.is_file() and p != record)
        lines = [_record_line(root, p) for p in files]
        record.write_text("\n".join([*lines, f"{record.relative_to(root).as_posix()},,"]) + "\n")
        wheel = out_dir / f"{name}-{version}-{tag}.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in [*files, record]:
                archive.write(path, path.relative_to(root).as_posix())
    return wheel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--inplace", action="store_true", help="build beside the sources")
    action.add_argument("--clean", action="store_true", help="remove the built modules")
    action.add_argument("--target", type=Path, metavar="DIR", help="copy the package and build")
    action.add_argument(
        "--wheel", type=Path, metavar="WHEEL", help="add the native code to a pure wheel"
    )
    parser.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = parser.parse_args(argv)
    try:
        return _run(args)
    except NativeBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace) -> int:
    if args.clean:
        for path in clean(ROOT):
            print(f"removed {path.relative_to(ROOT)}")
        return 0
    if args.wheel:
        pure = args.wheel.resolve()
        wheel = accelerate_wheel(pure, pure.parent, quiet=not args.verbose)
        print(f"built {wheel}")
        return 0
    root = ROOT if args.inplace else copy_package(args.target.resolve())
    for path in build(root, quiet=not args.verbose):
        print(f"built {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
