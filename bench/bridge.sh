#!/usr/bin/env bash
# `migrate bridge` against RabbitMQ's shovel plugin (ack-mode on-confirm), RabbitMQ -> RabbitMQ
# on this machine. Target: the bridge forwards at least at the shovel's rate.
#
#   bench/bridge.sh                      # N=100000, prefetch 256 and 1024, 3 rounds alternating
#   N=20000 ROUNDS=1 PREFETCH="256" bench/bridge.sh
#   bench/bridge.sh --reductions         # also RabbitMQ's Erlang reductions per message (+12 s a run)
#   python3 bench/bridge_acks.py         # what the ack pattern alone costs RabbitMQ (no forwarding)
#
# Needs a RabbitMQ on loopback with the management and shovel plugins
# (`scripts/services.sh start rabbitmq`, as root) and python3 (standard library only).
#
# Environment:
#   MIGRATE        the binary (default: build `migrate` in $CARGO_TARGET_DIR, release)
#   MIGRATE_LOG    the bridge's log filter (default warn; queue_migrate::brokers=debug logs the
#                  ack frames it sent, multiple and single, when it stops)
#   CARGO_TARGET_DIR  where to build it (default: target)
#   N ROUNDS PREFETCH KEYS SIZE   messages per run (100000), rounds (3), prefetch values ("256 1024"),
#                  distinct keys in x-qm-key (1000), payload bytes (200)
#   AMQP_URL       amqp://guest:guest@127.0.0.1:5672/%2f
#   MANAGEMENT     http://127.0.0.1:15672/api (guest:guest)
#   OUT            where logs, the state store and results.json go (default: a fresh temp dir)
#
# Per run: queues emptied, N identical messages pre-loaded into the ingress (persistent, key header
# uniform at random over KEYS keys, fixed seed), then the forwarder is started and the destination
# queue is polled (passive queue.declare, every 20 ms) until it holds N. Bridge and shovel use
# separate queues (bench.in -> bench.out, bench.in2 -> bench.out2) and alternate their order each
# round. Results: a markdown table on stdout, every run in $OUT/results.json.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
N=${N:-100000}
ROUNDS=${ROUNDS:-3}
PREFETCH=${PREFETCH:-"256 1024"}
KEYS=${KEYS:-1000}
SIZE=${SIZE:-200}
AMQP_URL=${AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}
MANAGEMENT=${MANAGEMENT:-http://127.0.0.1:15672/api}
OUT=${OUT:-$(mktemp -d /tmp/qm-bridge-bench.XXXXXX)}
mkdir -p "$OUT"

if [ -z "${MIGRATE:-}" ]; then
  CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
  export CARGO_TARGET_DIR
  (cd "$root" && cargo build --release --bin migrate) >&2
  MIGRATE=$CARGO_TARGET_DIR/release/migrate
fi

# RabbitMQ with the shovel plugin?
if ! curl -sf -u guest:guest "$MANAGEMENT/overview" >/dev/null; then
  echo "bench/bridge.sh: no RabbitMQ management API at $MANAGEMENT; run (as root): bash scripts/services.sh start rabbitmq" >&2
  exit 1
fi
if ! curl -sf -u guest:guest "$MANAGEMENT/shovels" >/dev/null; then
  echo "bench/bridge.sh: the shovel plugins are not enabled (rabbitmq-plugins enable rabbitmq_shovel rabbitmq_shovel_management)" >&2
  exit 1
fi

# One migration per prefetch, initialised in a fresh SQLite store (state `planned`: all to old).
export BENCH_AMQP_URL=$AMQP_URL
STATE=$OUT/state.db
rm -f "$STATE"
for p in $PREFETCH; do
  sed -e "s/^name: bench-bridge-256$/name: bench-bridge-$p/" -e "s/^  prefetch: 256$/  prefetch: $p/" \
    "$here/bridge_plan.yaml" >"$OUT/plan-$p.yaml"
  MIGRATE_STATE=$STATE "$MIGRATE" init "$OUT/plan-$p.yaml" >"$OUT/init-$p.log" 2>&1 ||
    { cat "$OUT/init-$p.log" >&2; exit 1; }
done

{
  echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) $(uname -srm); nproc=$(nproc)"
  lscpu | head -n 10 | sed 's/^/#   /'
  echo "# RabbitMQ $(curl -sf -u guest:guest "$MANAGEMENT/overview" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["rabbitmq_version"], "Erlang", d["erlang_version"])')"
  echo "# migrate: $MIGRATE ($("$MIGRATE" --version 2>/dev/null || echo '?'))"
  echo "# load average: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

# shellcheck disable=SC2086
python3 "$here/bridge_bench.py" --migrate "$MIGRATE" --state "$STATE" --out "$OUT" \
  --n "$N" --keys "$KEYS" --size "$SIZE" --rounds "$ROUNDS" --prefetch $PREFETCH \
  --amqp-url "$AMQP_URL" --management "$MANAGEMENT" "$@" | tee "$OUT/results.md"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg); results in $OUT" | tee -a "$OUT/results.md"
