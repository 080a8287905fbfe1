#!/usr/bin/env bash
# Run rabbitmqctl (or rabbitmq-plugins / rabbitmq-diagnostics via RMQ_TOOL) against
# the node started by start-rabbitmq.sh, e.g.
#   scripts/brokers/rabbitmqctl.sh list_queues name messages messages_unacknowledged
#   RMQ_TOOL=rabbitmq-diagnostics scripts/brokers/rabbitmqctl.sh listeners
set -euo pipefail
STATE="${STOMP_BROKERS_DIR:-/tmp/stomp-proto-brokers}/rabbitmq"
[ -s "$STATE/env.sh" ] || { echo "no $STATE/env.sh - start the broker with start-rabbitmq.sh first" >&2; exit 2; }
. "$STATE/env.sh"
exec "/usr/lib/rabbitmq/bin/${RMQ_TOOL:-rabbitmqctl}" "$@"
