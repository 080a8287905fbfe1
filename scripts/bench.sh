#!/usr/bin/env bash
# Run every benchmark in one go: the codec, end to end, and the embedded broker.
#
#     bash scripts/bench.sh             # full run, about 20 minutes; writes the
#                                       # results the docs show (benchmarks/results/,
#                                       # docs/_static/benchmarks-*.svg)
#     bash scripts/bench.sh --quick     # smoke run, under a minute (no accelerated build)
#     bash scripts/bench.sh --out DIR   # write the JSON and SVG files to DIR instead
#
# Creates ./.venv when needed and installs the 'bench' extra into it (stomp.py,
# stompest, stompman, trio, and Cython for the accelerated build); PYTHON=... uses that
# interpreter as it is instead.  RabbitMQ is started for the end-to-end rows as
# scripts/test.sh does (installed first when root on Debian) and stopped after,
# if this run started it; STOMP_BROKERS=none leaves it out, and its rows are
# then skipped with a message.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=()
accelerated=(--accelerated)
out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) quick=(--quick); accelerated=(); shift ;;
        --out) out="${2:?--out needs a directory}"; shift 2 ;;
        *) echo "usage: $0 [--quick] [--out DIR]" >&2; exit 64 ;;
    esac
done

if [ -z "${PYTHON:-}" ]; then
    # shellcheck source=scripts/_venv.sh
    source scripts/_venv.sh
    ensure_venv '.[bench]'
    PYTHON="$VENV_BIN/python"
fi

results="benchmarks/results"
charts="docs/_static"
if [ -n "$out" ]; then
    mkdir -p "$out"
    results="$out"
    charts="$out"
fi

# Only RabbitMQ takes part in the end-to-end rows.
export STOMP_BROKERS="${STOMP_BROKERS:-rabbitmq}"
# shellcheck source=scripts/brokers/test-session.sh
source scripts/brokers/test-session.sh
brokers_begin

section() {
    printf '\n==> %s\n' "$*"
}

section "codec"
"$PYTHON" benchmarks/codec.py "${quick[@]}" "${accelerated[@]}" \
    --json "$results/codec.json" --svg "$charts/benchmarks-codec.svg"

section "embedded broker"
"$PYTHON" benchmarks/broker.py "${quick[@]}" --json "$results/broker.json"

section "end to end"
brokers_ready
# Our clients on the pure build and on the accelerated one (rows named
# "asyncio[compiled]" ...), side by side.
compiled=()
[ ${#accelerated[@]} -gt 0 ] && compiled=(--compiled)
"$PYTHON" benchmarks/e2e.py "${quick[@]}" "${compiled[@]}" \
    --json "$results/e2e.json" --svg "$charts/benchmarks-e2e.svg"

section "the tables in docs/ and README.rst"
if [ -z "$out" ]; then
    "$PYTHON" benchmarks/summary.py
fi

section "done: results in $results, charts in $charts"
