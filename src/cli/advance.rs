//! `migrate advance NAME`: evaluate the exit gates now; move one step if they all pass.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;

use super::{
    CliError, CliResult, Ctx, GateRow, committed, exit_after_printing, print_json, to_stdout,
    write_applied, write_gate_rows,
};
use crate::controller::{AdvanceOptions, AdvanceOutcome};

#[derive(Debug, Args)]
pub struct AdvanceArgs {
    /// The migration.
    pub name: String,
    /// Evaluate and show what would be published; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Move even though gates do not pass (needs --reason; journaled as an override).
    #[arg(long, requires = "reason")]
    pub force: bool,
    /// Why (required with --force; kept in the journal).
    #[arg(long)]
    pub reason: Option<String>,
    /// The migration's name, to enter `complete` (the point of no return).
    #[arg(long, value_name = "NAME")]
    pub confirm: Option<String>,
    /// Act only if the migration is in this state (as `migrate status` and `history` print it, e.g.
    /// `slices[2]`); otherwise change nothing and exit 5. A retried command cannot move it twice.
    #[arg(long, value_name = "STATE")]
    pub from: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: AdvanceArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let c = ctx.controller(&store, &fetcher);
    let now = ctx.now_ms_in(&store).await?;
    let opts = AdvanceOptions {
        dry_run: args.dry_run,
        force: args.force,
        confirm: args.confirm.clone(),
        from: args.from.clone(),
        preflight: None,
    };
    let outcome = c
        .advance(&args.name, &opts, &ctx.actor(args.reason.clone()), now)
        .await?;
    let gated = !outcome.blockers.is_empty() && !outcome.forced;
    let printed = if args.json {
        print_json(&outcome)
    } else {
        to_stdout(|out| {
            write_outcome(out, &outcome, gated)?;
            match &outcome.applied {
                Some(applied) if !gated => write_applied(out, applied),
                _ => Ok(()),
            }
        })
    };
    if gated {
        return exit_after_printing(printed, ExitCode::from(3));
    }
    match &outcome.applied {
        Some(applied) if !args.json => committed(applied, printed),
        Some(applied) => match &applied.publish_error {
            Some(e) => Err(CliError::new(1, e.clone())),
            None => printed.map(|()| ExitCode::SUCCESS),
        },
        None => printed.map(|()| ExitCode::SUCCESS),
    }
}

/// The gates, what keeps the migration where it is or was forced past, and a dry run's routing.
fn write_outcome(out: &mut impl Write, outcome: &AdvanceOutcome, gated: bool) -> io::Result<()> {
    writeln!(out, "{}: {}", outcome.migration, outcome.state)?;
    if outcome.gates.is_empty() {
        writeln!(out, "  no gates in this state")?;
    }
    let kinds: Vec<String> = outcome.gates.iter().map(|g| g.kind.to_string()).collect();
    let rows: Vec<GateRow<'_>> = outcome
        .gates
        .iter()
        .zip(&kinds)
        .map(|(g, kind)| GateRow {
            kind,
            verdict: g.eval.verdict.as_str(),
            name: &g.name,
            value: g.eval.value,
            reason: &g.eval.reason,
        })
        .collect();
    write_gate_rows(out, &rows)?;
    if gated {
        writeln!(out, "not advancing:")?;
        for b in &outcome.blockers {
            writeln!(out, "  - {}", crate::outgoing::line(b))?;
        }
    } else if outcome.forced {
        writeln!(out, "FORCED past:")?;
        for b in &outcome.blockers {
            writeln!(out, "  - {}", crate::outgoing::line(b))?;
        }
    }
    if outcome.dry_run
        && let Some(r) = &outcome.routing
    {
        writeln!(
            out,
            "dry run: advancing would publish generation {} ({} of {} slices to new, state {}); nothing changed",
            r.generation, r.slices_migrated, r.slices_total, r.state
        )?;
    }
    Ok(())
}
