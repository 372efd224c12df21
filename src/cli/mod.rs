//! The `migrate` command line: one file per subcommand, errors mapped to exit codes once.
//!
//! Exit codes: 0 ok, 1 runtime error, 2 invalid input, 3 gated (a gate or the minimum time keeps
//! the migration where it is), 4 conflict (another command or controller acted first), 5 not in
//! the `--from` state (nothing done).
//! Output goes through [`to_stdout`]: a closed pipe (`| head`) ends the command with 0, quietly;
//! any other failed write to standard output is 1.

mod abort;
mod advance;
mod bridge;
mod demo;
mod dlq;
pub mod fit;
mod history;
mod init;
mod judge;
mod pause;
mod plan_apply;
mod plan_backtest;
mod plan_check;
mod prune;
mod resume;
mod rollback;
mod routing;
mod run;
mod slice;
mod status;
mod transition;

use std::fmt;
use std::io::{self, BufWriter, StdoutLock, Write};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::controller::{Actor, Controller, ControllerError};
use crate::indicators::fetch::Fetcher;
use crate::plan::{SecretsMode, SystemResolve};
use crate::store::StoreError;
use crate::store::any::AnyStore;

/// The help heading of [`Global`]'s options.
const GLOBAL: &str = "Global options";

/// Move a live message flow from one broker to another, one gated, journaled, reversible step at
/// a time.
///
/// A plan (YAML) declares the phases — consume_dual, synthetic, slices, drain, disconnect — and the
/// gates (Prometheus queries, /metrics readings) that must pass before each step. Every step is
/// journaled in the state store; producers follow the routing document it publishes.
///
/// New here? `migrate demo` runs a whole migration on this machine, nothing to install.
///
/// Typical session:
///   migrate plan check plans/orders.yaml
///   migrate init plans/orders.yaml
///   migrate status orders
///   migrate advance orders --dry-run
///   migrate advance orders
///   migrate rollback orders --reason "error rate up on new"
///   migrate plan apply plans/orders.yaml --reason "looser gate"
///
/// Exit codes: 0 ok, 1 runtime error, 2 invalid input, 3 gated, 4 conflict, 5 not in the
/// --from state.
#[derive(Debug, Parser)]
#[command(
    name = "migrate",
    version,
    verbatim_doc_comment,
    after_help = "Logs go to standard error: MIGRATE_LOG sets the level (default warn; info for production, \
                  see docs/operations.md), --log-format json writes one JSON object a line, NO_COLOR=1 turns colour off."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Cmd,
}

impl Cli {
    /// The command line as `migrate` parses it: [`Cli`]'s, with the global options `demo` does
    /// not read (a store, an actor, a source) hidden from its help, still accepted.
    pub fn command_tuned() -> clap::Command {
        use clap::CommandFactory;
        let c = Cli::command();
        let hidden: Vec<clap::Arg> = c
            .get_arguments()
            .filter(|a| ["state", "actor", "source_timeout"].contains(&a.get_id().as_str()))
            .map(|a| a.clone().hide(true))
            .collect();
        // A subcommand that has an argument of a global's id keeps its own copy.
        c.mut_subcommand("demo", |d| d.args(hidden))
    }

    /// Parse `args` with [`Cli::command_tuned`].
    ///
    /// # Errors
    /// What clap says of the command line (help and version included).
    pub fn try_parse_tuned<I, T>(args: I) -> Result<Cli, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::FromArgMatches;
        let matches = Cli::command_tuned().try_get_matches_from(args)?;
        Cli::from_arg_matches(&matches)
    }
}

/// Options every subcommand accepts, before or after its name. Shown apart, under "Global
/// options", after the subcommand's own: not every subcommand uses them (`slice` and `demo` use
/// none), and each says which do.
#[derive(Debug, Args)]
pub struct Global {
    /// The state store: a SQLite file path, sqlite://PATH, or postgres://USER@HOST/DB (the
    /// migrations, their journal, DLQ decisions).
    #[arg(
        long,
        global = true,
        env = "MIGRATE_STATE",
        default_value = "./queue-migrate.db",
        help_heading = GLOBAL
    )]
    pub state: String,
    /// Who acts, for the journal of a command that changes a migration (default: $USER).
    #[arg(long, global = true, env = "MIGRATE_ACTOR", help_heading = GLOBAL)]
    pub actor: Option<String>,
    /// How long to wait for an indicator source before its gate holds (status, advance, run),
    /// or for the etcd gateway a routing document is written to (above 0).
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        default_value = "10s",
        value_parser = nonzero_duration("a zero timeout fails every indicator request, so every gate would hold")
    )]
    pub source_timeout: Duration,
    /// Most series one `/metrics` scrape source may hold (status, advance, run): a target with
    /// more gives no reading (its gates hold, "too many series: N > cap") and none of it is
    /// kept. An exporter's label-cardinality bug must not fill the store.
    #[arg(
        long,
        global = true,
        help_heading = GLOBAL,
        env = "MIGRATE_MAX_SERIES",
        default_value_t = crate::indicators::fetch::MAX_SERIES as u32,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_series: u32,
    /// The log lines on standard error: `text` (for people) or `json` (one object a line, the
    /// migration, phase and gate as fields, for a log pipeline).
    #[arg(
        long,
        global = true,
        env = "MIGRATE_LOG_FORMAT",
        value_enum,
        default_value_t = LogFormat::Text,
        help_heading = GLOBAL
    )]
    pub log_format: LogFormat,
    /// Evaluate as if it were this instant (RFC 3339). For tests and rehearsals.
    #[arg(
        long,
        global = true,
        env = "MIGRATE_NOW",
        hide = true,
        help_heading = GLOBAL
    )]
    pub now: Option<String>,
}

/// How log lines are written (`--log-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line a message, for people (colour on a terminal).
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `message` and every field of
    /// the event (`migration`, `phase`, `gate`...) at the top level.
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run a whole migration on this machine against an embedded world (two brokers, producers,
    /// an idempotent consumer), with the real controller, and prove nothing was lost.
    Demo(demo::DemoArgs),
    /// Work with plan files.
    #[command(subcommand)]
    Plan(plan_check::PlanCmd),
    /// Register the migration of a plan in the state store (state: planned).
    Init(init::InitArgs),
    /// The `judge` gate: `simulate` its error rates and time to a decision before a migration.
    #[command(subcommand)]
    Judge(judge::JudgeCmd),
    /// Phase, step, routing and every gate with its last value.
    Status(status::StatusArgs),
    /// Evaluate the exit gates now; move one step if all pass and the minimum time is met.
    Advance(advance::AdvanceArgs),
    /// Move exactly one step back.
    Rollback(rollback::RollbackArgs),
    /// Stop advancing (rollback and abort still work).
    Pause(pause::PauseArgs),
    /// Allow advancing again.
    Resume(resume::ResumeArgs),
    /// Send every slice back to the old broker at once; consumers keep reading both; pauses.
    Abort(abort::AbortArgs),
    /// The daemon: auto-advance every active migration, act on guard breaches, serve the HTTP
    /// API and /metrics.
    Run(run::RunArgs),
    /// Forward an unchangeable producer's queue to the old or the new broker by the live routing.
    Bridge(bridge::BridgeArgs),
    /// Dead letters: triage, decisions, replay, alert signals, the weekly report.
    #[command(subcommand)]
    Dlq(dlq::DlqCmd),
    /// The journal: every transition with actor, reason and evidence.
    History(history::HistoryArgs),
    /// Delete gate evaluations and scrapes older than a duration (never the journal, nor what a
    /// gate still reads); `migrate run --retain` does it as it goes.
    Prune(prune::PruneArgs),
    /// The routing document producers and consumers follow.
    Routing(routing::RoutingArgs),
    /// The slice of aggregate keys (the function producers use).
    Slice(slice::SliceArgs),
}

impl Cli {
    /// Tokio worker threads for the command: the bridge's `--threads`, two for everything else.
    pub fn worker_threads(&self) -> usize {
        match &self.command {
            Cmd::Bridge(a) => usize::from(a.threads),
            _ => 2,
        }
    }

    /// How many malloc arenas the command should keep at most, before any thread starts: the
    /// daemon holds every source's scrape history, many small allocations made and freed on
    /// several threads, which glibc's default (up to 8 arenas per core) leaves scattered, free
    /// but held, across one arena per thread. `None` keeps the default (and so does an operator's
    /// `MALLOC_ARENA_MAX`).
    pub fn malloc_arenas(&self) -> Option<i32> {
        match &self.command {
            Cmd::Run(_) => Some(2),
            _ => None,
        }
    }
}

/// An error at the edge: the message for a person and the exit code. Exit code 0 is the one
/// error with nothing to say: standard output's reader stopped reading ([`CliError::stdout`]).
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> CliError {
        CliError {
            code,
            message: message.into(),
        }
    }
    /// Invalid input (exit 2).
    pub fn input(message: impl Into<String>) -> CliError {
        CliError::new(2, message)
    }
    /// Standard output could not be written. A closed pipe (`migrate history NAME | head -1`)
    /// is its reader's choice to stop: exit 0, nothing said, as `head` and `grep -q` users expect.
    /// Anything else (ENOSPC from a full disk, EIO) is a runtime error (exit 1).
    pub fn stdout(e: io::Error) -> CliError {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::new(0, "")
        } else {
            CliError::new(1, format!("cannot write to standard output: {e}"))
        }
    }
    /// Nothing to tell anyone: the command stops here, the exit code says the rest.
    pub fn is_quiet(&self) -> bool {
        self.code == 0
    }
    /// A plan's broker that cannot be connected to, while `doing` something: exit 2 when the
    /// plan or this machine's environment for it is at fault, 1 when the broker is.
    pub fn plan_broker(e: &crate::brokers::from_plan::PlanBrokerError, doing: &str) -> CliError {
        let code = if e.is_configuration() { 2 } else { 1 };
        CliError::new(code, format!("{doing}: {e}"))
    }
}

/// A command's own exit `code` once its report was `printed`: a reader that stopped reading
/// (`| head`) does not turn a gated advance (3) or an invalid plan (2) into a success; any other
/// failure to write is the error.
pub fn exit_after_printing(printed: Result<(), CliError>, code: ExitCode) -> CliResult {
    match printed {
        Err(e) if !e.is_quiet() => Err(e),
        _ => Ok(code),
    }
}

impl From<ControllerError> for CliError {
    fn from(e: ControllerError) -> CliError {
        let code = match &e {
            ControllerError::Store(
                StoreError::Conflict { .. } | StoreError::StaleMemory { .. },
            ) => 4,
            ControllerError::NotInState { .. } => 5,
            ControllerError::Store(
                StoreError::NotFound(_)
                | StoreError::AlreadyExists(_)
                | StoreError::UnsupportedUrl(_)
                | StoreError::MalformedUrl { .. },
            ) => 2,
            ControllerError::Store(_) => 1,
            ControllerError::Plan(_)
            | ControllerError::StoredPlan { .. }
            | ControllerError::Illegal(_)
            | ControllerError::ReasonRequired(_)
            | ControllerError::PlanFile { .. }
            | ControllerError::NotInitialized { .. }
            | ControllerError::UnknownState { .. } => 2,
        };
        CliError::new(code, e.to_string())
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> CliError {
        ControllerError::from(e).into()
    }
}

pub type CliResult = Result<ExitCode, CliError>;

/// What every subcommand gets: the parsed global options and, on demand, the store.
pub struct Ctx {
    pub global: Global,
    pub resolve: SystemResolve,
}

impl Ctx {
    /// "Now": the clock, unless `--now` says otherwise.
    pub fn now_ms(&self) -> Result<i64, CliError> {
        match &self.global.now {
            None => Ok(crate::time::now_ms()),
            Some(t) => crate::time::parse_rfc3339(t).map_err(|e| {
                CliError::input(format!("--now: {e} (want e.g. 2026-11-30T12:00:00Z)"))
            }),
        }
    }

    pub fn actor(&self, reason: Option<String>) -> Actor {
        let name = self
            .global
            .actor
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "cli".into());
        Actor { name, reason }
    }

    pub async fn store(&self) -> Result<AnyStore, CliError> {
        let url = &self.global.state;
        // `--now` tells the story's time: the journal keeps it (otherwise the database's clock).
        let simulated = self.global.now.is_some();
        crate::store::any::open(url)
            .await
            .map(|s| if simulated { s.with_writer_clock() } else { s })
            .map_err(|e| match e {
                StoreError::UnsupportedUrl(_) | StoreError::MalformedUrl { .. } => {
                    CliError::input(e.to_string())
                }
                e => CliError::new(
                    1,
                    format!(
                        "cannot open the state store {}: {}",
                        redact_url(url),
                        crate::redact::text(&e.to_string())
                    ),
                ),
            })
    }

    /// The state store, which must exist: commands that read or move a migration do not create
    /// an empty SQLite file where a mistyped `--state` points (it would read as "no migrations").
    pub async fn existing_store(&self) -> Result<AnyStore, CliError> {
        let url = &self.global.state;
        if let Some(file) = crate::store::any::sqlite_file(url)
            && !file.exists()
        {
            return Err(CliError::input(format!(
                "no state store at {}: `migrate init PLAN` creates it; otherwise point --state (or MIGRATE_STATE) at the store your migrations are in",
                file.display()
            )));
        }
        self.store().await
    }

    pub fn fetcher(&self) -> Result<Fetcher, CliError> {
        Fetcher::new(self.global.source_timeout)
            .map(|f| f.with_max_series(self.global.max_series as usize))
            .map_err(|e| CliError::new(1, e.to_string()))
    }

    pub fn controller<'a>(
        &'a self,
        store: &'a AnyStore,
        fetcher: &'a Fetcher,
    ) -> Controller<'a, AnyStore> {
        Controller {
            store,
            fetcher,
            resolve: &self.resolve,
            // The commands read and write the store; what needs a broker or a source URL
            // fails there, naming the variable (`migrate run` builds its own, strict).
            secrets: SecretsMode::Deferred,
            read_only: false,
            histories: None,
            round: None,
        }
    }
}

/// Run one command line.
///
/// # Errors
/// A [`CliError`] with the message and exit code.
pub async fn run(cli: Cli) -> CliResult {
    let ctx = Ctx {
        global: cli.global,
        resolve: SystemResolve,
    };
    match cli.command {
        Cmd::Demo(a) => demo::run(a).await,
        Cmd::Plan(plan_check::PlanCmd::Check(a)) => plan_check::run(&ctx, a),
        Cmd::Plan(plan_check::PlanCmd::Apply(a)) => plan_apply::run(&ctx, a).await,
        Cmd::Plan(plan_check::PlanCmd::Backtest(a)) => plan_backtest::run(&ctx, a).await,
        Cmd::Init(a) => init::run(&ctx, a).await,
        Cmd::Status(a) => status::run(&ctx, a).await,
        Cmd::Advance(a) => advance::run(&ctx, a).await,
        Cmd::Rollback(a) => rollback::run(&ctx, a).await,
        Cmd::Pause(a) => pause::run(&ctx, a).await,
        Cmd::Resume(a) => resume::run(&ctx, a).await,
        Cmd::Abort(a) => abort::run(&ctx, a).await,
        Cmd::Run(a) => run::run(&ctx, a).await,
        Cmd::Bridge(a) => bridge::run(&ctx, a).await,
        Cmd::Dlq(cmd) => dlq::run(&ctx, cmd).await,
        Cmd::History(a) => history::run(&ctx, a).await,
        Cmd::Prune(a) => prune::run(&ctx, a).await,
        Cmd::Routing(a) => routing::run(&ctx, a).await,
        Cmd::Slice(a) => slice::run(a),
        Cmd::Judge(cmd) => judge::run(cmd),
    }
}

/// The parser of a duration option (humantime: `10s`, `500ms`, `2m`, `7d`) where zero makes no
/// sense: refused with `why`, instead of a daemon that spins or a gate that always holds.
pub fn nonzero_duration(
    why: &'static str,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text: &str| {
        let d = humantime::parse_duration(text)
            .map_err(|e| format!("{e} (want a duration like 10s, 500ms, 2m)"))?;
        if d.is_zero() {
            Err(format!("must be above 0: {why}"))
        } else {
            Ok(d)
        }
    }
}

/// One gate as `status` and `advance` print it.
pub struct GateRow<'a> {
    pub kind: &'a str,
    pub verdict: &'a str,
    pub name: &'a str,
    pub value: Option<f64>,
    pub reason: &'a str,
}

/// The gate table of `status` and `advance`: kind, verdict, name, last value, reason, each column
/// as wide as its widest cell (a long gate name or value does not push its row out of line).
pub fn write_gate_rows(out: &mut impl Write, rows: &[GateRow<'_>]) -> io::Result<()> {
    // The one text rule at the print: a plan's gate name and a reason show no control
    // character and no credential, whoever made them.
    let names: Vec<String> = rows.iter().map(|r| crate::outgoing::line(r.name)).collect();
    let rows: Vec<GateRow<'_>> = rows
        .iter()
        .zip(&names)
        .map(|(r, name)| GateRow {
            kind: r.kind,
            verdict: r.verdict,
            name,
            value: r.value,
            reason: r.reason,
        })
        .collect();
    let rows = &rows[..];
    let values: Vec<String> = rows
        .iter()
        .map(|r| r.value.map_or_else(|| "-".into(), |v| format!("{v}")))
        .collect();
    let width = |cell: fn(&GateRow<'_>) -> usize| rows.iter().map(cell).max().unwrap_or(0);
    let kind_w = width(|r| r.kind.chars().count());
    let verdict_w = width(|r| r.verdict.chars().count());
    let name_w = width(|r| r.name.chars().count());
    let value_w = values.iter().map(|v| v.chars().count()).max().unwrap_or(1);
    for (r, value) in rows.iter().zip(&values) {
        writeln!(
            out,
            "  {:<kind_w$} {:<verdict_w$} {:<name_w$} {value:>value_w$}  {}",
            r.kind,
            r.verdict.to_uppercase(),
            r.name,
            crate::outgoing::line(r.reason)
        )?;
    }
    Ok(())
}

/// Whether output may use colour, by `NO_COLOR` (<https://no-color.org>): set and not empty, it
/// disables colour (the demo's live view, the log lines on a terminal).
pub fn colour_allowed(no_color: Option<&std::ffi::OsStr>) -> bool {
    no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// A store URL with its credentials masked (the one rule: [`crate::redact::url`]).
pub fn redact_url(url: &str) -> String {
    crate::redact::url(url)
}

/// Standard output as a command writes it: locked and buffered (see [`to_stdout`]).
pub type Stdout = BufWriter<StdoutLock<'static>>;

/// Write a command's output: the one way a command prints its result. `write` gets standard
/// output, locked and buffered; it is flushed at the end. A failed write (`| head` closed the
/// pipe, `> /dev/full`) comes back as [`CliError::stdout`], never as a panic (`println!` panics:
/// exit 101 and a backtrace).
///
/// # Errors
/// [`CliError::stdout`] of the first write that failed.
pub fn to_stdout<R>(write: impl FnOnce(&mut Stdout) -> io::Result<R>) -> Result<R, CliError> {
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    write(&mut out)
        .and_then(|r| out.flush().map(|()| r))
        .map_err(CliError::stdout)
}

/// Print a value as pretty JSON on stdout, written as it is encoded (a large report is never
/// held whole in memory).
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let mut encoding = None;
    let written = to_stdout(|out| {
        serde_json::to_writer_pretty(&mut *out, value).map_err(|e| {
            if e.is_io() {
                io::Error::from(e)
            } else {
                let message = e.to_string();
                encoding = Some(e);
                io::Error::other(message)
            }
        })?;
        writeln!(out)
    });
    match encoding {
        Some(e) => Err(CliError::new(1, format!("cannot encode JSON: {e}"))),
        None => written,
    }
}

/// What a committed transition did, one line.
pub fn write_applied(out: &mut impl Write, applied: &crate::controller::Applied) -> io::Result<()> {
    writeln!(
        out,
        "{}: {} -> {}{} (version {}, routing generation {}: {} of {} slices to new, consumers read {})",
        applied.command,
        applied.from,
        applied.to,
        if applied.paused { " [paused]" } else { "" },
        applied.version,
        applied.routing.generation,
        applied.routing.slices_migrated,
        applied.routing.slices_total,
        applied
            .routing
            .consume
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("+"),
    )
}

/// Print what a committed transition did, and warn when its routing could not be published.
pub fn print_applied(applied: &crate::controller::Applied, json: bool) -> CliResult {
    let printed = if json {
        print_json(applied)
    } else {
        to_stdout(|out| write_applied(out, applied))
    };
    committed(applied, printed)
}

/// The outcome of a committed transition whose report was `printed`: a routing that could not be
/// published comes first (exit 1, whatever became of the report), then how the report went.
pub fn committed(applied: &crate::controller::Applied, printed: Result<(), CliError>) -> CliResult {
    if let Some(e) = &applied.publish_error {
        return Err(CliError::new(
            1,
            format!(
                "the transition is committed, but {e}; the next migrate command retries the publication"
            ),
        ));
    }
    printed.map(|()| ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn a_daemon_round_asks_ten_prometheus_queries_per_request_unless_told() {
        let per_request = |args: &[&str]| match Cli::try_parse_from(args.iter().copied()) {
            Ok(Cli {
                command: Cmd::Run(run),
                ..
            }) => Some(run.queries_per_request),
            _ => None,
        };
        assert_eq!(per_request(&["migrate", "run"]), Some(10));
        assert_eq!(
            per_request(&["migrate", "run", "--queries-per-request", "1"]),
            Some(1)
        );
        assert_eq!(
            per_request(&["migrate", "run", "--queries-per-request", "0"]),
            None
        );
        assert_eq!(
            per_request(&["migrate", "run", "--queries-per-request", "31"]),
            None
        );
    }

    #[test]
    fn replay_goes_to_a_migration_or_to_an_output_not_both() {
        let parse = |extra: &[&str]| {
            let mut args = vec!["migrate", "dlq", "replay", "x.ndjson", "--by", "ana"];
            args.extend_from_slice(extra);
            Cli::try_parse_from(args).map_err(|e| e.to_string())
        };
        let replay = |extra: &[&str]| match parse(extra) {
            Ok(Cli {
                command: Cmd::Dlq(dlq::DlqCmd::Replay(a)),
                ..
            }) => (a.migration, a.key_field, a.output),
            other => panic!("{extra:?}: {:?}", other.err()),
        };
        assert_eq!(replay(&[]), (None, None, "-".to_string()));
        assert_eq!(
            replay(&["--migration", "orders", "--key-field", "orderId"]),
            (
                Some("orders".to_string()),
                Some("orderId".to_string()),
                "-".to_string()
            )
        );
        let e = parse(&["--migration", "orders", "--output", "out.ndjson"]).unwrap_err();
        assert!(
            e.contains("--migration") && e.contains("--output") && e.contains("cannot be used"),
            "{e}"
        );
        let e = parse(&["--output", "-", "--migration", "orders"]).unwrap_err();
        assert!(e.contains("cannot be used"), "{e}");
        let e = parse(&["--key-field", "orderId"]).unwrap_err();
        assert!(e.contains("--migration"), "{e}");
        for extra in [&["--dedup-key", "t:{id}:{n}"][..], &["--no-dedup-key"]] {
            let e = parse(extra).unwrap_err();
            assert!(e.contains("--migration"), "{extra:?}: {e}");
        }
        let e = parse(&[
            "--migration",
            "orders",
            "--dedup-key",
            "t:{id}:{n}",
            "--no-dedup-key",
        ])
        .unwrap_err();
        assert!(e.contains("cannot be used"), "{e}");
    }

    #[test]
    fn zero_durations_are_refused_where_they_make_no_sense() {
        let refusal = |args: &[&str]| match Cli::try_parse_from(args.iter().copied()) {
            Ok(_) => None,
            Err(e) => Some(e.to_string()),
        };
        for (args, why) in [
            (
                &["migrate", "--source-timeout", "0s", "status", "orders"][..],
                "every gate would hold",
            ),
            (
                &["migrate", "status", "orders", "--source-timeout", "0ms"][..],
                "every gate would hold",
            ),
            (&["migrate", "run", "--interval", "0s"][..], "busy loop"),
            (
                &["migrate", "bridge", "orders", "--routing-interval", "0s"][..],
                "busy loop",
            ),
            (
                &["migrate", "dlq", "watch", "x", "--every", "0s"][..],
                "compute once",
            ),
            (
                &["migrate", "dlq", "watch", "x", "--window", "0s"][..],
                "window",
            ),
            (
                &[
                    "migrate",
                    "dlq",
                    "replay",
                    "x",
                    "--by",
                    "a",
                    "--max-age",
                    "0s",
                ][..],
                "--force-old",
            ),
        ] {
            let e = refusal(args).unwrap_or_else(|| panic!("{args:?} was accepted"));
            assert!(
                e.contains("must be above 0") && e.contains(why),
                "{args:?}: {e}"
            );
        }
        // Above zero they parse; a duration that does not parse says what one looks like.
        assert_eq!(
            refusal(&["migrate", "--source-timeout", "1ms", "status", "orders"]),
            None
        );
        assert_eq!(refusal(&["migrate", "run", "--interval", "1s"]), None);
        let e = refusal(&["migrate", "run", "--interval", "soon"]).unwrap_or_default();
        assert!(e.contains("like 10s"), "{e}");
    }

    #[test]
    fn no_color_set_and_not_empty_disables_colour() {
        use std::ffi::OsStr;
        assert!(colour_allowed(None));
        assert!(colour_allowed(Some(OsStr::new(""))));
        assert!(!colour_allowed(Some(OsStr::new("1"))));
        assert!(!colour_allowed(Some(OsStr::new("0"))));
    }

    #[test]
    fn global_options_show_apart_from_a_subcommands_own_in_its_help() {
        let help = |args: &[&str]| match Cli::try_parse_from(args.iter().copied()) {
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.to_string(),
            other => panic!("{args:?} gave no help: {other:?}"),
        };
        for (sub, own) in [
            (&["migrate", "slice", "--help"][..], "--slices"),
            (&["migrate", "slice", "-h"][..], "--stdin"),
            (&["migrate", "dlq", "triage", "--help"][..], "--limit"),
            (&["migrate", "status", "-h"][..], "--json"),
        ] {
            let text = help(sub);
            let global = text
                .find("Global options:")
                .unwrap_or_else(|| panic!("{sub:?}: no Global options heading:\n{text}"));
            let (mine, globals) = text.split_at(global);
            assert!(
                mine.contains(own),
                "{sub:?}: {own} not among its own options:\n{text}"
            );
            for g in ["--state", "--actor", "--source-timeout"] {
                assert!(
                    !mine.contains(g),
                    "{sub:?}: {g} among its own options:\n{text}"
                );
                assert!(globals.contains(g), "{sub:?}: {g} missing:\n{text}");
            }
        }
        assert!(help(&["migrate", "--help"]).contains("MIGRATE_LOG"));
    }

    /// Issue 44: `demo --help` listed `--state` and `--actor`, which the demo ignores.
    #[test]
    fn demo_help_lists_only_what_the_demo_reads() {
        let help = match Cli::try_parse_tuned(["migrate", "demo", "--help"]) {
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.to_string(),
            other => panic!("no help: {other:?}"),
        };
        for own in ["--seed", "--fault", "--json", "--keep"] {
            assert!(help.contains(own), "{own} missing:\n{help}");
        }
        for ignored in ["--state", "--actor", "--source-timeout"] {
            assert!(!help.contains(ignored), "{ignored} listed:\n{help}");
        }
        // Still listed where they are read.
        let status = match Cli::try_parse_tuned(["migrate", "status", "--help"]) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("no help"),
        };
        assert!(
            status.contains("--state") && status.contains("--actor"),
            "{status}"
        );
        // And still parsed on the demo's command line (a script passing them does not break).
        let cli = Cli::try_parse_tuned(["migrate", "demo", "--state", "x.db", "--seed", "3"]);
        assert!(cli.is_ok_and(|c| c.global.state == "x.db"));
    }

    /// Regression: a constant put between `Cli`'s doc comment and the struct took that comment,
    /// and `migrate --help` opened with the global options' text instead of what the tool does,
    /// without the typical session or the exit codes.
    #[test]
    fn the_top_help_says_what_the_tool_does_and_its_exit_codes() {
        let help = match Cli::try_parse_from(["migrate", "--help"]) {
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.to_string(),
            other => panic!("no help: {other:?}"),
        };
        assert!(
            help.starts_with("Move a live message flow"),
            "the top help opens with what the tool does:\n{help}"
        );
        for part in ["Typical session:", "migrate demo", "Exit codes: 0 ok"] {
            assert!(help.contains(part), "{part:?} missing:\n{help}");
        }
    }

    #[test]
    fn the_bridge_runs_on_its_threads_flag_and_everything_else_on_two() {
        let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
        let threads = |args: &[&str]| parse(args).map(|c| c.worker_threads()).ok();
        assert_eq!(threads(&["migrate", "bridge", "orders"]), Some(1));
        assert_eq!(
            threads(&["migrate", "bridge", "orders", "--threads", "3"]),
            Some(3)
        );
        assert_eq!(threads(&["migrate", "run"]), Some(2));
        assert_eq!(
            threads(&["migrate", "bridge", "orders", "--threads", "0"]),
            None
        );
    }
}
