#!/usr/bin/env bash
# Run stomp.py's own test suite with `import stomp` resolved to stomp_proto.stomppy.
#
#     bash scripts/stomppy_suite.sh STOMPPY_CHECKOUT [embedded|rabbitmq|activemq ...]
#
# STOMPPY_CHECKOUT is a checkout of https://github.com/jasonrbriggs/stomp.py (its
# tests/ are not in its sdist).  Only its tests/ directory is used: it is copied to a
# scratch directory, beside a `stomp` package of three lines that makes
# `stomp` and `stomp.<submodule>` the layer's modules, so the checkout's own stomp/
# is never imported.  Each broker named (default: all three) gets one pytest run:
#   embedded  - this repository's broker, started here on a free port (admin:password,
#               WebSocket at /ws); the suite's "rabbitmq" tests use it too
#   rabbitmq  - RabbitMQ at 127.0.0.1:61613 (Web-STOMP 15674), guest:guest
#   activemq  - ActiveMQ at 127.0.0.1:61614, guest:guest
# (ports and users from /tmp/stomp-proto-brokers/last-start.env when it exists).
# STOMPPY_SUITE_TARGET=stomp.py runs the same with stomp.py itself (installed in the
# interpreter), for the baseline the layer's results are compared with.
# Needs pytest-mock in the interpreter (PYTHON, default ./.venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
checkout="${1:?usage: $0 STOMPPY_CHECKOUT [embedded|rabbitmq|activemq ...]}"
shift
brokers=("$@")
[ ${#brokers[@]} -gt 0 ] || brokers=(embedded rabbitmq activemq)
python="${PYTHON:-$PWD/.venv/bin/python}"
[ -f /tmp/stomp-proto-brokers/last-start.env ] && . /tmp/stomp-proto-brokers/last-start.env

scratch="$(mktemp -d /tmp/stomppy-suite.XXXXXX)"
logs="${STOMPPY_SUITE_LOGS:-/tmp/stomppy-suite-logs}"  # one NAME.log per broker
mkdir -p "$logs"
broker_pid=""
cleanup() {
    [ -n "$broker_pid" ] && kill "$broker_pid" 2>/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT
cp -r "$checkout/tests" "$scratch/tests"
mkdir -p "$scratch/shim/stomp"
cat > "$scratch/shim/stomp/__init__.py" <<'PY'
import sys
import stomp_proto.stomppy
import stomp_proto.stomppy.__main__  # stomp.__main__: its command-line client
sys.modules.update({"stomp" + name[len("stomp_proto.stomppy"):]: module for name, module in list(sys.modules.items()) if name.startswith("stomp_proto.stomppy")})
PY
# For the baseline: stomp.py 9 renamed stomp.logging (which the suite imports) to stomp.log.
mkdir -p "$scratch/baseline"
cat > "$scratch/baseline/sitecustomize.py" <<'PY'
import sys
import stomp.log
sys.modules.setdefault("stomp.logging", stomp.log)
stomp.logging = stomp.log
PY

run() {  # run NAME: one pytest run with the suite's STD_/RABBITMQ_ variables set by the caller
    echo "== stomp.py's suite on ${STOMPPY_SUITE_TARGET:-the layer}, broker: $1"
    shim="$scratch/shim"
    [ "${STOMPPY_SUITE_TARGET:-layer}" = stomp.py ] && shim="$scratch/baseline"
    # test_ss.py runs on its own: its stub server's port (60000) is the one the
    # other modules' stub servers leave bound, whichever client is tested.
    (cd "$scratch" && for part in "--ignore=tests/test_ss.py tests" tests/test_ss.py; do
        # shellcheck disable=SC2086  # $part is two words on purpose
        PYTHONPATH="$shim" "$python" -m pytest -q -p no:cacheprovider -o addopts="" \
            --timeout=120 -rfEs --continue-on-collection-errors $part
    done) 2>&1 | tee "$logs/$1.log" | grep -E '^(FAILED|ERROR|SKIPPED|[0-9]+ (passed|failed))|(passed|failed|error).* in [0-9.]+s' || true
}

for broker in "${brokers[@]}"; do
    case "$broker" in
        embedded)
            port="$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
            "$python" -m stomp_proto broker --port "$port" --user admin:password --websocket /ws \
                --log-level warning &
            broker_pid=$!
            sleep 2
            STD_HOST=127.0.0.1 STD_PORT="$port" STD_USER=admin STD_PASSWORD=password \
            RABBITMQ_HOST=127.0.0.1 RABBITMQ_PORT="$port" RABBITMQ_USER=admin RABBITMQ_PASSWORD=password \
            RABBITMQ_WS_HOST=127.0.0.1 RABBITMQ_WS_PORT="$port" \
                run embedded
            kill "$broker_pid"; broker_pid="" ;;
        rabbitmq)
            STD_HOST=127.0.0.1 STD_PORT="${RABBITMQ_STOMP_PORT:-61613}" \
            STD_USER="${RABBITMQ_STOMP_USER:-guest}" STD_PASSWORD="${RABBITMQ_STOMP_PASSWORD:-guest}" \
            RABBITMQ_HOST=127.0.0.1 RABBITMQ_PORT="${RABBITMQ_STOMP_PORT:-61613}" \
            RABBITMQ_USER="${RABBITMQ_STOMP_USER:-guest}" RABBITMQ_PASSWORD="${RABBITMQ_STOMP_PASSWORD:-guest}" \
            RABBITMQ_WS_HOST=127.0.0.1 RABBITMQ_WS_PORT=15674 \
                run rabbitmq ;;
        activemq)
            STD_HOST=127.0.0.1 STD_PORT="${ACTIVEMQ_STOMP_PORT:-61614}" \
            STD_USER="${ACTIVEMQ_STOMP_USER:-guest}" STD_PASSWORD="${ACTIVEMQ_STOMP_PASSWORD:-guest}" \
            RABBITMQ_HOST=127.0.0.1 RABBITMQ_PORT="${ACTIVEMQ_STOMP_PORT:-61614}" \
            RABBITMQ_USER="${ACTIVEMQ_STOMP_USER:-guest}" RABBITMQ_PASSWORD="${ACTIVEMQ_STOMP_PASSWORD:-guest}" \
            RABBITMQ_WS_HOST=127.0.0.1 RABBITMQ_WS_PORT=15674 \
                run activemq ;;
        *) echo "unknown broker: $broker" >&2; exit 64 ;;
    esac
done
