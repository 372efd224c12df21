//! `migrate slice KEY...`: the slice of aggregate keys, one number per line.

use std::io::{BufRead, Write};
use std::process::ExitCode;

use clap::Args;

use super::{CliError, CliResult, to_stdout};
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
    let mut bad_input = None;
    to_stdout(|out| {
        if args.stdin {
            for (n, line) in std::io::stdin().lock().lines().enumerate() {
                match line {
                    Ok(key) => writeln!(out, "{}", slice_of(&key, args.slices))?,
                    Err(e) => {
                        bad_input = Some(CliError::input(format!("stdin line {}: {e}", n + 1)));
                        break;
                    }
                }
            }
        } else {
            for key in &args.keys {
                writeln!(out, "{}", slice_of(key, args.slices))?;
            }
        }
        Ok(())
    })?;
    match bad_input {
        Some(e) => Err(e),
        None => Ok(ExitCode::SUCCESS),
    }
}
