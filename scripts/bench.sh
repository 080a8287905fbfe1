#!/usr/bin/env bash
# Run every benchmark in one go: the codec, the embedded broker, end to end, and one
# Spark read task - each on the pure build and on the accelerated one.
#
#     bash scripts/bench.sh             # full run, about 20 minutes; writes the
#                                       # results the docs show (benchmarks/results/,
#                                       # docs/_static/benchmarks-*.svg)
#     bash scripts/bench.sh --quick     # smoke run, under a minute (no accelerated build)
#     bash scripts/bench.sh --out DIR   # write the JSON and SVG files to DIR instead
#
# Creates ./.venv when needed and installs the 'bench' extra into it (stomp.py,
# stompest, stompman, trio, pyspark and pyarrow, and Cython for the accelerated build);
# PYTHON=... uses that interpreter as it is instead.  RabbitMQ is started for the end-to-end rows as
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

# The rows of the pure build import the stomp_proto beside benchmarks/, and a native
# module built in place there (build_accelerated.py --inplace) would be loaded
# instead: the codec's pure rows would measure the accelerated build, and the
# end-to-end workers, which check the build they load, would all fail.
built_in_place=(stomp_proto/_*_native*.so)
if [ -e "${built_in_place[0]}" ]; then
    echo "error: stomp_proto/ holds a native build made in place (${built_in_place[0]} ...): the pure build's rows would load it" >&2
    echo "remove it first: python scripts/build_accelerated.py --clean" >&2
    exit 1
fi

own_venv=false
if [ -z "${PYTHON:-}" ]; then
    own_venv=true
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
# The broker on the pure build and on the accelerated one, runs interleaved.
"$PYTHON" benchmarks/broker.py "${quick[@]}" "${accelerated[@]}" --json "$results/broker.json"

section "end to end"
brokers_ready
# Our clients on the pure build and on the accelerated one (rows named
# "asyncio[compiled]" ...), side by side.
compiled=()
[ ${#accelerated[@]} -gt 0 ] && compiled=(--compiled)
"$PYTHON" benchmarks/e2e.py "${quick[@]}" "${compiled[@]}" \
    --json "$results/e2e.json" --svg "$charts/benchmarks-e2e.svg"

# Celery and Kombu on RabbitMQ: the Kombu transport of stomp-proto-kombu beside
# Celery's default pyamqp (AMQP 0-9-1 on the same broker), alternating.
section "Celery and Kombu: stomp-proto-kombu beside pyamqp"
if "$own_venv"; then
    "$PYTHON" -m pip install --quiet --disable-pip-version-check -e "./stomp-proto-kombu[test]"
fi
if ! "$PYTHON" -c 'import celery, stomp_proto_kombu' 2>/dev/null; then
    echo "skipped: $PYTHON has no celery or stomp_proto_kombu (pip install './stomp-proto-kombu[test]')"
elif [ -n "${RABBITMQ_STOMP_PORT:-}" ] && [ -n "${RABBITMQ_AMQP_PORT:-}" ]; then
    "$PYTHON" stomp-proto-kombu/benchmarks/celery_vs_pyamqp.py "${quick[@]}" \
        --stomp-port "$RABBITMQ_STOMP_PORT" --amqp-port "$RABBITMQ_AMQP_PORT" \
        --json "$results/celery.json"
else
    echo "skipped: no RabbitMQ in this run (STOMP_BROKERS=${STOMP_BROKERS:-})"
fi

# One stomp-streams read task on each build, alternating (RabbitMQ's stream queues, Spark
# not started: the task's own code, as an executor runs it).  Not in the quick run.
if [ ${#quick[@]} -eq 0 ]; then
    section "the Spark read task"
    "$PYTHON" benchmarks/spark.py --tasks --repeats 5 --json "$results/spark-tasks.json"
fi

section "the tables in docs/ and README.rst"
if [ -z "$out" ]; then
    "$PYTHON" benchmarks/summary.py
fi

section "done: results in $results, charts in $charts"
