#!/usr/bin/env bash
# Controller before/after on an aged store: two `migrate` builds, each on its own copy of one
# store made by the OLDER build's controller_scale helper (so the newer build may upgrade its
# copy's schema), `migrate run --interval 1s` alternating between them, SECS seconds each,
# PASSES passes (the order flips every pass). Per run: warm ticks (the first two are left out:
# the cold one reads the whole stored history), wall and daemon CPU per tick, Prometheus CPU per
# tick, peak RSS, the longest tick (the cold one, from the daemon's /metrics; "-" for a build
# without queue_migrate_tick_seconds_max), and the scrape samples left in the store afterwards.
#
#   HELPER=<older controller_scale> BASE=<older migrate> NEW=<newer migrate> \
#     MIGRATIONS=1000 HISTORY_SCRAPES=500 bench/controller_before_after.sh
#
# HISTORY_SCRAPES=N: before the runs, give each migration's scrape source N earlier scrapes, 2 s
# apart (copies of its newest one, written straight into SQLite), as a source scraped for that
# long holds; the daemon keeps up to 20 minutes (600 such scrapes). The fleet is the `distinct`
# one of bench/controller_scale.sh, against the Prometheus of scripts/services.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${HELPER:?the controller_scale helper of the older build}" "${BASE:?the older migrate}" "${NEW:?the newer migrate}"
MIGRATIONS=${MIGRATIONS:-1000}
HISTORY_SCRAPES=${HISTORY_SCRAPES:-0}
SECS=${SECS:-25}
PASSES=${PASSES:-3}
PROM=${PROM:-http://127.0.0.1:9090}
curl -sf "$PROM/-/ready" >/dev/null || bash scripts/services.sh start prometheus >&2
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
"$HELPER" serve 127.0.0.1:0 > "$work/serve.out" &
pids+=($!)
for _ in $(seq 50); do [ -s "$work/serve.out" ] && break; sleep 0.1; done
read -r SCRAPE _ < "$work/serve.out"
"$HELPER" setup "sqlite://$work/fleet.db" "$MIGRATIONS" "$PROM" "$SCRAPE" distinct > /dev/null
"$HELPER" ticks "sqlite://$work/fleet.db" 2 > /dev/null
if [ "$HISTORY_SCRAPES" -gt 0 ]; then
  python3 - "$work/fleet.db" "$HISTORY_SCRAPES" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = int(sys.argv[2])
if db.execute("SELECT 1 FROM sqlite_master WHERE name = 'scrapes'").fetchone():
    # One row per scrape (SQLite schema 6 on).
    newest = db.execute("SELECT migration, source, at, samples FROM scrapes s WHERE at = "
                        "(SELECT MAX(at) FROM scrapes t WHERE t.migration = s.migration AND t.source = s.source)").fetchall()
    for (m, s, at, samples) in newest:
        db.executemany("INSERT OR IGNORE INTO scrapes (migration, source, at, samples) VALUES (?, ?, ?, ?)",
                       ((m, s, at - 2000 * k, samples) for k in range(1, n + 1)))
else:
    newest = db.execute("SELECT migration, source, MAX(at) FROM scrape_times GROUP BY 1, 2").fetchall()
    for (m, s, at) in newest:
        pts = db.execute("SELECT series, metric, labels, value FROM scrape_points"
                         " WHERE migration = ? AND source = ? AND at = ?", (m, s, at)).fetchall()
        db.executemany("INSERT OR IGNORE INTO scrape_times (migration, source, at) VALUES (?, ?, ?)",
                       ((m, s, at - 2000 * k) for k in range(1, n + 1)))
        db.executemany("INSERT OR IGNORE INTO scrape_points (migration, source, series, metric, labels, at, value)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?)",
                       ((m, s, se, me, la, at - 2000 * k, v) for k in range(1, n + 1) for (se, me, la, v) in pts))
db.commit()
PY
fi
SRC=$work/fleet.db
cp "$SRC" "$work/base.db"
cp "$SRC" "$work/new.db"
samples() { # the scrape samples stored, whichever schema the store has
  python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
new = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'scrapes'").fetchone()
q = "SELECT COALESCE(SUM(json_array_length(samples)), 0) FROM scrapes" if new else "SELECT COUNT(*) FROM scrape_points"
print(db.execute(q).fetchone()[0])
PY
}
cpu_of() { awk '{ split($0, a, ") "); split(a[2], f, " "); printf "%.2f", (f[12] + f[13]) / 100 }' "/proc/$1/stat"; }
prom_pid=$(pgrep -f '^[^ ]*prometheus .*--config' | head -1 || true)
prom_cpu() { if [ -n "$prom_pid" ]; then cpu_of "$prom_pid"; else echo 0; fi; }

one() { # one LABEL BIN DB: a row of the table
  local label=$1 bin=$2 db=$work/$3.db daemon_pid addr t t0 t1 c0 c1 s0 s1 p0 p1 hwm
  MIGRATE_LOG=error "$bin" --state "sqlite://$db" run --listen 127.0.0.1:0 --interval 1s --id before-after \
    > /dev/null 2> "$work/daemon.err" &
  daemon_pid=$!
  pids+=("$daemon_pid")
  addr=
  for _ in $(seq 600); do
    addr=$(sed -n 's|.* on http://\([0-9.:]*\) .*|\1|p' "$work/daemon.err" | head -1)
    [ -n "$addr" ] && curl -sf "http://$addr/healthz" >/dev/null && break
    sleep 0.1
  done
  done_ticks() { curl -sf "http://$addr/healthz" | python3 -c 'import json, sys; print(json.load(sys.stdin)["ticks"])'; }
  # Leave out the cold tick (it reads the whole stored history) and the one after it.
  for _ in 1 2; do
    t=$(done_ticks)
    while [ "$(done_ticks)" -le "$t" ]; do sleep 0.05; done
  done
  t0=$(done_ticks); c0=$(cpu_of "$daemon_pid"); s0=$(date +%s.%N); p0=$(prom_cpu)
  sleep "$SECS"
  t1=$(done_ticks); c1=$(cpu_of "$daemon_pid"); s1=$(date +%s.%N); p1=$(prom_cpu)
  # Peak RSS since the start: on a first start of an older store it includes the upgrade.
  hwm=$(awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$daemon_pid/status")
  longest=$(curl -sf "http://$addr/metrics" | awk '$1 == "queue_migrate_tick_seconds_max" {printf "%.2f", $2; found = 1} END {if (!found) print "-"}')
  kill "$daemon_pid"; wait "$daemon_pid" 2>/dev/null || true
  awk -v l="$label" -v t0="$t0" -v t1="$t1" -v s0="$s0" -v s1="$s1" -v c0="$c0" -v c1="$c1" -v p0="$p0" -v p1="$p1" \
    -v hwm="$hwm" -v longest="$longest" -v pts="$(samples "$db")" 'BEGIN {
    n = t1 - t0
    printf "| %s | %d | %.2f | %.2f | %.2f | %s | %s | %d |\n", l, n, (s1 - s0) / n, (c1 - c0) / n, (p1 - p0) / n, hwm, longest, pts
  }'
}

echo "machine: nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg); $MIGRATIONS migrations, $(samples "$SRC") samples stored"
echo
echo "| build | ticks | wall s per tick | daemon CPU s per tick | Prometheus CPU s per tick | daemon peak RSS MiB | longest tick s | samples after |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for pass in $(seq "$PASSES"); do
  if [ $((pass % 2)) = 1 ]; then
    one before "$BASE" base; one after "$NEW" new
  else
    one after "$NEW" new; one before "$BASE" base
  fi
done
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
