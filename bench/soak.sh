#!/usr/bin/env bash
# Soak: one `migrate run` driving MIGRATIONS migrations (default 50) at a 1-s interval for
# DURATION (default 30m) with a short retention, each table's rows, the store's size and the
# daemon's RSS sampled every SAMPLE (default 60s). After the retention horizon (RETAIN, default
# 5m, plus a minute of the daemon's pruning pace) the store and the RSS must stay flat.
#
#   bench/soak.sh                                  # 30 minutes, 50 migrations, --retain 5m
#   DURATION=5m RETAIN=1m bench/soak.sh            # a short check
#   MIGRATE=/path/to/migrate DURATION=2m bench/soak.sh
#
# Each migration is a copy of a plan with six gates (three exit, three guards, one `for:` and one
# rate), forced into slices[0] and not auto-advanced: every round evaluates and records six gates
# per migration, as a fleet waiting on people does. Its scrape source is a small HTTP server of
# this script (python3), whose counter moves at every scrape. The store is SQLite (a temporary
# file). The table at the end is the samples; the last line says whether the rows stayed flat
# after the horizon (within TOLERANCE, default 10%, of the first sample after it).
set -euo pipefail
cd "$(dirname "$0")/.."
MIGRATIONS=${MIGRATIONS:-50}
DURATION=${DURATION:-30m}
RETAIN=${RETAIN:-5m}
SAMPLE=${SAMPLE:-60}
INTERVAL=${INTERVAL:-1s}
TOLERANCE=${TOLERANCE:-10}

seconds() { # humantime-ish: 90, 90s, 5m, 2h -> seconds
  case "$1" in
    *h) echo $(( ${1%h} * 3600 )) ;;
    *m) echo $(( ${1%m} * 60 )) ;;
    *s) echo "${1%s}" ;;
    *) echo "$1" ;;
  esac
}
duration_s=$(seconds "$DURATION")
retain_s=$(seconds "$RETAIN")

# MIGRATE, $work and pids, cleaned up at exit.
source bench/prelude.sh

# The scrape endpoint: a counter that moves at every scrape, a depth, a ready flag.
python3 - "$work/scrape.port" <<'PY' &
import http.server, sys, threading
lock = threading.Lock()
count = [0]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with lock:
            count[0] += 1
            n = count[0]
        body = (
            "# TYPE soak_messages_total counter\n"
            f"soak_messages_total{{queue=\"orders\"}} {n}\n"
            "# TYPE soak_errors_total counter\n"
            f"soak_errors_total{{queue=\"orders\"}} {n // 1000}\n"
            "soak_depth{queue=\"orders\"} 3\n"
            "soak_consumer_ready 1\n"
            "soak_up 1\n"
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
pids+=($!)
for _ in $(seq 50); do [ -s "$work/scrape.port" ] && break; sleep 0.1; done
export QM_SOAK_SCRAPE="http://127.0.0.1:$(cat "$work/scrape.port")/metrics"

state="$work/state.db"
export MIGRATE_STATE="$state" MIGRATE_ACTOR=soak
t0=$SECONDS
for i in $(seq -w 1 "$MIGRATIONS"); do
  name="soak-$i"
  cat > "$work/$name.yaml" <<EOF
version: 1
name: $name
slices: 8
auto_advance: false
brokers:
  old: { name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: $name, dead_letter: $name.dlq }
  new: { name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: SOAK$i }
retry: { max_backoff: 1m, visibility_timeout: 30s }
dedup: { window: 1d, max_redelivery_delay: 1m, max_consumer_delay: 1m, reprocess_margin: 12h }
sources:
  app: { scrape: "\${QM_SOAK_SCRAPE}" }
routing: { file: $name.routing.json }
phases:
  consume_dual:
    min_duration: 0s
    exit:
      - { name: consumer ready, source: app, query: soak_consumer_ready, pass_if: ">= 1" }
  synthetic:
    min_duration: 0s
    exit:
      - { name: consumer ready, source: app, query: soak_consumer_ready, pass_if: ">= 1" }
  slices:
    steps: [1, 4, 8]
    observe: 1m
    exit:
      - { name: error rate low, source: app, query: 'sum(rate(soak_errors_total[1m]))', pass_if: "< 100" }
      - { name: flowing, source: app, query: 'rate(soak_messages_total{queue="orders"}[1m])', pass_if: "> 0", for: 10m }
      - { name: depth sane, source: app, query: 'max(soak_depth)', pass_if: "< 1000" }
    guard:
      - { name: up, source: app, query: soak_up, pass_if: "== 1" }
      - { name: errors bounded, source: app, query: 'increase(soak_errors_total[1m])', pass_if: "< 1000000" }
      - { name: depth bounded, source: app, query: soak_depth, pass_if: "< 100000" }
    on_breach: alert
  drain:
    quiet: 1m
    exit:
      - { name: depth zero, source: app, query: soak_depth, pass_if: "== 0", for: quiet }
  disconnect:
    retain: 1m
    exit:
      - { name: up, source: app, query: soak_up, pass_if: "== 1" }
EOF
  "$MIGRATE" init "$work/$name.yaml" > /dev/null
  for _ in 1 2 3; do
    "$MIGRATE" advance "$name" --force --reason "soak setup" > /dev/null
  done
done
echo "setup: $MIGRATIONS migrations in slices[0] ($((SECONDS - t0)) s)"
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "binary: $MIGRATE ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"

MIGRATE_LOG=warn "$MIGRATE" run --listen 127.0.0.1:0 --interval "$INTERVAL" --retain "$RETAIN" \
  --id soak > /dev/null 2> "$work/daemon.err" &
daemon=$!
pids+=("$daemon")
addr=
for _ in $(seq 100); do
  addr=$(sed -n 's|.* on http://\([0-9.:]*\) .*|\1|p' "$work/daemon.err" | head -1)
  [ -n "$addr" ] && curl -sf "http://$addr/healthz" > /dev/null && break
  sleep 0.1
done
[ -n "$addr" ] || { cat "$work/daemon.err" >&2; exit 1; }

sample() { # minute: rows per table, store size, RSS, ticks
  local rows
  rows=$(python3 - "$state" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=30)
n = lambda t: db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0]
print(n("gate_evaluations"), n("gate_memory"), n("scrapes"), n("journal"))
PY
)
  local size rss ticks pruned
  size=$(du -cm "$state"* | tail -1 | cut -f1)
  rss=$(awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$daemon/status")
  ticks=$(curl -sf "http://$addr/healthz" | python3 -c 'import json,sys; print(json.load(sys.stdin)["ticks"])')
  pruned=$(curl -sf "http://$addr/metrics" | awk '/^queue_migrate_pruned_rows_total/ {s += $2} END {print s + 0}')
  echo "$rows $size $rss $ticks $pruned"
}

echo
echo "migrate run --interval $INTERVAL --retain $RETAIN, $MIGRATIONS migrations x 6 gates, for $DURATION, a sample every ${SAMPLE}s:"
echo
echo "| minute | ticks | gate_evaluations | gate_memory | scrapes | journal | store MiB | RSS MiB | pruned rows (total) |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
start=$SECONDS
samples=()
while :; do
  elapsed=$((SECONDS - start))
  read -r ev mem sc jo size rss ticks pruned < <(sample)
  printf '| %.1f | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$(echo "$elapsed / 60" | bc -l)" "$ticks" "$ev" "$mem" "$sc" "$jo" "$size" "$rss" "$pruned"
  samples+=("$elapsed $ev $sc $size $rss")
  [ "$elapsed" -ge "$duration_s" ] && break
  sleep "$SAMPLE"
done
kill "$daemon"; wait "$daemon" 2>/dev/null || true
grep -v '^migrate run: ' "$work/daemon.err" | head -5 >&2 || true

# Flat after the horizon: the retention plus a minute. Between two prunes (about every 10 s)
# the history grows by what the rounds write, so single samples jitter by up to that much; the
# verdict compares the largest sample of the last half after the horizon with the largest of the
# first half (a table that keeps growing exceeds it; one held at the retention does not).
# Scrapes are not under --retain: a running migration keeps twice its longest window, at least
# 20 minutes, so they level off 20 minutes in (runs shorter than that still see them grow).
horizon=$((retain_s + 60))
printf '%s\n' "${samples[@]}" | awk -v h="$horizon" -v tol="$TOLERANCE" '
  BEGIN { n = 0 }
  $1 >= h { t[n] = $1; ev[n] = $2; sc[n] = $3; sz[n] = $4; rss[n] = $5; n++ }
  function maxof(a, from, to,   i, m) { m = a[from]; for (i = from; i < to; i++) if (a[i] > m) m = a[i]; return m }
  END {
    if (n < 4) { print "\nverdict: too short to judge (fewer than four samples after the horizon of " h " s)"; exit }
    half = int(n / 2)
    e0 = maxof(ev, 0, half); e1 = maxof(ev, half, n)
    r0 = maxof(rss, 0, half); r1 = maxof(rss, half, n)
    s0 = maxof(sz, 0, half); s1 = maxof(sz, half, n)
    ge = (e0 > 0 ? 100 * (e1 - e0) / e0 : 0); gr = (r0 > 0 ? 100 * (r1 - r0) / r0 : 0)
    printf "\nafter the horizon (%d s, %d samples): largest gate_evaluations %d then %d (%+.1f%%), RSS %.1f then %.1f MiB (%+.1f%%), store %d then %d MiB; scrapes %d -> %d\n", h, n, e0, e1, ge, r0, r1, gr, s0, s1, sc[0], sc[n - 1]
    printf "verdict: gate_evaluations %s, RSS %s (tolerance %d%%)\n", (ge <= tol ? "flat" : "GROWING"), (gr <= tol ? "flat" : "GROWING"), tol
  }'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
