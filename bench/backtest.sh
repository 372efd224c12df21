#!/usr/bin/env bash
# `migrate plan backtest` over a week at a 1-minute step for a plan of 10 gates, against a local
# Prometheus backfilled with that week (target: under 10 s; BENCHMARKS.md, "Backtest").
#
# Needs promtool and prometheus (scripts/services.sh install prometheus) and python3.
# MIGRATE: the binary to measure (default: target/release/migrate, built if missing).
# RUNS: how many timed runs (default 5).
set -euo pipefail
cd "$(dirname "$0")/.."
MIGRATE=${MIGRATE:-target/release/migrate}
RUNS=${RUNS:-5}
if [ ! -x "$MIGRATE" ]; then
  cargo build --release --bin migrate
fi
work=$(mktemp -d)
. bench/prometheus.sh
cleanup() {
  stop_prometheus
  rm -rf "$work"
}
trap cleanup EXIT

# The week of tests/integration/cli/backtest_prometheus.rs: a daily peak, a deploy, an error spike.
python3 - "$work/week.om" <<'EOF'
import sys
monday, minute, hour, day = 1793577600, 60, 3600, 86400
deploy = monday + day + 9 * hour
spike = (monday + day + 3 * hour, monday + day + 3 * hour + 30 * minute)
times = [monday + i * minute for i in range(7 * day // minute + 1)]
families = {
    "app_new_connected": lambda t: 1,
    "app_requests_rate": lambda t: 500 if 12 * hour <= t % day < 14 * hour else 100,
    "app_error_ratio": lambda t: 0.08 if spike[0] <= t < spike[1] else 0.001,
    "app_consumer_start_time_seconds": lambda t: monday - day if t < deploy else deploy,
    "app_old_publishers": lambda t: 0,
}
with open(sys.argv[1], "w") as out:
    for name, value in families.items():
        out.write(f"# TYPE {name} gauge\n")
        for t in times:
            out.write(f"{name} {value(t)} {t}\n")
    out.write("# EOF\n")
EOF
promtool tsdb create-blocks-from openmetrics "$work/week.om" "$work/tsdb" >/dev/null
start_prometheus "$work/tsdb" 1m
port=$prom_port

{
  cat <<'EOF'
version: 1
name: week
slices: 8
brokers:
  old: { name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: week }
  new: { name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: WEEK }
retry: { max_backoff: 2m, visibility_timeout: 1m }
dedup: { window: 1d, max_redelivery_delay: 2m, max_consumer_delay: 1m, reprocess_margin: 12h }
sources:
  prom: { prometheus: "${QM_BT_PROM_URL}" }
phases:
  slices:
    steps: [8]
    observe: 1d
    exit:
EOF
  for k in 1 2 3 4 5 6 7 8; do
    echo "      - { name: errors x$k, source: prom, query: \"app_error_ratio * $k\", pass_if: \"< 0.0$k\" }"
  done
  cat <<'EOF'
    require_peak: { source: prom, query: app_requests_rate, at_least: 400 }
    guard:
      - { name: errors breach, source: prom, query: "avg_over_time(app_error_ratio[5m])", pass_if: "< 0.05" }
    on_breach: alert
EOF
} >"$work/plan.yaml"

echo "binary: $MIGRATE"
echo "10 gates, 2026-11-02T00:00:00Z to 2026-11-09T00:00:00Z every 1m (10,081 instants):"
for run in $(seq 1 "$RUNS"); do
  start=$(date +%s.%N)
  QM_BT_PROM_URL="http://127.0.0.1:$port" "$MIGRATE" plan backtest "$work/plan.yaml" \
    --from 2026-11-02T00:00:00Z --to 2026-11-09T00:00:00Z --state "$work/none.db" >"$work/out.txt"
  end=$(date +%s.%N)
  printf '  run %d: %.2f s (%s)\n' "$run" "$(echo "$end - $start" | bc)" "$(grep '^verdict' "$work/out.txt")"
done
