#!/usr/bin/env bash
# Stop brokers started by scripts/start-brokers.sh.  Only the processes recorded
# in the state directory are signalled (see scripts/brokers/stop-*.sh).
#
#   scripts/stop-brokers.sh rabbitmq,activemq     stop these (names, comma or space separated)
#   scripts/stop-brokers.sh "$STOMP_BROKERS_STARTED"   an empty list stops nothing
#   scripts/stop-brokers.sh --claims FILE         stop the brokers a run claimed in FILE
#                                                 (STOMP_BROKERS_CLAIM_FILE of start-brokers.sh)
#   scripts/stop-brokers.sh all                   stop both, whoever started them
# Exit status: 0, or 1 if a broker could not be stopped.
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export STOMP_BROKERS_DIR="${STOMP_BROKERS_DIR:-/tmp/stomp-proto-brokers}"

names=""
if [ "${1:-}" = --claims ]; then
    [ -n "${2:-}" ] || { echo "usage: $0 --claims FILE" >&2; exit 64; }
    [ -f "$2" ] && names=$(tr '\n' ' ' < "$2")
else
    names="$*"
fi
names=${names//,/ }
[ "$names" = all ] && names="rabbitmq activemq"

rc=0
declare -A seen=()
for b in $names; do
    [ -z "${seen[$b]:-}" ] || continue
    seen[$b]=1
    case "$b" in
        rabbitmq|activemq) bash "$HERE/brokers/stop-$b.sh" || rc=1 ;;
        *) echo "[brokers] unknown broker '$b'" >&2; rc=1 ;;
    esac
done
[ -n "$names" ] || echo "[brokers] nothing to stop" >&2
exit "$rc"
