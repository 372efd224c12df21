#!/usr/bin/env bash
# The producer's hot path: slice_of and Router::route (criterion,
# crates/queue-migrate-bench/benches/slice.rs) against seed 000's function in Node.js
# (bench/slice_node.js) on the same 1,024 keys, with a check that both give the same slices; then
# instructions per call under callgrind (deterministic, whatever the load of the machine).
#
#   bench/slice.sh
#   SLICE=path/to/slice-bench-binary bench/slice.sh   # built already: nothing is built
#
# Needs node and valgrind. Prints the figures and the ratios. The route_arcswap rows are the
# baseline of the same run: Router::route's read path before its sequence lock
# (crates/queue-migrate-bench/benches/slice.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
command -v node >/dev/null || { echo "needs node" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "machine: nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg), sha_ni: $(grep -q sha_ni /proc/cpuinfo && echo yes || echo no)"
# SLICE: a slice bench binary built already (then nothing is built).
if [ -n "${SLICE:-}" ]; then
  "$SLICE" --bench --warm-up-time 2 --measurement-time 6 2>/dev/null | tee "$work/rust.out"
else
  cargo bench -p queue-migrate-bench --bench slice -- --warm-up-time 2 --measurement-time 6 2>/dev/null | tee "$work/rust.out"
fi
node bench/slice_node.js > "$work/node.json"
echo "node: $(cat "$work/node.json")"

python3 - "$work/rust.out" "$work/node.json" <<'EOF'
import json, re, sys
rust = open(sys.argv[1]).read()
node = json.load(open(sys.argv[2]))
ours = re.search(r"checksum ([0-9a-f]{8})", rust).group(1)
if ours != node["checksum"]:
    sys.exit(f"slices differ: ours {ours}, node {node['checksum']}")
unit = {"ps": 1e-3, "ns": 1.0, "µs": 1e3, "us": 1e3, "ms": 1e6}
names = ("slice_of", "route_idle", "slice_of_under_swaps", "route_under_swaps", "route_under_swaps_1us", "route_under_swaps_10us", "route_under_swaps_1ms",
         "route_arcswap_idle", "route_arcswap_under_swaps")
ns = {}
for clock in ("thread_cpu", "wall"):
    for name in names:
        m = re.search(rf"{clock}/{name}\s+time:\s+\[\S+ \S+ (\S+) (\S+) \S+ \S+\]", rust)
        ns[clock, name] = float(m.group(1)) * unit[m.group(2)]
print(f"\nsame slices on all 1024 keys: checksum {ours} on both sides")
print("\n| function | thread CPU ns per call | vs slice_of | wall ns per call | vs slice_of |")
print("|---|---:|---:|---:|---:|")
for name in names:
    c, w = ns["thread_cpu", name], ns["wall", name]
    print(f"| {name} | {c:.1f} | {c / ns['thread_cpu', 'slice_of']:.2f} | {w:.1f} | {w / ns['wall', 'slice_of']:.2f} |")
nc, nw = node["cpu_ns_per_call"], node["ns_per_call"]
print(f"| node fatiaDe (the migration article's) | {nc:.1f} (process) | {nc / ns['thread_cpu', 'slice_of']:.1f} | {nw:.1f} | {nw / ns['wall', 'slice_of']:.1f} |")
for clock in ("thread_cpu", "wall"):
    r = ns[clock, "route_under_swaps"] / ns[clock, "slice_of_under_swaps"]
    print(f"({clock}: route_under_swaps / slice_of_under_swaps, both while the writer swaps: {r:.2f})")
EOF

if command -v valgrind >/dev/null; then
  exe=${SLICE:-}
  [ -n "$exe" ] || exe=$(cargo bench -p queue-migrate-bench --bench slice --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "slice" and m.get("executable"):
        print(m["executable"])')
  ir() { # what calls -> total instructions
    QM_SLICE_LOOP="$1:$2" valgrind --tool=callgrind --callgrind-out-file="$work/cg.$1.$2" "$exe" >/dev/null 2>&1
    sed -n 's/^summary: //p' "$work/cg.$1.$2"
  }
  echo
  echo "| loop (callgrind) | instructions per call | without the loop's own |"
  echo "|---|---:|---:|"
  base=$(( ($(ir empty 110000) - $(ir empty 10000)) ))
  for what in slice_of route route_arcswap; do
    total=$(( $(ir "$what" 110000) - $(ir "$what" 10000) ))
    awk -v t="$total" -v b="$base" -v w="$what" 'BEGIN {printf "| %s | %.0f | %.0f |\n", w, t / 100000, (t - b) / 100000}'
  done
  # Which compression function ran under valgrind (it may hide SHA-NI from the program).
  if command -v callgrind_annotate >/dev/null; then
    echo
    echo "SHA-256 compression under callgrind: $(callgrind_annotate "$work/cg.slice_of.110000" 2>/dev/null |
      grep -o 'sha2::[a-z0-9_:]*compress[a-z0-9_]*' | sort -u | tr '\n' ' ')"
  fi
fi
