//! `migrate dlq triage`: an export (or the old broker's dead-letter queue) grouped by cause.

use std::fmt::Write as _;
use std::time::Duration;

use clap::{Args, ValueEnum};

use super::export::{LineCapArg, open_input, report_skipped, run_triage};
use super::output::emit;
use super::queue::{QueueArg, queue_decisions, queue_of_migration};
use crate::cli::{CliError, CliResult, Ctx, print_json};
use crate::dlq::disposition::{covered_until, split_against_history};
use crate::dlq::signature::SignatureVersion;
use crate::dlq::triage::{
    Group, TableOptions, TriageOptions, TriageReport, render_rows, summary_line,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
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
    /// plan) without consuming it, instead of FILE. NATS JetStream, Redis Streams and Kafka (a
    /// dead-letter topic: its partitions read without joining a group or committing) can;
    /// RabbitMQ cannot (export it to a file with a shovel first).
    #[arg(long, value_name = "MIGRATION", conflicts_with = "file")]
    pub from_broker: Option<String>,
    /// With --from-broker: read at most this many messages, oldest first.
    #[arg(long, default_value_t = 100_000)]
    pub limit: usize,
    #[command(flatten)]
    pub line_cap: LineCapArg,
    /// Threads reading FILE, each a range of its lines (default: the number of cores); the report
    /// is the same whatever the number. Standard input and --from-broker are read by one thread.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: Option<u16>,
}

fn parse_version(s: &str) -> Result<SignatureVersion, String> {
    SignatureVersion::parse(s).map_err(|e| e.to_string())
}

pub(super) async fn triage(ctx: &Ctx, mut a: TriageArgs) -> CliResult {
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
    let adapter = crate::adapters::from_plan::connect(broker, crate::routing::Side::Old)
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
