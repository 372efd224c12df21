#!/usr/bin/env bash
# Controller scale: N active migrations (default 1000) with ten gates each, against one scrape
# endpoint (benches/controller_scale.rs `serve`, its own process) and one real Prometheus.
#
#   bench/controller_scale.sh                   # 1000 migrations
#   MIGRATIONS=100 TICKS=3 RUN_SECONDS=30 bench/controller_scale.sh
#
# 1. setup: the migrations in a fresh SQLite store, each forced to slices[0];
# 2. ticks: TICKS rounds of daemon::tick_all in one process (wall and CPU of each round); then
#    COMPARE rounds alternating one-migration-after-the-other ticks and daemon::tick_all;
# 3. run: the real `migrate run --interval 1s` for RUN_SECONDS (ticks back to back when a tick
#    takes longer than 1 s): ticks done, CPU and peak RSS of the daemon, CPU of Prometheus and of
#    the scrape endpoint meanwhile;
# 4. parts: the pieces of one migration's tick, each alone (where the time goes).
#
# Prometheus: PROM (default $QM_TEST_PROMETHEUS_URL from /tmp/qm-services/env, else
# http://127.0.0.1:9090); started with scripts/services.sh when it does not answer.
set -euo pipefail
cd "$(dirname "$0")/.."
MIGRATIONS=${MIGRATIONS:-1000}
TICKS=${TICKS:-5}
RUN_SECONDS=${RUN_SECONDS:-60}
PARTS=${PARTS:-500}
COMPARE=${COMPARE:-3}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
if [ -z "${PROM:-}" ] && [ -f /tmp/qm-services/env ]; then
  # shellcheck disable=SC1091
  source /tmp/qm-services/env
  PROM=${QM_TEST_PROMETHEUS_URL:-}
fi
PROM=${PROM:-http://127.0.0.1:9090}
if ! curl -sf "$PROM/-/ready" >/dev/null; then
  bash scripts/services.sh start prometheus >&2
  curl -sf "$PROM/-/ready" >/dev/null || { echo "Prometheus does not answer at $PROM" >&2; exit 2; }
fi

cargo build --release --bin migrate >&2
MIGRATE="$CARGO_TARGET_DIR/release/migrate"
HELPER=$(cargo bench --bench controller_scale --no-run --message-format=json 2>/dev/null |
  python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "controller_scale" and m.get("executable"):
        print(m["executable"])')
[ -x "$HELPER" ] || { echo "cannot build the controller_scale helper" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

cpu_of() { # utime + stime of a pid, in seconds
  awk '{ split($0, a, ") "); split(a[2], f, " "); printf "%.2f", (f[12] + f[13]) / 100 }' "/proc/$1/stat"
}
prom_pid=$(pgrep -f '^[^ ]*prometheus .*--config' | head -1 || true)

"$HELPER" serve 127.0.0.1:0 > "$work/serve.out" &
serve_pid=$!
pids+=("$serve_pid")
for _ in $(seq 50); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
read -r SCRAPE scrape_size < "$work/serve.out"
echo "scrape endpoint: $SCRAPE $scrape_size; Prometheus: $PROM (pid ${prom_pid:-?})"
echo "machine: nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"

state="sqlite://$work/state.db"
echo
"$HELPER" setup "$state" "$MIGRATIONS" "$PROM" "$SCRAPE"

echo
echo "In-process daemon::tick_all (benches/controller_scale.rs ticks):"
echo
"$HELPER" ticks "$state" "$TICKS"
echo
echo "One migration after the other against daemon::tick_all, alternating (benches/controller_scale.rs compare):"
echo
"$HELPER" compare "$state" "$COMPARE"

echo
echo "migrate run --interval 1s for ${RUN_SECONDS}s:"
echo
MIGRATE_LOG=error "$MIGRATE" --state "$state" run --listen 127.0.0.1:0 --interval 1s --id scale-bench \
  2> "$work/daemon.err" &
daemon_pid=$!
pids+=("$daemon_pid")
addr=
for _ in $(seq 100); do
  addr=$(sed -n 's|.* on http://\([0-9.:]*\) .*|\1|p' "$work/daemon.err" | head -1)
  [ -n "$addr" ] && curl -sf "http://$addr/healthz" >/dev/null && break
  sleep 0.1
done
ticks() { curl -sf "http://$addr/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ticks"])'; }
# Wait for the first (cold) tick to end, then measure whole ticks.
t_first=$(ticks)
while [ "$(ticks)" -le "$t_first" ]; do sleep 0.05; done
t0=$(ticks); c0=$(cpu_of "$daemon_pid"); s0=$(date +%s.%N)
p0=$( [ -n "$prom_pid" ] && cpu_of "$prom_pid" || echo 0); e0=$(cpu_of "$serve_pid")
sleep "$RUN_SECONDS"
t1=$(ticks); c1=$(cpu_of "$daemon_pid"); s1=$(date +%s.%N)
p1=$( [ -n "$prom_pid" ] && cpu_of "$prom_pid" || echo 0); e1=$(cpu_of "$serve_pid")
rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$daemon_pid/status")
hwm=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$daemon_pid/status")
echo "| migrations | ticks | wall s | wall s per tick | daemon CPU s per tick | Prometheus CPU s per tick | scrape endpoint CPU s per tick | daemon RSS MiB | daemon peak RSS MiB |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
awk -v m="$MIGRATIONS" -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v c0="$c0" -v c1="$c1" \
  -v p0="$p0" -v p1="$p1" -v e0="$e0" -v e1="$e1" -v rss="$rss" -v hwm="$hwm" 'BEGIN {
  n = t1 - t0; w = s1 - s0
  if (n < 1) { printf "| %d | 0 | %.1f | > %.1f | - | - | - | %s | %s |\n", m, w, w, rss, hwm; exit }
  printf "| %d | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", m, n, w, w / n, (c1 - c0) / n, (p1 - p0) / n, (e1 - e0) / n, rss, hwm
}'
kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true

echo
echo "The pieces of one migration's tick, each alone ($PARTS calls each):"
echo
"$HELPER" parts "$state" "$PROM" "$SCRAPE" "$PARTS"
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
