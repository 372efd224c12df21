#!/usr/bin/env bash
# Dead-letter triage against Node.js (bench/triage_node.js) on several generated exports, in one
# run, as ratios (the machine may be shared: compare within a run, not across runs).
#
#   bench/triage_matrix.sh                  # 500,000 lines a file, best of 3 runs each
#   LINES=100000 RUNS=1 bench/triage_matrix.sh
#   MIGRATE=path/to/migrate bench/triage_matrix.sh  # default: $CARGO_TARGET_DIR/release/migrate
#   BASE=path/to/other/migrate bench/triage_matrix.sh  # also that build, in the same run
#
# Files (`migrate dlq generate`): "few" = few large groups (--tail 0), seeds 42 and 43; "tail" = a
# long tail of one-offs (--tail 0.03: ~15,000 groups at 500,000 lines), seeds 7 and 8; 1% tricky
# messages and 2% binary payloads in all. Each command is timed by its own rusage (CPU = user +
# system; RSS = peak); the runs go round robin over the commands (run 1 of each, then run 2...),
# and the lowest CPU of RUNS runs is kept. CPU, not wall time, is the figure: other processes
# competing for the cores stretch wall time much more than CPU time.
# Prints Markdown tables: CPU against Node in both formats (--jobs 1), MiB per CPU-second, RSS
# (and per 10,000 groups), the --jobs 2 wall-clock speedup with the load average, what the JSON
# of the groups costs against reading the file, and BASE against MIGRATE when BASE is given.
set -euo pipefail
cd "$(dirname "$0")/.."
LINES=${LINES:-500000}
RUNS=${RUNS:-3}
MIGRATE=${MIGRATE:-${CARGO_TARGET_DIR:-target}/release/migrate}
BASE=${BASE:-}
if [ ! -x "$MIGRATE" ]; then cargo build --release --all-features --bin migrate; fi
command -v python3 >/dev/null || { echo "needs python3" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time: apt-get install time" >&2; exit 2; }
command -v node >/dev/null || { echo "needs node (scripts/ui_tools.sh install)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One run: prints "cpu_s wall_s rss_kib". CPU is the run's own rusage (wait4), to the microsecond
# (GNU time prints hundredths: too coarse for what the JSON costs); it includes about 3 ms
# of harness, measured on `true` (the forked Python child up to its exec, and GNU time, to report
# the peak RSS: a process's peak survives exec, so Python's own would show if it were the
# parent). A command that fails stops the whole script (a substitution's status is not seen by
# set -e, so once() signals the script itself).
trap 'exit 1' TERM
once() { # out, command...
  python3 - "$work/rss" "$@" << 'PY' || { echo "failed: ${*:2}" >&2; kill -TERM $$; exit 1; }
import os, sys, time
rss, out, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
start = time.monotonic()
pid = os.fork()
if pid == 0:
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
                            (2, os.devnull, os.O_WRONLY)):
        os.dup2(os.open(path, flags, 0o644), fd)
    os.execv("/usr/bin/time", ["time", "-f", "%M", "-o", rss, *cmd])
_, status, ru = os.wait4(pid, 0)
wall = time.monotonic() - start
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(f"exit status {os.waitstatus_to_exitcode(status)}")
with open(rss) as f:
    peak = f.read().split()[-1]
print(f"{ru.ru_utime + ru.ru_stime:.4f} {wall:.4f} {peak}")
PY
}

# Of two "cpu wall rss" lines, the one with the lower CPU ($1 may be empty).
lower() {
  if [ -z "$1" ] || awk -v a="$2" -v b="$1" 'BEGIN{split(a,x," "); split(b,y," "); exit !(x[1] < y[1])}'; then
    echo "$2"
  else
    echo "$1"
  fi
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
declare -a rows speed jsoncost base_rows
few_rss=() few_groups=() tail_rss=() tail_groups=()
for spec in "few 42 0" "few 43 0" "tail 7 0.03" "tail 8 0.03"; do
  read -r shape seed tail <<< "$spec"
  f="$work/$shape-$seed.ndjson"
  "$MIGRATE" dlq generate --lines "$LINES" --seed "$seed" --tail "$tail" --tricky 0.01 \
    --binary 0.02 > "$f"
  size=$(stat -c %s "$f")
  cat "$f" > /dev/null # in the page cache for everyone
  cat_b="" wc_b="" json_b="" table_b="" j2_b="" node_b="" bjson_b="" btable_b=""
  load_min="" load_max=""
  for _ in $(seq "$RUNS"); do
    cat_b=$(lower "$cat_b" "$(once /dev/null cat "$f")")
    wc_b=$(lower "$wc_b" "$(once /dev/null wc -l "$f")")
    json_b=$(lower "$json_b" "$(once "$work/ours.json" "$MIGRATE" dlq triage "$f" --format json --jobs 1)")
    table_b=$(lower "$table_b" "$(once /dev/null "$MIGRATE" dlq triage "$f" --jobs 1)")
    j2_b=$(lower "$j2_b" "$(once "$work/ours2.json" "$MIGRATE" dlq triage "$f" --format json --jobs 2)")
    node_b=$(lower "$node_b" "$(once "$work/node.json" node bench/triage_node.js "$f")")
    if [ -n "$BASE" ]; then
      bjson_b=$(lower "$bjson_b" "$(once "$work/base.json" "$BASE" dlq triage "$f" --format json --jobs 1)")
      btable_b=$(lower "$btable_b" "$(once /dev/null "$BASE" dlq triage "$f" --jobs 1)")
    fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    load_min=$(awk -v a="$load" -v b="${load_min:-$load}" 'BEGIN{print (a < b ? a : b)}')
    load_max=$(awk -v a="$load" -v b="${load_max:-$load}" 'BEGIN{print (a > b ? a : b)}')
  done
  cmp -s "$work/ours.json" "$work/ours2.json" || { echo "--jobs 2 printed another report" >&2; exit 1; }
  if [ -n "$BASE" ]; then
    cmp -s "$work/ours.json" "$work/base.json" || { echo "BASE printed another report" >&2; exit 1; }
  fi
  groups=$(same_groups "$work/ours.json" "$work/node.json")
  read -r cat_cpu _ _ <<< "$cat_b"
  read -r wc_cpu _ _ <<< "$wc_b"
  read -r json_cpu json_wall json_rss <<< "$json_b"
  read -r table_cpu _ table_rss <<< "$table_b"
  read -r j2_cpu j2_wall _ <<< "$j2_b"
  read -r node_cpu _ node_rss <<< "$node_b"
  rss=$((json_rss > table_rss ? json_rss : table_rss))
  if [ "$shape" = few ]; then few_rss+=("$rss"); few_groups+=("$groups"); else tail_rss+=("$rss"); tail_groups+=("$groups"); fi
  rows+=("$(awk -v s="$shape" -v seed="$seed" -v g="$groups" -v sz="$size" -v j="$json_cpu" -v t="$table_cpu" \
    -v n="$node_cpu" -v jr="$json_rss" -v tr="$table_rss" -v nr="$node_rss" 'BEGIN {
      printf "| %s, seed %s | %d | %.0f | %.2f | %.3f | %.3f | %.1f× | %.1f× | %.0f | %.0f | %.1f / %.1f | %.1f |",
        s, seed, g, sz/1048576, n, j, t, n/j, n/t, sz/1048576/j, sz/1048576/t, jr/1024, tr/1024, nr/1024 }')")
  speed+=("$(awk -v s="$shape" -v seed="$seed" -v w1="$json_wall" -v w2="$j2_wall" -v c1="$json_cpu" -v c2="$j2_cpu" \
    -v l1="$load_min" -v l2="$load_max" 'BEGIN {
      printf "| %s, seed %s | %.3f | %.3f | %.2f× | %.3f | %.3f | %s–%s |", s, seed, w1, w2, w1/w2, c1, c2, l1, l2 }')")
  jsoncost+=("$(awk -v s="$shape" -v seed="$seed" -v g="$groups" -v j="$json_cpu" -v t="$table_cpu" -v c="$cat_cpu" -v w="$wc_cpu" 'BEGIN {
      printf "| %s, seed %s | %d | %.3f | %.3f | %+.3f | %.3f | %.3f |", s, seed, g, j, t, j - t, c, w }')")
  if [ -n "$BASE" ]; then
    read -r bjson_cpu _ bjson_rss <<< "$bjson_b"
    read -r btable_cpu _ _ <<< "$btable_b"
    base_rows+=("$(awk -v s="$shape" -v seed="$seed" -v bj="$bjson_cpu" -v bt="$btable_cpu" -v j="$json_cpu" -v t="$table_cpu" \
      -v br="$bjson_rss" -v r="$json_rss" 'BEGIN {
        printf "| %s, seed %s | %.3f | %.3f | %.2f× | %.3f | %.3f | %.2f× | %.1f | %.1f |", s, seed, bj, j, bj/j, bt, t, bt/t, br/1024, r/1024 }')")
  fi
  echo "$shape $seed: $groups groups, load $load_min–$load_max" >&2
  rm -f "$f"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

echo "| export ($LINES lines) | groups | MiB | Node CPU s | json CPU s | table CPU s | Node/json | Node/table | json MiB/CPU-s | table MiB/CPU-s | RSS MiB json / table | Node RSS MiB |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${rows[@]}"
echo
# RSS per 10,000 groups: the tail files' RSS over the few-group files', per group.
awk -v fr="${few_rss[*]}" -v fg="${few_groups[*]}" -v tr="${tail_rss[*]}" -v tg="${tail_groups[*]}" 'BEGIN {
  n = split(fr, a, " "); split(fg, b, " "); split(tr, c, " "); split(tg, d, " ");
  for (i = 1; i <= n; i++) { r0 += a[i] / n; g0 += b[i] / n; r1 += c[i] / n; g1 += d[i] / n }
  printf "RSS: %.1f MiB at %.0f groups, %.1f MiB at %.0f groups: %.1f MiB per 10,000 groups\n",
    r0/1024, g0, r1/1024, g1, (r1 - r0) / 1024 / (g1 - g0) * 10000 }'
echo
echo "| export | --jobs 1 wall s | --jobs 2 wall s | speedup | --jobs 1 CPU s | --jobs 2 CPU s | load average |"
echo "|---|---:|---:|---:|---:|---:|---|"
printf '%s\n' "${speed[@]}"
echo
echo "| export | groups | json CPU s | table CPU s | JSON output (difference) | cat CPU s | wc -l CPU s |"
echo "|---|---:|---:|---:|---:|---:|---:|"
printf '%s\n' "${jsoncost[@]}"
if [ -n "$BASE" ]; then
  echo
  echo "| export | BASE json CPU s | json CPU s | BASE/this | BASE table CPU s | table CPU s | BASE/this | BASE RSS MiB | RSS MiB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${base_rows[@]}"
fi
