//! `migrate dlq ...`: dead letters — triage an export, record decisions, replay, alert signals,
//! the weekly report, retention, and the drain gate's reading.
//!
//! Exports are NDJSON files of envelopes (docs/dlq.md), or `-` for standard input. Decisions and
//! seen signatures live in the state store (`--state`), per queue (`--queue`).

use std::collections::{BTreeSet, HashSet};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Subcommand, ValueEnum};

mod replay_ledger;
mod replay_target;
use replay_target::Target;

use super::{
    CliError, CliResult, Ctx, exit_after_printing, nonzero_duration, print_json, to_stdout,
};
use crate::dlq::alerts::{self, AlertInputs};
use crate::dlq::disposition::{
    Action, CloseReason, Disposition, covered_until, split_against_history,
};
use crate::dlq::envelope::{DeadLetter, EnvelopeRef, format_timestamp};
use crate::dlq::gate;
use crate::dlq::generate::{GenerateOptions, write_export};
use crate::dlq::lines::{Content, DEFAULT_MAX_LINE_BYTES, LineReader, too_long_message};
use crate::dlq::replay::{
    self, Event, GroupTally, NdjsonPublisher, Outcome, Pacer, ReplayMachine, ReplayPolicy,
};
use crate::dlq::report::{self, ReportInputs};
use crate::dlq::signature::{SignatureVersion, Signer};
use crate::dlq::triage::{
    Group, TableOptions, TriageOptions, TriageReport, render_rows, summary_line, triage_reader,
};
use crate::store::dispositions::{DispositionStore, SeenSignature};

const REASONS_HELP: &str = "entity_deleted (the referenced entity no longer exists), \
window_expired (the event lost its temporal validity), producer_retired (a producer version's \
format that no longer exists), already_processed (another path produced the same effect), \
fixed_in_code (defect fixed; the old messages are irrelevant)";

#[derive(Debug, Subcommand)]
pub enum DlqCmd {
    /// Group an export by cause in one streaming pass and print a report that fits a screen.
    ///
    /// Groups by (errorClass, consumerVersion, signature v1), largest first, with the span
    /// between the first and last firstAttemptAt and a hint: a short span is an incident that
    /// ended (replay is likely right), a long one a live defect (replaying only sends them back).
    /// `--format json` prints the seed's array (errorClass, consumerVersion, signature, count,
    /// firstSeen, lastSeen, spanHours, sample).
    ///
    /// Lines that are not envelopes are listed on stderr with their numbers and skipped.
    /// Exit codes: 0 every line was an envelope; 1 some lines were skipped (the report covers the
    /// rest); 2 the input cannot be read or an option is invalid.
    #[command(verbatim_doc_comment)]
    Triage(TriageArgs),
    /// Record a decision closing a group without replay, for a reason from a closed list.
    Close(CloseArgs),
    /// List the recorded decisions, oldest first.
    Decisions(DecisionsArgs),
    /// Republish the original payloads of a group (or a whole file), rate limited, with a canary
    /// batch, origin headers and an automatic stop.
    ///
    /// Each message carries x-replay-of (its deadLetteredAt) and x-replay-reason (its errorClass).
    /// After the canary batch (default 50) the run stops: look at the effect, then run the same
    /// command with --continue (which skips the canary batch and does not pause again). A failure
    /// during the canary stops the run at once. The run aborts itself when its own failure rate
    /// passes --abort-failure-rate, or when the NDJSON output cannot be flushed; it then says how
    /// many entries went out and the --skip N that goes on without losing any. Entries first
    /// attempted longer ago than --max-age (or of unknown age) are refused unless --force-old.
    /// A replay that reaches the end is recorded as a decision (action replay) for each group
    /// all of whose messages it published; a group with a message that failed to publish (under
    /// the abort threshold) stays open, and the run says which and the --skip N to send them again.
    /// Each message is recorded in the state store (per --queue and destination) before it is
    /// published, and marked sent once confirmed: a re-run skips what went out, so that whatever
    /// failed, no message is sent twice. One whose fate was never learnt (a run killed, a publish
    /// not confirmed) is in doubt and is not sent again unless --resend-in-doubt. A store that
    /// cannot record refuses before the first publish.
    ///
    /// Where the messages go: NDJSON lines on standard output by default; --output FILE appends
    /// them to a file. --migration NAME publishes them to that migration's brokers instead (not
    /// with --output): each to brokers.old.queue or brokers.new.queue (or stream) of its stored
    /// plan, the side its aggregate key's slice routes to under the routing the store holds now
    /// (followed while the run goes on), as a producer would send it, so that a key's messages
    /// are never on both sides. There a message also carries x-qm-key and the route stamp
    /// (x-qm-route: replay, x-qm-producer: migrate-dlq-replay), and counts as published only
    /// once the broker confirmed it; a publish not confirmed, or a broker that cannot be
    /// reached, counts as a failure. The key is read from the JSON payload: the field
    /// --key-field NAME (or a /pointer) when given, else the plan's bridge.key (a JSON field);
    /// a message whose key cannot be read is not published and counts as a failure.
    /// Each message also carries x-qm-dedup-key, built from its payload by --dedup-key TEMPLATE
    /// (e.g. 'order.paid:{orderId}:{version}', as the producers build it): consumers deduplicate
    /// by it, and a stopped replay continued with --skip N, or run again, sends some messages a
    /// second time. A message whose dedup key cannot be built is not published and counts as a
    /// failure; --no-dedup-key publishes without one (one of the two is required). Once a
    /// message of a key failed, the later messages of that key in the run are not sent either
    /// (counted as failures): they would arrive before it, which can only come back on a re-run.
    ///
    /// Exit codes: 0 completed; 1 aborted (a canary failure, the failure rate, a failed flush),
    /// or completed with messages that failed to publish;
    /// 2 invalid input or refused (too old); 3 paused after the canary batch.
    #[command(verbatim_doc_comment)]
    Replay(ReplayArgs),
    /// Export the alert signals as Prometheus text: inflow per minute, new signatures, the age
    /// of the oldest unclosed dead letter.
    Watch(WatchArgs),
    /// The weekly review in Markdown, for the queue's named owner.
    Report(ReportArgs),
    /// Retention: drop dead letters older than a duration from an export (and, with
    /// --decisions, decisions taken before it).
    Purge(PurgeArgs),
    /// The drain gate's reading: passes when the old queue's export is empty or every group in
    /// it is closed or replayed. Exit codes: 0 passes, 3 gated, 2 invalid input.
    Gate(GateArgs),
    /// Write a generated export (for rehearsals and benchmarks).
    #[command(hide = true)]
    Generate(GenerateArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

#[derive(Debug, Args)]
pub struct QueueArg {
    /// The dead-letter queue the decisions are about [default: with --migration NAME (close,
    /// replay) or --from-broker NAME (triage), that plan's brokers.old.dead_letter; otherwise
    /// `default`].
    #[arg(long, env = "MIGRATE_DLQ_QUEUE")]
    pub queue: Option<String>,
}

impl QueueArg {
    /// The queue given, or `default`.
    pub fn name(&self) -> &str {
        self.queue.as_deref().unwrap_or("default")
    }
}

#[derive(Debug, Args)]
pub struct LineCapArg {
    /// The longest line read from the export, in bytes (default 16 MiB): a longer line is
    /// counted as unreadable, with its line number, and skipped without being held in memory.
    #[arg(
        long = "max-line-bytes",
        value_name = "BYTES",
        default_value_t = DEFAULT_MAX_LINE_BYTES as u64,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    pub max_line_bytes: u64,
}

impl LineCapArg {
    /// The cap as a length.
    pub fn bytes(&self) -> usize {
        usize::try_from(self.max_line_bytes).unwrap_or(usize::MAX)
    }
}

#[derive(Debug, Args)]
pub struct TriageArgs {
    /// The export (NDJSON), or - for standard input.
    #[arg(default_value = "-")]
    pub file: String,
    /// table (fits a screen) or json (every group, the seed's fields).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Split the groups against recorded decisions: recurring (decided, came back) first.
    #[arg(long)]
    pub against_history: bool,
    #[command(flatten)]
    pub queue: QueueArg,
    /// Groups shown one per line in the table; the rest fold into one line.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
    /// A group spanning up to this long is an incident (hint: replay).
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub short_span: Duration,
    /// Signature rules (v1 keeps recorded decisions comparable).
    #[arg(long, default_value = "v1", value_parser = parse_version)]
    pub signature_version: SignatureVersion,
    /// Read the dead-letter queue of this migration's old broker (`brokers.old.dead_letter` in its
    /// plan) without consuming it, instead of FILE. NATS JetStream and Redis Streams can; RabbitMQ
    /// cannot (export it to a file with a shovel first).
    #[arg(long, value_name = "MIGRATION", conflicts_with = "file")]
    pub from_broker: Option<String>,
    /// With --from-broker: read at most this many messages, oldest first.
    #[arg(long, default_value_t = 100_000)]
    pub limit: usize,
    #[command(flatten)]
    pub line_cap: LineCapArg,
    /// Threads reading FILE, each a range of its lines (default: the number of cores); the report
    /// is the same whatever the number. Standard input is read by one.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
}

fn parse_version(s: &str) -> Result<SignatureVersion, String> {
    SignatureVersion::parse(s).map_err(|e| e.to_string())
}

fn parse_reason(s: &str) -> Result<CloseReason, String> {
    CloseReason::parse(s).map_err(|e| e.to_string())
}

#[derive(Debug, Args)]
pub struct GroupArgs {
    /// The group's signature (as triage prints it).
    #[arg(long)]
    pub signature: Option<String>,
    /// The group's errorClass.
    #[arg(long = "class")]
    pub class: Option<String>,
    /// The group's consumerVersion.
    #[arg(long = "version")]
    pub version: Option<String>,
}

#[derive(Debug, Args)]
pub struct CloseArgs {
    /// The group's signature (as triage prints it).
    #[arg(long)]
    pub signature: String,
    /// The group's errorClass.
    #[arg(long = "class")]
    pub class: String,
    /// The group's consumerVersion.
    #[arg(long = "version")]
    pub version: String,
    /// Why it is closed without replay. One of:
    #[arg(long, value_parser = parse_reason, long_help = format!("Why it is closed without replay: {REASONS_HELP}."))]
    pub reason: CloseReason,
    /// Who decides.
    #[arg(long)]
    pub by: String,
    /// Free text beside the reason (a ticket, a PR).
    #[arg(long)]
    pub note: Option<String>,
    /// The export the group is in: records its count and first/last seen (without it, the
    /// decision covers entries first attempted up to now).
    #[arg(long)]
    pub from: Option<String>,
    #[command(flatten)]
    pub queue: QueueArg,
    /// The migration whose drain gate the decision is for: without --queue, the decision is
    /// recorded under its plan's brokers.old.dead_letter (the queue that gate reads).
    #[arg(long, value_name = "NAME")]
    pub migration: Option<String>,
    /// Print the recorded decision as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct DecisionsArgs {
    #[command(flatten)]
    pub queue: QueueArg,
    /// Every queue's decisions.
    #[arg(long)]
    pub all_queues: bool,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The export (NDJSON), or - for standard input.
    #[arg(default_value = "-")]
    pub file: String,
    #[command(flatten)]
    pub group: GroupArgs,
    /// Where the messages go: an NDJSON file, or - for standard output.
    #[arg(long, default_value = "-", conflicts_with = "migration")]
    pub output: String,
    /// Publish to this migration's brokers instead of writing NDJSON: each message to
    /// brokers.old.queue or brokers.new.queue (or stream) of its stored plan, by its key's slice
    /// under the routing the store holds for it now, each publish confirmed by the broker.
    #[arg(long, value_name = "NAME")]
    pub migration: Option<String>,
    /// With --migration: the JSON field of the payload that holds the aggregate key (or a JSON
    /// pointer, /order/id). Default: the plan's bridge.key, when it is a JSON field.
    #[arg(long, value_name = "NAME", requires = "migration")]
    pub key_field: Option<String>,
    /// With --migration (required, or --no-dedup-key): how each message's x-qm-dedup-key is
    /// built from its payload, as the producers build it: type:aggregate:event, each part text
    /// and {FIELD} or {/json/pointer}, e.g. 'order.paid:{orderId}:{version}'. A dead-letter
    /// envelope does not keep the original key, and consumers deduplicate by it: without it a
    /// consumer refuses the message, or applies twice what a re-run (or --skip N) sends again. A
    /// message whose key cannot be built is not published and counts as a failure.
    #[arg(
        long,
        value_name = "TEMPLATE",
        requires = "migration",
        conflicts_with = "no_dedup_key"
    )]
    pub dedup_key: Option<String>,
    /// With --migration: publish without x-qm-dedup-key (consumers that deduplicate by it refuse
    /// such messages or cannot recognise one sent twice).
    #[arg(long, requires = "migration")]
    pub no_dedup_key: bool,
    /// Messages per second.
    #[arg(long, default_value_t = 20.0)]
    pub rate: f64,
    /// Stop after this many and wait for --continue (0: no canary).
    #[arg(long, default_value_t = 50)]
    pub canary: u64,
    /// The canary batch was checked: skip it and go on without pausing.
    #[arg(long = "continue")]
    pub resume: bool,
    /// Skip this many entries at the start of the selection: an earlier run that stopped early
    /// sent them (it says the number). With --continue, the canary batch after them is skipped too.
    #[arg(long, default_value_t = 0)]
    pub skip: u64,
    /// Abort when the replay's own failure rate passes this (0..1).
    #[arg(long, default_value_t = 0.2)]
    pub abort_failure_rate: f64,
    /// Refuse entries first attempted longer ago than this.
    #[arg(
        long,
        default_value = "7d",
        value_parser = nonzero_duration("0s would refuse every entry; --force-old replays whatever their age")
    )]
    pub max_age: Duration,
    /// Replay entries older than --max-age anyway.
    #[arg(long)]
    pub force_old: bool,
    /// Who replays (recorded with the decision when the replay completes).
    #[arg(long)]
    pub by: String,
    /// Send again the entries an earlier run claimed and never learnt the fate of (killed,
    /// not confirmed by the broker, a store that failed): only once you checked that they did
    /// not arrive.
    #[arg(long)]
    pub resend_in_doubt: bool,
    #[command(flatten)]
    pub queue: QueueArg,
    #[command(flatten)]
    pub line_cap: LineCapArg,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The export (NDJSON), or - for standard input (once only).
    #[arg(default_value = "-")]
    pub file: String,
    #[command(flatten)]
    pub queue: QueueArg,
    /// The inflow window (above 0).
    #[arg(
        long,
        default_value = "5m",
        value_parser = nonzero_duration("the inflow per minute is counted over the window")
    )]
    pub window: Duration,
    /// A signature first seen within this long is new.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    pub new_for: Duration,
    /// At most this many dlq_new_signature_info series.
    #[arg(long, default_value_t = 10)]
    pub max_info: usize,
    /// Write here (atomically, for a node_exporter textfile collector) instead of stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Recompute this often, until interrupted (default: once).
    #[arg(
        long,
        value_parser = nonzero_duration("0s would recompute in a busy loop; leave --every out to compute once")
    )]
    pub every: Option<Duration>,
    #[command(flatten)]
    pub line_cap: LineCapArg,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The export (NDJSON), or - for standard input.
    #[arg(default_value = "-")]
    pub file: String,
    /// The queue's named owner.
    #[arg(long)]
    pub owner: String,
    #[command(flatten)]
    pub queue: QueueArg,
    /// "Since last week": decisions taken within this long are listed.
    #[arg(long, default_value = "7d", value_parser = humantime::parse_duration)]
    pub since: Duration,
    /// Fresh groups listed one per row.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Write the Markdown here instead of stdout.
    #[arg(long)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub line_cap: LineCapArg,
}

#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Drop what is older than this (by deadLetteredAt; decisions by when they were taken).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub older_than: Duration,
    /// The export to filter.
    pub input: Option<PathBuf>,
    /// Where the kept lines go (- for standard output).
    #[arg(long, conflicts_with = "in_place")]
    pub output: Option<String>,
    /// Rewrite the input file (through a temporary file and a rename).
    #[arg(long)]
    pub in_place: bool,
    /// Also drop decisions taken before the cut (they carry the history that recurrence needs).
    #[arg(long)]
    pub decisions: bool,
    #[command(flatten)]
    pub line_cap: LineCapArg,
}

#[derive(Debug, Args)]
pub struct GateArgs {
    /// The old queue's export (NDJSON), or - for standard input.
    #[arg(default_value = "-")]
    pub file: String,
    #[command(flatten)]
    pub queue: QueueArg,
    /// Print the reading as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub line_cap: LineCapArg,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Lines to write.
    #[arg(long, default_value_t = 1000)]
    pub lines: u64,
    /// PRNG seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Share of one-offs.
    #[arg(long, default_value_t = 0.05)]
    pub tail: f64,
    /// Share of tricky messages.
    #[arg(long, default_value_t = 0.0)]
    pub tricky: f64,
    /// Share of binary payloads.
    #[arg(long, default_value_t = 0.02)]
    pub binary: f64,
    /// Share of corrupt lines.
    #[arg(long, default_value_t = 0.0)]
    pub corrupt: f64,
    /// The period ends at --now (default: the generator's fixed period).
    #[arg(long)]
    pub until_now: bool,
}

pub async fn run(ctx: &Ctx, cmd: DlqCmd) -> CliResult {
    match cmd {
        DlqCmd::Triage(a) => triage(ctx, a).await,
        DlqCmd::Close(a) => close(ctx, a).await,
        DlqCmd::Decisions(a) => decisions(ctx, a).await,
        DlqCmd::Replay(a) => replay_cmd(ctx, a).await,
        DlqCmd::Watch(a) => watch(ctx, a).await,
        DlqCmd::Report(a) => report_cmd(ctx, a).await,
        DlqCmd::Purge(a) => purge(ctx, a).await,
        DlqCmd::Gate(a) => gate_cmd(ctx, a).await,
        DlqCmd::Generate(a) => generate(ctx, a),
    }
}

// ---------------------------------------------------------------------------------------------

/// Text on stdout, through [`to_stdout`].
fn emit(text: &str) -> Result<(), CliError> {
    to_stdout(|out| out.write_all(text.as_bytes()))
}

fn open_input(file: &str) -> Result<Box<dyn BufRead>, CliError> {
    if file == "-" {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            std::io::stdin(),
        )));
    }
    let f = File::open(file).map_err(|e| CliError::input(format!("cannot open {file}: {e}")))?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
}

fn run_triage(file: &str, options: TriageOptions) -> Result<TriageReport, CliError> {
    triage_reader(open_input(file)?, options).map_err(|e| CliError::input(format!("{file}: {e}")))
}

/// Browse the old broker's dead-letter queue of migration `name` (nothing is consumed) and triage
/// each message's payload as one envelope.
async fn triage_broker(
    ctx: &Ctx,
    name: &str,
    limit: usize,
    options: TriageOptions,
) -> Result<TriageReport, CliError> {
    let store = ctx.store().await?;
    let fetcher = ctx.fetcher()?;
    let mut controller = ctx.controller(&store, &fetcher);
    controller.read_only = true;
    let plan = controller.load(name).await?.plan;
    let broker = &plan.brokers.old;
    let Some(dlq) = broker.dead_letter.as_deref() else {
        return Err(CliError::input(format!(
            "the plan of {name} names no brokers.old.dead_letter queue"
        )));
    };
    let adapter = crate::brokers::from_plan::connect(broker, crate::routing::Side::Old)
        .await
        .map_err(|e| CliError::plan_broker(&e, &format!("browsing the dead letters of {name}")))?;
    let messages = adapter.browse(dlq, limit).await.map_err(|e| match e {
        crate::brokers::BrokerError::Unsupported { .. } => CliError::input(e.to_string()),
        e => CliError::new(1, e.to_string()),
    })?;
    if messages.len() == limit {
        eprintln!(
            "migrate dlq triage: read the first {limit} messages of {dlq}; --limit reads more"
        );
    }
    let mut triage = crate::dlq::triage::Triage::new(options);
    for m in &messages {
        triage.push_line(&m.payload);
    }
    Ok(triage.finish())
}

/// The skipped lines on stderr; the exit code that says whether there were any.
fn report_skipped(report: &TriageReport, file: &str) -> ExitCode {
    for e in &report.errors {
        eprintln!("{file}:{}: skipped: {}", e.line, e.message);
    }
    let listed = report.errors.len() as u64;
    if report.skipped > listed {
        eprintln!(
            "{file}: … and {} more skipped lines",
            report.skipped - listed
        );
    }
    if report.skipped > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

async fn queue_decisions(ctx: &Ctx, queue: &str) -> Result<Vec<Disposition>, CliError> {
    let store = ctx.store().await?;
    Ok(DispositionStore::list(&store)
        .await?
        .into_iter()
        .filter(|d| d.queue == queue)
        .collect())
}

async fn triage(ctx: &Ctx, mut a: TriageArgs) -> CliResult {
    if a.against_history
        && let Some(name) = &a.from_broker
    {
        queue_of_migration(ctx, &mut a.queue, name).await?;
    }
    let decisions = if a.against_history {
        queue_decisions(ctx, a.queue.name()).await?
    } else {
        Vec::new()
    };
    let options = TriageOptions {
        version: a.signature_version,
        covered_until_ms: covered_until(&decisions),
        max_line_errors: 20,
        max_line_bytes: a.line_cap.bytes(),
        ..TriageOptions::default()
    };
    let report = match &a.from_broker {
        None if a.file != "-" => {
            drop(open_input(&a.file)?);
            let jobs = a.jobs.map_or_else(
                || std::thread::available_parallelism().map_or(1, usize::from),
                usize::from,
            );
            crate::dlq::triage_file::triage_file(std::path::Path::new(&a.file), options, jobs)
                .map_err(|e| CliError::input(format!("{}: {e}", a.file)))?
        }
        None => run_triage(&a.file, options)?,
        Some(name) => triage_broker(ctx, name, a.limit, options).await?,
    };
    let table = TableOptions {
        top: a.top,
        short_span_hours: a.short_span.as_secs_f64() / 3600.0,
        ..TableOptions::default()
    };
    match (a.format, a.against_history) {
        (Format::Json, false) => print_json(&report.groups)?,
        (Format::Json, true) => print_json(&split_against_history(&report.groups, &decisions))?,
        (Format::Table, false) => {
            emit(&format!(
                "{}{}\n",
                render_rows(&report.groups, &table),
                summary_line(&report)
            ))?;
        }
        (Format::Table, true) => {
            let split = split_against_history(&report.groups, &decisions);
            let mut out = format!(
                "RECURRING: decided before, came back ({} groups)\n",
                split.recurring.len()
            );
            for r in &split.recurring {
                let row = render_rows(std::slice::from_ref(r.group), &table);
                if let Some(line) = row.lines().nth(1) {
                    let _ = writeln!(out, "{line}");
                }
                let _ = writeln!(out, "          earlier: {}", r.previous.summary());
            }
            let fresh: Vec<Group> = split.fresh.iter().map(|g| (*g).clone()).collect();
            let _ = writeln!(out, "\nFRESH: never decided ({} groups)", fresh.len());
            if !fresh.is_empty() {
                out.push_str(&render_rows(&fresh, &table));
            }
            let covered: u64 = split.covered.iter().map(|w| w.group.count).sum();
            let _ = writeln!(
                out,
                "\nCOVERED: {} groups ({covered} entries) decided, entries still in the queue",
                split.covered.len()
            );
            let _ = writeln!(out, "{}", summary_line(&report));
            emit(&out)?;
        }
    }
    Ok(report_skipped(&report, &a.file))
}

/// The queue of decisions about migration `name`'s dead letters: `queue` when given (said on
/// stderr when it is not the one the plan names), else its plan's `brokers.old.dead_letter`; set
/// into `queue`. A plan that names none leaves `queue` as it is.
async fn queue_of_migration(ctx: &Ctx, queue: &mut QueueArg, name: &str) -> Result<(), CliError> {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let mut controller = ctx.controller(&store, &fetcher);
    controller.read_only = true;
    let plan = controller.load(name).await?.plan;
    let Some(dead_letter) = plan.brokers.old.dead_letter else {
        return Ok(());
    };
    match &queue.queue {
        Some(given) if *given != dead_letter => eprintln!(
            "migrate dlq: note: the drain gate of {name} reads the decisions of queue {dead_letter:?} (its plan's brokers.old.dead_letter), not of {given:?} (--queue)"
        ),
        Some(_) => {}
        None => queue.queue = Some(dead_letter),
    }
    Ok(())
}

async fn close(ctx: &Ctx, mut a: CloseArgs) -> CliResult {
    let now = ctx.now_ms()?;
    if let Some(name) = &a.migration {
        queue_of_migration(ctx, &mut a.queue, name).await?;
    }
    let queue = a.queue.name().to_string();
    let disposition = match &a.from {
        Some(file) => {
            let report = run_triage(file, TriageOptions::default())?;
            let group = report
                .groups
                .iter()
                .find(|g| {
                    g.signature == a.signature
                        && g.error_class == a.class
                        && g.consumer_version == a.version
                })
                .ok_or_else(|| {
                    let near: Vec<String> = report
                        .groups
                        .iter()
                        .filter(|g| g.signature == a.signature)
                        .map(|g| {
                            format!(
                                "--class {:?} --version {:?}",
                                g.error_class, g.consumer_version
                            )
                        })
                        .collect();
                    CliError::input(format!(
                        "no group ({}, {}, {:?}) in {file}{}",
                        a.class,
                        a.version,
                        a.signature,
                        if near.is_empty() {
                            " (see `migrate dlq triage` for the signatures it has)".to_string()
                        } else {
                            format!("; that signature is there with {}", near.join(", "))
                        }
                    ))
                })?;
            Disposition::close(&queue, group, a.reason, &a.by, now, a.note)
                .map_err(|e| CliError::input(e.to_string()))?
        }
        None => {
            if a.by.trim().is_empty() {
                return Err(CliError::input("a decision needs who took it (--by)"));
            }
            Disposition {
                id: 0,
                queue,
                signature: a.signature,
                signature_version: SignatureVersion::V1.as_str().to_string(),
                error_class: a.class,
                consumer_version: a.version,
                affected_count: None,
                first_seen: None,
                last_seen: None,
                action: Action::Close(a.reason),
                decided_by: a.by.trim().to_string(),
                decided_at_ms: now,
                note: a.note,
            }
        }
    };
    let store = ctx.store().await?;
    let id = store.record(&disposition).await?;
    let recorded = Disposition { id, ..disposition };
    if a.json {
        print_json(&recorded)?;
    } else {
        to_stdout(|out| {
            writeln!(
                out,
                "recorded #{id}: {} {} {:?} closed as {} by {}{}",
                recorded.error_class,
                recorded.consumer_version,
                recorded.signature,
                a.reason,
                recorded.decided_by,
                recorded
                    .affected_count
                    .map(|n| format!(" ({n} entries)"))
                    .unwrap_or_default()
            )
        })?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn decisions(ctx: &Ctx, a: DecisionsArgs) -> CliResult {
    let store = ctx.store().await?;
    let all: Vec<Disposition> = DispositionStore::list(&store)
        .await?
        .into_iter()
        .filter(|d| a.all_queues || d.queue == a.queue.name())
        .collect();
    if a.json {
        print_json(&all)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    if all.is_empty() {
        let _ = writeln!(out, "no decisions recorded for queue {:?}", a.queue.name());
    }
    // Each column as wide as its widest cell: a long queue or class name keeps its row in line.
    let what = |d: &Disposition| d.action.reason().map_or("replayed", CloseReason::as_str);
    let width = |cell: &dyn Fn(&Disposition) -> usize| all.iter().map(cell).max().unwrap_or(0);
    let id_w = width(&|d| d.id.to_string().len());
    let by_w = width(&|d| d.decided_by.chars().count());
    let what_w = width(&|d| what(d).len());
    let queue_w = width(&|d| d.queue.chars().count());
    let class_w = width(&|d| d.error_class.chars().count());
    let version_w = width(&|d| d.consumer_version.chars().count());
    for d in &all {
        let _ = writeln!(
            out,
            "{:>id_w$}  {}  {:<by_w$} {:<what_w$} {:<queue_w$} {:<class_w$} {:<version_w$} {:?}{}{}",
            d.id,
            format_timestamp(d.decided_at_ms)
                .get(..16)
                .unwrap_or_default(),
            d.decided_by,
            what(d),
            d.queue,
            d.error_class,
            d.consumer_version,
            d.signature,
            d.affected_count
                .map(|n| format!("  ×{n}"))
                .unwrap_or_default(),
            d.note
                .as_deref()
                .map(|n| format!("  — {n}"))
                .unwrap_or_default(),
        );
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

// ---------------------------------------------------------------------------------------------
// Replay

type GroupKey = (String, String, String);

/// Failed messages a replay names on stderr before it only counts them.
const SHOWN_FAILURES: u64 = 10;

/// A selected entry and its group.
struct Selected {
    entry: DeadLetter,
    key: GroupKey,
    /// Its line in the export.
    line: u64,
}

impl std::borrow::Borrow<DeadLetter> for Selected {
    fn borrow(&self) -> &DeadLetter {
        &self.entry
    }
}

/// Reads the export lazily, keeps the entries of the selected group.
struct Selection {
    reader: LineReader<Box<dyn BufRead>>,
    signer: Signer,
    filter: Option<GroupKey>,
    skipped: Arc<AtomicU64>,
    /// The first invalid line (or the read error that ended the input), for the summary.
    first_error: Arc<std::sync::Mutex<Option<String>>>,
}

impl Selection {
    fn note(&self, error: impl FnOnce() -> String) {
        if let Ok(mut first) = self.first_error.lock() {
            first.get_or_insert_with(error);
        }
    }
}

impl Iterator for Selection {
    type Item = Selected;
    fn next(&mut self) -> Option<Selected> {
        loop {
            let max = self.reader.max();
            let line = match self.reader.next_line() {
                Ok(None) => return None,
                Ok(Some(line)) => line,
                Err(e) => {
                    self.note(|| format!("read error: {e}"));
                    return None;
                }
            };
            let number = line.number;
            let line = match line.content {
                Content::Text(text) => text,
                Content::TooLong { bytes } => {
                    self.skipped.fetch_add(1, Ordering::Relaxed);
                    self.note(|| format!("line {number}: {}", too_long_message(bytes, max)));
                    continue;
                }
            };
            if line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                continue;
            }
            let view = match EnvelopeRef::parse(line) {
                Ok(v) => v,
                Err(e) => {
                    self.skipped.fetch_add(1, Ordering::Relaxed);
                    self.note(|| format!("line {number}: {e}"));
                    continue;
                }
            };
            let key = (
                view.error_class().to_string(),
                view.consumer_version().to_string(),
                self.signer.sign_wtf8(view.error_message_wtf8()),
            );
            if self.filter.as_ref().is_none_or(|f| *f == key) {
                return Some(Selected {
                    entry: view.to_dead_letter(),
                    key,
                    line: number,
                });
            }
        }
    }
}

/// What the pre-scan of a file refuses, before anything is sent: entries older than --max-age,
/// and entries whose age cannot be computed.
#[derive(Default)]
struct Refused {
    old_lines: Vec<u64>,
    /// The oldest refused entry: its line, `firstAttemptAt` as written, and in ms.
    oldest: Option<(u64, String, i64)>,
    unknown_lines: Vec<u64>,
    unknown_first: Option<String>,
    groups: BTreeSet<GroupKey>,
}

/// Lines a refusal names before it only counts them.
const SHOWN_LINES: usize = 5;

/// "line 3" or "lines 3, 5, 6" (the first few, then "…").
fn lines_text(lines: &[u64]) -> String {
    let shown: Vec<String> = lines.iter().take(SHOWN_LINES).map(u64::to_string).collect();
    format!(
        "line{} {}{}",
        if lines.len() == 1 { "" } else { "s" },
        shown.join(", "),
        if lines.len() > SHOWN_LINES {
            ", …"
        } else {
            ""
        }
    )
}

impl Refused {
    fn too_old(&mut self, s: &Selected, first_ms: i64) {
        self.old_lines.push(s.line);
        if self.oldest.as_ref().is_none_or(|o| first_ms < o.2) {
            self.oldest = Some((s.line, s.entry.first_attempt_at.clone(), first_ms));
        }
        self.groups.insert(s.key.clone());
    }

    fn unknown(&mut self, s: &Selected) {
        self.unknown_lines.push(s.line);
        self.unknown_first
            .get_or_insert_with(|| s.entry.first_attempt_at.clone());
        self.groups.insert(s.key.clone());
    }

    /// The refusal: how many, which lines, why, and what to do; `None` when nothing is refused.
    fn message(&self, a: &ReplayArgs, count: u64) -> Option<String> {
        let mut parts = Vec::new();
        if let Some((line, at, _)) = &self.oldest {
            parts.push(format!(
                "{} of {count} selected entries first attempted more than --max-age {} ago ({} of {}; the oldest, line {line}, at {at}): replaying old events can act on a state that moved on",
                self.old_lines.len(),
                crate::time::human(a.max_age),
                lines_text(&self.old_lines),
                a.file,
            ));
        }
        if let Some(at) = &self.unknown_first {
            parts.push(format!(
                "{} of {count} selected entries with a firstAttemptAt that gives no age ({} of {}, e.g. {at:?}): --max-age cannot vouch for them",
                self.unknown_lines.len(),
                lines_text(&self.unknown_lines),
                a.file,
            ));
        }
        if parts.is_empty() {
            return None;
        }
        let close = match self.groups.iter().collect::<Vec<_>>().as_slice() {
            [(class, version, signature)] => format!(
                "Close their group if they no longer apply (`migrate dlq close --class {} --version {} --signature {} --reason window_expired --by {} --queue {} --from {}`)",
                shell_word(class),
                shell_word(version),
                shell_word(signature),
                shell_word(a.by.trim()),
                shell_word(a.queue.name()),
                shell_word(&a.file),
            ),
            groups => format!(
                "Close their {} groups if they no longer apply (`migrate dlq triage {}` lists them; `migrate dlq close ... --reason window_expired` closes one)",
                groups.len(),
                a.file,
            ),
        };
        let others = if a.group.class.is_none() {
            ", replay the other groups alone (--class, --version, --signature)"
        } else {
            ""
        };
        Some(format!(
            "refused, nothing was sent: {}. {close}{others}, or replay anyway with --force-old",
            parts.join("; and "),
        ))
    }
}

struct TokioPacer {
    base_ms: i64,
    started: Instant,
}

impl Pacer for TokioPacer {
    fn now_ms(&self) -> i64 {
        self.base_ms + i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX / 2)
    }
    async fn sleep_until(&mut self, at_ms: i64) {
        let wait = at_ms - self.now_ms();
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
        }
    }
}

fn group_filter(g: &GroupArgs) -> Result<Option<GroupKey>, CliError> {
    match (&g.class, &g.version, &g.signature) {
        (Some(c), Some(v), Some(s)) => Ok(Some((c.clone(), v.clone(), s.clone()))),
        (None, None, None) => Ok(None),
        _ => Err(CliError::input(
            "a group is --class, --version and --signature together (or none of them, for the whole file)",
        )),
    }
}

/// `, N held behind a failed message of their key` when N > 0 (only a broker replay holds).
fn held_behind(held: u64) -> String {
    if held == 0 {
        String::new()
    } else {
        format!(", {held} held behind a failed message of their key")
    }
}

async fn replay_cmd(ctx: &Ctx, mut a: ReplayArgs) -> CliResult {
    if a.by.trim().is_empty() {
        return Err(CliError::input("--by: who replays"));
    }
    let now = ctx.now_ms()?;
    if let Some(name) = &a.migration {
        queue_of_migration(ctx, &mut a.queue, name).await?;
    }
    let filter = group_filter(&a.group)?;
    let policy = ReplayPolicy {
        rate_per_second: a.rate,
        canary: a.canary,
        abort_failure_rate: a.abort_failure_rate,
        min_sample: if a.canary > 0 { a.canary } else { 50 },
        max_age_ms: Some(crate::time::millis(a.max_age)),
        force_old: a.force_old,
        resume: a.resume,
        skip: a.skip,
    };
    let mut machine = ReplayMachine::new(policy).map_err(|e| CliError::input(e.to_string()))?;

    // A file can be read twice: count the selection and refuse old entries before sending any.
    let mut total = None;
    if a.file != "-" {
        let mut count = 0_u64;
        let mut refused = Refused::default();
        let selection = Selection {
            reader: LineReader::new(open_input(&a.file)?, a.line_cap.bytes()),
            signer: Signer::new(SignatureVersion::V1),
            filter: filter.clone(),
            skipped: Arc::new(AtomicU64::new(0)),
            first_error: Arc::default(),
        };
        for s in selection {
            count += 1;
            if a.force_old {
                continue;
            }
            // An age that cannot be computed is refused like an old one: nobody can vouch for it.
            match s.entry.first_attempt_ms() {
                Some(first) => match now.checked_sub(first) {
                    Some(age) if age <= crate::time::millis(a.max_age) => {}
                    Some(_) => refused.too_old(&s, first),
                    None => refused.unknown(&s),
                },
                None => refused.unknown(&s),
            }
        }
        if count == 0 {
            return Err(CliError::input(format!(
                "nothing to replay: no entry of the selected group in {} (see `migrate dlq triage`)",
                a.file
            )));
        }
        if let Some(message) = refused.message(&a, count) {
            return Err(CliError::input(message));
        }
        total = Some(count);
    }

    let skipped = Arc::new(AtomicU64::new(0));
    let first_error: Arc<std::sync::Mutex<Option<String>>> = Arc::default();
    let selection = Selection {
        reader: LineReader::new(open_input(&a.file)?, a.line_cap.bytes()),
        signer: Signer::new(SignatureVersion::V1),
        filter,
        skipped: skipped.clone(),
        first_error: first_error.clone(),
    };
    let replay_to_stdout = a.migration.is_none() && a.output == "-";
    let mut publisher = match &a.migration {
        Some(name) => {
            let dedup = (a.dedup_key.as_deref(), a.no_dedup_key);
            replay_target::brokers(ctx, name, a.key_field.as_deref(), dedup).await?
        }
        None => {
            // A file stands for a queue: what an earlier run (the canary) wrote there went out
            // and stays, so the file is appended to, never truncated.
            let sink: Box<dyn Write + Send> = if replay_to_stdout {
                Box::new(BufWriter::new(std::io::stdout()))
            } else {
                Box::new(BufWriter::new(open_to_append(&a.output).map_err(|e| {
                    CliError::input(format!("cannot open {}: {e}", a.output))
                })?))
            };
            Target::Ndjson(NdjsonPublisher::new(sink))
        }
    };
    // What the run sends is recorded before it goes: a re-run never sends an entry twice.
    let destination = match &a.migration {
        Some(name) => format!("migration:{name}"),
        None if replay_to_stdout => "stdout".to_string(),
        None => format!(
            "file:{}",
            std::fs::canonicalize(&a.output)
                .map_or_else(|_| a.output.clone(), |p| p.display().to_string())
        ),
    };
    let mut ledger = replay_ledger::StoreLedger::new(
        ctx.store().await?,
        a.queue.name(),
        destination,
        now,
        a.resend_in_doubt,
    );
    let mut pacer = TokioPacer {
        base_ms: now,
        started: Instant::now(),
    };
    let started = Instant::now();
    let mut last_progress = Instant::now();
    let mut tally: GroupTally<GroupKey> = GroupTally::default();
    let mut held_keys: HashSet<String> = HashSet::new();
    // Publishes the broker did not confirm: they may have arrived, and stay in doubt.
    let mut unconfirmed = 0_u64;
    let summary = replay::run_recorded(
        &mut machine,
        selection,
        &mut publisher,
        &mut pacer,
        &mut ledger,
        |event: &Event<'_, Selected>, stats| {
            match event {
                Event::Published(s) => tally.observe(&s.key, &s.entry, true),
                Event::Failed(s, e) => {
                    tally.observe(&s.key, &s.entry, false);
                    if !e.certainly_not_sent() {
                        unconfirmed += 1;
                    }
                    // The first few by name; the rest are counted in the summary.
                    if stats.failed <= SHOWN_FAILURES {
                        let (class, version, signature) = &s.key;
                        eprintln!(
                            "replay: failed to publish the entry dead-lettered at {} ({class} {version} {signature:?}): {e}",
                            s.entry.dead_lettered_at
                        );
                    }
                    if stats.failed == SHOWN_FAILURES {
                        eprintln!("replay: further failures are only counted");
                    }
                }
                // Said once per key (its first held message), after the failure that holds it.
                Event::Held(s, key) => {
                    tally.observe(&s.key, &s.entry, false);
                    if held_keys.insert((*key).to_string()) && held_keys.len() as u64 <= SHOWN_FAILURES {
                        eprintln!(
                            "replay: key {key:?} is held from here on: an earlier message of it failed, and its later ones are not sent before it (run the replay again once the cause is fixed)"
                        );
                    }
                }
            }
            if last_progress.elapsed() >= Duration::from_secs(2) {
                last_progress = Instant::now();
                let secs = started.elapsed().as_secs_f64().max(0.001);
                eprintln!(
                    "replay: {}{} published, {} failed ({:.1}%){}, {:.1}/s",
                    stats.published,
                    total.map(|t| format!(" of {t}")).unwrap_or_default(),
                    stats.failed,
                    stats.failure_rate() * 100.0,
                    held_behind(stats.held),
                    stats.processed() as f64 / secs
                );
            }
        },
    )
    .await;
    let per_side = publisher.finish();
    // What earlier runs sent counts for the groups' decisions; what they left in doubt keeps
    // its group open.
    tally.merge(std::mem::take(&mut ledger.earlier));

    let skipped = skipped.load(Ordering::Relaxed);
    // What the replay says: on stderr when the messages themselves go to stdout, otherwise the
    // command's output, written once the decisions are recorded.
    let mut said = String::new();
    let mut say = |text: String| {
        if replay_to_stdout {
            eprintln!("{text}");
        } else {
            said.push_str(&text);
            said.push('\n');
        }
    };
    let s = &summary.stats;
    let first_error = first_error
        .lock()
        .ok()
        .and_then(|f| f.clone())
        .map(|e| format!(" (the first: {e})"))
        .unwrap_or_default();
    say(format!(
        "replay: {} published{}, {} failed{}, {} skipped as sent by an earlier run, {} invalid lines skipped{first_error}, {} remaining",
        s.published,
        per_side
            .map(|(old, new)| format!(" ({old} to old, {new} to new)"))
            .unwrap_or_default(),
        s.failed,
        held_behind(s.held),
        s.skipped,
        skipped,
        summary.remaining
    ));
    if s.in_doubt > 0 {
        say(format!(
            "replay: {} entries not sent again: an earlier run sent them without learning whether they arrived (in doubt). \
             Check the destination; if they did not arrive, run the same command with --resend-in-doubt",
            s.in_doubt
        ));
    }
    if unconfirmed > 0 {
        say(format!(
            "replay: {unconfirmed} of the failed messages were not confirmed by the broker: they may have arrived, so they are \
             in doubt and a re-run does not send them again unless --resend-in-doubt (once you checked that they did not arrive)"
        ));
    }
    let resume_hint = || resume_hint(&summary, a.resume);
    let result = match &summary.outcome {
        Outcome::Completed => match record_replayed(ctx, &a, &tally, now).await {
            Ok(recorded) => {
                say(format!(
                    "completed; recorded {recorded} group(s) as replayed"
                ));
                let open: Vec<String> = tally
                    .unfinished()
                    .map(|((class, version, signature), c)| {
                        format!(
                            "{class} {version} {signature:?} ({} of {} failed{})",
                            c.failed,
                            c.failed + c.published + c.in_doubt,
                            if c.in_doubt > 0 {
                                format!(", {} in doubt", c.in_doubt)
                            } else {
                                String::new()
                            }
                        )
                    })
                    .collect();
                if open.is_empty() {
                    Ok(ExitCode::SUCCESS)
                } else {
                    // Under the abort threshold, but not every message went: the groups with a
                    // failure stay open (the drain gate keeps holding on them).
                    Err(CliError::new(
                        1,
                        format!(
                            "completed with {} message(s) that failed to publish{}{} (see above): {} group(s) not recorded as replayed, they stay open: {}. {}",
                            s.failed,
                            held_behind(s.held),
                            if s.in_doubt > 0 {
                                format!(" and {} in doubt", s.in_doubt)
                            } else {
                                String::new()
                            },
                            open.len(),
                            open.join("; "),
                            resume_hint()
                        ),
                    ))
                }
            }
            Err(e) => Err(e),
        },
        Outcome::PausedAfterCanary => {
            say(format!(
                "paused after the canary batch of {}: check the effect, then run the same command with --continue",
                a.canary
            ));
            Ok(ExitCode::from(3))
        }
        Outcome::CanaryFailed => Err(CliError::new(
            1,
            format!(
                "aborted: a message of the canary batch failed to publish (see above); nothing after it was sent. {}",
                resume_hint()
            ),
        )),
        Outcome::Aborted { failure_rate } => Err(CliError::new(
            1,
            format!(
                "aborted: the replay's own failure rate is {:.1}% (threshold {:.1}%); nothing more was sent. {}",
                failure_rate * 100.0,
                a.abort_failure_rate * 100.0,
                resume_hint()
            ),
        )),
        Outcome::FlushFailed { error } => Err(CliError::new(
            1,
            format!(
                "aborted: the output could not be flushed ({error}): the message being written did not go out whole \
                 (the output may end in part of its line), the {} before it went out. Check {} before going on. {}",
                s.published,
                if replay_to_stdout {
                    "what read standard output"
                } else {
                    a.output.as_str()
                },
                resume_hint()
            ),
        )),
        Outcome::NotRecorded { error } if s.published == 0 && unconfirmed == 0 => {
            Err(CliError::new(
                1,
                format!(
                    "refused, nothing was sent: the state store cannot record what the replay sends ({error}). \
                 A replay records each entry before it publishes it, so that a re-run never sends one twice: \
                 fix the store (--state), then run the same command again"
                ),
            ))
        }
        Outcome::NotRecorded { error } => Err(CliError::new(
            1,
            format!(
                "stopped: the state store failed to record what the replay sends ({error}); nothing after it was sent. \
                 What went out before is recorded, and an entry whose outcome could not be recorded stays in doubt: \
                 once the store is fixed, run the same command again (it skips what went out). {}",
                resume_hint()
            ),
        )),
        Outcome::RefusedTooOld {
            first_attempt_at,
            age_ms,
        } => Err(CliError::input(format!(
            "refused: an entry first attempted at {first_attempt_at} is {} old (more than --max-age); close it (--reason window_expired) or use --force-old. {}",
            crate::dlq::report::human_age(*age_ms),
            resume_hint()
        ))),
        Outcome::RefusedUnknownAge { first_attempt_at } => Err(CliError::input(format!(
            "refused: an entry's firstAttemptAt {first_attempt_at:?} gives no age, so --max-age cannot vouch for it; \
             close its group, or replay anyway with --force-old. {}",
            resume_hint()
        ))),
    };
    let printed = if said.is_empty() { Ok(()) } else { emit(&said) };
    // The replay's own outcome comes first; then whether its summary could be written.
    exit_after_printing(printed, result?)
}

/// Record every group the run replayed whole (none of its messages failed) as a decision
/// (action `replay`); how many.
async fn record_replayed(
    ctx: &Ctx,
    a: &ReplayArgs,
    tally: &GroupTally<GroupKey>,
    now: i64,
) -> Result<usize, CliError> {
    let store = ctx.store().await?;
    let decided = queue_decisions(ctx, a.queue.name()).await?;
    let latest = crate::dlq::disposition::latest_by_signature(&decided);
    let mut recorded = 0;
    for ((class, version, signature), count) in tally.replayed() {
        // A re-run that found the group sent already (the ledger) and its replay recorded.
        let already = latest.get(signature.as_str()).is_some_and(|d| {
            d.action == Action::Replay
                && d.error_class == *class
                && d.consumer_version == *version
                && d.last_seen == count.last_seen
        });
        if already {
            continue;
        }
        let d = Disposition {
            id: 0,
            queue: a.queue.name().to_string(),
            signature: signature.clone(),
            signature_version: SignatureVersion::V1.as_str().to_string(),
            error_class: class.clone(),
            consumer_version: version.clone(),
            affected_count: Some(count.published),
            first_seen: count.first_seen.clone(),
            last_seen: count.last_seen.clone(),
            action: Action::Replay,
            decided_by: a.by.trim().to_string(),
            decided_at_ms: now,
            note: None,
        };
        store.record(&d).await?;
        recorded += 1;
    }
    Ok(recorded)
}

/// How to go on after a run that stopped early, without losing an entry: the exact `--skip`.
fn resume_hint(summary: &replay::ReplaySummary, resumed: bool) -> String {
    let r = summary.resume;
    let went = if r.skip == 0 {
        "No entry of the selection is known to have gone out".to_string()
    } else {
        format!("Entries 1-{} of the selection went out", r.skip)
    };
    let mut text = format!(
        "{went}: once the cause is fixed, run the same command with --skip {}{} \
         (--continue alone would skip the canary batch by position).",
        r.skip,
        if resumed {
            " instead of --continue"
        } else {
            ""
        },
    );
    if r.sent_again > 0 {
        let _ = write!(
            text,
            " {} later entries went out too: they are recorded as sent, and a re-run skips them.",
            r.sent_again,
        );
    }
    text
}

// ---------------------------------------------------------------------------------------------

fn write_atomically(path: &Path, text: &str) -> Result<(), CliError> {
    crate::atomic_file::write(path, text.as_bytes())
        .map_err(|e| CliError::new(1, format!("cannot write {}: {e}", path.display())))
}

async fn watch(ctx: &Ctx, a: WatchArgs) -> CliResult {
    loop {
        let now = ctx.now_ms()?;
        let decisions = queue_decisions(ctx, a.queue.name()).await?;
        let options = TriageOptions {
            recent_since_ms: Some(now - crate::time::millis(a.window)),
            covered_until_ms: covered_until(&decisions),
            max_line_errors: 5,
            max_line_bytes: a.line_cap.bytes(),
            ..TriageOptions::default()
        };
        let report = run_triage(&a.file, options)?;
        let store = ctx.store().await?;
        let seen: Vec<SeenSignature> = report
            .groups
            .iter()
            .map(|g| SeenSignature {
                queue: a.queue.name().to_string(),
                signature: g.signature.clone(),
                error_class: g.error_class.clone(),
                consumer_version: g.consumer_version.clone(),
            })
            .collect();
        let first_seen = store.note_signatures(&seen, now).await?;
        let decided: Vec<String> = decisions.iter().map(|d| d.signature.clone()).collect();
        let signals = alerts::compute(
            &report.groups,
            &AlertInputs {
                now_ms: now,
                window_ms: crate::time::millis(a.window),
                new_for_ms: crate::time::millis(a.new_for),
                first_seen: &first_seen,
                decided: &decided,
                max_info: a.max_info,
            },
        )
        .map_err(|e| CliError::input(e.to_string()))?;
        let text = alerts::render_prometheus(&signals, a.queue.name());
        match &a.output {
            Some(path) => write_atomically(path, &text)?,
            None => emit(&text)?,
        }
        for e in &report.errors {
            eprintln!("{}:{}: skipped: {}", a.file, e.line, e.message);
        }
        match a.every {
            Some(every) if a.file != "-" => tokio::time::sleep(every).await,
            _ => return Ok(ExitCode::SUCCESS),
        }
    }
}

async fn report_cmd(ctx: &Ctx, a: ReportArgs) -> CliResult {
    let now = ctx.now_ms()?;
    let decisions = queue_decisions(ctx, a.queue.name()).await?;
    let options = TriageOptions {
        covered_until_ms: covered_until(&decisions),
        max_line_errors: 20,
        max_line_bytes: a.line_cap.bytes(),
        ..TriageOptions::default()
    };
    let report = run_triage(&a.file, options)?;
    let md = report::render(
        &report,
        &decisions,
        &ReportInputs {
            queue: a.queue.name(),
            owner: &a.owner,
            now_ms: now,
            since_ms: now - crate::time::millis(a.since),
            top: a.top,
            short_span_hours: 24.0,
        },
    )
    .map_err(|e| CliError::input(e.to_string()))?;
    match &a.output {
        Some(path) => write_atomically(path, &md)?,
        None => emit(&md)?,
    }
    Ok(report_skipped(&report, &a.file))
}

async fn purge(ctx: &Ctx, a: PurgeArgs) -> CliResult {
    let now = ctx.now_ms()?;
    let cut = now - crate::time::millis(a.older_than);
    if a.input.is_none() && !a.decisions {
        return Err(CliError::input(
            "nothing to purge: give an export (with --output or --in-place) and/or --decisions",
        ));
    }
    if let Some(input) = &a.input {
        let source = File::open(input)
            .map_err(|e| CliError::input(format!("cannot open {}: {e}", input.display())))?;
        let source_meta = source
            .metadata()
            .map_err(|e| CliError::input(format!("cannot read {}: {e}", input.display())))?;
        let reader = LineReader::new(BufReader::new(source), a.line_cap.bytes());
        let io = |e: std::io::Error| CliError::new(1, format!("purge: {e}"));
        let tally = match (&a.output, a.in_place) {
            (Some(o), _) if o == "-" => {
                let mut out = BufWriter::new(std::io::stdout());
                let tally = keep_recent(reader, &mut out, cut).map_err(io)?;
                out.flush().map_err(io)?;
                tally
            }
            (Some(o), _) => {
                let file = open_purge_output(Path::new(o), input, &source_meta)?;
                let mut out = BufWriter::new(file);
                let tally = keep_recent(reader, &mut out, cut).map_err(io)?;
                out.flush().map_err(io)?;
                tally
            }
            (None, true) => {
                // Created 0600, then given the export's own permissions before the rename: dead
                // letters hold personal data, and the rewritten export is as closed as it was.
                let mut staged = crate::atomic_file::stage(input, 0o600).map_err(|e| {
                    CliError::new(
                        1,
                        format!(
                            "cannot create a temporary file beside {}: {e}",
                            input.display()
                        ),
                    )
                })?;
                staged
                    .file()
                    .set_permissions(source_meta.permissions())
                    .map_err(io)?;
                let tally = {
                    let mut out = BufWriter::new(staged.file());
                    let tally = keep_recent(reader, &mut out, cut).map_err(io)?;
                    out.flush().map_err(io)?;
                    tally
                };
                staged.commit().map_err(io)?;
                tally
            }
            (None, false) => {
                return Err(CliError::input(
                    "where do the kept lines go? --output FILE|- or --in-place",
                ));
            }
        };
        for (line, bytes) in &tally.too_long {
            eprintln!(
                "{}:{line}: kept unread: {}",
                input.display(),
                too_long_message(*bytes, a.line_cap.bytes())
            );
        }
        let (dropped, kept, unreadable) = (tally.dropped, tally.kept, tally.unreadable);
        eprintln!(
            "purge: dropped {dropped} dead letters older than {} (dead-lettered before {}), kept {kept}{}",
            humantime::format_duration(a.older_than),
            format_timestamp(cut),
            if unreadable > 0 {
                format!(
                    ", kept {unreadable} lines that are not envelopes (look at them: they may hold personal data too)"
                )
            } else {
                String::new()
            }
        );
    }
    if a.decisions {
        let store = ctx.store().await?;
        let purged = store.purge_before(cut).await?;
        eprintln!(
            "purge: removed {} decisions taken before {}, {} signatures not seen since and the replay records of {} entries dead-lettered before it",
            purged.dispositions,
            format_timestamp(cut),
            purged.signatures,
            purged.replays
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// What `purge` did with the lines of an export.
#[derive(Default)]
struct PurgeTally {
    kept: u64,
    dropped: u64,
    /// Lines that are not envelopes (over-long ones included), kept as they are.
    unreadable: u64,
    /// The first over-long lines: number and length.
    too_long: Vec<(u64, u64)>,
}

/// Copies the lines of an export to `out`, but for the envelopes dead-lettered before `cut`.
/// A line that is not an envelope is kept as it is; one over the line cap too, copied through in
/// chunks without being held.
fn keep_recent<R: BufRead>(
    mut reader: LineReader<R>,
    out: &mut impl Write,
    cut: i64,
) -> std::io::Result<PurgeTally> {
    let mut t = PurgeTally::default();
    loop {
        let Some(line) = reader.next_line_forwarding_overflow(|chunk| out.write_all(chunk))? else {
            return Ok(t);
        };
        match line.content {
            Content::TooLong { bytes } => {
                t.unreadable += 1;
                if t.too_long.len() < SHOWN_LINES {
                    t.too_long.push((line.number, bytes));
                }
            }
            Content::Text(body) => match EnvelopeRef::parse(body) {
                Ok(v) if v.dead_lettered_ms() < cut => {
                    t.dropped += 1;
                    continue;
                }
                Ok(_) => {
                    t.kept += 1;
                    out.write_all(body)?;
                }
                Err(_) => {
                    t.unreadable += 1;
                    out.write_all(body)?;
                }
            },
        }
        if line.newline {
            out.write_all(b"\n")?;
        }
    }
}

/// `purge --output FILE`: the file, opened without truncating it first, refused when it is the
/// export itself (by device and inode: the same path, a link or another path to it), which would
/// be emptied before it is read. A new file gets the export's permissions.
fn open_purge_output(
    output: &Path,
    input: &Path,
    source: &std::fs::Metadata,
) -> Result<File, CliError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(source.permissions().mode() & 0o777);
    }
    let file = options
        .open(output)
        .map_err(|e| CliError::input(format!("cannot create {}: {e}", output.display())))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = file
            .metadata()
            .map_err(|e| CliError::input(format!("cannot read {}: {e}", output.display())))?;
        if meta.dev() == source.dev() && meta.ino() == source.ino() {
            return Err(CliError::input(format!(
                "--output {} is the export {} itself: it would be emptied before it is read; \
                 use --in-place to rewrite the export, or name another file",
                output.display(),
                input.display()
            )));
        }
    }
    file.set_len(0)
        .map_err(|e| CliError::input(format!("cannot truncate {}: {e}", output.display())))?;
    Ok(file)
}

async fn gate_cmd(ctx: &Ctx, a: GateArgs) -> CliResult {
    let decisions = queue_decisions(ctx, a.queue.name()).await?;
    let options = TriageOptions {
        max_line_bytes: a.line_cap.bytes(),
        ..TriageOptions::default()
    };
    let report = run_triage(&a.file, options)?;
    let reading = gate::evaluate(&report, &decisions);
    if a.json {
        print_json(&reading)?;
    } else {
        to_stdout(|out| {
            writeln!(
                out,
                "{}: {}",
                if reading.passes() { "PASS" } else { "GATED" },
                reading.reason(10)
            )
        })?;
    }
    Ok(if reading.passes() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

fn generate(ctx: &Ctx, a: GenerateArgs) -> CliResult {
    let mut options = GenerateOptions {
        seed: a.seed,
        lines: a.lines,
        tail: a.tail,
        tricky: a.tricky,
        binary: a.binary,
        corrupt: a.corrupt,
        ..GenerateOptions::default()
    };
    if a.until_now {
        options.start_ms = ctx.now_ms()? - options.period_ms;
    }
    options
        .validate()
        .map_err(|e| CliError::input(e.to_string()))?;
    to_stdout(|out| write_export(options, out))?;
    Ok(ExitCode::SUCCESS)
}

/// `text` as one word of a POSIX shell command: as it is when it holds only characters no
/// shell treats specially, else in single quotes (a quote inside written `'\''`).
fn shell_word(text: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._/:@%+=,-".contains(c);
    if !text.is_empty() && text.chars().all(plain) {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `path` opened to append lines, created if missing (write-only: a pipe or FIFO whose reader
/// dies still fails the writes). A regular file that ends in part of a line (an earlier run cut
/// by a full disk or a kill) gets a line end first, so that the fragment stays a line of its own
/// and the first new line is whole; a file that cannot be read is appended to as it is.
fn open_to_append(path: &str) -> std::io::Result<std::fs::File> {
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let meta = file.metadata()?;
    if meta.is_file() && meta.len() > 0 && !ends_a_line(path, meta.len()) {
        file.write_all(b"\n")?;
    }
    Ok(file)
}

/// Whether the regular file `path` (of `len` > 0 bytes) ends with a line end; `true` when it
/// cannot be read, so that nothing is added to it.
fn ends_a_line(path: &str, len: u64) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let last = std::fs::File::open(path).and_then(|mut f| {
        f.seek(SeekFrom::Start(len - 1))?;
        let mut last = [0u8; 1];
        f.read_exact(&mut last)?;
        Ok(last)
    });
    last.map_or(true, |b| b == *b"\n")
}
