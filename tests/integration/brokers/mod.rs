//! The broker adapters' contract on real servers, the bridge, and dead letters (store, triage,
//! replay, the broker story).
//!
//! Filter a topic by its path: `cargo test --test integration -- brokers::brokers_real::`.

mod bridge_properties_real;
mod bridge_real;
mod brokers_real;
mod dlq_broker;
mod dlq_replay;
mod dlq_store;
mod dlq_triage_jobs;
mod dlq_triage_seed;
mod preflight_real;
mod probes_kafka;
mod stale_marks_real;
