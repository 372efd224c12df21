//! The integration tests: one binary, a module per area (cargo's `tests/testsuite` and ripgrep's
//! habit), `tests/common` compiled once, and every area's tests in one pool of threads, so that a
//! test waiting on a child process or a timer leaves the cores to the others.
//!
//! - [`library`]: what producers and consumers link (slicing and stamp vectors, the routing
//!   follower, the clients in other languages, the dedup backends).
//! - [`cli`]: the `migrate` binary as a person runs it (plans, status, the demo, the backtest).
//! - [`daemon`]: `migrate run` (the loop, its API and console, hardening, failover, SIGKILL).
//! - [`brokers`]: the adapters on real servers, the bridge, dead letters.
//!
//! Filter by path: `cargo test --test integration -- daemon::core::`. Tests that need a server
//! are ignored without it (`--include-ignored` with the `QM_TEST_*` variables that
//! `scripts/services.sh start` prints). Two tests keep binaries of their own because they own
//! something process-wide: `daemon_start_statements` (a global tracing subscriber counts SQL
//! statements) and `rabbitmq_alarm` (a broker-wide memory alarm).

#[path = "../common/mod.rs"]
mod common;

/// Three test threads per core: most tests here wait rather than compute, and the longest of them
/// (a daemon killed again and again, secrets hunted in every output) come late in libtest's
/// alphabetical order; `cargo test` on 2 cores: this binary 128.6 s with 2 threads, 86.9 s with
/// 4, 82.2 and 78.6 s with 6 (BENCHMARKS.md, "Test binaries").
const TEST_THREADS_PER_CORE: usize = 3;
#[path = "../common/test_threads.rs"]
mod test_threads;

mod brokers;
mod cli;
mod daemon;
mod library;
