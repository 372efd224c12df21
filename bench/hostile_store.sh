#!/usr/bin/env bash
# Store growth under a hostile source (issue 43): one `migrate run` at a 1-s interval on one
# migration in slices[0] whose two gates (an exit and a guard) read a fake Prometheus that
# answers every query `400` with a 3 MB JSON error. Before the reason was bounded, every gate
# stored the 3 MB text every round (114 MiB in 20 s). The figure: the store's growth (the pages
# of the SQLite database in use, WAL included) from the first sample to the last, and per hour
# at that pace, with the file's size (database and WAL) at the end.
#
#   bench/hostile_store.sh                          # 5 minutes
#   DURATION=60 bench/hostile_store.sh              # a short check (seconds)
#   MIGRATE=/path/to/migrate bench/hostile_store.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-300}
INTERVAL=${INTERVAL:-1s}
ERROR_BYTES=${ERROR_BYTES:-3000000}
# MIGRATE, $work and pids, cleaned up at exit.
source bench/prelude.sh

# The hostile Prometheus: every answer a 400 whose JSON error is ERROR_BYTES long.
python3 - "$work/prom.port" "$ERROR_BYTES" <<'PY' &
import http.server, sys
body = ('{"status":"error","errorType":"bad_data","error":"' + "E" * int(sys.argv[2]) + '"}').encode()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    do_POST = do_GET
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
open(sys.argv[1], "w").write(str(s.server_address[1]))
s.serve_forever()
PY
pids+=($!)
for _ in $(seq 50); do [ -s "$work/prom.port" ] && break; sleep 0.1; done
export QM_HOSTILE_PROM="http://127.0.0.1:$(cat "$work/prom.port")"

state="$work/state.db"
export MIGRATE_STATE="$state" MIGRATE_ACTOR=hostile
cat > "$work/hostile.yaml" <<'EOF'
version: 1
name: hostile
slices: 8
auto_advance: false
brokers:
  old: { name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: hostile, dead_letter: hostile.dlq }
  new: { name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: HOSTILE }
retry: { max_backoff: 1m, visibility_timeout: 30s }
dedup: { window: 1d, max_redelivery_delay: 1m, max_consumer_delay: 1m, reprocess_margin: 12h }
sources:
  prom: { prometheus: "${QM_HOSTILE_PROM}" }
routing: { file: hostile.routing.json }
phases:
  consume_dual:
    exit:
      - { name: up, source: prom, query: up, pass_if: "== 1" }
  synthetic:
    exit:
      - { name: up, source: prom, query: up, pass_if: "== 1" }
  slices:
    steps: [1, 4, 8]
    observe: 1m
    exit:
      - { name: error ratio low, source: prom, query: app_error_ratio, pass_if: "< 0.01" }
    guard:
      - { name: error ratio bounded, source: prom, query: app_error_ratio, pass_if: "< 0.05" }
    on_breach: alert
  drain:
    quiet: 1m
    exit:
      - { name: up, source: prom, query: up, pass_if: "== 1" }
  disconnect:
    retain: 1m
    exit:
      - { name: up, source: prom, query: up, pass_if: "== 1" }
EOF
(cd "$work" && "$MIGRATE" init hostile.yaml > /dev/null)
for _ in 1 2 3; do "$MIGRATE" advance hostile --force --reason "hostile setup" > /dev/null; done
echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -1), nproc $(nproc)"
echo "binary: $MIGRATE ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))"

MIGRATE_LOG=warn "$MIGRATE" run --listen 127.0.0.1:0 --interval "$INTERVAL" --id hostile \
  > /dev/null 2> "$work/daemon.err" &
daemon=$!
pids+=("$daemon")
# The database's pages in use (the file once checkpointed; the WAL is reused, not grown).
size() {
  python3 -c "import sqlite3,sys; db=sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True); q=lambda p: db.execute(f'PRAGMA {p}').fetchone()[0]; print((q('page_count') - q('freelist_count')) * q('page_size'))" "$state"
}
sleep 10
first=$(size)
rows0=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True).execute('SELECT COUNT(*) FROM gate_evaluations').fetchone()[0])" "$state")
sleep "$DURATION"
last=$(size)
read -r rows1 longest < <(python3 -c "import sqlite3,sys; db=sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True); print(*db.execute('SELECT COUNT(*), MAX(LENGTH(reason)) FROM gate_evaluations').fetchone())" "$state")
files=$(cat "$state" "$state-wal" 2>/dev/null | wc -c)
kill "$daemon"; wait "$daemon" 2>/dev/null || true
grown=$((last - first))
echo "files at the end (database and WAL): $files bytes"
echo "over ${DURATION} s: the store grew $grown bytes ($((rows1 - rows0)) gate evaluations, the longest reason $longest bytes)"
awk -v g="$grown" -v d="$DURATION" 'BEGIN { printf "per hour at that pace: %.1f MB\n", g * 3600 / d / 1e6 }'
