"""Optional mypyc build of the codec's hot modules; the pure-Python sources stay the reference.

    python scripts/build_mypyc.py --inplace     # compile next to the sources (stomp_proto/*.so)
    python scripts/build_mypyc.py --clean       # remove what --inplace built
    python scripts/build_mypyc.py --target DIR  # copy stomp_proto to DIR and compile it there

The compiled modules import under the same names (``stomp_proto._decoder`` ...): Python
picks an extension module over the ``.py`` file next to it, so after ``--inplace`` the
whole package - tests included - runs on the compiled codec; after ``--clean`` it is pure
Python again.  ``--target`` leaves the working tree alone (``benchmarks/codec.py --mypyc``
uses it to time both builds in one run).

Needs mypy (which ships mypyc), setuptools and a C compiler with the Python headers.
Each module is compiled on its own (``separate=True``), so no extra top-level runtime
library is written next to the package.  The generated C and object files go to a
temporary directory.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "stomp_proto"
#: The modules on the codec's hot path.  _frame is left out: Frame is a NamedTuple,
#: which mypyc compiles as an ordinary Python class anyway.
MODULES = ("_decoder", "_encoder")

_SETUP = """
import sys
from setuptools import setup
from mypyc.build import mypycify

paths, c_dir, temp = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
setup(
    name="stomp_proto_mypyc",
    ext_modules=mypycify(paths, opt_level="3", separate=True, target_dir=c_dir),
    script_args=["build_ext", "--inplace", "--build-temp", temp, "--build-lib", temp],
)
"""


def built_files(root: Path) -> list[Path]:
    """Extension modules built for MODULES under ``root`` (any Python version, any ABI)."""
    package = root / PACKAGE
    return sorted(
        path
        for module in MODULES
        # The module itself, and the mypyc runtime library it loads (one per module).
        for pattern in (f"{module}.*.so", f"{module}.*.pyd", f"{module}__mypyc.*")
        for path in package.glob(pattern)
    )


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
            [sys.executable, "-c", _SETUP, paths, str(c_dir), str(temp)],
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
    missing = [m for m in MODULES if not (root / PACKAGE / f"{m}{suffix}").exists()]
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--inplace", action="store_true", help="compile next to the sources")
    action.add_argument("--clean", action="store_true", help="remove the compiled modules")
    action.add_argument("--target", type=Path, metavar="DIR", help="copy the package and compile")
    parser.add_argument("--verbose", action="store_true", help="show the compiler's output")
    args = parser.parse_args(argv)
    if args.clean:
        for path in clean(ROOT):
            print(f"removed {path.relative_to(ROOT)}")
        return 0
    root = ROOT if args.inplace else copy_package(args.target.resolve())
    for path in build(root, quiet=not args.verbose):
        print(f"built {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
