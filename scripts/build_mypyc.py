"""Optional mypyc build of the codec's hot modules; the pure-Python sources stay the reference.

    python scripts/build_mypyc.py --inplace     # compile next to the sources (stomp_proto/*.so)
    python scripts/build_mypyc.py --clean       # remove what --inplace built
    python scripts/build_mypyc.py --target DIR  # copy stomp_proto to DIR and compile it there
    python scripts/build_mypyc.py --wheel dist/stomp_proto-*-py3-none-any.whl
                                                # a compiled wheel for this Python, beside it

The compiled modules import under the same names (``stomp_proto._decoder`` ...): Python
picks an extension module over the ``.py`` file next to it, so after ``--inplace`` the
whole package - tests included - runs on the compiled codec; after ``--clean`` it is pure
Python again.  ``--target`` leaves the working tree alone (``benchmarks/codec.py --mypyc``
uses it to time both builds in one run).  ``--wheel`` takes the pure wheel that
``python -m build`` made, compiles the same modules inside it and writes a wheel tagged
for this interpreter and platform (``stomp_proto-VERSION-cp311-cp311-linux_x86_64.whl``,
say): the same files and metadata, plus the extension modules.  It is a local build, not
a manylinux one: install it where it was built.

Needs mypy (which ships mypyc), setuptools and a C compiler with the Python headers.
The modules are compiled as one group: one shared library holding the code and mypyc's
runtime (``stomp_proto__mypyc.*.so``, beside the package: mypyc derives each module's
``__file__`` from where it is) and a small extension module per module that loads it
(``stomp_proto/_decoder.*.so`` ...).  The generated C and object files go to a
temporary directory.  hatch_build.py
calls :func:`build` for ``STOMP_PROTO_COMPILE=1 python -m build`` (and cibuildwheel).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "stomp_proto"
#: The sans-IO core, as paths under stomp_proto/ without ".py": codec, headers, events,
#: errors, state, heart-beats, connections and the clients' shared core (the same list as
#: stomp_proto._build.CORE_MODULES, which stomp_proto.BUILD checks).  The I/O adapters,
#: the broker and the rest stay Python.
#: The group's shared library, ``GROUP__mypyc.*.so``, beside the package.
GROUP = "stomp_proto"
MODULES = (
    "_build",
    "_limits",
    "_protocol_errors",
    "_checks",
    "_frame",
    "_events",
    "_errors",
    "_headers",
    "_decoder",
    "_encoder",
    "_state",
    "_heartbeat",
    "_connection",
    "_client/_core",
)

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

paths, group, c_dir, temp = sys.argv[1].split(","), sys.argv[2], sys.argv[3], sys.argv[4]
setup(
    name="stomp_proto_mypyc",
    ext_modules=mypycify(paths, opt_level="3", separate=[(paths, group)], target_dir=c_dir),
    script_args=["build_ext", "--inplace", "--build-temp", temp, "--build-lib", temp],
)
"""


def built_files(root: Path) -> list[Path]:
    """Extension modules built for MODULES under ``root`` (any Python version, any ABI)."""
    package = root / PACKAGE
    modules = [
        path
        # Each module, and a per-module library (from a build with separate=True).
        for name in MODULES
        for pattern in (f"{name}.*.so", f"{name}.*.pyd", f"{name}__mypyc.*")
        for path in package.glob(pattern)
    ]
    return sorted(p for p in [*modules, *root.glob(f"{GROUP}__mypyc.*")] if p.is_file())


def clean(root: Path) -> list[Path]:
    removed = built_files(root)
    for path in removed:
        path.unlink()
    return removed


def build(root: Path, *, quiet: bool = True) -> list[Path]:
    """Compile MODULES of ``root/stomp_proto`` in place; return the extension files."""
    clean(root)
    paths = ",".join(f"{PACKAGE}/{module}.py" for module in MODULES)
    with tempfile.TemporaryDirectory(prefix="stomp-proto-mypyc-") as work:
        c_dir, temp = Path(work, "c"), Path(work, "temp")
        result = subprocess.run(
            [sys.executable, "-c", _SETUP, paths, GROUP, str(c_dir), str(temp)],
            cwd=root,
            capture_output=quiet,
            text=True,
            check=False,
        )
    if result.returncode:
        output = (result.stdout or "") + (result.stderr or "")
        raise SystemExit(f"mypyc build failed (exit {result.returncode})\n{output[-4000:]}")
    files = built_files(root)
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    wanted = [f"{PACKAGE}/{m}" for m in MODULES] + [f"{GROUP}__mypyc"]
    missing = [m for m in wanted if not (root / f"{m}{suffix}").exists()]
    if missing:
        raise SystemExit(f"mypyc build did not produce {missing}; got {[f.name for f in files]}")
    return files


def copy_package(target: Path) -> Path:
    """Copy the package sources (no caches, no built modules) to ``target``; return it."""
    destination = target / PACKAGE
    if destination.exists():
        shutil.rmtree(destination)
    shutil.copytree(
        ROOT / PACKAGE, destination, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyd")
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


def compile_wheel(pure: Path, out_dir: Path, *, quiet: bool = True) -> Path:
    """Compile MODULES inside the pure wheel ``pure``; return the platform wheel written."""
    name, version, *_ = pure.name.split("-")
    tag = wheel_tag()
    with tempfile.TemporaryDirectory(prefix="stomp-proto-wheel-") as work:
        root = Path(work)
        with zipfile.ZipFile(pure) as archive:
            archive.extractall(root)
        build(root, quiet=quiet)
        dist_info = root / f"{name}-{version}.dist-info"
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
    action.add_argument("--inplace", action="store_true", help="compile next to the sources")
    action.add_argument("--clean", action="store_true", help="remove the compiled modules")
    action.add_argument("--target", type=Path, metavar="DIR", help="copy the package and compile")
    action.add_argument(
        "--wheel", type=Path, metavar="WHEEL", help="compile inside a pure wheel, write it beside"
    )
    parser.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = parser.parse_args(argv)
    if args.clean:
        for path in clean(ROOT):
            print(f"removed {path.relative_to(ROOT)}")
        return 0
    if args.wheel:
        wheel = compile_wheel(
            args.wheel.resolve(), args.wheel.resolve().parent, quiet=not args.verbose
        )
        print(f"built {wheel}")
        return 0
    root = ROOT if args.inplace else copy_package(args.target.resolve())
    for path in build(root, quiet=not args.verbose):
        print(f"built {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
