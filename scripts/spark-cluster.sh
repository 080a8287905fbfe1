#!/usr/bin/env bash
# The stomp-streams exactly-once check on a real standalone Spark cluster, from the pip pyspark:
# a Master and two Workers (one core each) on 127.0.0.1, RabbitMQ from scripts/start-brokers.sh.
#
#   bash scripts/spark-cluster.sh            # 60,000 messages over 4 streams, three driver kills
#   MESSAGES=100000 KILLS=3 bash scripts/spark-cluster.sh
#
# The query (scripts/spark_streams_check.py run: stomp-streams -> parquet with a checkpoint,
# availableNow, maxOffsetsPerTrigger) is killed with SIGKILL - its whole process group: the
# Python driver, its JVM and their Python workers - each time two more micro-batches have
# committed; 10,000 more messages are published while it is down, and it restarts from its
# checkpoint.  The last run goes to the end, prints its rows/s and how many tasks each
# executor ran (from the driver's REST API); then spark.read.parquet must find every published
# message exactly once.  Then a new query reads them all again with larger micro-batches, for
# the rows/s.  The cluster is stopped at exit (only the processes this script started).
# Scale-out (one worker, then two, with the Python start-up apart from the steady rate) is
# measured by benchmarks/spark_cluster.py; the sink under speculative execution by
# scripts/spark_sink_check.py speculate.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
MESSAGES="${MESSAGES:-60000}"
KILLS="${KILLS:-3}"
MORE=10000
PER_TRIGGER="${PER_TRIGGER:-4000}"
PORT_BASE="${SPARK_PORT_BASE:-7177}"
MASTER="spark://127.0.0.1:${PORT_BASE}"
RMQ_PORT="${RABBITMQ_STOMP_PORT:-61613}"

SPARK_HOME="$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')"
WORK="$(mktemp -d /tmp/stomp-spark-cluster.XXXXXX)"
export SPARK_HOME SPARK_LOCAL_IP=127.0.0.1 SPARK_LOG_DIR="$WORK/logs" SPARK_CONF_DIR="$WORK/conf"
export PYSPARK_PYTHON="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" PYSPARK_DRIVER_PYTHON="$PY"
mkdir -p "$SPARK_LOG_DIR" "$SPARK_CONF_DIR"
cat > "$SPARK_CONF_DIR/log4j2.properties" <<'EOF'
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.spark.name = org.apache.spark
logger.spark.level = error
EOF
cat > "$SPARK_CONF_DIR/spark-defaults.conf" <<EOF
spark.executor.cores 1
spark.executor.memory 512m
spark.cores.max 2
spark.executorEnv.PYSPARK_PYTHON $PYSPARK_PYTHON
EOF

PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

echo "== cluster: master $MASTER, two workers (1 core, 1 GiB each); work dir $WORK"
"$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.master.Master \
    --host 127.0.0.1 --port "$PORT_BASE" --webui-port $((PORT_BASE + 1)) \
    >"$WORK/logs/master.out" 2>&1 &
PIDS+=($!)
for i in 1 2; do
    "$SPARK_HOME/bin/spark-class" org.apache.spark.deploy.worker.Worker "$MASTER" \
        --host 127.0.0.1 --cores 1 --memory 1g --webui-port $((PORT_BASE + 1 + i)) \
        --work-dir "$WORK/worker-$i" >"$WORK/logs/worker-$i.out" 2>&1 &
    PIDS+=($!)
done
for _ in $(seq 120); do
    workers=$(curl -s "http://127.0.0.1:$((PORT_BASE + 1))/json/" | "$PY" -c \
        'import json,sys; print(sum(w["state"]=="ALIVE" for w in json.load(sys.stdin)["workers"]))' \
        2>/dev/null || echo 0)
    [ "$workers" = 2 ] && break
    sleep 1
done
[ "$workers" = 2 ] || { echo "the workers did not register"; tail "$WORK"/logs/*.out; exit 1; }
echo "two workers alive"

BASE="spark-cluster-$(date +%s)"
COMMON=(--port "$RMQ_PORT" --stream "$BASE" --partitions 4 --run cluster)
QUERY=("$PY" scripts/spark_streams_check.py run "${COMMON[@]}" --master "$MASTER"
       --ui-port $((PORT_BASE + 10)) --out "$WORK/out" --checkpoint "$WORK/checkpoint"
       --per-trigger "$PER_TRIGGER")
committed() { ls "$WORK/checkpoint/commits" 2>/dev/null | grep -c '^[0-9]*$' || true; }

"$PY" scripts/spark_streams_check.py publish "${COMMON[@]}" --count "$MESSAGES"
total=$MESSAGES
for kill in $(seq "$KILLS"); do
    before=$(committed)
    setsid "${QUERY[@]}" >"$WORK/run-$kill.log" 2>&1 &
    query=$!
    for _ in $(seq 1200); do
        [ "$(committed)" -ge $((before + 2)) ] && break
        kill -0 "$query" 2>/dev/null || break
        sleep 0.1
    done
    if ! kill -0 "$query" 2>/dev/null; then
        echo "the query ended before kill $kill:"; tail -20 "$WORK/run-$kill.log"; exit 1
    fi
    kill -9 -- "-$query"
    wait "$query" 2>/dev/null || true
    echo "kill $kill: SIGKILL to the driver's process group after batch $(( $(committed) - 1 )) committed"
    "$PY" scripts/spark_streams_check.py publish "${COMMON[@]}" --first "$total" --count "$MORE"
    total=$((total + MORE))
done
echo "== the last run, to the end"
"${QUERY[@]}" 2>"$WORK/run-last.err" | grep -v '^batch ' || { tail -30 "$WORK/run-last.err"; exit 1; }
echo "== verify: spark.read.parquet over the sink"
"$PY" scripts/spark_streams_check.py verify "${COMMON[@]}" --master "$MASTER" \
    --ui-port $((PORT_BASE + 11)) --out "$WORK/out" --count "$total" 2>"$WORK/verify.err" \
    || { tail -30 "$WORK/verify.err"; exit 1; }
echo "parquet files in the sink directory: $(find "$WORK/out" -name '*.parquet' | wc -l)" \
     "(orphans of killed batches are left out by _spark_metadata)"
echo "== throughput: the same $total messages again, a new query, ${THROUGHPUT_PER_TRIGGER:-50000} per micro-batch"
"$PY" scripts/spark_streams_check.py run "${COMMON[@]}" --master "$MASTER" \
    --ui-port $((PORT_BASE + 12)) --out "$WORK/out-throughput" --checkpoint "$WORK/cp-throughput" \
    --per-trigger "${THROUGHPUT_PER_TRIGGER:-50000}" 2>"$WORK/throughput.err" | grep -v '^batch ' \
    || { tail -30 "$WORK/throughput.err"; exit 1; }
