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

/// Unless `RUST_TEST_THREADS` or `--test-threads` says otherwise, two test threads per core:
/// most of these tests wait on a child process, a daemon's tick or a timer rather than compute,
/// and with one thread per core the cores idled a third of the run (`cargo test` on 2 cores:
/// 128.6 s with 2 threads, 88.0 s with 4; BENCHMARKS.md). libtest reads the variable when it
/// starts running tests, after this constructor.
#[ctor::ctor(unsafe)]
fn two_test_threads_per_core() {
    if std::env::var_os("RUST_TEST_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        // SAFETY: constructors run before `main`, while this process has one thread: nothing
        // reads the environment concurrently.
        unsafe { std::env::set_var("RUST_TEST_THREADS", (2 * cores).to_string()) };
    }
}

mod brokers;
mod cli;
mod daemon;
mod library;
