#!/usr/bin/env bash
# Stop the ActiveMQ started by start-activemq.sh (only the JVM PID it recorded).
# Idempotent.  Exit: 0 stopped / was not running, 1 could not stop it.
#   AMQ_STOP_TIMEOUT 30  seconds to wait after SIGTERM before SIGKILL
#   AMQ_PURGE        0   1 = also delete the state dir
set -euo pipefail
BROKER_NAME=activemq
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/brokers/lib.sh
. "$HERE/lib.sh"
STATE="$STOMP_BROKERS_DIR/activemq"
AMQ_STOP_TIMEOUT="${AMQ_STOP_TIMEOUT:-30}"

stop() {
    local pid="" ours=""
    [ -s "$STATE/activemq.pid" ] && pid=$(tr -dc '0-9' < "$STATE/activemq.pid")
    if [ -n "${_AMQ_JAVA_PID:-}" ] && [ "$pid" = "$_AMQ_JAVA_PID" ] && pid_alive "$pid"; then
        ours=1                  # start-activemq.sh aborting the JVM it just forked
    elif [ -n "$pid" ] && pid_alive "$pid" && pid_cmd_has "$pid" "-Dactivemq.base=$STATE "; then
        ours=1
    fi
    if [ -n "$ours" ]; then
        local t0; t0=$(now_ms)
        kill -TERM "$pid" 2>/dev/null || true          # JVM shutdown hook stops the broker cleanly
        local deadline=$(( $(date +%s) + AMQ_STOP_TIMEOUT ))
        while pid_alive "$pid" && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.1; done
        if pid_alive "$pid"; then
            log "still running after ${AMQ_STOP_TIMEOUT}s; sending SIGKILL to $pid"
            kill -KILL "$pid" 2>/dev/null || true
            sleep 0.5
        fi
        pid_alive "$pid" && die 1 "could not stop pid $pid"
        log "stopped in $(( $(now_ms) - t0 ))ms"
    else
        log "not running"
    fi
    rm -f "$STATE/activemq.pid"
    if [ "${AMQ_PURGE:-0}" = 1 ]; then rm -rf "$STATE"; log "removed $STATE"; fi
    return 0
}

with_lock "$STOMP_BROKERS_DIR/.activemq.lock" stop
