#!/usr/bin/env bash
# Routing propagation: N producers long-poll the real `migrate run` (its own process); the time
# from a committed transition to the last producer holding the new generation, over a few dozen
# transitions, through the API and through the CLI (which writes the store; the daemon's watcher
# notices). The producers are the library's Router (follow_http), tokio tasks in one client
# process (crates/queue-migrate-bench/benches/propagation.rs).
#
#   bench/propagation.sh                        # 1000 producers, 40 API + 20 CLI transitions
#   CLIENTS=200 TRANSITIONS=10 CLI_TRANSITIONS=5 bench/propagation.sh
#   MIGRATE=path/to/migrate CLIENT=path/to/propagation-client bench/propagation.sh  # no build
#
# Prints Markdown tables: latencies, and the CPU of the daemon and of the client process.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${CLIENTS:-1000}
TRANSITIONS=${TRANSITIONS:-40}
CLI_TRANSITIONS=${CLI_TRANSITIONS:-20}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }

# 1000 long-polls are 1000 sockets in each process (and the client's reconnections).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
echo "ulimit -n: $(ulimit -n)" >&2

if [ -z "${MIGRATE:-}" ]; then
  cargo build --release --bin migrate >&2
  MIGRATE="$CARGO_TARGET_DIR/release/migrate"
fi
[ -n "${CLIENT:-}" ] || CLIENT=$(cargo bench -p queue-migrate-bench --bench propagation --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "propagation" and m.get("executable"):
        print(m["executable"])')
[ -x "$CLIENT" ] || { echo "cannot build the propagation client" >&2; exit 1; }

work=$(mktemp -d)
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

state="sqlite://$work/state.db"
cat > "$work/bench.yaml" <<'EOF'
version: 1
name: bench
slices: 128
auto_advance: false
brokers:
  old: { name: rabbitmq, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: bench, dead_letter: bench.dlq }
  new: { name: nats, kind: nats, url: "nats://127.0.0.1:4222", stream: BENCH }
retry: { max_backoff: 2m, visibility_timeout: 1m }
dedup: { window: 1d, max_redelivery_delay: 2m, max_consumer_delay: 1m, reprocess_margin: 12h }
sources:
  app: { scrape: "http://127.0.0.1:9/metrics" }
phases:
  consume_dual:
    exit:
      - { name: new consumer connected, source: app, query: app_new_consumer_connected, pass_if: ">= 1" }
  synthetic:
    exit:
      - { name: probe ok, source: app, query: app_probe_ok, pass_if: "== 1" }
  slices:
    steps: [6, 32, 64, 128]
    observe: 1m
    exit:
      - { name: error ratio low, source: app, query: app_error_ratio_new, pass_if: "< 0.01" }
  drain:
    quiet: auto
    exit:
      - { name: old queue empty, source: app, query: app_old_depth, pass_if: "== 0", for: quiet }
  disconnect:
    retain: 2m
    exit:
      - { name: no publishers, source: app, query: app_old_publishers, pass_if: "== 0" }
EOF
"$MIGRATE" --state "$state" init "$work/bench.yaml" >/dev/null

token=propagation-bench-token
MIGRATE_API_TOKEN=$token "$MIGRATE" --state "$state" run --listen 127.0.0.1:0 --id bench-daemon \
  2> "$work/daemon.err" &
daemon_pid=$!
addr=
for _ in $(seq 100); do
  addr=$(sed -n 's|.* on http://\([0-9.:]*\) .*|\1|p' "$work/daemon.err" | head -1)
  [ -n "$addr" ] && curl -sf "http://$addr/healthz" | grep -q '"leader":true' && break
  sleep 0.1
done
curl -sf "http://$addr/healthz" | grep -q '"leader":true' || { cat "$work/daemon.err" >&2; exit 1; }
echo "daemon: pid $daemon_pid on http://$addr" >&2

cpu_of() { # utime + stime of a pid, in seconds
  awk '{ split($0, a, ") "); split(a[2], f, " "); printf "%.2f", (f[12] + f[13]) / 100 }' "/proc/$1/stat"
}
rss_of() { awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }

measure() { # mode transitions
  local mode=$1 n=$2 before after
  before=$(cpu_of "$daemon_pid")
  QM_DAEMON="http://$addr" QM_MIGRATION=bench QM_TOKEN=$token QM_CLIENTS=$CLIENTS \
    QM_TRANSITIONS=$n QM_MODE=$mode QM_MIGRATE="$MIGRATE" QM_STATE="$state" \
    /usr/bin/time -f "%U %S %e %M" -o "$work/client.$mode.time" "$CLIENT" > "$work/out.$mode"
  after=$(cpu_of "$daemon_pid")
  cat "$work/out.$mode"
  read -r cu cs ce cm < "$work/client.$mode.time"
  echo "$mode $(awk -v a="$before" -v b="$after" 'BEGIN {printf "%.2f", b - a}') \
$(awk -v u="$cu" -v s="$cs" 'BEGIN {printf "%.2f", u + s}') $ce $((cm / 1024))" >> "$work/cpu"
}

echo "Producers: $CLIENTS; machine: nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo
measure api "$TRANSITIONS"
echo
measure cli "$CLI_TRANSITIONS"
echo
echo "| mode | daemon CPU s (whole run) | client process CPU s | client wall s | client peak RSS MiB |"
echo "|---|---:|---:|---:|---:|"
while read -r mode dcpu ccpu cwall crss; do
  echo "| $mode | $dcpu | $ccpu | $cwall | $crss |"
done < "$work/cpu"
echo
echo "daemon peak RSS: $(rss_of "$daemon_pid") MiB; load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
