//! The broker adapters' contract on real servers, the bridge, and dead letters (store, triage,
//! replay, the broker story).
//!
//! One test binary for the area (ripgrep's habit: a module per topic, `tests/common` compiled
//! once). Filter a topic by its module: `cargo test --test brokers -- brokers_real::`.

#[path = "../common/mod.rs"]
mod common;

mod bridge_properties_real;
mod bridge_real;
mod brokers_real;
mod dlq_broker;
mod dlq_replay;
mod dlq_store;
mod dlq_triage_jobs;
mod dlq_triage_seed;
mod probes_kafka;
