//! The `migrate` binary as a person runs it: plans, status, history, the demo (also in tmux), the
//! backtest, the deployment manifests, the exposition parser and the fuzzers' regressions.
//!
//! One test binary for the area (ripgrep's habit: a module per topic, `tests/common` compiled
//! once). Filter a topic by its module: `cargo test --test cli -- cli_migration::`.

#[path = "../common/mod.rs"]
mod common;

mod backtest_agrees;
mod backtest_prometheus;
mod cli_migration;
mod cli_plan_and_slice;
mod cli_plan_apply;
mod demo;
mod demo_tty;
mod deploy_manifests;
mod exposition_conformance;
mod fuzz_regressions;
mod prometheus_batch;
