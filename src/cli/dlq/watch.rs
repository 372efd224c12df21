//! `migrate dlq watch`: the alert signals as Prometheus text, once or every `--every`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::export::{LineCapArg, run_triage};
use super::output::{emit, write_atomically};
use super::queue::{QueueArg, queue_decisions};
use crate::cli::{CliError, CliResult, Ctx, nonzero_duration};
use crate::dlq::alerts::{self, AlertInputs};
use crate::dlq::disposition::covered_until;
use crate::dlq::triage::TriageOptions;
use crate::store::dispositions::{DispositionStore, SeenSignature};

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

pub(super) async fn watch(ctx: &Ctx, a: WatchArgs) -> CliResult {
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
