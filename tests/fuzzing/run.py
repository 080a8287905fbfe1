"""Run one fuzz target under atheris (coverage-guided, libFuzzer).

    python tests/fuzzing/run.py TARGET [libFuzzer options] [CORPUS_DIR ...]

TARGET is ``decoder``, ``server`` or ``client`` (see ``properties.py``).  Every
option after it goes to libFuzzer: ``-max_total_time=SECONDS``, ``-runs=N``,
``-jobs=N``, ``-artifact_prefix=DIR/``; the first corpus directory collects new
inputs, the others (say the committed seeds) are only read.  A crash stops the
run with a non-zero status and leaves the input in the artifact directory;
``scripts/fuzz.sh`` wraps this for CI and for long local runs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

# This checkout's stomp_proto and tests, whatever is installed.
_TESTS = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_TESTS.parent), str(_TESTS)]

with atheris.instrument_imports(include=["stomp_proto"]):
    import stomp_proto  # noqa: F401  (instrumented before the properties import it)

from fuzzing.properties import TARGETS  # noqa: E402


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(TARGETS)}}} [libFuzzer options] [corpus ...]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
