//! How a command prints: standard output locked and buffered, JSON written as it is encoded,
//! the gate table, what a committed transition did.

use std::io::{self, BufWriter, StdoutLock, Write};
use std::process::ExitCode;

use super::error::{CliError, CliResult};

/// One gate as `status` and `advance` print it.
pub struct GateRow<'a> {
    pub kind: &'a str,
    pub verdict: &'a str,
    pub name: &'a str,
    pub value: Option<f64>,
    pub reason: &'a str,
}

/// The gate table of `status` and `advance`: kind, verdict, name, last value, reason, each column
/// as wide as its widest cell (a long gate name or value does not push its row out of line).
pub fn write_gate_rows(out: &mut impl Write, rows: &[GateRow<'_>]) -> io::Result<()> {
    // The one text rule at the print: a plan's gate name and a reason show no control
    // character and no credential, whoever made them.
    let names: Vec<String> = rows.iter().map(|r| crate::outgoing::line(r.name)).collect();
    let values: Vec<String> = rows
        .iter()
        .map(|r| r.value.map_or_else(|| "-".into(), |v| format!("{v}")))
        .collect();
    let width = |cell: fn(&GateRow<'_>) -> usize| rows.iter().map(cell).max().unwrap_or(0);
    let kind_w = width(|r| r.kind.chars().count());
    let verdict_w = width(|r| r.verdict.chars().count());
    let name_w = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
    let value_w = values.iter().map(|v| v.chars().count()).max().unwrap_or(1);
    for ((r, name), value) in rows.iter().zip(&names).zip(&values) {
        writeln!(
            out,
            "  {:<kind_w$} {:<verdict_w$} {name:<name_w$} {value:>value_w$}  {}",
            r.kind,
            r.verdict.to_uppercase(),
            crate::outgoing::line(r.reason)
        )?;
    }
    Ok(())
}

/// Whether output may use colour, by `NO_COLOR` (<https://no-color.org>): set and not empty, it
/// disables colour (the demo's live view, the log lines on a terminal).
pub fn colour_allowed(no_color: Option<&std::ffi::OsStr>) -> bool {
    no_color.is_none_or(std::ffi::OsStr::is_empty)
}

/// A store URL with its credentials masked (the one rule: [`crate::redact::url`]).
pub fn redact_url(url: &str) -> String {
    crate::redact::url(url)
}

/// Standard output as a command writes it: locked and buffered (see [`to_stdout`]).
pub type Stdout = BufWriter<StdoutLock<'static>>;

/// Write a command's output: the one way a command prints its result. `write` gets standard
/// output, locked and buffered; it is flushed at the end. A failed write (`| head` closed the
/// pipe, `> /dev/full`) comes back as [`CliError::stdout`], never as a panic (`println!` panics:
/// exit 101 and a backtrace).
///
/// # Errors
/// [`CliError::stdout`] of the first write that failed.
pub fn to_stdout<R>(write: impl FnOnce(&mut Stdout) -> io::Result<R>) -> Result<R, CliError> {
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    write(&mut out)
        .and_then(|r| out.flush().map(|()| r))
        .map_err(CliError::stdout)
}

/// Print a value as pretty JSON on stdout, written as it is encoded (a large report is never
/// held whole in memory).
pub fn print_json<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let mut encoding = None;
    let written = to_stdout(|out| {
        serde_json::to_writer_pretty(&mut *out, value).map_err(|e| {
            if e.is_io() {
                io::Error::from(e)
            } else {
                let message = e.to_string();
                encoding = Some(e);
                io::Error::other(message)
            }
        })?;
        writeln!(out)
    });
    match encoding {
        Some(e) => Err(CliError::new(1, format!("cannot encode JSON: {e}"))),
        None => written,
    }
}

/// What a committed transition did, one line.
pub fn write_applied(out: &mut impl Write, applied: &crate::controller::Applied) -> io::Result<()> {
    writeln!(
        out,
        "{}: {} -> {}{} (version {}, routing generation {}: {} of {} slices to new, consumers read {})",
        applied.command,
        applied.from,
        applied.to,
        if applied.paused { " [paused]" } else { "" },
        applied.version,
        applied.routing.generation,
        applied.routing.slices_migrated,
        applied.routing.slices_total,
        applied
            .routing
            .consume
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("+"),
    )?;
    match (&applied.earliest_advance_at, applied.command.as_str()) {
        (Some(at), "resume") => writeln!(
            out,
            "it can advance at {at} at the earliest: its minimum time and its exit gates' `for:` count from this resume (time paused never counts), and every exit gate must pass"
        ),
        _ => Ok(()),
    }
}

/// Print what a committed transition did, and warn when its routing could not be published.
pub fn print_applied(applied: &crate::controller::Applied, json: bool) -> CliResult {
    let printed = if json {
        print_json(applied)
    } else {
        to_stdout(|out| write_applied(out, applied))
    };
    committed(applied, printed)
}

/// The outcome of a committed transition whose report was `printed`: a routing that could not be
/// published comes first (exit 1, whatever became of the report), then how the report went.
pub fn committed(applied: &crate::controller::Applied, printed: Result<(), CliError>) -> CliResult {
    if let Some(e) = &applied.publish_error {
        return Err(CliError::new(
            1,
            format!(
                "the transition is committed, but {e}; the next migrate command retries the publication"
            ),
        ));
    }
    printed.map(|()| ExitCode::SUCCESS)
}
