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
pub use crate::fit;
mod history;
mod init;
mod judge;
mod pause;
mod plan_apply;
mod plan_backtest;
mod plan_check;
mod plan_check_judges;
mod preflight;
mod prune;
mod resume;
mod rollback;
mod routing;
mod run;
mod slice;
mod status;
mod status_watch;
mod transition;

mod ctx;
mod error;
mod options;
mod output;

pub use ctx::Ctx;
pub use error::{CliError, CliResult, exit_after_printing};
pub use options::{Global, LogFormat, nonzero_duration};
pub use output::{
    GateRow, Stdout, colour_allowed, committed, print_applied, print_json, redact_url, to_stdout,
    write_applied, write_gate_rows,
};

use clap::{Parser, Subcommand};

use crate::plan::SystemResolve;

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
///   migrate preflight plans/orders.yaml
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

#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run a whole migration on this machine against an embedded world (two brokers, producers,
    /// an idempotent consumer), with the real controller, and prove nothing was lost.
    Demo(demo::DemoArgs),
    /// Work with plan files.
    #[command(subcommand)]
    Plan(plan_check::PlanCmd),
    /// Read both brokers' durability settings and refuse, naming the setting and the fix,
    /// what may lose acknowledged writes (a plan may waive a check, with a reason).
    #[command(long_about = preflight::LONG_ABOUT)]
    Preflight(preflight::PreflightArgs),
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

/// The async runtime a command runs on ([`Cli::runtime_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeShape {
    /// Every task on the thread that runs the command.
    CurrentThread,
    /// That many worker threads.
    Workers(usize),
}

impl Cli {
    /// The async runtime for the command: the bridge's `--threads` workers; the demo on the
    /// thread that runs it (a single simulated world whose every step waits on SQLite's thread:
    /// any worker thread only adds wake-ups); two workers for everything else.
    pub fn runtime_shape(&self) -> RuntimeShape {
        match &self.command {
            Cmd::Bridge(a) => RuntimeShape::Workers(usize::from(a.threads)),
            Cmd::Demo(_) => RuntimeShape::CurrentThread,
            _ => RuntimeShape::Workers(2),
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

/// Run one command line.
///
/// # Errors
/// A [`CliError`] with the message and exit code.
pub async fn run(cli: Cli) -> CliResult {
    run_on_host_clock(cli, crate::time::now_ms).await
}

/// [`run`] on a host whose wall clock reads `host_clock` (ms since the epoch): a test's host
/// whose clock is off. What the command stamps and measures from the store stays on the
/// database's clock; only `--now` replaces that.
///
/// # Errors
/// A [`CliError`] with the message and exit code.
pub async fn run_on_host_clock(cli: Cli, host_clock: fn() -> i64) -> CliResult {
    let ctx = Ctx {
        global: cli.global,
        resolve: SystemResolve,
        host_clock,
    };
    match cli.command {
        Cmd::Demo(a) => demo::run(a).await,
        Cmd::Plan(plan_check::PlanCmd::Check(a)) => plan_check::run(&ctx, a),
        Cmd::Plan(plan_check::PlanCmd::Apply(a)) => plan_apply::run(&ctx, a).await,
        Cmd::Plan(plan_check::PlanCmd::Backtest(a)) => plan_backtest::run(&ctx, a).await,
        Cmd::Preflight(a) => preflight::run(&ctx, a).await,
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
    fn the_bridge_runs_on_its_threads_flag_the_demo_on_its_own_thread_and_the_rest_on_two() {
        let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied());
        let threads = |args: &[&str]| parse(args).map(|c| c.runtime_shape()).ok();
        let workers = |n| Some(RuntimeShape::Workers(n));
        assert_eq!(threads(&["migrate", "bridge", "orders"]), workers(1));
        assert_eq!(
            threads(&["migrate", "bridge", "orders", "--threads", "3"]),
            workers(3)
        );
        assert_eq!(threads(&["migrate", "run"]), workers(2));
        assert_eq!(
            threads(&["migrate", "demo"]),
            Some(RuntimeShape::CurrentThread)
        );
        assert_eq!(
            threads(&["migrate", "bridge", "orders", "--threads", "0"]),
            None
        );
    }
}
