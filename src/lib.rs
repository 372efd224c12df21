//! queue-migrate: move a live message flow from one broker to another without losing,
//! duplicating or reordering what matters.
//!
//! A map of the modules. Pure ones take values and return values (no IO, no clock reads); shell
//! ones do IO. Two crates: [`slice`], [`routing`], [`stamp`], [`probe`], [`router`], [`dedup`],
//! [`redact`], `metrics_text` and the clock type ([`time::Millis`], [`time::now_ms`]) are the
//! client library's (`queue-migrate-client`, in `crates/queue-migrate-client`: what a producer or
//! a consumer links), re-exported here at the same paths; it cannot import this crate, so the
//! layering is the compiler's. Everything else is this crate's.
//!
//! Pure core:
//! - [`slice`] — the slice function of an aggregate key (`docs/design.md#the-slice-function`,
//!   byte-for-byte).
//! - [`routing`] — the routing document and `route(key)`.
//! - [`stamp`], [`probe`] — the route stamp a message carries and the synthetic probes' keys and
//!   pacing, with their counters (in memory).
//! - [`plan`] — the YAML plan, compiled from its raw form into a validated [`plan::Plan`]; every
//!   error at once, with its path and line. Compiling is pure over a [`plan::Resolve`]; its edge
//!   reads files and the environment ([`plan::SystemResolve`], the size-capped read of a plan
//!   file in [`plan::bounds`]).
//! - [`machine`] — the state machine: `handle(snapshot, command) -> Transition`.
//! - [`gate`] — gate verdicts (pass / soaking / no data / fail) from observations; a
//!   `routing_applied` gate's from the producers the daemon saw on the routing long-poll
//!   ([`gate::routing_applied`]).
//! - [`judge`] — the `judge` gate's always-valid sequential test of the new route against the old;
//!   [`judge_verdict`] — its verdict as a gate (the ledger in the gate's memory).
//! - [`preflight`] — whether each broker keeps what it acknowledges: durability settings and the
//!   plan's waivers -> findings (refused, warned, waived), naming the setting and the fix.
//! - [`standing`] — where a migration stands and why it is not moving, from its snapshot.
//! - [`indicators::exposition`], [`indicators::query`], [`indicators::selector`],
//!   [`indicators::history`], [`indicators::promql`], [`indicators::cause`] — reading /metrics
//!   text, the scrape query language and the samples it reads, Prometheus API answers, why a
//!   source gave no number.
//! - [`time`] — instants as numbers and the text forms of instants and durations. Its two clock
//!   reads are for the edges: [`time::now_ms`] (a command's host clock) and [`time::DbClock`]
//!   (the database's clock followed on the monotonic one, sampled by a [`lease::Lease`]: the
//!   daemon's `DaemonClock` reads it).
//! - [`redact`] — the redaction of anything that may hold a secret (URLs, client errors).
//! - [`outgoing`] — the one rule for every text that leaves the process: redact, sanitize, cap.
//! - [`oneline`] — free text on one line for logs and webhooks.
//! - [`rank`] — nearest-rank quantiles (medians, p90s), censored ones included.
//!
//! Shell:
//! - [`indicators::followers`] — the producers that polled the daemon's routing endpoint, with
//!   the generation each applied (the daemon's memory, capped).
//! - [`indicators::fetch`] — HTTP to indicator sources; [`indicators::kafka_lag`] reads a
//!   consumer group's lag from Kafka (feature `kafka`).
//! - [`store`] — the state store (SQLite or PostgreSQL via sqlx): migrations, journal, gate
//!   evaluations, leases; every statement under a client-side deadline.
//! - [`lease`] — one held lease: its keeper, the database's clock it samples, the epoch its
//!   writes prove; the daemon's and each bridge's.
//! - [`controller`] — the driver: load, evaluate, decide, commit, publish.
//! - [`backtest`] — `migrate plan backtest`: the controller's gates, decisions and state machine
//!   replayed over a past window of the plan's sources (pure rehearsal, IO edge for readings).
//! - [`daemon`] — `migrate run`: the loop, the lease, the HTTP API and console, webhooks, on one
//!   injected clock ([`daemon::DaemonClock`]).
//! - [`dlq`] — dead letters: envelope, signature, triage, decisions, replay, alerts (docs/dlq.md;
//!   its pure parts are listed in its own map).
//! - [`router`], [`dedup`] — the producer's and the consumer's side: follow the routing document
//!   (HTTP long-poll or a file), apply effects once (SQLite, PostgreSQL, Redis, or in memory)
//!   (docs/routing.md).
//! - [`brokers`] — one adapter contract for RabbitMQ, NATS JetStream and Redis Streams, and Kafka
//!   with the feature `kafka`: publish with confirm, consume with manual ack, depth, browse
//!   (docs/brokers.md).
//! - `adapters` — the brokers a plan names, as adapters, and a message's key as the plan reads it.
//! - [`bridge`] — `migrate bridge`: forward an unchangeable producer's queue by the live routing,
//!   acking after the destination's confirm, one key in flight at a time (docs/bridge.md).
//! - [`atomic_file`] — writing a file whole or not at all.
//! - `cli` — the `migrate` command line, one file per subcommand.
//! - `sim` — the embedded world of `migrate demo` (two brokers, producers, an idempotent consumer),
//!   and `migrate judge simulate`'s runs.
//! - `fit` — text that fits the terminal (width, wrapping, rounding), for `cli` and `sim` alike.
//!
//! Cargo features: `routing` (the slice function, the routing document, the route stamp: what a
//! producer needs, no async runtime), `router` (the following `Router`), `dedup-sqlite` and
//! `dedup-postgres` (the consumer's durable dedup on one database; `dedup` is both),
//! `dedup-redis` (the Redis mode, no SQL) — each enables the client's feature of the same name —,
//! `controller` (everything but the CLI), `brokers` (the adapters), `kafka` (Kafka among them),
//! `cli` (default: the `migrate` binary; with router, dedup and brokers). [`slice`], [`time`],
//! [`redact`], `metrics_text`, [`outgoing`] and [`oneline`] are always compiled. Each set builds
//! alone (`scripts/features.sh`).
//!
//! [`slice`]: mod@slice

// The unit tests run two threads per core: they mostly compute (tests/common/test_threads.rs).
#[cfg(test)]
const TEST_THREADS_PER_CORE: usize = 2;
#[cfg(test)]
#[path = "../tests/common/test_threads.rs"]
mod test_threads;

pub mod oneline;
pub mod outgoing;
pub mod rank;
pub mod time;

// The client library (crates/queue-migrate-client), at the paths it always had here.
pub use queue_migrate_client::{metrics_text, redact, slice};

#[cfg(feature = "routing")]
pub use queue_migrate_client::{probe, routing, stale, stamp};

#[cfg(feature = "router")]
pub use queue_migrate_client::router;

#[cfg(any(
    feature = "dedup-sqlite",
    feature = "dedup-postgres",
    feature = "dedup-redis"
))]
pub use queue_migrate_client::dedup;

#[cfg(all(feature = "brokers", feature = "controller"))]
pub mod adapters;
#[cfg(all(feature = "brokers", feature = "controller", feature = "router"))]
pub mod bridge;
#[cfg(feature = "brokers")]
pub mod brokers;

#[cfg(feature = "controller")]
pub mod atomic_file;
#[cfg(feature = "controller")]
pub mod backtest;
#[cfg(feature = "controller")]
pub mod controller;
#[cfg(feature = "controller")]
pub mod daemon;
#[cfg(feature = "controller")]
pub mod dlq;
#[cfg(feature = "controller")]
pub mod gate;
#[cfg(feature = "controller")]
pub mod indicators;
#[cfg(feature = "controller")]
pub mod judge;
#[cfg(feature = "controller")]
pub mod judge_verdict;
#[cfg(feature = "controller")]
pub mod lease;
#[cfg(feature = "controller")]
pub mod machine;
#[cfg(feature = "controller")]
pub mod plan;
#[cfg(feature = "controller")]
pub mod preflight;
#[cfg(feature = "controller")]
pub mod standing;
#[cfg(feature = "controller")]
pub mod store;

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod fit;
#[cfg(feature = "cli")]
pub mod sim;
