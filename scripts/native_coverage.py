"""Line coverage of the native code, by the differential fuzz corpus.

    python scripts/native_coverage.py [CORPUS_DIR ...]

Copies ``stomp_proto`` to a temporary directory and compiles each native module
that ``scripts/build_accelerated.py`` builds with Cython's line tracing (the
``linetrace`` directive and ``CYTHON_TRACE``).  Then it replays every input of
``tests/fuzzing/corpus/differential/`` - and of each CORPUS_DIR given, say
``.fuzz/corpus/differential`` after ``scripts/fuzz.sh`` - through the differential
target (tests/fuzzing/differential.py) under coverage.py with Cython's plugin, and
prints the line coverage of each ``.pyx`` and of each function in it.

Needs coverage.py (``pip install coverage``) besides the build's Cython and
compiler.  Traced native code is slow: about a minute for the committed seeds.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_accelerated import MODULES, PACKAGE, ROOT, copy_package

_SETUP = """
import sys
from Cython.Build import cythonize
from setuptools import Extension, setup

trace = [("CYTHON_TRACE", "1"), ("CYTHON_TRACE_NOGIL", "1")]
extensions = [
    Extension("stomp_proto." + name, ["stomp_proto/" + name + ".pyx"], define_macros=trace)
    for name in sys.argv[1].split(",")
]
setup(
    name="stomp_proto_traced",
    ext_modules=cythonize(
        extensions, language_level=3, quiet=True, compiler_directives={"linetrace": True}
    ),
    script_args=["build_ext", "--inplace"],
)
"""

# The .c files stay beside the .pyx: Cython's coverage plugin reads them there.
_RCFILE = """
[run]
plugins = Cython.Coverage
source = stomp_proto
# The shared .pxd's inline helpers are traced into each twin, but the plugin reports
# on .pyx files only (coverage report fails on a file it cannot report).
omit = stomp_proto/*.pxd
[report]
include = stomp_proto/*.pyx
"""

_REPLAY = """
import sys
from pathlib import Path

sys.path[:0] = [sys.argv[1], sys.argv[2]]
import stomp_proto

assert stomp_proto.BUILD == "accelerated", stomp_proto.BUILD
from fuzzing.differential import check_builds_agree

inputs = [path for folder in sys.argv[3:] for path in sorted(Path(folder).glob("*"))]
for path in inputs:
    check_builds_agree(path.read_bytes())
print(len(inputs), "inputs replayed")
"""

# A function's first line in a .pyx: def, cdef or cpdef (not a cdef of data), or a class.
_FUNCTION = re.compile(
    r"^( {0,4})(?:(?:cp?def|def)\b(?!\s+(?:enum|extern|struct))[^(=]*?|cdef class )(\w+)\s*[(:]"
)


def per_function(pyx: Path, executed: set[int], missing: set[int]) -> str:
    counts: dict[str, list[int]] = {}
    name = "(module)"
    for number, line in enumerate(pyx.read_text().splitlines(), 1):
        found = _FUNCTION.match(line)
        if found:
            name = found.group(2)
        if number in executed or number in missing:
            tally = counts.setdefault(name, [0, 0])
            tally[0] += number in executed
            tally[1] += 1
    return ", ".join(f"{name} {run}/{total}" for name, (run, total) in counts.items())


def main() -> None:
    tests = ROOT / "tests"
    corpora = [str(tests / "fuzzing" / "corpus" / "differential"), *sys.argv[1:]]
    with tempfile.TemporaryDirectory(prefix="stomp-proto-coverage-") as temp:
        root = Path(temp)
        copy_package(root)
        subprocess.run(
            [sys.executable, "-c", _SETUP, ",".join(MODULES)],
            cwd=root,
            check=True,
            capture_output=True,
        )
        (root / ".coveragerc").write_text(_RCFILE)
        (root / "replay.py").write_text(_REPLAY)
        coverage = [sys.executable, "-m", "coverage"]
        subprocess.run(
            [*coverage, "run", "replay.py", str(root), str(tests), *corpora], cwd=root, check=True
        )
        subprocess.run([*coverage, "report"], cwd=root, check=True)
        subprocess.run([*coverage, "json", "-q", "-o", "coverage.json"], cwd=root, check=True)
        files = json.loads((root / "coverage.json").read_text())["files"]
        for name, data in sorted(files.items()):
            executed, missing = set(data["executed_lines"]), set(data["missing_lines"])
            print(f"\n{name}: {per_function(root / name, executed, missing)}")


if __name__ == "__main__":
    if not (ROOT / PACKAGE).is_dir():
        sys.exit(f"no {PACKAGE} package under {ROOT}")
    main()
