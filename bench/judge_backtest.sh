#!/usr/bin/env bash
# The judge's error rates through `migrate plan backtest` on counters we generate (issue 55 item 5;
# BENCHMARKS.md, "The judge"). Per case: bench/judge_backtest_gen.py writes HOURS + 1 hours of two
# routes' counters (failed and handled totals, two pods a route, each pod restarting about every
# 3 h: counter resets) as an app exports them, scraped every SCRAPE s; promtool backfills them
# into a Prometheus of this script's own (its own port and data dir, started and stopped here,
# never the shared one); `plan backtest --windows 1h --start-at 'slices[0]'` rehearses the plan
# of five slice steps with one judge (an exit gate, tolerance 0.2, default judge_budget: 0.2% of
# false FAIL and of false PASS a step) over each hour from the second one on: one window = one
# step's judge over one hour. bench/judge_backtest_stats.py turns each answer into a table row.
#
# Needs promtool and prometheus (scripts/services.sh install prometheus) and python3.
# MIGRATE: the binary (default target/release/migrate, built if missing).
# HOURS: windows per case (default 2000). CASES: which rows (default all, by label below).
# OUT: where the answers (JSON) and the table are kept (default: a new temporary directory).
# --source-timeout 600s: on a loaded machine a query_range answer of 11,000 points of two series
# can take longer than the default 10 s to arrive, and a window whose counts were not read is
# undecided for no fault of the judge (judge_backtest_stats.py counts such windows and says so).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
MIGRATE=${MIGRATE:-target/release/migrate}
HOURS=${HOURS:-2000}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
if [ ! -x "$MIGRATE" ]; then
  cargo build --release --bin migrate
fi
MIGRATE=$(realpath "$MIGRATE")

# label | generator case | true ratio | scrape s | step
ALL_CASES='bursts|bursts|1|10|10s
boundary|boundary|1.2|10|10s
overdispersed|overdispersed|1.2|10|10s
share|share|1|10|10s
scrape30|ratio12|1.2|30|1m
scrape15|plain|1|15|10s
doubled|doubled|2|10|10s
plain|plain|1|10|10s'
CASES=${CASES:-bursts boundary overdispersed share scrape30 scrape15 doubled plain}
TOLERANCE=0.2
# 2026-06-01T00:00:00Z: the windows start an hour later, on the hour.
START=1780272000

work=$(mktemp -d)
. bench/prometheus.sh
cleanup() {
  stop_prometheus
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/plan.yaml" <<'EOF'
version: 1
name: judgebt
slices: 16
brokers:
  old: { name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: judgebt }
  new: { name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: JUDGEBT }
retry: { max_backoff: 2m, visibility_timeout: 1m }
dedup: { window: 1d, max_redelivery_delay: 2m, max_consumer_delay: 1m, reprocess_margin: 12h }
sources:
  prom: { prometheus: "${QM_BT_PROM_URL}" }
phases:
  slices:
    steps: [1, 2, 4, 8, 16]
    exit:
      - name: failures new vs old
        source: prom
        judge:
          new:
            events: 'sum(increase(qm_bt_handled_total{route="new"}[$step]))'
            failures: 'sum(increase(qm_bt_failed_total{route="new"}[$step]))'
          old:
            events: 'sum(increase(qm_bt_handled_total{route="old"}[$step]))'
            failures: 'sum(increase(qm_bt_failed_total{route="old"}[$step]))'
          tolerance: 0.2
EOF

iso() { date -u -d "@$1" +%Y-%m-%dT%H:%M:%SZ; }
echo "binary: $MIGRATE; $HOURS one-hour windows per case; answers in $OUT" >&2
echo "| case | true ratio | step | windows | false FAIL (95% CI) | false PASS (95% CI) | decided in the hour (95% CI) | median / p90 to a decision |" >"$OUT/table.md"
echo "|---|---|---|---|---|---|---|---|" >>"$OUT/table.md"
for label in $CASES; do
  line=$(printf '%s\n' "$ALL_CASES" | grep "^$label|") || { echo "unknown case $label" >&2; exit 2; }
  IFS='|' read -r _ gen truth scrape step <<<"$line"
  t0=$(date +%s)
  python3 bench/judge_backtest_gen.py --case "$gen" --hours $((HOURS + 1)) --start "$START" \
    --scrape "$scrape" --seed "$(cksum <<<"$label" | cut -d' ' -f1)" --out "$work/counts.om"
  rm -rf "$work/tsdb"
  promtool tsdb create-blocks-from openmetrics --max-block-duration=4400h "$work/counts.om" "$work/tsdb" >/dev/null
  rm -f "$work/counts.om"
  start_prometheus "$work/tsdb" "${scrape}s" --query.max-samples=200000000
  port=$prom_port
  t1=$(date +%s)
  QM_BT_PROM_URL="http://127.0.0.1:$port" "$MIGRATE" plan backtest "$work/plan.yaml" \
    --from "$(iso $((START + 3600)))" --to "$(iso $((START + 3600 * (HOURS + 1))))" \
    --step "$step" --windows 1h --start-at 'slices[0]' --state "$work/none.db" \
    --source-timeout 600s --json >"$OUT/$label.json"
  t2=$(date +%s)
  stop_prometheus
  python3 bench/judge_backtest_stats.py "$label (scrape ${scrape} s)" "$truth" "$TOLERANCE" "$step" \
    "$OUT/$label.json" >>"$OUT/table.md" 2>>"$OUT/reasons.txt"
  echo "$label: data ready in $((t1 - t0)) s, backtest $((t2 - t1)) s" >&2
done
cat "$OUT/table.md"
echo "wrong decisions' reasons (most frequent):"
cat "$OUT/reasons.txt" 2>/dev/null || true
cd "$root"
