"""Run one fuzz target under atheris (coverage-guided, libFuzzer).

    python tests/fuzzing/run.py TARGET [libFuzzer options] [CORPUS_DIR ...]

TARGET is ``decoder``, ``server``, ``client`` ... (see ``properties.py``);
``differential`` runs each input on the build loaded and on the pure build
beside it in this process (``differential.py``), and fails where they differ.  Every
option after it goes to libFuzzer: ``-max_total_time=SECONDS``, ``-runs=N``,
``-jobs=N``, ``-artifact_prefix=DIR/``; the first corpus directory collects new
inputs, the others (say the committed seeds) are only read.  A crash stops the
run with a non-zero status and leaves the input in the artifact directory;
``scripts/fuzz.sh`` wraps this for CI and for long local runs.

``STOMP_PROTO_FUZZ_ROOT`` names another directory to import ``stomp_proto``
from - the accelerated copy that ``scripts/build_accelerated.py --target``
writes, so that the native fast path is fuzzed too (``scripts/fuzz.sh`` does
both builds).  Only the Python code is coverage-instrumented: the native
module's inputs are found through the pure code's edges around it, and a crash
inside it (a signal) stops the run like any other.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import atheris

# This checkout's stomp_proto (or the one STOMP_PROTO_FUZZ_ROOT names) and tests,
# whatever is installed.
_TESTS = Path(__file__).resolve().parent.parent
_ROOT = os.environ.get("STOMP_PROTO_FUZZ_ROOT") or str(_TESTS.parent)
sys.path[:0] = [_ROOT, str(_TESTS)]

with atheris.instrument_imports(include=["stomp_proto", "stomp_proto_pure"]):
    import stomp_proto  # (instrumented before the properties import it)

    if sys.argv[1:2] == ["differential"]:
        from fuzzing.differential import pure_twin

        pure_twin()  # the pure build beside it, instrumented too

print(f"fuzzing stomp_proto.BUILD={stomp_proto.BUILD} from {stomp_proto.__file__}", flush=True)
_EXPECTED = os.environ.get("STOMP_PROTO_EXPECT_BUILD")
if _EXPECTED and stomp_proto.BUILD != _EXPECTED:
    sys.exit(f"STOMP_PROTO_EXPECT_BUILD={_EXPECTED} but stomp_proto.BUILD is {stomp_proto.BUILD}")

from fuzzing.properties import TARGETS  # noqa: E402


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(TARGETS)}}} [libFuzzer options] [corpus ...]")
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
