#!/usr/bin/env bash
# Every documented feature set of the library builds alone (docs/routing.md, "Depend on it"), and
# the doc examples of the consumer-facing modules run with only the features they document.
#
#   scripts/features.sh          check each set, then the doc tests
#   scripts/features.sh --quick  check each set only
#
# `cargo check` of the library only, one shared target dir: dependencies are checked once, each
# set re-checks the crate itself (seconds). Run from `.ci/run`.
set -euo pipefail
cd "$(dirname "$0")/.."

# One line per set a user can ask for (comma-separated features, no defaults).
SETS=(
  routing
  router
  dedup-sqlite
  dedup-postgres
  dedup
  dedup-redis
  brokers
  controller
  cli
  router,dedup
  router,dedup-sqlite
  router,dedup,dedup-redis
  kafka
)

for set in "${SETS[@]}"; do
  echo "-- cargo check --lib --no-default-features --features $set"
  cargo check --quiet --lib --no-default-features --features "$set"
done

# librdkafka (a C library built from source) only where Kafka is asked for: never in what a
# producer links (docs/brokers.md, "Kafka").
for set in routing router "router,dedup" brokers controller cli; do
  if cargo tree --quiet --edges normal --no-default-features --features "$set" | grep -q rdkafka; then
    echo "the feature set $set pulls in librdkafka (rdkafka); only the kafka feature may" >&2
    exit 1
  fi
done

[ "${1:-}" = --quick ] && exit 0

# The doc examples: the producer's modules alone, then everything a consumer may enable (the
# Redis example runs against QM_TEST_REDIS_URL when it is set, and stops early otherwise).
[ -n "${QM_TEST_REDIS_URL:-}" ] ||
  echo "note: QM_TEST_REDIS_URL is not set: the dedup::redis example stops before it talks to Redis"
for set in routing router,dedup,dedup-redis; do
  echo "-- cargo test --doc --no-default-features --features $set"
  cargo test --quiet --doc --no-default-features --features "$set"
done
