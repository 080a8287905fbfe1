#!/usr/bin/env bash
# Install (as root, on Debian 12) and start the real brokers of the interop tests
# (tests/test_interop_brokers.py), each bound to 127.0.0.1 only:
#
#   RabbitMQ 3.10  STOMP 127.0.0.1:61613, Web-STOMP ws://127.0.0.1:15674/ws
#   ActiveMQ 5.17  STOMP 127.0.0.1:61614
#
#   usage: scripts/start-brokers.sh [rabbitmq] [activemq]     (default: $STOMP_BROKERS)
#
# Both start in parallel (about 10 s; the first install adds about 40 s).  Each
# start is idempotent: a broker this project's scripts already run is reused.
#
# stdout carries KEY=VALUE lines only (for `set -a; . FILE; set +a`):
#   * the coordinates of every broker that is ready (RABBITMQ_STOMP_PORT=61613, ...);
#   * STOMP_BROKERS_STARTED=rabbitmq,activemq  the brokers this call booted - stop
#     only those: scripts/stop-brokers.sh "$STOMP_BROKERS_STARTED";
#   * STOMP_BROKERS_FAILED=...  the brokers that did not come up (empty when all did);
#   * STOMP_BROKERS_LOG=FILE    their start-up output.
# The same lines go to $STOMP_BROKERS_DIR/last-start.env.  Progress goes to stderr.
# Exit status: 0 when every requested broker is ready, 1 otherwise.  The tests then
# skip with a message, or fail when CI=true (see docs/interop.rst).
#
# Environment:
#   STOMP_BROKERS          brokers to start, default "rabbitmq activemq"; "none" starts nothing
#   STOMP_BROKERS_INSTALL  auto (default): apt-get install missing packages when running as
#                          root on Debian; 1: also try with passwordless sudo; 0: never install
#   STOMP_BROKERS_DIR      state directory (default /tmp/stomp-proto-brokers)
#   STOMP_BROKERS_CLAIM_FILE  if set, each broker this call boots is appended to it *before*
#                          it boots (scripts/stop-brokers.sh --claims FILE stops exactly those)
#   and the knobs of scripts/brokers/start-rabbitmq.sh and start-activemq.sh (ports, timeouts).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BROKERS_DIR="$HERE/brokers"
export STOMP_BROKERS_DIR="${STOMP_BROKERS_DIR:-/tmp/stomp-proto-brokers}"

say() { printf '[brokers] %s\n' "$*" >&2; }

want=("$@")
if [ ${#want[@]} -eq 0 ]; then
    # shellcheck disable=SC2206
    want=(${STOMP_BROKERS:-rabbitmq activemq})
fi
brokers=()
for b in "${want[@]}"; do
    case "$b" in
        rabbitmq|activemq) brokers+=("$b") ;;
        none|0|"") ;;
        *) say "unknown broker '$b' (rabbitmq|activemq|none)"; exit 64 ;;
    esac
done

mkdir -p "$STOMP_BROKERS_DIR"
log_file="$STOMP_BROKERS_DIR/start.log"
: > "$log_file"
out_file="$STOMP_BROKERS_DIR/last-start.env"

finish() {   # $1 = started list, $2 = failed list
    {
        for b in "${brokers[@]}"; do
            [ -s "$STOMP_BROKERS_DIR/$b.out" ] && grep -E '^[A-Z][A-Z0-9_]*=' "$STOMP_BROKERS_DIR/$b.out" |
                grep -vE '^(RABBITMQ|ACTIVEMQ)_STARTED='
        done
        echo "STOMP_BROKERS_STARTED=$1"
        echo "STOMP_BROKERS_FAILED=$2"
        echo "STOMP_BROKERS_LOG=$log_file"
    } | tee "$out_file"
    [ -z "$2" ]
}

if [ ${#brokers[@]} -eq 0 ]; then
    say "no brokers requested (STOMP_BROKERS=${STOMP_BROKERS:-})"
    rm -f "$STOMP_BROKERS_DIR"/*.out
    brokers=()
    finish "" ""
    exit 0
fi

installed() {
    case "$1" in
        rabbitmq) [ -x "${RMQ_BIN:-/usr/lib/rabbitmq/bin}/rabbitmq-server" ] ;;
        activemq) [ -f "${AMQ_HOME:-/usr/share/activemq}/bin/activemq.jar" ] && command -v java >/dev/null ;;
    esac
}

# 1. Install what is missing (root on Debian only, unless told otherwise).
missing=()
for b in "${brokers[@]}"; do installed "$b" || missing+=("$b"); done
if [ ${#missing[@]} -gt 0 ]; then
    mode="${STOMP_BROKERS_INSTALL:-auto}"
    if [ "$mode" = 0 ]; then
        say "not installed: ${missing[*]} (STOMP_BROKERS_INSTALL=0)"
    elif [ "$mode" = auto ] && [ "$(id -u)" != 0 ]; then
        say "not installed: ${missing[*]}; installing needs root (run as root, or STOMP_BROKERS_INSTALL=1 with passwordless sudo)"
    elif ! command -v apt-get >/dev/null 2>&1; then
        say "not installed: ${missing[*]}; no apt-get here (the scripts need Debian 12 packages)"
    else
        say "installing ${missing[*]}"
        bash "$BROKERS_DIR/install-brokers.sh" "${missing[@]}" 2>&1 | tee -a "$log_file" >&2
    fi
fi

# 2. Start them in parallel; each start script serialises itself with a lock.
t0=$(date +%s%3N)
pids=()
for b in "${brokers[@]}"; do
    bash "$BROKERS_DIR/start-$b.sh" > "$STOMP_BROKERS_DIR/$b.out" 2> "$STOMP_BROKERS_DIR/$b.err" &
    pids+=("$!")
done
started=() failed=()
for i in "${!brokers[@]}"; do
    b="${brokers[$i]}"
    rc=0
    wait "${pids[$i]}" || rc=$?
    cat "$STOMP_BROKERS_DIR/$b.err" >&2
    cat "$STOMP_BROKERS_DIR/$b.err" >> "$log_file"
    upper=$(printf '%s' "$b" | tr '[:lower:]' '[:upper:]')
    if [ "$rc" = 0 ]; then
        grep -qx "${upper}_STARTED=1" "$STOMP_BROKERS_DIR/$b.out" && started+=("$b")
    else
        case "$rc" in
            2) why="not installed" ;;
            3) why="a port is already in use" ;;
            *) why="did not come up (exit $rc)" ;;
        esac
        say "$b: $why; see $log_file"
        failed+=("$b")
        : > "$STOMP_BROKERS_DIR/$b.out"
    fi
done
say "done in $(( $(date +%s%3N) - t0 ))ms; started: ${started[*]:-none}; failed: ${failed[*]:-none}"
join() { local IFS=,; printf '%s' "$*"; }
finish "$(join "${started[@]}")" "$(join "${failed[@]}")"
