# Sourced by the bench scripts that run `migrate plan backtest` against a Prometheus of their own
# (backtest.sh, judge_backtest.sh): serve a backfilled TSDB on a free loopback port, and stop it.
# Needs prometheus (scripts/services.sh install prometheus), python3 and curl. The caller stops it
# on exit (stop_prometheus in its trap).
prom_pid=
prom_port=

# start_prometheus TSDB SCRAPE_INTERVAL [PROMETHEUS_ARG...]: serves TSDB (its config and log
# beside it) with no retention limit; sets prom_port and prom_pid; returns once it is ready.
start_prometheus() {
  local tsdb=$1 interval=$2
  shift 2
  local dir
  dir=$(dirname "$tsdb")
  printf 'global:\n  scrape_interval: %s\n' "$interval" >"$dir/prometheus.yml"
  prom_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  prometheus --storage.tsdb.path="$tsdb" --web.listen-address="127.0.0.1:$prom_port" \
    --config.file="$dir/prometheus.yml" --storage.tsdb.retention.time=100y "$@" \
    >"$dir/prometheus.log" 2>&1 &
  prom_pid=$!
  for _ in $(seq 1 300); do
    curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "prometheus on port $prom_port not ready after 60 s; its log: $dir/prometheus.log" >&2
  return 1
}

stop_prometheus() {
  if [ -n "$prom_pid" ]; then
    kill "$prom_pid" 2>/dev/null || true
    wait "$prom_pid" 2>/dev/null || true
  fi
  prom_pid=
}
