#!/usr/bin/env bash
# Dead-letter triage against Node.js (bench/triage_node.js) on several generated exports, in one
# run, as ratios (the machine may be shared: compare within a run, not across runs).
#
#   bench/triage_matrix.sh                  # 500,000 lines a file, best of 3 runs each
#   LINES=100000 RUNS=1 bench/triage_matrix.sh
#   MIGRATE=path/to/migrate bench/triage_matrix.sh  # default: target/release/migrate
#
# Files (`migrate dlq generate`): "few" = few large groups (--tail 0), seeds 42 and 43; "tail" = a
# long tail of one-offs (--tail 0.03: ~15,000 groups at 500,000 lines), seeds 7 and 8. Each run
# is timed with GNU time (CPU = user + system; RSS = peak); the lowest CPU of RUNS runs is kept.
# Prints Markdown tables: CPU against Node in both formats (--jobs 1), MiB per CPU-second, RSS,
# the --jobs 2 wall-clock speedup, and what the JSON of the groups costs against reading the file.
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${LINES:-500000}
RUNS=${RUNS:-3}
MIGRATE=${MIGRATE:-target/release/migrate}
if [ ! -x "$MIGRATE" ]; then cargo build --release --features cli --bin migrate; fi
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }
command -v node >/dev/null || { echo "needs node" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Best of RUNS: prints "cpu_s wall_s rss_kib" of the run with the lowest CPU.
measure() { # out, command...
  local out=$1 best="" line
  shift
  for _ in $(seq "$RUNS"); do
    /usr/bin/time -f '%U %S %e %M' -o "$work/t" "$@" > "$out" 2> /dev/null || true
    line=$(awk '{printf "%.3f %.3f %d\n", $1 + $2, $3, $4}' "$work/t")
    if [ -z "$best" ] || awk -v a="$line" -v b="$best" 'BEGIN{split(a,x," "); split(b,y," "); exit !(x[1] < y[1])}'; then
      best=$line
    fi
  done
  echo "$best"
}

same_groups() { # ours.json node.json: same groups and counts (see bench/triage.sh for the two
  # documented representation differences it allows).
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
    console.log(a.length);
  ' "$1" "$2"
}

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); cores: $(nproc); RUNS=$RUNS" >&2
declare -a rows speed jsoncost
for spec in "few 42 0" "few 43 0" "tail 7 0.03" "tail 8 0.03"; do
  read -r shape seed tail <<< "$spec"
  f="$work/$shape-$seed.ndjson"
  "$MIGRATE" dlq generate --lines "$LINES" --seed "$seed" --tail "$tail" --tricky 0.01 \
    --binary 0.02 > "$f"
  size=$(stat -c %s "$f")
  read -r cat_cpu _ _ < <(measure /dev/null cat "$f")
  read -r wc_cpu _ _ < <(measure /dev/null wc -l "$f")
  read -r json_cpu json_wall json_rss < <(measure "$work/ours.json" "$MIGRATE" dlq triage "$f" --format json --jobs 1)
  read -r table_cpu table_wall table_rss < <(measure /dev/null "$MIGRATE" dlq triage "$f" --jobs 1)
  read -r j2_cpu j2_wall _ < <(measure /dev/null "$MIGRATE" dlq triage "$f" --format json --jobs 2)
  read -r node_cpu node_wall node_rss < <(measure "$work/node.json" node bench/triage_node.js "$f")
  groups=$(same_groups "$work/ours.json" "$work/node.json")
  rows+=("$(awk -v s="$shape" -v seed="$seed" -v g="$groups" -v sz="$size" -v j="$json_cpu" -v t="$table_cpu" \
    -v n="$node_cpu" -v jr="$json_rss" -v nr="$node_rss" 'BEGIN {
      printf "| %s, seed %s | %d | %.0f | %.2f | %.2f | %.2f | %.1f× | %.1f× | %.0f | %.0f | %.1f | %.1f |",
        s, seed, g, sz/1048576, n, j, t, n/j, n/t, sz/1048576/j, sz/1048576/t, jr/1024, nr/1024 }')")
  speed+=("$(awk -v s="$shape" -v seed="$seed" -v w1="$json_wall" -v w2="$j2_wall" -v c1="$json_cpu" -v c2="$j2_cpu" 'BEGIN {
      printf "| %s, seed %s | %.2f | %.2f | %.2f× | %.2f | %.2f |", s, seed, w1, w2, w1/w2, c1, c2 }')")
  jsoncost+=("$(awk -v s="$shape" -v seed="$seed" -v g="$groups" -v j="$json_cpu" -v t="$table_cpu" -v c="$cat_cpu" -v w="$wc_cpu" 'BEGIN {
      printf "| %s, seed %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f |", s, seed, g, j, t, j - t, c, w }')")
  echo "$shape $seed: $groups groups, $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  rm -f "$f"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo "| export ($LINES lines) | groups | MiB | Node CPU s | json CPU s | table CPU s | Node/json | Node/table | json MiB/CPU-s | table MiB/CPU-s | RSS MiB | Node RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
echo "| export | --jobs 1 wall s | --jobs 2 wall s | speedup | --jobs 1 CPU s | --jobs 2 CPU s |"
echo "|---|---:|---:|---:|---:|---:|"
printf '%s\n' "${speed[@]}"
echo
echo "| export | groups | json CPU s | table CPU s | JSON output (difference) | cat CPU s | wc -l CPU s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${jsoncost[@]}"
