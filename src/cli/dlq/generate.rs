//! `migrate dlq generate` (hidden): a generated export, for rehearsals and benchmarks.

use std::process::ExitCode;

use clap::Args;

use crate::cli::{CliError, CliResult, Ctx, to_stdout};
use crate::dlq::generate::{GenerateOptions, write_export};

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

pub(super) fn generate(ctx: &Ctx, a: GenerateArgs) -> CliResult {
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
