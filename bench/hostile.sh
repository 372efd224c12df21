#!/usr/bin/env bash
# The hostile-source figures of docs/robustness.md (issue 43), each the peak RSS (VmHWM) or size:
#  1. `migrate run` scraping a 1,000,000-series /metrics target every second for 20 s;
#  2. `migrate plan backtest` over a week at a 1-minute step against a Prometheus whose every
#     answer is 63 MB;
#  3. the console's migration page with 2,000 journal entries of 60 KB reasons.
# Needs python3 and curl. MIGRATE: the binary (default: the release build, built first).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
# MIGRATE, $work and pids, cleaned up at exit.
source bench/prelude.sh
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 bench/hostile_server.py "$port" 2>"$work/server.log" &
pids+=($!)
until curl -fs -o /dev/null "http://127.0.0.1:$port/metrics"; do sleep 0.5; done
export QM_PROM_URL="http://127.0.0.1:$port" QM_SCRAPE_URL="http://127.0.0.1:$port/metrics"
export MIGRATE_STATE="$work/state.db" MIGRATE_ACTOR=bench
cp plans/local.yaml "$work/local.yaml"
cd "$work"
"$MIGRATE" init local.yaml >/dev/null
"$MIGRATE" advance local >/dev/null   # planned -> consume_dual: its gate scrapes the target
hwm() { awk '/VmHWM/ {print $2 / 1024 " MB"}' "/proc/$1/status"; }

# 1. The daemon and the 1,000,000-series target.
"$MIGRATE" run --listen 127.0.0.1:0 --interval 1s 2>"$work/run.log" &
daemon=$!
pids+=($daemon)
sleep 20
echo "1. daemon, 1,000,000-series target, 20 s at 1 s: peak RSS $(hwm $daemon)"
addr=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/run.log" | head -1)
curl -s "$addr/v1/migrations/local" | python3 -c 'import json,sys; g=json.load(sys.stdin)["gates"][0]; print("   gate:", g["verdict"], "-", g["reason"][:160])'
echo "   state.db: $(du -k "$work/state.db" | cut -f1) KiB"

# 3. The console page with 2,000 journal entries of 60 KB reasons (through the API).
python3 - "$addr" <<'PY'
import json, sys, urllib.request
addr, reason = sys.argv[1], "r" * 60_000
for i in range(1000):
    for action in ("pause", "resume"):
        req = urllib.request.Request(f"{addr}/v1/migrations/local/{action}",
            data=json.dumps({"reason": f"{i} {reason}"}).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req).read()
PY
page=$(curl -s -o /dev/null -w '%{size_download} bytes in %{time_total} s' "$addr/migrations/local")
history=$(curl -s -o /dev/null -w '%{size_download} bytes in %{time_total} s' "$addr/v1/migrations/local/history")
echo "3. console page with 2,000+ journal entries of 60 KB reasons: $page; /history: $history; daemon peak RSS $(hwm $daemon)"
kill "$daemon"; wait "$daemon" 2>/dev/null || true

# 2. The backtest against 63 MB answers: with their Content-Length (refused unread), then
#    streamed without one (read up to the cap sized by the points asked, then dropped).
backtest() {
  local before
  before=$(grep -c answered "$2" || true)
  /usr/bin/env time -f '%M %e' -o "$work/bt.rss" "$MIGRATE" plan backtest local.yaml --from 2026-11-01T00:00:00Z --to 2026-11-08T00:00:00Z --step 1m --json >"$work/bt.out" 2>&1 || true
  read -r kb secs <"$work/bt.rss"
  echo "2. plan backtest, a week at 1m, 63 MB answers ($1): peak RSS $((kb / 1024)) MB, $secs s, $(( $(grep -c answered "$2") - before )) query_range answers sent"
}
backtest "with Content-Length" "$work/server.log"
sport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 "$root/bench/hostile_server.py" "$sport" 10 stream 2>"$work/stream.log" &
pids+=($!)
until curl -fs -o /dev/null "http://127.0.0.1:$sport/metrics"; do sleep 0.5; done
QM_PROM_URL="http://127.0.0.1:$sport" backtest "streamed, no Content-Length" "$work/stream.log"
