//! `migrate dlq gate`: the drain gate's reading of the old queue's export.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::export::{LineCapArg, run_triage};
use super::queue::{QueueArg, queue_decisions};
use crate::cli::{CliResult, Ctx, print_json, to_stdout};
use crate::dlq::gate;
use crate::dlq::triage::TriageOptions;

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

pub(super) async fn gate_cmd(ctx: &Ctx, a: GateArgs) -> CliResult {
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
