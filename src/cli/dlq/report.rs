//! `migrate dlq report`: the weekly review in Markdown.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::export::{LineCapArg, report_skipped, run_triage};
use super::output::{emit, write_atomically};
use super::queue::{QueueArg, queue_decisions};
use crate::cli::{CliError, CliResult, Ctx};
use crate::dlq::disposition::covered_until;
use crate::dlq::report::{self, ReportInputs};
use crate::dlq::triage::TriageOptions;

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

pub(super) async fn report_cmd(ctx: &Ctx, a: ReportArgs) -> CliResult {
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
