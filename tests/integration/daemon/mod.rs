//! `migrate run`: the controller loop, its API, console and logs, hardening against hostile input,
//! misbehaving sources, failover on real stores, SIGKILL in the middle of transitions.
//!
//! Filter a topic by its path: `cargo test --test integration -- daemon::core::`.

mod advance_memory_race;
mod complete_role_race;
mod console;
mod console_truth;
mod core;
mod crash_sigkill;
mod daemon_hardening;
mod daemon_logs;
mod daemon_real;
mod daemon_watch_race;
mod db_clock_step;
mod guard_isolation;
mod guard_isolation_scale;
mod half_open_store;
mod hardening_input;
mod judge_counters_real;
mod judge_undecided;
mod last_round;
mod not_driven;
mod outbox;
mod preflight_refused;
mod resume_time;
mod routing_applied;
mod same_id;
mod secrets_redacted;
mod skewed_writer;
mod sources_misbehaving;
