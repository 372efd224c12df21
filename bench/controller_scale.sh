#!/usr/bin/env bash
# Controller scale: N active migrations (default 1000) with ten gates each, against one scrape
# endpoint (crates/queue-migrate-bench/benches/controller_scale.rs `serve`, its own process) and
# one real Prometheus.
#
#   bench/controller_scale.sh                   # 1000 migrations
#   MIGRATIONS=100 TICKS=3 RUN_SECONDS=30 bench/controller_scale.sh
#   BASE_HELPER=/path/to/old/controller_scale bench/controller_scale.sh   # before/after
#
# Two fleets, each in a fresh SQLite store: `same` (every migration asks Prometheus the same 5
# queries: a round of the daemon asks them once) and `distinct` (each migration's queries name it:
# same answers, 5,000 distinct texts per round). For each fleet:
# 1. setup: the migrations, each forced to slices[0];
# 2. ticks: TICKS rounds of daemon::tick_all in one process (wall and CPU of each round, and
#    Prometheus's CPU meanwhile); with BASE_HELPER (the helper built from an older commit), ROUNDS
#    rounds alternating that build's `ticks` and this one's on the same store: before/after in
#    one run;
# 3. run: the real `migrate run --interval 1s` for RUN_SECONDS (ticks back to back when a tick
#    takes longer than 1 s): ticks done, CPU and peak RSS of the daemon, CPU of Prometheus and of
#    the scrape endpoint meanwhile.
# Then the pieces of one migration's tick, each alone (where the time goes), PARTS calls each;
# COMPARE > 0 adds that many rounds alternating one-migration-after-the-other ticks (no sharing
# between migrations) and daemon::tick_all.
#
# AGE=H: before the ticks, give each migration's step H earlier rounds of evaluations (ten rows
# each, written straight into the SQLite file), as a step that has been evaluated H times has:
# a soak step of 12 h at a 15-s interval holds 2,880.
#
# RUN_SECONDS=0 or PARTS=0 leave those parts out. HELPER and MIGRATE: binaries built already.
# RUN_ARGS: more options for `migrate run` (e.g. `--queries-per-request 1`). BASE_MIGRATE (an
# older `migrate` of the same schema: an older schema refuses the store): its run too, before
# this build's, on the same store.
#
# Prometheus: PROM (default $QM_TEST_PROMETHEUS_URL from /tmp/qm-services/env, else
# http://127.0.0.1:9090); started with scripts/services.sh when it does not answer.
set -euo pipefail
cd "$(dirname "$0")/.."
MIGRATIONS=${MIGRATIONS:-1000}
TICKS=${TICKS:-5}
RUN_SECONDS=${RUN_SECONDS:-60}
PARTS=${PARTS:-500}
COMPARE=${COMPARE:-0}
ROUNDS=${ROUNDS:-3}
BASE_HELPER=${BASE_HELPER:-}
AGE=${AGE:-0}
FLEETS=${FLEETS:-same distinct}
RUN_ARGS=${RUN_ARGS:-}
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

# HELPER and MIGRATE may name binaries built already (then nothing is built).
if [ -z "${HELPER:-}" ]; then
  cargo build --release --bin migrate >&2
  MIGRATE="$CARGO_TARGET_DIR/release/migrate"
  HELPER=$(cargo bench -p queue-migrate-bench --bench controller_scale --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "controller_scale" and m.get("executable"):
        print(m["executable"])')
fi
MIGRATE=${MIGRATE:-$CARGO_TARGET_DIR/release/migrate}
[ -x "$HELPER" ] || { echo "cannot build the controller_scale helper" >&2; exit 1; }

# $work and pids, cleaned up at exit (MIGRATE as set above).
source bench/prelude.sh

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

# prom_cpu: Prometheus's CPU seconds so far (0 when its pid is unknown)
prom_cpu() { if [ -n "$prom_pid" ]; then cpu_of "$prom_pid"; else echo 0; fi; }

# ticks BIN STATE: K rounds of tick_all by BIN; prints "wall cpu rss hwm prom" (medians of the
# warm rounds; Prometheus CPU per round over all of them)
ticks() {
  local p0 p1 line
  p0=$(prom_cpu)
  line=$("$1" ticks "$2" "$TICKS" | tee -a "$work/ticks.log" | grep '^summary')
  p1=$(prom_cpu)
  echo "$line" | sed -n 's/.*median tick \([0-9.]*\) s wall, \([0-9.]*\) s CPU; RSS \([0-9.]*\) MiB, peak \([0-9.]*\).*/\1 \2 \3 \4/p' |
    awk -v p0="$p0" -v p1="$p1" -v k="$TICKS" '{ printf "%s %s %s %s %.2f\n", $1, $2, $3, $4, (p1 - p0) / k }'
}

run_daemon() { # run_daemon STATE LABEL: migrate run for RUN_SECONDS, one table row
  local state=$1 label=$2 daemon_pid addr t_first t0 t1 c0 c1 s0 s1 p0 p1 e0 e1 rss hwm
  # shellcheck disable=SC2086
  MIGRATE_LOG=error "$MIGRATE" --state "$state" run --listen 127.0.0.1:0 --interval 1s --id scale-bench \
    $RUN_ARGS > /dev/null 2> "$work/daemon.err" &
  daemon_pid=$!
  pids+=("$daemon_pid")
  addr=
  for _ in $(seq 100); do
    addr=$(sed -n 's|.* on http://\([0-9.:]*\) .*|\1|p' "$work/daemon.err" | head -1)
    [ -n "$addr" ] && curl -sf "http://$addr/healthz" >/dev/null && break
    sleep 0.1
  done
  done_ticks() { curl -sf "http://$addr/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ticks"])'; }
  # Wait for the first (cold) tick to end, then measure whole ticks.
  t_first=$(done_ticks)
  while [ "$(done_ticks)" -le "$t_first" ]; do sleep 0.05; done
  t0=$(done_ticks); c0=$(cpu_of "$daemon_pid"); s0=$(date +%s.%N)
  p0=$(prom_cpu); e0=$(cpu_of "$serve_pid")
  sleep "$RUN_SECONDS"
  t1=$(done_ticks); c1=$(cpu_of "$daemon_pid"); s1=$(date +%s.%N)
  p1=$(prom_cpu); e1=$(cpu_of "$serve_pid")
  rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$daemon_pid/status")
  hwm=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$daemon_pid/status")
  awk -v f="$label" -v m="$MIGRATIONS" -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v c0="$c0" -v c1="$c1" \
    -v p0="$p0" -v p1="$p1" -v e0="$e0" -v e1="$e1" -v rss="$rss" -v hwm="$hwm" 'BEGIN {
    n = t1 - t0; w = s1 - s0
    if (n < 1) { printf "| %s | %d | 0 | %.1f | > %.1f | - | - | - | %s | %s |\n", f, m, w, w, rss, hwm; exit }
    printf "| %s | %d | %d | %.1f | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", f, m, n, w, w / n, (c1 - c0) / n, (p1 - p0) / n, (e1 - e0) / n, rss, hwm
  }'
  kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
}

age_steps() { # age_steps DB H: H earlier rounds of the ten gates in each migration's step
  local t0=$SECONDS
  python3 - "$1" "$2" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
gates = [(g, "exit") for g in ("prometheus serving", "prometheus up", "head series",
         "error ratio low", "new consumes", "new consumer connected")]
gates += [(g, "guard") for g in ("prometheus still up", "targets", "error ratio breach",
          "old depth sane")]
migrations = db.execute("SELECT name, entered_at, state, step FROM migrations").fetchall()
for i in range(int(sys.argv[2])):
    db.executemany(
        "INSERT INTO gate_evaluations (migration, step_entered, state, step, gate, kind, query,"
        " value, old_value, samples, verdict, reason, held_since, peak, at)"
        " VALUES (?, ?, ?, ?, ?, ?, 'aged', 1.0, NULL, 1, 'pass', 'an earlier round', NULL, NULL, ?)",
        ((m, e, st, sp, g, k, e + i) for (m, e, st, sp) in migrations for (g, k) in gates))
    db.commit()
print("gate_evaluations:", db.execute("SELECT COUNT(*) FROM gate_evaluations").fetchone()[0], "rows")
PY
  echo "aged: $2 earlier rounds per migration's step ($((SECONDS - t0)) s)"
}

runs=()
for fleet in $FLEETS; do
  state="sqlite://$work/$fleet.db"
  echo
  "$HELPER" setup "$state" "$MIGRATIONS" "$PROM" "$SCRAPE" "$fleet"
  if [ "$AGE" -gt 0 ]; then age_steps "$work/$fleet.db" "$AGE"; fi
  echo
  echo "Fleet '$fleet': in-process daemon::tick_all, $TICKS rounds (the controller_scale bench: ticks):"
  echo
  "$HELPER" ticks "$state" "$TICKS"
  if [ -n "$BASE_HELPER" ]; then
    echo
    echo "Fleet '$fleet': before ($BASE_HELPER) and after (this build), alternating, $TICKS rounds each time;"
    echo "medians of the warm rounds (the first of each process is left out); Prometheus CPU per round:"
    echo
    echo "| turn | before: wall s | CPU s | Prometheus CPU s | after: wall s | CPU s | Prometheus CPU s | after / before (wall) | (CPU) |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for r in $(seq "$ROUNDS"); do
      read -r bw bc _ _ bp < <(ticks "$BASE_HELPER" "$state")
      read -r nw nc _ _ np < <(ticks "$HELPER" "$state")
      awk -v r="$r" -v bw="$bw" -v bc="$bc" -v bp="$bp" -v nw="$nw" -v nc="$nc" -v np="$np" 'BEGIN {
        printf "| %d | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r, bw, bc, bp, nw, nc, np, nw / bw, (bc > 0 ? nc / bc : 0)
      }'
    done
  fi
  if [ "$COMPARE" -gt 0 ]; then
    echo
    echo "Fleet '$fleet': one migration after the other against daemon::tick_all, alternating (the controller_scale bench: compare):"
    echo
    "$HELPER" compare "$state" "$COMPARE"
  fi
  if [ "$RUN_SECONDS" -gt 0 ]; then
    if [ -n "${BASE_MIGRATE:-}" ]; then
      runs+=("$(MIGRATE=$BASE_MIGRATE run_daemon "$state" "$fleet (before)")")
    fi
    runs+=("$(run_daemon "$state" "$fleet")")
  fi
done

if [ "$RUN_SECONDS" -gt 0 ]; then
  echo
  echo "migrate run --interval 1s for ${RUN_SECONDS}s, per fleet:"
  echo
  echo "| fleet | migrations | ticks | wall s | wall s per tick | daemon CPU s per tick | Prometheus CPU s per tick | scrape endpoint CPU s per tick | daemon RSS MiB | daemon peak RSS MiB |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  printf '%s\n' "${runs[@]}"
fi

if [ "$PARTS" -gt 0 ]; then
  echo
  echo "The pieces of one migration's tick, each alone ($PARTS calls each):"
  echo
  "$HELPER" parts "sqlite://$work/$fleet.db" "$PROM" "$SCRAPE" "$PARTS"
fi
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
