//! The demo's embedded world and its driver (`migrate demo`).
//!
//! - [`broker`] (pure): an in-memory broker with at-least-once delivery, visibility timeouts,
//!   backoff retries, a dead-letter queue and outages.
//! - [`world`]: producers routing with the real `Router`, both brokers, and an idempotent consumer
//!   applying effects through the real durable dedup on SQLite; its /metrics feed the plan's gates.
//! - [`demo`]: the real controller driving `plans/demo.yaml` against the world, in lockstep, and the
//!   report whose invariants are counted from the consumer's database.
//! - [`view`]: the live progress view.
//! - [`preflight`]: the world's brokers as the daemon's preflight reads them.
//! - [`stale_moves`] (pure): the stale-producer check over 1,000 slice moves with a backlog on the
//!   old broker, and a producer pinned to an old generation (issue 58's figures).
//! - [`judge`]: `migrate judge simulate`: both routes' traffic drawn at random and judged by the
//!   very gate code the daemon runs (the judge and a threshold gate side by side).

pub mod broker;
pub mod demo;
pub mod judge;
pub mod preflight;
pub mod stale_moves;
pub mod view;
pub mod world;
