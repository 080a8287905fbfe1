#!/usr/bin/env bash
# The long chaos run: every client (asyncio, trio, threads) through the
# fault-injecting proxy of tests/chaos.py for SECONDS each, against the embedded
# broker and against a RabbitMQ of this script's own, which is also restarted
# under load.  Prints the table of the results (sent, received, lost,
# duplicates, longest gap, recovery time) and leaves it in .chaos/results.txt.
#
#     bash scripts/chaos.sh [SECONDS [PYTEST ARGUMENTS...]]   (default 120)
#
# (-k trio, say, runs one client.)
# The RabbitMQ runs in its own state directory (/tmp/stomp-proto-chaos) on its
# own ports (STOMP 61623), so the brokers of scripts/test.sh are not touched; it
# is installed first when missing (as root on Debian), and stopped at the end.
# STOMP_CHAOS_SEED changes the series of faults; STOMP_CHAOS_BROKERS="embedded"
# (or "rabbitmq") runs one of the two.  Exit status: that of the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SECONDS_EACH="${1:-120}"
shift || true
BROKERS="${STOMP_CHAOS_BROKERS:-embedded rabbitmq}"

# shellcheck source=scripts/_venv.sh
source scripts/_venv.sh
ensure_venv '.[dev]'

OUT="$ROOT/.chaos"
mkdir -p "$OUT"
RESULTS="$OUT/results.jsonl"
: > "$RESULTS"

# A private RabbitMQ: its own state, ports, node name and epmd.
export CHAOS_BROKERS_DIR=/tmp/stomp-proto-chaos
rabbitmq_env=(
    STOMP_BROKERS_DIR="$CHAOS_BROKERS_DIR"
    RMQ_STOMP_PORT=61623 RMQ_WS_PORT=0 RMQ_AMQP_PORT=5682 RMQ_EPMD_PORT=4380
    RMQ_NODENAME=stompchaos@localhost
)
started_rabbitmq=0
stop_rabbitmq() {
    if [ "$started_rabbitmq" = 1 ]; then
        env "${rabbitmq_env[@]}" bash scripts/brokers/stop-rabbitmq.sh >&2 || true
    fi
}
trap stop_rabbitmq EXIT

status=0
for broker in $BROKERS; do
    case "$broker" in
        embedded)
            test_file=tests/test_chaos.py
            env_extra=()
            ;;
        rabbitmq)
            bash scripts/brokers/install-brokers.sh rabbitmq >&2 || true
            env "${rabbitmq_env[@]}" RMQ_FRESH=1 bash scripts/brokers/start-rabbitmq.sh \
                > "$OUT/rabbitmq.env" || { echo "error: the chaos RabbitMQ did not start" >&2; exit 1; }
            started_rabbitmq=1
            test_file=tests/test_chaos_rabbitmq.py
            # The restart keeps the broker's database: durable queues and
            # persistent messages must come back with it.
            restart="env ${rabbitmq_env[*]} bash $ROOT/scripts/brokers/stop-rabbitmq.sh >/dev/null 2>&1"
            restart+=" && env ${rabbitmq_env[*]} RMQ_FRESH=0 bash $ROOT/scripts/brokers/start-rabbitmq.sh >/dev/null 2>&1"
            env_extra=(STOMP_BROKERS_DIR="$CHAOS_BROKERS_DIR" RABBITMQ_STOMP_PORT=61623
                STOMP_CHAOS_RESTART="$restart")
            ;;
        *) echo "unknown broker '$broker' (embedded|rabbitmq)" >&2; exit 64 ;;
    esac
    echo "==> chaos: $broker, ${SECONDS_EACH} s per client" >&2
    # One client at a time: the figures of one are not disturbed by the others.
    # STOMP_CHAOS_PACE=0: the long run sends as fast as each client goes.
    (cd tests && env "${env_extra[@]}" STOMP_CHAOS_SECONDS="$SECONDS_EACH" STOMP_CHAOS_PACE=0 \
        STOMP_CHAOS_RESULTS="$RESULTS" "$ROOT/$VENV_BIN/python" -m pytest -q -p no:cacheprovider \
        "$ROOT/$test_file" -k "chaos" "$@") || status=$?
done

"$VENV_BIN/python" - "$RESULTS" <<'EOF' | tee "$OUT/results.txt"
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
columns = ["broker", "client", "seconds", "faults", "sent", "received", "lost",
           "duplicates", "longest_gap_s", "recovery_median_s", "recovery_max_s", "errors"]
def cell(row, name):
    value = row[name]
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items()))
    return str(value)
table = [columns] + [[cell(row, name) for name in columns] for row in rows]
widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
for line in table:
    print("  ".join(value.ljust(width) for value, width in zip(line, widths)).rstrip())
EOF
exit "$status"
