#!/usr/bin/env bash
# Two builds of `migrate bridge` against the shovel, invocation by invocation: BASE, NEW, NEW,
# BASE, BASE, NEW, … (the order flips every pair, so neither build always runs first), each an
# invocation of bench/bridge.sh with one round (the bridge and the shovel, in its alternating
# order). Every figure it prints is the bridge/shovel ratio of one invocation, the comparable
# number on a shared machine where the broker's own cost drifts from minute to minute.
#
#   BASE=<migrate> NEW=<migrate> bench/bridge_ab.sh              # 7 pairs, prefetch 256, N=100000
#   PAIRS=5 PREFETCH=1024 N=50000 BASE=… NEW=… bench/bridge_ab.sh
#
# Needs what bench/bridge.sh needs (RabbitMQ with the shovel plugin, python3). Nothing else may run
# on the machine meanwhile (a build shifts the ratios by more than the changes measured).
#
# Environment: BASE, NEW (the binaries), PAIRS (7), PREFETCH (256), N (100000), OUT (a fresh
# temp dir: one directory per invocation, and ab.txt with one line per invocation).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
: "${BASE:?set BASE to the migrate binary to compare against}"
: "${NEW:?set NEW to the migrate binary measured}"
PAIRS=${PAIRS:-7}
PREFETCH=${PREFETCH:-256}
N=${N:-100000}
OUT=${OUT:-$(mktemp -d /tmp/qm-bridge-ab.XXXXXX)}
case $PREFETCH in
  *[!0-9]*|'') echo "bench/bridge_ab.sh: PREFETCH is one number (got '$PREFETCH')" >&2; exit 1 ;;
esac
mkdir -p "$OUT"
if [ -e "$OUT/ab.txt" ]; then
  echo "bench/bridge_ab.sh: $OUT holds an earlier comparison (ab.txt); give a new OUT" >&2
  exit 1
fi

one() { # name binary pair
  local dir=$OUT/$1-$3
  OUT=$dir N=$N ROUNDS=1 PREFETCH=$PREFETCH MIGRATE=$2 bash "$here/bridge.sh" >"$dir.log" 2>&1 ||
    { echo "bench/bridge_ab.sh: $1 pair $3 failed, see $dir.log" >&2; exit 1; }
  python3 - "$dir/results.json" "$1" "$3" <<'PY' | tee -a "$OUT/ab.txt"
import json, sys
runs = json.load(open(sys.argv[1]))["runs"]
b = next(r for r in runs if r["kind"] == "bridge")
s = next(r for r in runs if r["kind"] == "shovel")
print(f"{sys.argv[2]} {sys.argv[3]} ratio {b['rate'] / s['rate']:.3f} bridge {b['rate']:.0f} "
      f"shovel {s['rate']:.0f} migrate_cpu_s {b['migrate_cpu_s']:.2f} "
      f"rabbitmq_cpu_s_bridge {b['beam_cpu_s']:.2f} rabbitmq_cpu_s_shovel {s['beam_cpu_s']:.2f} "
      f"load {b['loadavg_start']:.2f}")
PY
}

echo "# $(date -u +%Y-%m-%dT%H:%M:%SZ) BASE=$BASE NEW=$NEW PAIRS=$PAIRS PREFETCH=$PREFETCH N=$N; results in $OUT" >&2
for pair in $(seq 1 "$PAIRS"); do
  if [ $((pair % 2)) -eq 1 ]; then
    one base "$BASE" "$pair"; one new "$NEW" "$pair"
  else
    one new "$NEW" "$pair"; one base "$BASE" "$pair"
  fi
done
python3 - "$OUT/ab.txt" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
ratio = {name: [float(r[3]) for r in rows if r[0] == name] for name in ("base", "new")}
pairs = {}
for r in rows:
    pairs.setdefault(r[1], {})[r[0]] = float(r[3])
wins = sum(1 for p in pairs.values() if p.get("new", 0) > p.get("base", 0))
for name, values in ratio.items():
    print(f"{name}: bridge/shovel median {statistics.median(values):.3f} "
          f"(range {min(values):.3f}-{max(values):.3f}, {sum(v >= 1 for v in values)} of {len(values)} at least 1)")
print(f"new above base in {wins} of {len(pairs)} pairs")
PY
