#!/usr/bin/env bash
# `migrate judge simulate` over the matrix of issue 46: identical routes (--ratio 1) at every
# check interval from 1 s to 1 min, base rates 0.1% to 5%, traffic 1 to 10,000 msg/s per side,
# 1,000 runs of one hour each; then a twice-as-bad new route, and the sparse case. One line per
# scenario: the judge's and the threshold gate's false-fail rate, false-pass rate and times to a
# decision. Then the latency form (`--quantile 0.99`: lognormal latencies, new's scaled by
# --ratio) on the same grid of intervals and traffic. MIGRATE defaults to the release build;
# PART=counts or PART=latency runs one half.
set -euo pipefail
MIGRATE=${MIGRATE:-target/release/migrate}
RUNS=${RUNS:-1000}
PART=${PART:-all}
row() {
  "$MIGRATE" judge simulate --json --runs "$RUNS" "$@" | python3 -c '
import json, sys
r = json.load(sys.stdin); s = r["scenario"]; j = r["judge"]; t = r["threshold"]
f = lambda v: "-" if v is None else "%.0f" % v
print("| %s | %s | %s | %s | %.1f%% | %.1f%% | %.1f%% / %.1f%% / %.1f%% | %s / %s s | %.1f%% | %.1f%% | %s / %s s | %d |" % (
    s["every"], s["traffic"], ("p%g latency" % (100 * s["quantile"])) if "quantile" in s else s["base_rate"], s["ratio"],
    100 * j["false_fail_rate"], 100 * j["false_pass_rate"], 100 * j["fail_rate"], 100 * j["pass_rate"], 100 * j["undecided_rate"], f(j["median_decision_s"]), f(j["p90_decision_s"]),
    100 * t["false_fail_rate"], 100 * t["false_pass_rate"], f(t["median_decision_s"]), f(t["p90_decision_s"]),
    j["passes_before_min_events"]))'
}
echo "| every | msg/s per side | base rate | ratio | judge false FAIL | judge false PASS | judge first decision FAIL / PASS / none | judge median / p90 decision | threshold false FAIL | threshold false PASS | threshold median / p90 decision | judge passes before min_events |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
if [ "$PART" != latency ]; then
for every in 1s 10s 1m; do
  for base in 0.001 0.01 0.05; do
    for traffic in 1 100 10000; do
      row --ratio 1 --every "$every" --base-rate "$base" --traffic "$traffic"
    done
  done
done
for every in 1s 15s 1m; do
  row --ratio 2 --base-rate 0.01 --traffic 100 --every "$every"
done
row --ratio 1 --base-rate 0.001 --traffic 1 --every 15s
fi
if [ "$PART" != counts ]; then
  for every in 1s 15s 1m; do
    for traffic in 1 100 10000; do
      row --quantile 0.99 --ratio 1 --every "$every" --traffic "$traffic"
    done
  done
  for ratio in 1.5 2; do
    row --quantile 0.99 --ratio "$ratio" --every 15s --traffic 100
  done
  row --quantile 0.99 --ratio 2 --every 15s --traffic 1
fi
