#!/usr/bin/env bash
# Stop the RabbitMQ started by start-rabbitmq.sh, plus the private epmd it started
# on $RMQ_EPMD_PORT.  Only processes proven to be ours are signalled: the recorded
# launcher PID, and beam.smp processes whose environment carries this state dir's
# RABBITMQ_MNESIA_BASE.  Idempotent.
# Exit: 0 stopped / was not running, 1 could not stop it.
#   RMQ_STOP_TIMEOUT 30  seconds to wait for a graceful stop before SIGKILL
#   RMQ_PURGE        0   1 = also delete the state dir
set -euo pipefail
BROKER_NAME=rabbitmq
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/brokers/lib.sh
. "$HERE/lib.sh"
STATE="$STOMP_BROKERS_DIR/rabbitmq"
RMQ_STOP_TIMEOUT="${RMQ_STOP_TIMEOUT:-30}"
MARK="RABBITMQ_MNESIA_BASE=$STATE/mnesia"

# beam.smp processes of this state dir (normally one; also finds a VM whose pid
# file was not written yet, e.g. when a start is aborted early).
our_beams() {
    local d p comm
    for d in /proc/[0-9]*; do
        p=${d#/proc/}
        comm=$(cat "$d/comm" 2>/dev/null) || continue
        [ "$comm" = beam.smp ] || continue
        pid_env_has "$p" "$MARK" && echo "$p"
    done
    return 0
}

our_launcher() {
    local p=""
    # start-rabbitmq.sh hands us the PID it just forked when it aborts a start
    if [ -n "${_RMQ_LAUNCHER_PID:-}" ] && pid_alive "$_RMQ_LAUNCHER_PID"; then echo "$_RMQ_LAUNCHER_PID"; return 0; fi
    [ -s "$STATE/launcher.pid" ] && p=$(tr -dc '0-9' < "$STATE/launcher.pid")
    if [ -n "$p" ] && pid_alive "$p" && pid_cmd_has "$p" "rabbitmq-server" && pid_env_has "$p" "$MARK"; then echo "$p"; fi
    return 0
}

stop() {
    local beams launcher stopped_any=0 t0 deadline last_term=0 now p
    launcher=$(our_launcher)
    beams=$(our_beams)
    if [ -n "$beams$launcher" ]; then
        stopped_any=1
        t0=$(now_ms)
        deadline=$(( $(date +%s) + RMQ_STOP_TIMEOUT ))
        while :; do
            beams=$(our_beams)
            pid_alive "$launcher" || launcher=""
            [ -n "$beams$launcher" ] || break
            now=$(date +%s)
            if [ "$now" -ge "$deadline" ]; then
                log "still running after ${RMQ_STOP_TIMEOUT}s; SIGKILL to ${beams//$'\n'/ } $launcher"
                for p in $beams $launcher; do kill -KILL "$p" 2>/dev/null || true; done
                sleep 0.5
                beams=$(our_beams); pid_alive "$launcher" || launcher=""
                [ -z "$beams$launcher" ] || die 1 "could not stop pids ${beams//$'\n'/ } $launcher"
                break
            fi
            # SIGTERM makes the Erlang VM run RabbitMQ's orderly shutdown (like `rabbitmqctl stop`,
            # minus the ~1 s CLI start-up).  A VM still booting may not act on it yet, so repeat
            # it every second.  The launcher shell exits by itself once beam is gone; it is only
            # signalled when there is no beam (yet) to stop.
            if [ $(( now - last_term )) -ge 1 ]; then
                if [ -n "$beams" ]; then
                    for p in $beams; do kill -TERM "$p" 2>/dev/null || true; done
                else
                    kill -TERM "$launcher" 2>/dev/null || true
                fi
                last_term=$now
            fi
            sleep 0.1
        done
        log "stopped in $(( $(now_ms) - t0 ))ms"
    fi

    # Our private epmd (started by the broker's VM; it outlives it).  `epmd -kill`
    # only succeeds once no node is registered, and talks only to this port.
    local epmd_port="" owner
    [ -s "$STATE/env.sh" ] && epmd_port=$(sed -n 's/^export ERL_EPMD_PORT="\{0,1\}\([0-9]*\)"\{0,1\}$/\1/p' "$STATE/env.sh")
    if [ -n "$epmd_port" ] && port_open 127.0.0.1 "$epmd_port"; then
        owner=$(port_owner "$epmd_port" || true)
        case "$owner" in
            *epmd*)
                if epmd -port "$epmd_port" -kill >/dev/null 2>&1; then
                    stopped_any=1; log "stopped private epmd on port $epmd_port"
                else
                    log "epmd on port $epmd_port still has nodes registered; left running: $(epmd -port "$epmd_port" -names 2>&1 | tr '\n' ' ')"
                fi ;;
        esac
    fi
    rm -f "$STATE/rabbitmq.pid" "$STATE/launcher.pid"
    [ "$stopped_any" = 1 ] || log "not running"
    if [ "${RMQ_PURGE:-0}" = 1 ]; then rm -rf "$STATE"; log "removed $STATE"; fi
    return 0
}

with_lock "$STOMP_BROKERS_DIR/.rabbitmq.lock" stop
