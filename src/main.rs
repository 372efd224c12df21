//! `migrate`: parse the command line, run it, map the outcome to an exit code. Nothing else.

use std::process::ExitCode;

use queue_migrate::cli::{Cli, LogFormat, RuntimeShape, run};

/// The longest error message printed, in bytes (a plan's many errors fit; a source's
/// megabytes do not).
const ERROR_MAX: usize = 64 << 10;

fn main() -> ExitCode {
    queue_migrate::indicators::fetch::install_crypto_provider();
    let cli = match Cli::try_parse_tuned(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    init_logs(cli.global.log_format);
    if let Some(arenas) = cli.malloc_arenas() {
        cap_malloc_arenas(arenas);
    }
    let mut builder = match cli.runtime_shape() {
        RuntimeShape::CurrentThread => tokio::runtime::Builder::new_current_thread(),
        RuntimeShape::Workers(n) => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("migrate: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            if !e.is_quiet() {
                // The one text rule: an error may quote a source, a server or a person.
                eprintln!(
                    "migrate: {}",
                    queue_migrate::outgoing::text(
                        &e.message,
                        &queue_migrate::outgoing::Secrets::none(),
                        queue_migrate::outgoing::Shape::Block,
                        ERROR_MAX,
                    )
                );
            }
            ExitCode::from(e.code)
        }
    }
}

/// Log lines on standard error, at the level `MIGRATE_LOG` says (default warn), as `format` says:
/// text (colour on a terminal unless `NO_COLOR`), or one JSON object a line with the event's
/// fields at the top level.
fn init_logs(format: LogFormat) {
    let filter = || {
        tracing_subscriber::EnvFilter::try_from_env("MIGRATE_LOG")
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
    };
    match format {
        LogFormat::Text => tracing_subscriber::fmt()
            .with_env_filter(filter())
            // One line per event: a newline in free text (a reason) cannot forge a log line.
            .with_writer(|| queue_migrate::oneline::LogWriter(std::io::stderr()))
            .with_ansi(
                std::io::IsTerminal::is_terminal(&std::io::stderr())
                    && queue_migrate::cli::colour_allowed(std::env::var_os("NO_COLOR").as_deref()),
            )
            .init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_env_filter(filter())
            // JSON escapes line breaks itself; the writer keeps every event on its line anyway.
            .with_writer(|| queue_migrate::oneline::LogWriter(std::io::stderr()))
            .init(),
    }
}

/// Keep at most `arenas` malloc arenas, unless the operator chose a number (`MALLOC_ARENA_MAX`,
/// or `glibc.malloc.arena_max` in `GLIBC_TUNABLES`: glibc reads both itself). Called before the
/// runtime starts any thread.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn cap_malloc_arenas(arenas: i32) {
    let tuned = std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("arena_max"));
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() && !tuned {
        // SAFETY: mallopt only sets a parameter of glibc's allocator, and no other thread
        // exists yet to allocate concurrently.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn cap_malloc_arenas(_arenas: i32) {}
