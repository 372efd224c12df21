#!/usr/bin/env bash
# A user's crate, made from nothing in a temporary directory, depending on the client library
# (crates/queue-migrate-client) by path with each documented feature set (docs/routing.md), and on
# queue-migrate by path for its sets: every client set builds, and the docs' producer and consumer
# (the client's examples/*.rs, shown verbatim in docs/routing.md) run and check themselves.
# Then the resolution a user gets with `dedup` + `controller` when their lock holds another
# libsqlite3-sys (the lowest that sqlx 0.9 accepts).
#
#   scripts/fresh-crate.sh       (from `.ci/run`; reuses CARGO_TARGET_DIR when set)
#
# Fast on purpose: the repository's Cargo.lock seeds the crate's (same dependency versions as the
# main build), one shared target dir, `cargo check` for the sets that have nothing to run.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$repo/target}"

examples="$repo/crates/queue-migrate-client/examples"

# The docs show the examples verbatim.
python3 - "$repo" <<'EOF'
import pathlib, sys
repo = pathlib.Path(sys.argv[1])
docs = (repo / "docs/routing.md").read_text()
for name in ["producer.rs", "producer_document.rs", "consumer.rs"]:
    text = (repo / "crates/queue-migrate-client/examples" / name).read_text().rstrip()
    if text not in docs:
        sys.exit(f"docs/routing.md does not show crates/queue-migrate-client/examples/{name} verbatim")
EOF

crate="$work/user-crate"
mkdir -p "$crate/src/bin"
cat > "$crate/Cargo.toml" <<EOF
[package]
name = "user-crate"
version = "0.1.0"
edition = "2024"
publish = false

[dependencies]
queue-migrate-client = { path = "$repo/crates/queue-migrate-client" }
queue-migrate = { path = "$repo", default-features = false, optional = true }
serde_json = "1"
tokio = { version = "1", features = ["macros", "rt-multi-thread"] }

[features]
routing = ["queue-migrate-client/routing"]
router = ["routing", "queue-migrate-client/router"]
dedup-sqlite = ["queue-migrate-client/dedup-sqlite"]
dedup-postgres = ["queue-migrate-client/dedup-postgres"]
dedup = ["dedup-sqlite", "dedup-postgres"]
dedup-redis = ["queue-migrate-client/dedup-redis"]
brokers = ["routing", "dep:queue-migrate", "queue-migrate/brokers"]
controller = ["dep:queue-migrate", "queue-migrate/controller", "dedup"]
cli = ["dep:queue-migrate", "queue-migrate/cli", "routing", "router", "dedup", "brokers", "controller"]

[[bin]]
name = "producer_document"
required-features = ["routing"]

[[bin]]
name = "producer"
required-features = ["router"]

[[bin]]
name = "consumer"
required-features = ["dedup-sqlite"]
EOF
echo 'pub fn linked() {}' > "$crate/src/lib.rs"
cp "$examples/producer.rs" "$examples/producer_document.rs" "$examples/consumer.rs" "$crate/src/bin/"
cp "$repo/Cargo.lock" "$crate/Cargo.lock"
cd "$crate"

cat > "$work/orders.routing.json" <<'EOF'
{"migration":"orders","generation":7,"state":"slices","step":1,"paused":false,"slices_total":128,
 "slices_migrated":32,"consume":["old","new"],"brokers":{"old":"rabbitmq","new":"nats"},
 "updated_at":"2026-11-30T00:00:00Z"}
EOF

# Every set of the client builds in a user's crate (with the programs its features allow). The
# application crate's own sets (brokers, controller, cli) are checked alone by scripts/features.sh,
# which is stricter (no user's features unified into them); checking them again here re-checked
# the whole application crate three times.
for set in routing router dedup-sqlite dedup-postgres dedup dedup-redis router,dedup; do
  echo "-- user crate: cargo check --features $set"
  cargo check --quiet --all-targets --features "$set"
done

run() {
  local set="$1" bin="$2"
  shift 2
  echo "-- user crate: cargo run --features $set --bin $bin"
  cargo run --quiet --features "$set" --bin "$bin" -- "$@" >"$work/out" 2>&1 || {
    cat "$work/out"
    exit 1
  }
  cat "$work/out"
}
expect() {
  grep -qF -- "$1" "$work/out" || { echo "expected: $1"; exit 1; }
}

# The producer without a runtime: order-0 is slice 8 of 128, below 32: new, named as the document does.
run routing producer_document "$work/orders.routing.json"
expect "order-0 slice 8 -> nats (new)"
expect "x-qm-generation: 7"
# A SQLite-only consumer: five deliveries, each verdict checked by the program itself.
run dedup-sqlite consumer "$work/sqlite-only.db"
expect 'queue_migrate_consumer_messages_total{route="new",outcome="stale"} 1'
# A service that produces and consumes: the Router following the file, and the consumer.
run router,dedup producer "$work/orders.routing.json"
expect "order-0 slice 8 -> nats (new)"
expect 'queue_migrate_published_total{broker="nats",route="new",producer="checkout"} 2'
run router,dedup consumer "$work/both.db"
expect 'outcome="conflict"} 1'

# dedup + controller when the user's lock holds the lowest libsqlite3-sys sqlx 0.9 accepts: it
# resolves (needs the registry's index; says so and stops when it is not reachable).
if cargo update --quiet -p libsqlite3-sys --precise 0.30.1 2>"$work/update.err"; then
  cargo tree --quiet --features dedup,controller -i libsqlite3-sys --depth 0 | grep -q "libsqlite3-sys v0.30.1"
  echo "-- user crate: dedup + controller resolve with libsqlite3-sys 0.30.1"
else
  echo "skipped: cannot lock libsqlite3-sys 0.30.1 here: $(head -c 300 "$work/update.err")"
fi
echo "fresh crate: ok"
