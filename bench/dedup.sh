#!/usr/bin/env bash
# Durable dedup throughput (queue_migrate::dedup::sql) on SQLite (WAL) and PostgreSQL, against one
# bare single-row insert transaction per message, and with several messages per transaction.
# See crates/queue-migrate-bench/benches/dedup.rs for the workloads.
#
#   bench/dedup.sh                              # 2000 messages x 3 rounds, batches 1, 10, 100
#   QM_DEDUP_MESSAGES=500 QM_DEDUP_ROUNDS=1 bench/dedup.sh
#
# PostgreSQL: QM_TEST_POSTGRES_URL (default: from /tmp/qm-services/env when present); the bench
# works in a schema of its own and drops it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
if [ -z "${QM_TEST_POSTGRES_URL:-}" ] && [ -f /tmp/qm-services/env ]; then
  # shellcheck disable=SC1091
  source /tmp/qm-services/env
fi
export QM_TEST_POSTGRES_URL QM_DEDUP_RUN=1
echo "machine: nproc $(nproc), load average $(cut -d' ' -f1-3 /proc/loadavg); SQLite file in ${TMPDIR:-/tmp} ($(df -T "${TMPDIR:-/tmp}" | awk 'NR == 2 {print $2}'))"
cargo bench -p queue-migrate-bench --bench dedup 2>/dev/null
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
