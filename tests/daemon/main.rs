//! `migrate run`: the controller loop, its API, console and logs, hardening against hostile input,
//! misbehaving sources, failover on real stores, SIGKILL in the middle of transitions.
//!
//! One test binary for the area (ripgrep's habit: a module per topic, `tests/common` compiled
//! once). Filter a topic by its module: `cargo test --test daemon -- core::`.

#[path = "../common/mod.rs"]
mod common;

mod advance_memory_race;
mod console;
mod core;
mod crash_sigkill;
mod daemon_hardening;
mod daemon_logs;
mod daemon_real;
mod daemon_watch_race;
mod hardening_input;
mod secrets_redacted;
mod skewed_writer;
mod sources_misbehaving;
