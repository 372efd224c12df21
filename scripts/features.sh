#!/usr/bin/env bash
# Every documented feature set of both crates builds alone (docs/routing.md, "Depend on it"): the
# client library (crates/queue-migrate-client) with each set a producer or a consumer asks for,
# the application crate (queue-migrate) with each of its own; the client never pulls the
# controller's, the CLI's or the brokers' dependencies; and the doc examples of the client run
# with only the features they document.
#
#   scripts/features.sh          check each set, then the doc tests
#   scripts/features.sh --quick  check each set only
#   scripts/features.sh --docs   the doc tests only
#
# `cargo check` of the library only, one shared target dir: dependencies are checked once, each
# set re-checks the crate itself (seconds). Run from `.ci/run`.
set -euo pipefail
cd "$(dirname "$0")/.."

# The client: one line per set a producer or a consumer can ask for (comma-separated, no defaults).
CLIENT_SETS=(
  ""
  routing
  router
  dedup-sqlite
  dedup-postgres
  dedup
  dedup-redis
  router,dedup
  router,dedup-sqlite
  router,dedup,dedup-redis
)

checks() {
  for set in "${CLIENT_SETS[@]}"; do
    echo "-- cargo check -p queue-migrate-client --lib --no-default-features --features '$set'"
    cargo check --quiet -p queue-migrate-client --lib --no-default-features --features "$set"
  done

  # What the client links, with every feature: no CLI, no HTTP server, no broker client, no Kafka.
  # hyper itself is in (reqwest's client, the router's long-poll) but not its server, nor HTTP/2
  # (h2): the crate names, then hyper's and hyper-util's features.
  if cargo tree --quiet -p queue-migrate-client --edges normal,features --all-features --prefix none |
    grep -E '^((clap|axum|h2|lapin|async-nats|rdkafka) |hyper(-util)? feature "(server|http2)")'; then
    echo "queue-migrate-client pulls in a dependency of the controller, the CLI or a broker (above)" >&2
    exit 1
  fi

  # The application crate: the client's sets (its features of the same names forward to the
  # client's), then its own.
  SETS=("${CLIENT_SETS[@]:1}" brokers controller cli kafka)

  for set in "${SETS[@]}"; do
    echo "-- cargo check -p queue-migrate --lib --no-default-features --features $set"
    cargo check --quiet -p queue-migrate --lib --no-default-features --features "$set"
  done

  # librdkafka (a C library built from source) only where Kafka is asked for: never in what a
  # producer links (docs/brokers.md, "Kafka").
  for set in routing router "router,dedup" brokers controller cli; do
    if cargo tree --quiet -p queue-migrate --edges normal --no-default-features --features "$set" | grep -q rdkafka; then
      echo "the feature set $set pulls in librdkafka (rdkafka); only the kafka feature may" >&2
      exit 1
    fi
  done
}

docs() {
  # The client's doc examples: the producer's modules alone, then everything a consumer may enable
  # (the Redis example runs against QM_TEST_REDIS_URL when it is set, and stops early otherwise).
  [ -n "${QM_TEST_REDIS_URL:-}" ] ||
    echo "note: QM_TEST_REDIS_URL is not set: the dedup::redis example stops before it talks to Redis"
  for set in routing router,dedup,dedup-redis; do
    echo "-- cargo test -p queue-migrate-client --doc --no-default-features --features $set"
    cargo test --quiet -p queue-migrate-client --doc --no-default-features --features "$set"
  done
}

case "${1:-}" in
  --quick) checks ;;
  --docs) docs ;;
  "")
    checks
    docs
    ;;
  *) echo "usage: scripts/features.sh [--quick | --docs]" >&2; exit 2 ;;
esac
