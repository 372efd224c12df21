//! Reading an export: the line cap (`--max-line-bytes`), the file or standard input, a triage of
//! it, and the lines it skipped.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::process::ExitCode;

use clap::Args;

use crate::cli::CliError;
use crate::dlq::lines::DEFAULT_MAX_LINE_BYTES;
use crate::dlq::triage::{TriageOptions, TriageReport, triage_reader};

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

pub(super) fn open_input(file: &str) -> Result<Box<dyn BufRead>, CliError> {
    if file == "-" {
        return Ok(Box::new(BufReader::with_capacity(
            1 << 16,
            std::io::stdin(),
        )));
    }
    let f = File::open(file).map_err(|e| CliError::input(format!("cannot open {file}: {e}")))?;
    Ok(Box::new(BufReader::with_capacity(1 << 16, f)))
}

pub(super) fn run_triage(file: &str, options: TriageOptions) -> Result<TriageReport, CliError> {
    triage_reader(open_input(file)?, options).map_err(|e| CliError::input(format!("{file}: {e}")))
}

/// The skipped lines on stderr; the exit code that says whether there were any.
pub(super) fn report_skipped(report: &TriageReport, file: &str) -> ExitCode {
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
