#!/usr/bin/env bash
# Fuzz the decoder, the server connection and the client connection.
#
#     bash scripts/fuzz.sh --ci                 # CI: every target, bounded (~2.5 min in all)
#     bash scripts/fuzz.sh [TARGET] [SECONDS]   # locally, longer: default all targets, 600 s each
#
# With atheris (pip install atheris; wheels for CPython <= 3.11 on Linux/macOS)
# each target runs coverage-guided from the committed seed corpus
# (tests/fuzzing/corpus/TARGET); new inputs go to .fuzz/corpus/TARGET, kept
# between local runs.  A crash fails the run and its input is written to
# tests/fuzzing/regressions/TARGET/ - commit it with the fix: pytest replays
# every file there (tests/test_fuzz_properties.py).
#
# Without atheris the same property functions run under hypothesis instead
# (HYPOTHESIS_PROFILE=fuzz), and the script says so loudly: fuzzing is never
# skipped in silence.  FUZZ_ENGINE=hypothesis forces that fallback.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-}
if [ -z "$PYTHON" ]; then
    if [ -x .venv/bin/python ]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
TARGETS=(decoder server client)

ci=0
if [ "${1:-}" = "--ci" ]; then
    ci=1
    shift
fi
if [ $ci -eq 1 ]; then
    selected=("${TARGETS[@]}")
    seconds=${FUZZ_SECONDS:-45}
else
    if [ -n "${1:-}" ]; then selected=("$1"); else selected=("${TARGETS[@]}"); fi
    seconds=${2:-600}
fi

if [ "${FUZZ_ENGINE:-}" = hypothesis ] || ! "$PYTHON" -c "import atheris" 2>/dev/null; then
    cat >&2 <<'EOF'
################################################################################
# atheris is NOT installed: running the fuzz properties under HYPOTHESIS instead.
# Same properties, random rather than coverage-guided inputs.
# For real fuzzing: pip install atheris  (CPython <= 3.11)
################################################################################
EOF
    examples=$(( seconds * 40 ))
    HYPOTHESIS_PROFILE=fuzz FUZZ_EXAMPLES=$examples "$PYTHON" -m pytest -q -p no:cacheprovider \
        tests/test_fuzz_properties.py
    exit $?
fi

status=0
for target in "${selected[@]}"; do
    work=.fuzz/corpus/$target
    artifacts=tests/fuzzing/regressions/$target/
    mkdir -p "$work" "$artifacts"
    printf '\n==> fuzz %s for %ss (atheris)\n' "$target" "$seconds"
    log=$(mktemp)
    if "$PYTHON" tests/fuzzing/run.py "$target" -max_total_time="$seconds" \
        -print_final_stats=1 -artifact_prefix="$artifacts" -timeout=20 -rss_limit_mb=1024 \
        "$work" "tests/fuzzing/corpus/$target" >"$log" 2>&1; then
        grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)' "$log" || true
    else
        status=1
        grep -v -E '^(INFO|#[0-9])' "$log" | tail -40 >&2
        echo "error: fuzz target $target crashed; the input is in $artifacts" >&2
    fi
    rm -f "$log"
done
exit $status
