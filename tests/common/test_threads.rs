//! Test threads per core unless `RUST_TEST_THREADS` or `--test-threads` says otherwise, in the
//! test binaries that include this file, each saying how many in `TEST_THREADS_PER_CORE` beside
//! the `mod` line: most of the integration binary's tests wait on a child process, a daemon's
//! tick, a timer or a database rather than compute (with one thread per core the cores idled a
//! third of the run); the unit tests mostly compute (BENCHMARKS.md, "Test binaries"). libtest reads
//! the variable when it starts running tests, after this constructor.

#[ctor::ctor(unsafe)]
fn test_threads_per_core() {
    if std::env::var_os("RUST_TEST_THREADS").is_none() {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        let threads = super::TEST_THREADS_PER_CORE * cores;
        // SAFETY: constructors run before `main`, while this process has one thread: nothing
        // reads the environment concurrently.
        unsafe { std::env::set_var("RUST_TEST_THREADS", threads.to_string()) };
    }
}
