#!/usr/bin/env bash
# The Jepsen-style suite of the daemon's lease (docs/robustness.md, "Leadership under faults").
#
#   scripts/jepsen.sh [--only SCENARIO,...] [--seed N] [--no-epoch-audit]
#
# Installs what it needs from Debian's packages (PostgreSQL 15, iproute2, iptables, libfaketime,
# procps), builds `migrate`, and runs tests/jepsen/jepsen.py: two or three `migrate run` daemons
# on a PostgreSQL of the suite's OWN (its data directory under the work dir, a free port; it is
# restarted as a fault, so never the shared one on 5432), under kill -9, SIGSTOP, a partition in a
# network namespace, skewed and jumping clocks and PostgreSQL restarts; and (issue 54) a
# partition that heals only for new connections (a proxy of the suite's own), a same-`--id`
# replacement, a pause between commit and publish, a step of the database host's clock, and two
# `migrate bridge` on Redis streams of a redis-server of the suite's own (a free port; the
# end-to-end suite beside it in .ci/run restarts the shared one) under SIGSTOP and kill -9; then
# the checks. Needs root
# (runuser, ip netns, iptables). When network namespaces or iptables are refused, the partition
# scenario prints "skipped: <reason>"; the others run. A scenario known to fail (tests/jepsen/scenarios_faults.py, KNOWN_FAILING) runs only
# when --only names it; the default run prints "excluded (known failure ...)" with the reason.
#
# Exits 1 when any check found a violation. The work dir (JEPSEN_WORK, default a new /tmp dir,
# removed when every check passed) keeps each daemon's log and report.json; the seed is printed
# (--seed N replays the random instants). Everything the suite started is stopped on exit, the
# namespace deleted.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never

need=()
[ -x /usr/lib/postgresql/15/bin/postgres ] || need+=(postgresql-15)
command -v psql >/dev/null || need+=(postgresql-client-15)
command -v ip >/dev/null || need+=(iproute2)
command -v iptables >/dev/null || need+=(iptables)
[ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 ] || need+=(faketime)
command -v runuser >/dev/null || need+=(util-linux)
command -v redis-server >/dev/null || need+=(redis-server)
if (( ${#need[@]} )); then
  echo "jepsen: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

cargo build --all-features --bin migrate
target_dir=${CARGO_TARGET_DIR:-target}

# A work dir of its own goes when every check passed (about 150 MB: a PostgreSQL and the logs);
# one named by JEPSEN_WORK, or one of a failed run, stays.
WORK=${JEPSEN_WORK:-$(mktemp -d /tmp/qm-jepsen.XXXXXX)}
mkdir -p "$WORK"
py=""
remove_work=""
cleanup() {
  # The driver stops its daemons, its PostgreSQL and the namespace itself; this is for a driver
  # killed before it could.
  if [ -n "$py" ] && kill -0 "$py" 2>/dev/null; then kill "$py" 2>/dev/null; wait "$py" 2>/dev/null || true; fi
  local p
  if [ -f "$WORK/pids" ]; then
    while read -r p; do
      if grep -qa migrate "/proc/$p/cmdline" 2>/dev/null; then kill -CONT "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; fi
    done <"$WORK/pids"
  fi
  if [ -f "$WORK/pg/data/postmaster.pid" ]; then
    runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D "$WORK/pg/data" -m immediate stop >/dev/null 2>&1 || true
  fi
  ip netns del qmjepsen 2>/dev/null || true
  ip link del qmjh0 2>/dev/null || true
  if [ -n "$remove_work" ]; then rm -rf "$WORK"; fi
}
trap cleanup EXIT INT TERM

start=$SECONDS
python3 tests/jepsen/jepsen.py --migrate "$target_dir/debug/migrate" --work "$WORK" \
  --report "$WORK/report.json" "$@" &
py=$!
rc=0
wait "$py" || rc=$?
py=""
if (( rc == 0 )) && [ -z "${JEPSEN_WORK:-}" ]; then
  remove_work=1
  echo "jepsen: wall time $(( SECONDS - start )) s; passed, its work dir removed (JEPSEN_WORK=DIR keeps the logs)"
else
  echo "jepsen: wall time $(( SECONDS - start )) s, logs and report in $WORK"
fi
exit "$rc"
