# shellcheck shell=bash
# Shared helpers for the start-/stop- broker scripts.  Sourced, not executed.
# The scripts in this directory run private, loopback-only RabbitMQ and ActiveMQ
# instances for the interop tests (tests/test_interop_brokers.py); the entry
# points are scripts/start-brokers.sh and scripts/stop-brokers.sh, and
# docs/interop.rst describes them and the brokers' measured behaviour.
# Conventions:
#   * progress/diagnostics go to stderr; stdout carries only KEY=VALUE lines
#     (so callers can do:  eval "$(scripts/brokers/start-rabbitmq.sh)" ).
#   * every broker lives in its own state dir under $STOMP_BROKERS_DIR
#     (default /tmp/stomp-proto-brokers); nothing outside it is written at run time.
#   * only PIDs recorded in that state dir are ever signalled.

STOMP_BROKERS_DIR="${STOMP_BROKERS_DIR:-/tmp/stomp-proto-brokers}"

log()  { printf '[%s] %s\n' "${BROKER_NAME:-broker}" "$*" >&2; }
die()  { local rc="$1"; shift; printf '[%s] ERROR: %s\n' "${BROKER_NAME:-broker}" "$*" >&2; exit "$rc"; }

now_ms() { date +%s%3N; }

# pid_alive PID  -> 0 if a process with that PID exists (and is not a zombie)
pid_alive() {
    [ -n "${1:-}" ] || return 1
    kill -0 "$1" 2>/dev/null || return 1
    local st
    st=$(ps -o stat= -p "$1" 2>/dev/null | tr -d ' ')
    [ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

# pid_cmd_has PID STRING -> 0 if the process' command line contains STRING
# (guards against PID reuse before we signal anything)
pid_cmd_has() {
    [ -r "/proc/$1/cmdline" ] || return 1
    local c; c=$( { tr '\0' ' ' < "/proc/$1/cmdline"; } 2>/dev/null) || return 1
    [[ "$c" == *"$2"* ]]
}

# pid_env_has PID STRING -> 0 if the process' environment contains the exact entry STRING
pid_env_has() {
    [ -r "/proc/$1/environ" ] || return 1
    local e; e=$( { tr '\0' '\n' < "/proc/$1/environ"; } 2>/dev/null) || return 1
    grep -qxF -- "$2" <<< "$e"
}

# port_open HOST PORT -> 0 if a TCP connect succeeds
port_open() {
    timeout 2 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

# port_owner PORT -> prints "name,pid=N" of the listener on 127.0.0.1/any, if ss can tell
port_owner() {
    ss -Hltnp "sport = :$1" 2>/dev/null | sed -n 's/.*users:((\(.*\))).*/\1/p' | sed -n 1p
}

# stomp_ping HOST PORT VHOST LOGIN PASSCODE
# Sends a real STOMP CONNECT and waits for CONNECTED (5 s max).  Prints the
# CONNECTED frame's header lines on success; returns 0 on CONNECTED, 2 on
# ERROR (frame printed to stderr), 1 on no answer.
stomp_ping() {
    timeout 5 bash -c '
        exec 3<>"/dev/tcp/$0/$1" || exit 1
        printf "CONNECT\naccept-version:1.0,1.1,1.2\nhost:%s\nlogin:%s\npasscode:%s\nheart-beat:0,0\n\n\0" "$2" "$3" "$4" >&3
        IFS= read -r -d "" -u 3 frame || exit 1
        case "$frame" in
            CONNECTED*) printf "DISCONNECT\n\n\0" >&3; printf "%s\n" "$frame"; exit 0 ;;
            *)          printf "%s\n" "$frame" >&2; exit 2 ;;
        esac
    ' "$@"
}

# with_lock FILE CMD... : serialise start/stop of one broker (flock is in util-linux).
# A nested call (start-x.sh calling stop-x.sh after a failed start) inherits the lock.
with_lock() {
    local lock="$1"; shift
    if [ "${_STOMP_BROKERS_LOCK_HELD:-}" = "$lock" ]; then "$@"; return; fi
    mkdir -p "$(dirname "$lock")"
    exec 9>"$lock"
    if ! flock -w 120 9; then die 1 "could not take lock $lock within 120 s (another start/stop running?)"; fi
    export _STOMP_BROKERS_LOCK_HELD="$lock"
    "$@"
}

# claim_start NAME: note, before booting broker NAME, that this run is starting it, in the
# file $STOMP_BROKERS_CLAIM_FILE (if set).  scripts/stop-brokers.sh --claims FILE stops what a
# run claimed even when that run was interrupted before it could print RABBITMQ_STARTED=1.
claim_start() {
    [ -n "${STOMP_BROKERS_CLAIM_FILE:-}" ] || return 0
    printf '%s\n' "$1" >> "$STOMP_BROKERS_CLAIM_FILE"
}
