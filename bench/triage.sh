#!/usr/bin/env bash
# Dead-letter triage throughput and peak memory: `migrate dlq triage` against a straightforward
# Node.js implementation of the same grouping (bench/triage_node.js), on the same generated file.
#
#   bench/triage.sh              # 2,000,000 lines
#   LINES=200000 bench/triage.sh
#   MIGRATE=path/to/migrate bench/triage.sh   # default: target/release/migrate (built if missing)
#
# Needs node and GNU time (/usr/bin/time; Debian package `time`). Prints a Markdown table.
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${LINES:-2000000}
MIGRATE=${MIGRATE:-target/release/migrate}
if [ ! -x "$MIGRATE" ]; then cargo build --release --bin migrate; fi
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }
command -v node >/dev/null || { echo "needs node" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Concentrated distribution (5 causes) + a 0.1% tail of one-offs + tricky messages, binary
# payloads and a few corrupt lines; and a second file without tail, for the memory-scaling check.
"$MIGRATE" dlq generate --lines "$LINES" --seed 42 --tail 0.001 --tricky 0.01 --binary 0.02 \
  --corrupt 0.0005 > "$work/export.ndjson"
"$MIGRATE" dlq generate --lines $((LINES / 10)) --seed 42 --tail 0 --binary 0.02 > "$work/small.ndjson"
"$MIGRATE" dlq generate --lines "$LINES" --seed 43 --tail 0 --binary 0.02 > "$work/big.ndjson"

measure() { # name, output, command...
  local name=$1 out=$2
  shift 2
  /usr/bin/time -v "$@" > "$out" 2> "$work/$name.time" || true
  local wall rss cpu
  wall=$(grep 'Elapsed (wall clock)' "$work/$name.time" | awk '{print $NF}')
  rss=$(grep 'Maximum resident set size' "$work/$name.time" | awk '{print $NF}')
  cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$work/$name.time")
  echo "$wall $rss $cpu"
}

secs() { # m:ss.ss or h:mm:ss -> seconds
  awk -F: '{ if (NF == 3) print $1*3600 + $2*60 + $3; else print $1*60 + $2 }' <<< "$1"
}

size=$(stat -c %s "$work/export.ndjson")
read -r ours_wall ours_rss ours_cpu < <(measure ours "$work/ours.json" "$MIGRATE" dlq triage "$work/export.ndjson" --format json)
read -r node_wall node_rss node_cpu < <(measure node "$work/node.json" node bench/triage_node.js "$work/export.ndjson")
read -r small_wall small_rss small_cpu < <(measure small /dev/null "$MIGRATE" dlq triage "$work/small.ndjson" --format json)
read -r big_wall big_rss big_cpu < <(measure big /dev/null "$MIGRATE" dlq triage "$work/big.ndjson" --format json)

# Same groups and counts on both sides, after two documented representation differences: where
# JS holds a lone surrogate (a cut inside an emoji) we hold the text \udXXX; and node's readline
# decodes a non-UTF-8 line lossily (U+FFFD) and keeps it, where we skip it as not an envelope.
# (tests/integration/brokers/dlq_triage_seed.rs compares everything, samples and spans included, with the article's
# code.)
node -e '
  const fs = require("fs");
  const fix = (s) => s.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g,
    (c) => "\\u" + c.charCodeAt(0).toString(16));
  const a = JSON.parse(fs.readFileSync(process.argv[1]));
  const b = JSON.parse(fs.readFileSync(process.argv[2]));
  const lossy = b.filter((g) => JSON.stringify(g).includes("\ufffd"));
  const k = (g) => `${g.errorClass}\u0000${g.consumerVersion}\u0000${fix(g.signature)}\u0000${g.count}`;
  const sa = a.map(k).sort().join("\n");
  const sb = b.filter((g) => !lossy.includes(g)).map(k).sort().join("\n");
  if (sa !== sb) { console.error("MISMATCH between migrate and node groups"); process.exit(1); }
  console.error(`groups agree: ${a.length} (node also kept ${lossy.length} groups of lossily decoded non-UTF-8 lines)`);
' "$work/ours.json" "$work/node.json"

ours_s=$(secs "$ours_wall"); node_s=$(secs "$node_wall")
groups=$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).length)' "$work/ours.json")
echo
echo "| implementation | lines | file MiB | groups | CPU s (user+sys) | lines per CPU s | MiB per CPU s | wall s | peak RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
row() { # name, cpu, wall, rss
  awk -v name="$1" -v n="$LINES" -v sz="$size" -v g="$groups" -v c="$2" -v w="$3" -v r="$4" 'BEGIN {
    printf "| %s | %d | %.0f | %d | %.2f | %.0f | %.1f | %.2f | %.1f |\n", name, n, sz/1048576, g, c, n/c, sz/1048576/c, w, r/1024 }'
}
row "migrate dlq triage (Rust, release)" "$ours_cpu" "$ours_s" "$ours_rss"
row "bench/triage_node.js (Node $(node --version))" "$node_cpu" "$node_s" "$node_rss"
echo
echo "Memory against entries, same groups (no tail):"
echo
echo "| lines | CPU s | wall s | peak RSS MiB |"
echo "|---:|---:|---:|---:|"
echo "| $((LINES / 10)) | $small_cpu | $(secs "$small_wall") | $(awk -v r="$small_rss" 'BEGIN{printf "%.1f", r/1024}') |"
echo "| $LINES | $big_cpu | $(secs "$big_wall") | $(awk -v r="$big_rss" 'BEGIN{printf "%.1f", r/1024}') |"
