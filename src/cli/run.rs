//! `migrate run`: the daemon.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{CliError, CliResult, Ctx, nonzero_duration, redact_url};
use crate::daemon::{self, Config};
use crate::indicators::fetch::QUERIES_PER_REQUEST;
use crate::plan::SystemResolve;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the HTTP API and /metrics listen.
    #[arg(long, default_value = "127.0.0.1:8480")]
    pub listen: SocketAddr,
    /// Time between evaluations of every active migration (above 0).
    #[arg(
        long,
        default_value = "15s",
        value_parser = nonzero_duration("a zero interval would evaluate every migration in a busy loop")
    )]
    pub interval: Duration,
    /// How long the controller lease lasts without renewal; a standby takes over within two.
    #[arg(long, default_value = "15s", value_parser = humantime::parse_duration)]
    pub lease_ttl: Duration,
    /// A file holding the API token (else MIGRATE_API_TOKEN). Mutating calls need
    /// `Authorization: Bearer <token>`.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Serve reads only: every mutating API call is refused.
    #[arg(long)]
    pub read_only: bool,
    /// Let the daemon enter `complete` (the point of no return) for this migration by itself
    /// once every gate of `disconnect` passes. Repeat for several.
    #[arg(long, value_name = "NAME")]
    pub confirm_complete: Vec<String>,
    /// This controller's name in the lease and the journal (default: daemon@HOST:PID).
    #[arg(long)]
    pub id: Option<String>,
    /// Most Prometheus queries of a migration asked in one request (joined with `or`, each
    /// answer split back): fewer requests cost Prometheus less CPU (BENCHMARKS.md). 1 asks each
    /// query alone, for a source or a proxy that refuses POST or `label_replace`; at most 30.
    #[arg(
        long,
        default_value_t = QUERIES_PER_REQUEST as u16,
        value_parser = clap::value_parser!(u16).range(1..=30)
    )]
    pub queries_per_request: u16,
    /// Delete gate evaluations, the memory of steps left and the scrapes of complete migrations
    /// older than this, in small batches after the rounds (never the journal, nor what a gate
    /// still reads: docs/operations.md); `off` keeps everything.
    #[arg(long, value_name = "DURATION|off", default_value = "14d", value_parser = retention)]
    pub retain: Retention,
}

/// What `--retain` says: keep what is younger than a duration, or everything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retention {
    Keep(Duration),
    Forever,
}

/// The parser of `--retain`: a duration above 0 (humantime: `14d`, `36h`), or `off`.
fn retention(text: &str) -> Result<Retention, String> {
    if text.eq_ignore_ascii_case("off") {
        return Ok(Retention::Forever);
    }
    nonzero_duration("say `off` to keep everything")(text).map(Retention::Keep)
}

fn token(args: &RunArgs) -> Result<Option<String>, CliError> {
    if let Some(path) = &args.token_file {
        let t = std::fs::read_to_string(path)
            .map_err(|e| CliError::input(format!("--token-file {}: {e}", path.display())))?;
        let t = t.trim().to_string();
        if t.is_empty() {
            return Err(CliError::input(format!(
                "--token-file {} is empty",
                path.display()
            )));
        }
        return Ok(Some(t));
    }
    Ok(std::env::var("MIGRATE_API_TOKEN")
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty()))
}

pub async fn run(ctx: &Ctx, args: RunArgs) -> CliResult {
    let token = token(&args)?;
    if args.lease_ttl < Duration::from_secs(1) {
        return Err(CliError::input(format!(
            "--lease-ttl {}: must be at least 1s (a standby takes over within two)",
            humantime::format_duration(args.lease_ttl)
        )));
    }
    let store = ctx.store().await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| CliError::new(1, format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| CliError::new(1, e.to_string()))?;
    let holder = args.id.clone().unwrap_or_else(|| {
        let host = std::fs::read_to_string("/etc/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        format!("daemon@{host}:{}", std::process::id())
    });
    let now = ctx.global.now.clone();
    let clock: daemon::Clock = match now {
        Some(_) => {
            let fixed = ctx.now_ms()?;
            Arc::new(move || fixed)
        }
        None => Arc::new(crate::time::now_ms),
    };
    let config = Config {
        interval: args.interval,
        source_timeout: ctx.global.source_timeout,
        queries_per_request: usize::from(args.queries_per_request),
        lease_ttl: args.lease_ttl,
        watch_interval: Duration::from_millis(25),
        holder: holder.clone(),
        token,
        read_only_api: args.read_only,
        confirm_complete: args.confirm_complete.clone(),
        clock,
        retain: match args.retain {
            Retention::Keep(d) => Some(d),
            Retention::Forever => None,
        },
    };
    daemon::check_listener(addr, &config).map_err(|e| CliError::input(e.to_string()))?;
    eprintln!(
        "migrate run: {holder} on http://{addr} (state {}), every {}, {}; Ctrl-C to stop",
        redact_url(&ctx.global.state),
        crate::time::human(args.interval),
        match args.retain {
            Retention::Keep(d) => format!("history kept {}", crate::time::human(d)),
            Retention::Forever => "history kept forever (--retain off)".to_string(),
        }
    );
    if let Some(warning) = interval_warning(args.interval) {
        eprintln!("migrate run: warning: {warning}");
    }
    daemon::run(
        store,
        listener,
        config,
        Arc::new(SystemResolve),
        shutdown_signal(),
    )
    .await
    .map_err(|e| CliError::new(1, e.to_string()))?;
    eprintln!("migrate run: stopped");
    Ok(ExitCode::SUCCESS)
}

/// What to say when `interval` is not under the default `for_max_gap`: every `for:` gate that
/// keeps the default would restart its span at each round and never pass.
fn interval_warning(interval: Duration) -> Option<String> {
    let limit = crate::plan::model::DEFAULT_FOR_MAX_GAP;
    (interval >= limit).then(|| {
        format!(
            "--interval {} is not under {}, the time a `for:` gate allows between two \
             evaluations by default (`for_max_gap`): such a gate restarts its span at every round \
             and never passes. Lower --interval, or set `for_max_gap` above it on those gates",
            crate::time::human(interval),
            crate::time::human(limit)
        )
    })
}

/// SIGTERM or SIGINT.
pub(super) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) {
            (Ok(mut term), Ok(mut int)) => {
                tokio::select! {
                    _ = term.recv() => {},
                    _ = int.recv() => {},
                }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retain_is_a_duration_above_zero_or_off() {
        assert_eq!(
            retention("14d"),
            Ok(Retention::Keep(Duration::from_secs(14 * 86_400)))
        );
        assert_eq!(retention("OFF"), Ok(Retention::Forever));
        assert!(retention("0s").is_err_and(|e| e.contains("off")));
        assert!(retention("soon").is_err());
    }

    #[test]
    fn an_interval_at_or_over_the_default_for_max_gap_is_warned_about() {
        assert_eq!(interval_warning(Duration::from_secs(15)), None);
        assert_eq!(interval_warning(Duration::from_secs(299)), None);
        for interval in [Duration::from_secs(300), Duration::from_secs(600)] {
            let warning = interval_warning(interval).expect("a warning");
            assert!(warning.contains("for_max_gap"), "{warning}");
            assert!(warning.contains("never passes"), "{warning}");
        }
    }
}
