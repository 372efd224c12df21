//! The `migrate` binary as a person runs it: plans, status, history, the demo (also in tmux), the
//! backtest, the deployment manifests, the exposition parser and the fuzzers' regressions.
//!
//! Filter a topic by its path: `cargo test --test integration -- cli::cli_migration::`.

mod backtest_agrees;
pub(crate) mod backtest_prometheus;
mod backtest_windows_prometheus;
mod cli_migration;
mod cli_plan_and_slice;
mod cli_plan_apply;
mod demo;
mod demo_tty;
mod deploy_manifests;
mod exposition_conformance;
mod fuzz_regressions;
mod judge_counters_prometheus;
mod prometheus_batch;
