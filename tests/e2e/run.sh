#!/usr/bin/env bash
# End-to-end migrations against real servers, with faults.
#
#   tests/e2e/run.sh [nats] [redis] [kafka] [kafka-nats] [stale]        (default: all five)
#
# Installs (Debian packages) and starts RabbitMQ, NATS, Redis, PostgreSQL and Prometheus on
# loopback with scripts/services.sh, builds `migrate` and the example producer and consumer, and
# runs, per scenario, a whole migration under `migrate run` whose gates query a real Prometheus
# that scrapes the apps:
#
#   nats   a producer we can change: RabbitMQ -> NATS JetStream, the producer routes by slice;
#          state in PostgreSQL. Faults: kill -9 of the controller (synthetic) and of the consumer
#          (slices, drain), NATS stopped and restarted, a guard breach injected (a conflicting
#          duplicate) -> rollback of one step.
#   redis  a producer we cannot change: RabbitMQ -> Redis Streams through two `migrate bridge`
#          (one forwards, one stands by); state in SQLite. Faults: kill -9 of the active bridge,
#          of the consumer and of the controller, Redis stopped and restarted, a guard breach.
#   kafka  the same through the bridge, RabbitMQ -> Kafka (a real Apache Kafka broker, KRaft, a
#          process of this scenario's own); the fault on the new side is that broker killed
#          (kill -9) and restarted 3 s later on its data.
#   stale  a producer that stops following (issue 58): RabbitMQ -> NATS JetStream, two instances
#          of a routed producer; the plan is first refused by `migrate preflight` and by the
#          daemon before synthetic (the test servers are one node each: lossy by the preflight's
#          rules) until its waivers are applied; the consumer is stopped (SIGSTOP) across the move
#          to slices[0] and to slices[1], so the old queue holds a backlog of moved slices
#          (never a stale trip); one instance stops following at slices[1] and keeps writing
#          slices 8-15 to the old broker after slices[2] moved them: the stale-producer guard pauses the
#          migration naming it, detection time printed. No shared server is faulted.
#   kafka-nats  the same with Kafka as the old broker: the producer writes to a Kafka ingress
#          topic, the bridge forwards to a Kafka topic (old) or NATS JetStream (new), the drain
#          gate reads the consumer group's lag from Kafka itself (`kafka_lag`); the same broker
#          fault.
#
# Each fault happens at a milestone of the migration plus a random delay (seeded: E2E_SEED=N to
# replay). At the end tests/e2e/verify.py checks, from the consumer's database and the journal:
# every confirmed event applied exactly once, per-order version order, every phase journaled,
# the rollback, and the old queue empty at disconnect (a Kafka old topic: the drain gate read
# the group's lag 0 from Kafka for the quiet period, and conservation shows nothing stayed
# there). Logs stay in $E2E_WORK (printed) when it is set or the run failed; a passing run's
# own work dir is removed.
#
# E2E_SERVICES=running uses the servers already running ($QM_SERVICES_DIR/env) instead of
# installing and restarting them (a shared machine): only the Kafka scenarios, whose faults hit
# their own broker, and `stale`, which faults no server, run that way; their RabbitMQ queues and
# NATS streams get names of this run (prefix e2e-SEED-), and the RabbitMQ queues are deleted at
# the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
SEED=${E2E_SEED:-$(( $(date +%s) % 32768 ))}
RANDOM=$SEED
WORK=${E2E_WORK:-$(mktemp -d /tmp/qm-e2e.XXXXXX)}
mkdir -p "$WORK"
SCENARIOS=("$@")
(( ${#SCENARIOS[@]} )) || SCENARIOS=(nats redis kafka kafka-nats stale)
SERVICES_MODE=${E2E_SERVICES:-fresh}
KAFKA=
for s in "${SCENARIOS[@]}"; do
  case $s in
    nats|redis)
      [ "$SERVICES_MODE" = fresh ] || { echo "e2e: $s stops a shared server: not with E2E_SERVICES=$SERVICES_MODE" >&2; exit 2; } ;;
    kafka|kafka-nats) KAFKA=1 ;;
    stale) ;;
    *) echo "e2e: unknown scenario $s (nats, redis, kafka, kafka-nats, stale)" >&2; exit 2 ;;
  esac
done
# `stale` runs last whatever the order asked: the other plans' stale guards sum every job's count
# in this run's Prometheus over a minute, and its pinned producer's count must not reach them.
ordered=()
for s in "${SCENARIOS[@]}"; do [ "$s" = stale ] || ordered+=("$s"); done
for s in "${SCENARIOS[@]}"; do [ "$s" != stale ] || { ordered+=("$s"); break; }; done
SCENARIOS=("${ordered[@]}")
TIMEOUT=${E2E_TIMEOUT:-420}
# Each scenario's stale-guard figures (trips, moves; the stale scenario's detection time), one
# JSON line each: E2E_STALE_RECORD=FILE keeps them across runs (BENCHMARKS.md's figures).
STALE_RECORD=${E2E_STALE_RECORD:-$WORK/stale-record.jsonl}
echo "e2e: seed $SEED, work dir $WORK, scenarios ${SCENARIOS[*]}"

# ---- servers ----------------------------------------------------------------------------------
# Names of this run's queues and streams (renamed only on shared servers).
NS=
if [ "$SERVICES_MODE" = fresh ]; then
  services=(rabbitmq nats redis postgres prometheus)
  # The Kafka scenarios: librdkafka's toolchain (`kafka`) and the broker's classpath.
  [ -z "$KAFKA" ] || services+=(kafka apache-kafka)
  scripts/services.sh install "${services[@]}"
  # Fresh brokers: every scenario starts from empty queues and streams.
  scripts/services.sh stop rabbitmq nats redis >/dev/null 2>&1 || true
  scripts/services.sh start rabbitmq nats redis postgres >/dev/null
else
  NS=e2e-$SEED-
fi
# shellcheck disable=SC1091
source "${QM_SERVICES_DIR:-/tmp/qm-services}/env"
export E2E_AMQP_URL=$QM_TEST_AMQP_URL E2E_NATS_URL=$QM_TEST_NATS_URL E2E_REDIS_URL=$QM_TEST_REDIS_URL
RABBIT_API=${QM_TEST_RABBITMQ_API_URL}

echo "e2e: building migrate and the example apps"
if [ -n "$KAFKA" ] || [ -n "${E2E_ALL_FEATURES:-}" ]; then
  # .ci/run's `cargo test --all-features` feature set: one build of the crate (E2E_ALL_FEATURES=1
  # asks for it without a Kafka scenario, to reuse that build).
  cargo build --quiet --all-features --bin migrate --example broker_producer --example broker_consumer
else
  cargo build --quiet --bin migrate --example broker_producer --example broker_consumer
fi
BIN=${CARGO_TARGET_DIR:-$ROOT/target}/debug
MIGRATE=$BIN/migrate
EXAMPLES=$BIN/examples

# ---- processes --------------------------------------------------------------------------------
declare -A PIDS
spawn() { # NAME CMD...: in the background, output to $WORK/NAME.log
  local name=$1; shift
  "$@" >>"$WORK/$name.log" 2>&1 &
  PIDS[$name]=$!
}
alive() { [ -n "${PIDS[$1]:-}" ] && kill -0 "${PIDS[$1]}" 2>/dev/null; }
kill9() { if alive "$1"; then kill -9 "${PIDS[$1]}"; wait "${PIDS[$1]}" 2>/dev/null || true; fi; }
term() { # NAME [TIMEOUT_S]
  [ -n "${PIDS[$1]:-}" ] || return 0
  if alive "$1"; then
    kill -TERM "${PIDS[$1]}" 2>/dev/null || true
    local i
    for i in $(seq "$(( ${2:-20} * 10 ))"); do alive "$1" || break; sleep 0.1; done
    kill9 "$1"
  fi
  wait "${PIDS[$1]}" 2>/dev/null || true
}
# On the way out: every process of the run; the work dir too when the run passed and the dir is
# its own (E2E_WORK=DIR keeps one; a failed run's stays, printed).
passed=""
cleanup() {
  local n
  for n in "${!PIDS[@]}"; do kill -9 "${PIDS[$n]}" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [ -n "$passed" ] && [ -z "${E2E_WORK:-}" ]; then
    rm -rf "$WORK"
  else
    echo "e2e: logs in $WORK" >&2
  fi
}
trap cleanup EXIT
jitter() { sleep "$(( RANDOM % 3 )).$(( RANDOM % 10 ))"; }
log() { echo "e2e[$SCENARIO +$(( SECONDS - T0 ))s]: $*"; }

# Prometheus on its own port, scraping this run's apps every second.
PROM_PORT=19090
export E2E_PROM_URL=http://127.0.0.1:$PROM_PORT
start_prometheus() {
  cat >"$WORK/prometheus.yml" <<YML
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - {job_name: migrate, static_configs: [{targets: ['127.0.0.1:18480']}]}
  - {job_name: rabbitmq, metrics_path: /metrics/per-object, static_configs: [{targets: ['127.0.0.1:15692']}]}
  - {job_name: consumer-nats, static_configs: [{targets: ['127.0.0.1:19464']}]}
  - {job_name: producer-nats, static_configs: [{targets: ['127.0.0.1:19465']}]}
  - {job_name: consumer-redis, static_configs: [{targets: ['127.0.0.1:19474']}]}
  - {job_name: producer-redis, static_configs: [{targets: ['127.0.0.1:19475']}]}
  - {job_name: consumer-kafka, static_configs: [{targets: ['127.0.0.1:19484']}]}
  - {job_name: producer-kafka, static_configs: [{targets: ['127.0.0.1:19485']}]}
  - {job_name: consumer-kafka-nats, static_configs: [{targets: ['127.0.0.1:19494']}]}
  - {job_name: producer-kafka-nats, static_configs: [{targets: ['127.0.0.1:19495']}]}
  - {job_name: consumer-stale, static_configs: [{targets: ['127.0.0.1:19504']}]}
  - {job_name: producer-stale, static_configs: [{targets: ['127.0.0.1:19505', '127.0.0.1:19506']}]}
  - {job_name: bridge, static_configs: [{targets: ['127.0.0.1:19476', '127.0.0.1:19477']}]}
YML
  rm -rf "$WORK/prom"
  spawn prometheus prometheus --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/prom" \
    --web.listen-address=127.0.0.1:$PROM_PORT
  local i
  for i in $(seq 300); do curl -fsS "$E2E_PROM_URL/-/ready" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "e2e: prometheus did not start; see $WORK/prometheus.log" >&2; exit 1
}

# ---- the migration ------------------------------------------------------------------------------
status_field() { # NAME -> "state step paused"
  "$MIGRATE" status "$1" --json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(d["state"], d.get("step") if d.get("step") is not None else "-", "paused" if d["paused"] else "running")' \
    || echo "unknown - -"
}
# wait_for_state NAME CONDITION TIMEOUT_S: CONDITION is Python over `state`, `step` (None outside
# slices), `paused`, and `reached(phase, step=0)`: at or past that point of the plan (a loaded
# machine may poll too late to see a short phase).
wait_for_state() {
  local name=$1 cond=$2 t=$3 s=$SECONDS st
  while true; do
    st=$(status_field "$name")
    # shellcheck disable=SC2086
    if python3 - "$cond" $st <<'PY'
import sys
cond, state, step, paused = sys.argv[1:5]
step = int(step) if step != '-' else None
order = ['planned', 'consume_dual', 'synthetic', 'slices', 'drain', 'disconnect', 'complete']
def reached(phase, at=0):
    return (order.index(state), step or 0) >= (order.index(phase), at)
sys.exit(0 if eval(cond) else 1)
PY
    then
      log "now $st"
      return 0
    fi
    if (( SECONDS - s > t )); then
      log "timed out waiting for ($cond); state is $st"
      "$MIGRATE" status "$name" || true
      return 1
    fi
    sleep 0.5
  done
}
# The consumer's stale-producer check (issue 58): it follows the migration's routing document
# by the daemon's long-poll and takes the grace and the clock-skew bound from the plan; it counts
# the old broker's messages stamped by a generation older than the one that moved their slice
# (the plan's built-in `stale producers` guard reads the count). Words for `read -a`.
stale_check() { # NAME DIR
  echo "--migration $1 --daemon http://127.0.0.1:18480 --plan $2/plan.yaml"
}
start_consumer() { spawn consumer "$EXAMPLES/broker_consumer" "${CONSUMER[@]}"; }
restart_consumer() {
  log "fault: kill -9 the consumer"
  kill9 consumer
  sleep 1
  start_consumer
}
start_daemon() { # NAME: a new controller process (a new lease holder)
  spawn daemon "$MIGRATE" run --listen 127.0.0.1:18480 --interval 1s --lease-ttl 3s \
    --source-timeout 2s --confirm-complete "$1" --id "daemon-$RANDOM"
}
queue_depth() { # QUEUE: ready + unacked on RabbitMQ (the management API lags up to ~5 s)
  curl -fsS "$RABBIT_API/queues/%2f/$1" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("messages", 0))'
}
# old_drained SPEC QUEUE WHEN: the old queue is empty. A Kafka topic keeps its records: there the
# drain gate (the consumer group's lag 0 for the quiet period, read from Kafka) let the migration
# pass, and verify.py's conservation shows nothing confirmed stayed unapplied.
old_drained() {
  case $1 in
    kafka=*) log "old topic $2: the drain gate read the group's lag 0 from Kafka ($3)" ;;
    *)
      local depth; depth=$(queue_depth "$2")
      [ "$depth" = 0 ] || { log "FAILED: the old queue $2 still holds $depth messages ($3)"; return 1; }
      log "old queue $2 empty ($3)"
      ;;
  esac
}
ledger_count() { python3 -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("select count(*) from ledger").fetchone()[0])' "$1" 2>/dev/null || echo 0; }

# Stop the producer, wait for the consumer to apply everything confirmed, check the old queue,
# stop everything, verify.
finish() { # NAME OLD_SPEC OLD_QUEUE DIR CONFLICTS [VERIFY_ARGS...]
  local name=$1 old_spec=$2 old_queue=$3 dir=$4 conflicts=$5
  shift 5
  term producer 30
  term pinned 30
  local produced=0 i f
  # Every producer's confirmed events (the stale scenario's pinned instance logs to produced-pinned).
  for f in "$dir/produced" "$dir/produced-pinned"; do
    if [ -f "$f" ]; then produced=$(( produced + $(wc -l <"$f") )); fi
  done
  log "producer stopped after $produced confirmed events; waiting for the consumer"
  for i in $(seq 240); do
    [ "$(ledger_count "$dir/consumer.db")" -ge "$produced" ] && break
    sleep 0.5
  done
  log "ledger holds $(ledger_count "$dir/consumer.db") events"
  term consumer
  term daemon
  for b in bridge1 bridge2; do term "$b"; done
  "$MIGRATE" history "$name" --json >"$dir/history.json"
  python3 "$ROOT/tests/e2e/verify.py" --produced "$dir/produced" --db "$dir/consumer.db" \
    --history "$dir/history.json" --conflicts "$conflicts" --record "$STALE_RECORD" "$@"
  old_drained "$old_spec" "$old_queue" "at the end" || return 1
  log "scenario passed"
}

# The guard breach: a conflicting duplicate on the new broker; the daemon must roll back one
# step and pause; once the guard's window has passed, resume.
breach_and_resume() { # NAME NEW_SPEC NEW_QUEUE
  local step; step=$(status_field "$1" | cut -d' ' -f2)
  "$EXAMPLES/broker_producer" --old "rabbitmq=$E2E_AMQP_URL" --new "$2" --new-queue "$3" \
    --inject-conflict >>"$WORK/inject.log" 2>&1
  log "conflict injected at slices[$step]; waiting for the guard to roll back one step"
  wait_for_state "$1" "state == 'slices' and step == $step - 1 and paused == 'paused'" 60
  sleep 17 # the guard's 15 s window, then a scrape
  MIGRATE_ACTOR=e2e "$MIGRATE" resume "$1" --reason "e2e: conflict explained" >/dev/null
  log "resumed"
}

scenario_nats() {
  local dir=$WORK/nats name=e2e-nats
  mkdir -p "$dir"
  cp tests/e2e/plans/nats.yaml "$dir/plan.yaml"
  psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS qm_e2e" -c "CREATE DATABASE qm_e2e" >/dev/null
  export MIGRATE_STATE=postgres://postgres@127.0.0.1:5432/qm_e2e
  "$MIGRATE" init "$dir/plan.yaml" >/dev/null
  local old=(--old "rabbitmq=$E2E_AMQP_URL" --old-queue e2e-orders-nats)
  local new=(--new "nats=$E2E_NATS_URL" --new-queue E2E_ORDERS)
  start_daemon $name
  local stale_check; read -ra stale_check <<<"$(stale_check $name "$dir")"
  CONSUMER=("${old[@]}" "${new[@]}" --db "$dir/consumer.db" --metrics 127.0.0.1:19464
    --visibility-timeout 3s "${stale_check[@]}")
  start_consumer
  spawn producer "$EXAMPLES/broker_producer" --migration $name --daemon http://127.0.0.1:18480 \
    "${old[@]}" "${new[@]}" --slices 16 --rate 40 --count 0 --aggregates 30 \
    --log "$dir/produced" --metrics 127.0.0.1:19465 --producer checkout

  wait_for_state $name "reached('synthetic')" 90
  jitter; log "fault: kill -9 the controller"; kill9 daemon
  sleep 1; start_daemon $name
  wait_for_state $name "reached('slices', 0)" 120
  jitter; restart_consumer
  wait_for_state $name "state == 'slices' and step >= 1" 120
  jitter; breach_and_resume $name "nats=$E2E_NATS_URL" E2E_ORDERS
  wait_for_state $name "reached('slices', 1) and paused == 'running'" 120
  jitter; log "fault: NATS stopped for 3 s and restarted (data kept)"
  scripts/services.sh stop nats >/dev/null; sleep 3; scripts/services.sh restart nats >/dev/null
  wait_for_state $name "reached('drain')" 180
  jitter; restart_consumer
  wait_for_state $name "reached('disconnect')" 120
  old_drained "rabbitmq=" e2e-orders-nats "at disconnect" || return 1
  wait_for_state $name "state == 'complete'" 120
  finish $name "rabbitmq=" e2e-orders-nats "$dir" 1 --steps 2,8,16
  unset MIGRATE_STATE
}

start_bridge() { # N NAME
  spawn "bridge$1" "$MIGRATE" bridge "$2" --metrics "127.0.0.1:$(( 19475 + $1 ))" --lease-ttl 3s \
    --id "bridge-$1-$RANDOM"
}
active_bridge() { # which of bridge1/bridge2 forwards now (empty if none)
  local n
  for n in 1 2; do
    if curl -fsS "http://127.0.0.1:$(( 19475 + n ))/metrics" 2>/dev/null \
        | grep -q '^queue_migrate_bridge_active{.*} 1$'; then echo "bridge$n"; return; fi
  done
}

# A producer we cannot change, through two `migrate bridge` (one forwards, one stands by); state
# in SQLite. Faults: kill -9 of the controller, of the active bridge and of the consumer, a guard
# breach, and FAULT (a broker of the scenario's own).
bridge_scenario() { # TAG OLD_SPEC NEW_SPEC NEW_QUEUE PORT FAULT
  local tag=$1 old_spec=$2 new_spec=$3 new_queue=$4 port=$5 fault=$6
  local dir=$WORK/$tag name=e2e-$tag old_queue=${NS}e2e-orders-$tag
  mkdir -p "$dir"
  named <"tests/e2e/plans/$tag.yaml" >"$dir/plan.yaml"
  export MIGRATE_STATE=$dir/state.db
  "$MIGRATE" init "$dir/plan.yaml" >/dev/null
  local old=(--old "$old_spec" --old-queue "$old_queue")
  local new=(--new "$new_spec" --new-queue "$new_queue")
  start_daemon $name
  start_bridge 1 $name
  sleep 1
  start_bridge 2 $name
  local stale_check; read -ra stale_check <<<"$(stale_check $name "$dir")"
  CONSUMER=("${old[@]}" "${new[@]}" --db "$dir/consumer.db" --metrics "127.0.0.1:$port"
    --visibility-timeout 3s "${stale_check[@]}")
  start_consumer
  spawn producer "$EXAMPLES/broker_producer" --old "$old_spec" \
    --ingress "$old_queue.ingress" --rate 40 --count 0 --aggregates 30 \
    --log "$dir/produced" --metrics "127.0.0.1:$(( port + 1 ))" --producer legacy-checkout

  wait_for_state $name "reached('synthetic')" 90
  jitter; log "fault: kill -9 the controller"; kill9 daemon
  sleep 1; start_daemon $name
  wait_for_state $name "reached('slices', 0)" 120
  jitter
  local active; active=$(active_bridge)
  log "fault: kill -9 the active bridge (${active:-none})"
  if [ -n "$active" ]; then kill9 "$active"; sleep 1; start_bridge "${active#bridge}" $name; fi
  wait_for_state $name "state == 'slices' and step >= 1" 120
  jitter; breach_and_resume $name "$new_spec" "$new_queue"
  wait_for_state $name "reached('slices', 1) and paused == 'running'" 120
  jitter; "$fault"
  wait_for_state $name "reached('drain')" 180
  jitter; restart_consumer
  wait_for_state $name "reached('disconnect')" 120
  old_drained "$old_spec" "$old_queue" "at disconnect" || return 1
  wait_for_state $name "state == 'complete'" 120
  finish $name "$old_spec" "$old_queue" "$dir" 1 --steps 4,16 --journal-db "$dir/state.db"
  unset MIGRATE_STATE
}

# The plan with this run's queue and stream names (unchanged on fresh servers).
named() { sed -e "s/e2e-orders-/${NS}e2e-orders-/g" -e "s/E2E_ORDERS/${NS//-/_}E2E_ORDERS/g"; }

fault_redis() {
  log "fault: Redis stopped for 3 s and restarted (append-only file kept)"
  scripts/services.sh stop redis >/dev/null; sleep 3; scripts/services.sh restart redis >/dev/null
}

scenario_redis() {
  bridge_scenario redis "rabbitmq=$E2E_AMQP_URL" "redis=$E2E_REDIS_URL" e2e-orders-redis 19474 fault_redis
}

# ---- Kafka: a real Apache Kafka broker (KRaft, one JVM) of each Kafka scenario ------------------
# The classpath `scripts/services.sh install apache-kafka` fetched from Maven Central; the broker
# is this scenario's own (its ports, its data under $WORK), so its fault may stop it on a shared
# machine. One broker: the fault takes the whole cluster down, a harder fault than one broker of
# three.
AK_LIB=${QM_TEST_APACHE_KAFKA_LIB:-${QM_SERVICES_DIR:-/tmp/qm-services}/apache-kafka/lib}
KAFKA_PORT=${E2E_KAFKA_PORT:-19692} # PLAINTEXT; the next port is its KRaft controller's
ak_java() { java -Xmx256m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -cp "$AK_LIB/*" "$@"; }
kafka_properties() {
  cat <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$((KAFKA_PORT + 1))
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$((KAFKA_PORT + 1))
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$WORK/kafka/data
num.partitions=3
auto.create.topics.enable=false
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
}
spawn_kafka() { # the broker on the data it has (not waited for)
  spawn kafka java -Xmx512m -Xms128m -Dorg.slf4j.simpleLogger.defaultLogLevel=warn \
    -cp "$AK_LIB/*" kafka.Kafka "$WORK/kafka/server.properties"
}
kafka_ready() { # returns once the broker answers a metadata request
  local s=$SECONDS
  until ak_java org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" \
      --list >/dev/null 2>&1; do
    (( SECONDS - s < 120 )) || { echo "e2e: the Kafka broker is not ready after 120 s; see $WORK/kafka.log" >&2; return 1; }
    sleep 0.5
  done
}
start_kafka() { # TOPIC...: a new broker on empty data with these topics of 3 partitions
  kill9 kafka
  [ -f "$AK_LIB/.complete" ] || { echo "e2e: Apache Kafka is not installed: scripts/services.sh install apache-kafka" >&2; exit 1; }
  rm -rf "$WORK/kafka"; mkdir -p "$WORK/kafka/data"
  kafka_properties >"$WORK/kafka/server.properties"
  ak_java kafka.tools.StorageTool format --config "$WORK/kafka/server.properties" \
    --cluster-id "$(ak_java kafka.tools.StorageTool random-uuid 2>/dev/null | tail -n 1)" \
    >"$WORK/kafka/format.log" 2>&1 || { echo "e2e: Kafka storage format failed; see $WORK/kafka/format.log" >&2; exit 1; }
  spawn_kafka
  kafka_ready || exit 1
  local t pids=()
  for t in "$@"; do
    ak_java org.apache.kafka.tools.TopicCommand --bootstrap-server "127.0.0.1:$KAFKA_PORT" \
      --create --topic "$t" --partitions 3 --replication-factor 1 >>"$WORK/kafka/topics.log" 2>&1 &
    pids+=($!)
  done
  for t in "${pids[@]}"; do
    wait "$t" || { echo "e2e: a Kafka topic was not made; see $WORK/kafka/topics.log" >&2; exit 1; }
  done
  E2E_KAFKA_URL=kafka://127.0.0.1:$KAFKA_PORT
  export E2E_KAFKA_URL
  log "Apache Kafka broker ready on 127.0.0.1:$KAFKA_PORT, topics $*"
}
# The broker's start (a JVM, its log recovery) takes 10-25 s on 2 shared cores: the scenario goes
# on meanwhile, as a migration would, and a watcher logs when it answers again.
fault_kafka() {
  log "fault: the Kafka broker killed (kill -9), restarted 3 s later on its data"
  kill9 kafka; sleep 3
  spawn_kafka
  local s=$SECONDS
  ( kafka_ready && log "the Kafka broker answers again, $(( SECONDS - s + 3 ))s after it was killed" ) &
}
# The scenario's topics: the ingress, the old queue and its dead letters (a Kafka old side), the
# new queue (a Kafka new side).
kafka_topics() { # TAG
  local q=${NS}e2e-orders-$1
  echo "$q" "$q.ingress" "$q.dlq"
}

scenario_kafka() {
  start_kafka $(kafka_topics kafka)
  bridge_scenario kafka "rabbitmq=$E2E_AMQP_URL" "kafka=$E2E_KAFKA_URL" "${NS}e2e-orders-kafka" 19484 fault_kafka
  kill9 kafka
}

scenario_kafka_nats() {
  start_kafka $(kafka_topics kafka-nats)
  bridge_scenario kafka-nats "kafka=$E2E_KAFKA_URL" "nats=$E2E_NATS_URL" "${NS//-/_}E2E_ORDERS_KN" 19494 fault_kafka
  kill9 kafka
}

# ---- stale: a producer that stops following the routing document (issue 58) --------------------
# The plan without its `preflight:` waivers is refused: by `migrate preflight` (exit 3, each
# setting with its fix), and by the daemon before its first write step (paused in consume_dual,
# the refusal journaled, nothing published that moves traffic). Then the same migration gets the
# plan with the waivers (`migrate plan apply`) and a resume: it proceeds.
refused_until_waived() { # NAME DIR
  local name=$1 dir=$2 rc=0
  sed '/^preflight:/,$d' "$dir/plan.yaml" >"$dir/unwaived.yaml"
  "$MIGRATE" preflight "$dir/unwaived.yaml" >"$dir/preflight.out" 2>&1 || rc=$?
  echo "$rc" >"$dir/preflight.rc"
  log "migrate preflight on the plan without waivers: exit $rc"
  "$MIGRATE" init "$dir/unwaived.yaml" >/dev/null
  start_daemon "$name"
  wait_for_state "$name" "state == 'consume_dual' and paused == 'paused'" 90
  "$MIGRATE" history "$name" --json >"$dir/refused.json"
  log "the daemon refused before synthetic: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[-1]["reason"][:160])' "$dir/refused.json")"
  MIGRATE_ACTOR=e2e "$MIGRATE" plan apply "$dir/plan.yaml" --reason "e2e: the test servers are one node each, waived" >/dev/null
  MIGRATE_ACTOR=e2e "$MIGRATE" resume "$name" --reason "e2e: waived" >/dev/null
  log "plan with the waivers applied, resumed"
}

# The consumer paused (SIGSTOP) across a move: the old queue holds a backlog of the slices that
# move, stamped before the publish and consumed after it; it must not trip the stale guard. The
# step moves while the consumer is stopped (the exit gates read Prometheus' windows; the stale
# guard, its scrape of the consumer unanswered, has no data, which does not hold a move): it is
# resumed (SIGCONT) once the move is seen, or after 15 s (a step that waits on the consumer).
backlog_across_move() { # NAME WHEN STEP: stop once WHEN, plus a seeded delay
  wait_for_state "$1" "$2" 120
  jitter
  log "consumer stopped (SIGSTOP): a backlog on the old broker for the move to slices[$3]"
  kill -STOP "${PIDS[consumer]}"
  local s=$SECONDS st
  while (( SECONDS - s < 15 )); do
    st=$(status_field "$1")
    case $st in slices\ $3\ *|drain\ *|disconnect\ *|complete\ *) break ;; esac
    sleep 0.3
  done
  kill -CONT "${PIDS[consumer]}"
  log "consumer resumed after $(( SECONDS - s )) s"
  wait_for_state "$1" "reached('slices', $3)" 60
}

scenario_stale() {
  local dir=$WORK/stale name=e2e-stale old_queue=${NS}e2e-orders-stale new_queue=${NS//-/_}E2E_ORDERS_ST
  mkdir -p "$dir"
  named <tests/e2e/plans/stale.yaml >"$dir/plan.yaml"
  export MIGRATE_STATE=$dir/state.db
  local old=(--old "rabbitmq=$E2E_AMQP_URL" --old-queue "$old_queue")
  local new=(--new "nats=$E2E_NATS_URL" --new-queue "$new_queue")
  local stale_check; read -ra stale_check <<<"$(stale_check $name "$dir")"
  CONSUMER=("${old[@]}" "${new[@]}" --db "$dir/consumer.db" --metrics 127.0.0.1:19504
    --visibility-timeout 3s "${stale_check[@]}")
  start_consumer
  local producer=(--migration $name --daemon http://127.0.0.1:18480 "${old[@]}" "${new[@]}"
    --slices 16 --aggregates 30)
  spawn producer "$EXAMPLES/broker_producer" "${producer[@]}" --rate 40 --count 0 \
    --log "$dir/produced" --metrics 127.0.0.1:19505 --producer checkout
  # A second instance follows until slices[1] (8 of 16 moved), then stops following: slices 8-15
  # move at slices[2], and it keeps writing them to the old broker.
  spawn pinned "$EXAMPLES/broker_producer" "${producer[@]}" --rate 10 --count 0 \
    --order-prefix pinned- --pin-at-slices 8 --log "$dir/produced-pinned" \
    --metrics 127.0.0.1:19506 --producer checkout-pinned
  refused_until_waived $name "$dir"

  # Stopped from a seeded 0-2.9 s into the step to its move; the consumer runs again at least
  # the 8 s of observe before the third move (the pinned producer's), so it reads that one live.
  backlog_across_move $name "reached('synthetic')" 0
  backlog_across_move $name "reached('slices', 0)" 1
  log "checkout-pinned: $(grep -h 'pinned at' "$WORK/pinned.log" || echo 'not pinned yet')"
  wait_for_state $name "reached('slices', 2) and paused == 'paused'" 90
  "$MIGRATE" history $name --json >"$dir/paused.json"
  log "paused: $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[-1]["reason"][:200])' "$dir/paused.json")"
  log "the pinned producer fixed (stopped); resuming once the guard's 10 s window passed"
  term pinned 30
  sleep 13
  MIGRATE_ACTOR=e2e "$MIGRATE" resume $name --reason "e2e: checkout-pinned stopped" >/dev/null
  wait_for_state $name "reached('disconnect')" 120
  old_drained "rabbitmq=" "$old_queue" "at disconnect" || return 1
  wait_for_state $name "state == 'complete'" 120
  finish $name "rabbitmq=" "$old_queue" "$dir" 0 --produced "$dir/produced-pinned" \
    --rollbacks 0 --stale-trips 1 --stale-producer checkout-pinned --pinned-routes "$dir/produced-pinned.routes" \
    --backlog-routes "$dir/produced.routes" --preflight "$dir/preflight.out" --preflight-rc "$(cat "$dir/preflight.rc")" \
    --refused "$dir/refused.json" --steps 4,8,16 --journal-db "$dir/state.db"
  unset MIGRATE_STATE
}

# On shared servers, this run's RabbitMQ queues go at the end.
drop_queues() {
  [ -n "$NS" ] || return 0
  local q
  for q in $(curl -fsS "$RABBIT_API/queues/%2f" | python3 -c 'import json,sys; print(" ".join(q["name"] for q in json.load(sys.stdin)))'); do
    case $q in "$NS"*) curl -fsS -X DELETE "$RABBIT_API/queues/%2f/$q" >/dev/null || true ;; esac
  done
}

start_prometheus
for SCENARIO in "${SCENARIOS[@]}"; do
  T0=$SECONDS
  log "starting"
  "scenario_${SCENARIO//-/_}"
  log "passed in $(( SECONDS - T0 ))s"
done
drop_queues
# The stale-producer guard over this run: its trips and moves, per scenario (verify.py's lines).
python3 - "$STALE_RECORD" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()] if __import__("os").path.exists(sys.argv[1]) else []
moves = sum(r["moves"] for r in runs)
detections = [r["detection_ms"] for r in runs if "detection_ms" in r]
unexpected = sum(r["trips"] - r["expected_trips"] for r in runs)
print(f"e2e: stale-producer guard: {unexpected} unexpected trip(s) over {moves} slice moves"
      f" ({sum(r['expected_trips'] for r in runs)} expected: a pinned producer's)"
      + (f"; detection after the grace {', '.join(f'{d / 1000:.2f} s' for d in detections)}" if detections else ""))
PY
passed=1
echo "e2e: all scenarios passed (seed $SEED)"
