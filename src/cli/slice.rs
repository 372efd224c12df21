//! `migrate slice KEY...`: the slice of aggregate keys, one number per line.

use std::io::BufRead;
use std::process::ExitCode;

use clap::Args;

use super::{CliError, CliResult};
use crate::slice::slice_of;

#[derive(Debug, Args)]
pub struct SliceArgs {
    /// Total number of slices.
    #[arg(long, default_value_t = crate::plan::DEFAULT_SLICES, value_parser = clap::value_parser!(u32).range(1..))]
    pub slices: u32,
    /// Read keys from standard input, one per line.
    #[arg(long, conflicts_with = "keys")]
    pub stdin: bool,
    /// Aggregate keys (e.g. order-4711).
    #[arg(required_unless_present = "stdin")]
    pub keys: Vec<String>,
}

pub fn run(args: SliceArgs) -> CliResult {
    use std::io::Write;
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let write_err = |e: std::io::Error| CliError::new(1, format!("cannot write: {e}"));
    if args.stdin {
        for (n, line) in std::io::stdin().lock().lines().enumerate() {
            let key = line.map_err(|e| CliError::input(format!("stdin line {}: {e}", n + 1)))?;
            writeln!(out, "{}", slice_of(&key, args.slices)).map_err(write_err)?;
        }
    } else {
        for key in &args.keys {
            writeln!(out, "{}", slice_of(key, args.slices)).map_err(write_err)?;
        }
    }
    out.flush().map_err(write_err)?;
    Ok(ExitCode::SUCCESS)
}
