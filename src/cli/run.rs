//! `migrate run`: the daemon.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::{CliError, CliResult, Ctx, nonzero_duration, redact_url};
use crate::daemon::auth::{Access, FileKind, TokenFile, TokenSource, Tokens};
use crate::daemon::http::Limits;
use crate::daemon::{self, Config};
use crate::indicators::fetch::QUERIES_PER_REQUEST;
use crate::plan::SystemResolve;
use crate::store::postgres::{Keepalives, SessionLimits};

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
    /// A file holding the API token (else MIGRATE_API_TOKEN), or one `name role token` line per
    /// person (roles viewer, operator, admin; docs/api.md), read again when its content changes.
    /// Mutating calls need `Authorization: Bearer <token>`.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// Take the caller's name from this header (e.g. X-Forwarded-User), set by an authenticating
    /// proxy; believed only from the --trusted-proxy addresses. A name is a viewer unless
    /// --roles-file (or the token file) gives it a role; a header sent twice is refused.
    #[arg(long, value_name = "HEADER", requires = "trusted_proxy")]
    pub trust_identity_header: Option<String>,
    /// The roles of the names the proxy vouches for: one `name role` line each (the token file's
    /// format, no token needed), read again when its content changes. Without it, the token
    /// file's lines give the roles, and a name on no line is a viewer.
    #[arg(long, value_name = "PATH", requires = "trust_identity_header")]
    pub roles_file: Option<PathBuf>,
    /// An address (or network: 10.0.0.0/8) of the authenticating proxy whose identity header is
    /// believed. Repeat for several.
    #[arg(long, value_name = "ADDR", value_parser = proxy_address, requires = "trust_identity_header")]
    pub trusted_proxy: Vec<ipnet::IpNet>,
    /// Serve reads only: every mutating API call is refused.
    #[arg(long)]
    pub read_only: bool,
    /// Answer requests whose `Host` is this name (or address) too; repeat for several. Loopback
    /// names, the listen address and this machine's hostname are always allowed; any other
    /// `Host` is refused on every route (DNS rebinding). `*` allows any (an ingress that checks
    /// the Host itself): docs/api.md.
    #[arg(long, value_name = "HOST")]
    pub allowed_host: Vec<String>,
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
    /// Most HTTP connections served at once; one more is answered 503 with Retry-After. Lowered
    /// at start to leave the controller file descriptors (the open-files limit minus 256, or
    /// half of it).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_connections: u32,
    /// Most routing long-polls parked at once; one more is answered 503 with Retry-After.
    #[arg(long, default_value_t = 768, value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_long_polls: u32,
    /// Most producers remembered from the routing long-poll (their id, the generation they
    /// applied), across all migrations; one more evicts the one seen longest ago, counted in
    /// queue_migrate_routing_followers_evicted_total.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub http_max_followers: u32,
    /// Time a client has to send a request's headers, from the connection's start or the
    /// previous response (also how long an idle kept-alive connection stays open).
    #[arg(long, default_value = "10s", value_parser = nonzero_duration("a zero header timeout would close every connection at once"))]
    pub http_header_timeout: Duration,
    /// A connection on which no byte moved this long, while no request is being answered, is
    /// closed (a client that stopped reading its answer).
    #[arg(long, default_value = "30s", value_parser = nonzero_duration("a zero idle timeout would close every connection at once"))]
    pub http_idle_timeout: Duration,
    /// Time to answer a request (a routing long-poll: its ?wait plus this), else 503.
    #[arg(long, default_value = "30s", value_parser = nonzero_duration("a zero request timeout would answer every request 503"))]
    pub http_request_timeout: Duration,
    /// Delete gate evaluations, the memory of steps left, the scrapes of complete migrations and
    /// the delivered outbox rows older than this, in small batches after the rounds (never the
    /// journal, nor what a gate still reads, nor a transition still to announce:
    /// docs/operations.md); `off` keeps everything.
    #[arg(long, value_name = "DURATION|off", default_value = "14d", value_parser = retention)]
    pub retain: Retention,
    /// Warn (at start, and whenever it changes) when this host's clock differs from the
    /// database's by more than this; leases and gates run on the database's clock regardless.
    #[arg(long, default_value = "2s", value_parser = humantime::parse_duration)]
    pub max_clock_skew: Duration,
    /// PostgreSQL: how long a statement of this daemon waits for a row lock (`lock_timeout`)
    /// before its round skips that migration [default: 2s, at most a fifth of --lease-ttl]
    #[arg(long, value_parser = nonzero_duration("a zero lock timeout would wait forever"))]
    pub db_lock_timeout: Option<Duration>,
    /// PostgreSQL: the longest statement of this daemon (`statement_timeout`).
    #[arg(long, default_value = "30s", value_parser = nonzero_duration("a zero statement timeout would wait forever"))]
    pub db_statement_timeout: Duration,
    /// PostgreSQL: how long a session of this daemon may sit idle inside a transaction before
    /// the server ends it and frees its locks (`idle_in_transaction_session_timeout`): what a
    /// paused ex-leader's open transaction can hold up a takeover for [default: 30s, at most a
    /// third of --lease-ttl]
    #[arg(long, value_parser = nonzero_duration("a zero idle timeout would wait forever"))]
    pub db_idle_in_transaction_timeout: Option<Duration>,
    /// PostgreSQL: how long a session of this daemon may be silent before the server probes
    /// its client (`tcp_keepalives_idle`, whole seconds). The server notices a daemon that is
    /// gone after about idle + count x interval, then ends its session and frees its locks.
    #[arg(long, default_value = "10s", value_parser = nonzero_duration("0 would leave it to the operating system's default, 2 hours on Linux"))]
    pub db_keepalive_idle: Duration,
    /// PostgreSQL: the time between two keepalive probes (`tcp_keepalives_interval`).
    #[arg(long, default_value = "5s", value_parser = nonzero_duration("0 would leave it to the operating system's default"))]
    pub db_keepalive_interval: Duration,
    /// PostgreSQL: how many keepalive probes go unanswered before the server drops the
    /// session (`tcp_keepalives_count`).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub db_keepalive_count: u32,
}

/// The HTTP limits of `args`, the connection cap fitted to this process's open-files limit.
fn http_limits(args: &RunArgs) -> Limits {
    let wanted = Limits {
        max_connections: usize::try_from(args.http_max_connections).unwrap_or(usize::MAX),
        max_long_polls: usize::try_from(args.http_max_long_polls).unwrap_or(usize::MAX),
        header_timeout: args.http_header_timeout,
        idle_timeout: args.http_idle_timeout,
        request_timeout: args.http_request_timeout,
        max_followers: usize::try_from(args.http_max_followers).unwrap_or(usize::MAX),
    };
    let fitted = wanted.fit_open_files(open_files_limit());
    if fitted.max_connections < wanted.max_connections {
        eprintln!(
            "migrate run: serving at most {} HTTP connections at once (not {}): the open-files limit (ulimit -n) leaves no more beside what the controller needs",
            fitted.max_connections, wanted.max_connections
        );
    }
    fitted
}

/// This process's open-files limit (soft `RLIMIT_NOFILE`), when known.
#[cfg(unix)]
fn open_files_limit() -> Option<u64> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only into the struct it is given.
    let got = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) };
    (got == 0 && limit.rlim_cur != libc::RLIM_INFINITY).then_some(limit.rlim_cur)
}

#[cfg(not(unix))]
fn open_files_limit() -> Option<u64> {
    None
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

/// The parser of `--trusted-proxy`: an address, or a network in CIDR notation.
fn proxy_address(text: &str) -> Result<ipnet::IpNet, String> {
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| {
            format!("{text:?} is not an address (10.0.0.5, ::1) or a network (10.0.0.0/8)")
        })
}

/// Who may call the API: `--token-file` (read again when it changes) or MIGRATE_API_TOKEN, and
/// the authenticating proxy.
fn access(args: &RunArgs) -> Result<Access, CliError> {
    let tokens = if let Some(path) = &args.token_file {
        let file = TokenFile::open(path).map_err(CliError::input)?;
        TokenSource::File(Arc::new(file))
    } else {
        match std::env::var("MIGRATE_API_TOKEN")
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
        {
            Some(t) => TokenSource::Fixed(Arc::new(Tokens::single(t))),
            None => TokenSource::None,
        }
    };
    let identity_header = args
        .trust_identity_header
        .as_deref()
        .map(|h| {
            axum::http::HeaderName::try_from(h.trim()).map_err(|_| {
                CliError::input(format!(
                    "--trust-identity-header {h:?} is not a header name"
                ))
            })
        })
        .transpose()?;
    let roles = args
        .roles_file
        .as_deref()
        .map(|path| TokenFile::open_as(path, FileKind::Roles).map_err(CliError::input))
        .transpose()?
        .map(Arc::new);
    Ok(Access {
        tokens,
        identity_header,
        roles,
        trusted_proxies: args.trusted_proxy.clone(),
    })
}

/// The PostgreSQL session limits of `args`: the ones not given scale with the lease, so that an
/// ex-leader's lock or open transaction holds a takeover or a round up for a fraction of the
/// lease period at most.
fn session_limits(args: &RunArgs) -> SessionLimits {
    let ttl = args.lease_ttl;
    SessionLimits {
        lock_timeout: args
            .db_lock_timeout
            .unwrap_or_else(|| Duration::from_secs(2).min(ttl / 5)),
        statement_timeout: args.db_statement_timeout,
        idle_in_transaction_timeout: args
            .db_idle_in_transaction_timeout
            .unwrap_or_else(|| Duration::from_secs(30).min(ttl / 3)),
        keepalives: Keepalives {
            idle: args.db_keepalive_idle,
            interval: args.db_keepalive_interval,
            count: args.db_keepalive_count,
        },
    }
}

pub async fn run(ctx: &Ctx, args: RunArgs) -> CliResult {
    let access = access(&args)?;
    if args.lease_ttl < Duration::from_secs(1) {
        return Err(CliError::input(format!(
            "--lease-ttl {}: must be at least 1s (a standby takes over within two)",
            humantime::format_duration(args.lease_ttl)
        )));
    }
    let store = ctx.store().await?;
    let store = store
        .with_session_limits(&session_limits(&args))
        .await
        .map_err(|e| {
            CliError::new(
                1,
                format!(
                    "cannot open the state store: {}",
                    crate::redact::text(&e.to_string())
                ),
            )
        })?;
    if ctx.global.source_timeout >= args.lease_ttl {
        tracing::warn!(
            "--source-timeout {} is not below --lease-ttl {}: a round that waits that long on a source may find its lease gone, and its decision is then refused (fenced), never committed",
            crate::time::human(ctx.global.source_timeout),
            crate::time::human(args.lease_ttl)
        );
    }
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
    let fixed = match ctx.global.now {
        Some(_) => Some(ctx.now_ms()?),
        None => None,
    };
    // Gates measure `observe` and `for:` on the database's clock, as the store stamps.
    let clock = daemon::DaemonClock::on_host(std::sync::Arc::new(ctx.host_clock), fixed);
    let config = Config {
        interval: args.interval,
        source_timeout: ctx.global.source_timeout,
        queries_per_request: usize::from(args.queries_per_request),
        max_series: ctx.global.max_series as usize,
        lease_ttl: args.lease_ttl,
        watch_interval: Duration::from_millis(25),
        holder: holder.clone(),
        instance: crate::store::lease_keeper::new_instance(),
        access,
        read_only_api: args.read_only,
        allowed_hosts: args.allowed_host.clone(),
        confirm_complete: args.confirm_complete.clone(),
        clock,
        http: http_limits(&args),
        retain: match args.retain {
            Retention::Keep(d) => Some(d),
            Retention::Forever => None,
        },
        max_clock_skew: args.max_clock_skew,
    };
    daemon::check_listener(addr, &config).map_err(|e| CliError::input(e.to_string()))?;
    eprintln!(
        "migrate run: {holder} (instance {}) on http://{addr} (state {}), every {}, {}; Ctrl-C to stop",
        config.instance,
        redact_url(&ctx.global.state),
        // Exact: a sub-second interval is not rounded down to "0s".
        crate::plan::duration_serde::format(args.interval),
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
    fn the_http_flags_default_to_the_daemon_s_limits() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            run: RunArgs,
        }
        let args = Cmd::parse_from(["migrate"]).run;
        let fitted = Limits {
            max_connections: args.http_max_connections as usize,
            max_long_polls: args.http_max_long_polls as usize,
            header_timeout: args.http_header_timeout,
            idle_timeout: args.http_idle_timeout,
            request_timeout: args.http_request_timeout,
            max_followers: args.http_max_followers as usize,
        };
        assert_eq!(fitted, Limits::default());
    }

    /// Issue 42: the sessions' keepalives had no flag; they default to the documented 10 s /
    /// 5 s x 3 and follow the flags.
    #[test]
    fn the_keepalive_flags_reach_the_sessions_limits() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cmd {
            #[command(flatten)]
            run: RunArgs,
        }
        let limits = |argv: &[&str]| Cmd::try_parse_from(argv).map(|c| session_limits(&c.run));
        let default = limits(&["migrate"]).map(|l| l.keepalives);
        assert_eq!(default.ok(), Some(Keepalives::default()));
        let given = limits(&[
            "migrate",
            "--db-keepalive-idle",
            "4s",
            "--db-keepalive-interval",
            "2s",
            "--db-keepalive-count",
            "2",
        ]);
        assert_eq!(
            given.map(|l| l.keepalives).ok(),
            Some(Keepalives {
                idle: Duration::from_secs(4),
                interval: Duration::from_secs(2),
                count: 2,
            })
        );
        for refused in [
            &["migrate", "--db-keepalive-idle", "0s"][..],
            &["migrate", "--db-keepalive-count", "0"],
        ] {
            assert!(limits(refused).is_err(), "{refused:?}");
        }
    }

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
