#!/usr/bin/env bash
# Fuzz the decoder, the connections, long structured streams and whole sessions.
#
#     bash scripts/fuzz.sh --ci                 # CI: every target, bounded (~3 min in all)
#     bash scripts/fuzz.sh --long [SECONDS [TARGET...]]
#                                               # a local campaign: every target (or those
#                                               # named), nice'd, SECONDS each (default
#                                               # 3600), summary in .fuzz/campaign.txt
#     bash scripts/fuzz.sh [TARGET] [SECONDS]   # locally, longer: default all targets, 600 s each
#     bash scripts/fuzz.sh --help               # this text
#
# Targets (tests/fuzzing/properties.py): decoder, server, client (arbitrary bytes)
# and stream, server_session, client_session (structure-aware: a recipe of valid
# frames of every command and version, mutated and repeated into streams of up to
# 4 MiB, or whole sessions; each fed whole and in random chunks, which must agree),
# and differential: scripts of calls on the public API (the decoder in any pieces,
# the encoder, a server, client sessions that send every event, iterate and ack),
# run on the accelerated build and on the pure build in the same process, whose
# traces must be equal (tests/fuzzing/differential.py; accelerated build only);
# unbounded: the same scripts under limits around and past what a C integer holds
# (2**60, 2**63, 2**64, 10**20: Limits have no upper bound), also accelerated only.
#
# With atheris (pip install atheris; wheels for CPython <= 3.11 on Linux/macOS)
# each target runs coverage-guided from the committed seed corpus
# (tests/fuzzing/corpus/TARGET); new inputs go to .fuzz/corpus/TARGET, kept
# between local runs.  A crash fails the run and its input is written to
# tests/fuzzing/regressions/TARGET/ - commit it with the fix: pytest replays
# every file there (tests/test_fuzz_properties.py).
#
# Each target runs on both builds, one after the other: the pure one (the
# checkout's sources, STOMP_PROTO_NO_EXTENSIONS=1) and the accelerated one
# (scripts/build_accelerated.py --target .fuzz/accelerated: the native fast path
# under the same properties; a crash in native code - a signal - fails the run
# like any other).  --ci splits each target's time between the two.
# FUZZ_BUILDS="pure" (or "accelerated") runs one.  Under CI=true a native build
# that fails to compile fails the run; elsewhere it is skipped with a note.
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
TARGETS=(decoder server client stream server_session client_session differential unbounded)

usage() {
    # The comment block at the top of this file, without its "# ".
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

mode=local
case "${1:-}" in
    -h|--help) usage; exit 0 ;;
    --ci) mode=ci; shift ;;
    --long) mode=long; shift ;;
    -*) echo "error: unknown option $1 (--help for the options)" >&2; exit 2 ;;
esac
NICE=()
if [ $mode = ci ]; then
    selected=("${TARGETS[@]}")
    seconds=${FUZZ_SECONDS:-22}
elif [ $mode = long ]; then
    selected=("${TARGETS[@]}")
    seconds=${1:-3600}
    if [ $# -gt 1 ]; then selected=("${@:2}"); fi
    # A campaign shares the machine: lowest priority.
    NICE=(nice -n 19)
else
    if [ -n "${1:-}" ]; then selected=("$1"); else selected=("${TARGETS[@]}"); fi
    seconds=${2:-600}
fi
for target in "${selected[@]}"; do
    if [[ " ${TARGETS[*]} " != *" $target "* ]]; then
        echo "error: no fuzz target $target (targets: ${TARGETS[*]}; --help for the options)" >&2
        exit 2
    fi
done
if ! [[ "$seconds" =~ ^[0-9]+$ ]]; then
    echo "error: SECONDS must be a whole number, not $seconds (--help for the options)" >&2
    exit 2
fi
if [ $mode = long ]; then
    summary=.fuzz/campaign.txt
    mkdir -p .fuzz
    printf 'campaign started %s, %ss per target, commit %s\n' "$(date -u +%FT%TZ)" "$seconds" \
        "$(git rev-parse --short HEAD 2>/dev/null || echo '?')" >>"$summary"
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

builds=(${FUZZ_BUILDS:-pure accelerated})
if [[ " ${builds[*]} " == *" accelerated "* ]]; then
    rm -rf .fuzz/accelerated
    mkdir -p .fuzz
    if ! "$PYTHON" scripts/build_accelerated.py --target .fuzz/accelerated >/dev/null; then
        if [ "${CI:-}" = true ]; then
            echo "error: CI=true and the native build failed" >&2
            exit 1
        fi
        echo "the native build failed: fuzzing the pure build only" >&2
        builds=(pure)
    fi
fi
if [ $mode = ci ] && [ ${#builds[@]} -gt 1 ]; then
    # The same time in all as before: half of it on each build.
    seconds=$(( (seconds + 1) / 2 ))
fi

status=0
for build in "${builds[@]}"; do
for target in "${selected[@]}"; do
    if [[ "$target" =~ ^(differential|unbounded)$ ]] && [ "$build" = pure ]; then
        continue  # it compares the accelerated build with the pure one
    fi
    work=.fuzz/corpus/$target
    artifacts=tests/fuzzing/regressions/$target/
    mkdir -p "$work" "$artifacts"
    printf '\n==> fuzz %s for %ss (atheris, %s build)\n' "$target" "$seconds" "$build"
    if [ "$build" = accelerated ]; then
        build_env=(env STOMP_PROTO_FUZZ_ROOT="$PWD/.fuzz/accelerated" STOMP_PROTO_EXPECT_BUILD=accelerated)
    else
        build_env=(env STOMP_PROTO_NO_EXTENSIONS=1 STOMP_PROTO_EXPECT_BUILD=pure)
    fi
    log=$(mktemp)
    started=$(date +%s)
    # -timeout=120: the structure-aware targets build streams of over 1 MB, a
    # second's work uninstrumented and tens of seconds instrumented on a loaded
    # machine (a nice'd campaign hit 29 s); a real hang still stops the run.
    if "${NICE[@]}" "${build_env[@]}" "$PYTHON" tests/fuzzing/run.py "$target" -max_total_time="$seconds" \
        -print_final_stats=1 -artifact_prefix="$artifacts" -timeout=120 -report_slow_units=100000 -rss_limit_mb=2048 \
        "$work" "tests/fuzzing/corpus/$target" >"$log" 2>&1; then
        stats=$(grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|stat::new_units_added|stat::peak_rss_mb)' "$log" || true)
        # libFuzzer's last status line: executions, coverage (cov: edges, ft: features), corpus.
        last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
        printf '%s\n%s\n' "$stats" "$last"
        if [ $mode = long ]; then
            printf '%s (%s): %ss wall, %s | %s\n' "$target" "$build" "$(( $(date +%s) - started ))" \
                "$(echo "$stats" | tr '\n' ' ')" "$last" >>"$summary"
        fi
    else
        status=1
        grep -v -E '^(INFO|#[0-9])' "$log" | tail -40 >&2
        echo "error: fuzz target $target crashed ($build build); the input is in $artifacts" >&2
        if [ $mode = long ]; then
            # Keep the figures of a run that ended early too (a finding, or a
            # libFuzzer -timeout after the process was stopped and resumed).
            last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
            stats=$(grep -E '^stat::number_of_executed_units' "$log" || true)
            printf '%s (%s): ENDED EARLY after %ss wall | %s | %s\n' "$target" "$build" \
                "$(( $(date +%s) - started ))" "$stats" "$last" >>"$summary"
        fi
    fi
    rm -f "$log"
done
done
exit $status
