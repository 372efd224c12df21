//! `migrate plan apply FILE --reason "..."`: replace a migration's plan by the edited file, with
//! the diff shown and journaled; refused when the edit would break the migration's guarantees in
//! its current state.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{CliError, CliResult, Ctx, exit_after_printing, print_json, to_stdout};
use crate::controller::plan_apply::PlanApplyOutcome;

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The edited plan file; its `name` is the migration whose plan it replaces.
    pub file: PathBuf,
    /// Why the plan changes: it goes into the journal with the diff.
    #[arg(long)]
    pub reason: String,
    /// Show the diff and whether it would be applied; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

pub async fn run(ctx: &Ctx, args: ApplyArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let controller = ctx.controller(&store, &fetcher);
    let now = ctx.now_ms_in(&store).await?;
    let outcome = controller
        .plan_apply(&args.file, &ctx.actor(Some(args.reason)), now, args.dry_run)
        .await?;
    for w in &outcome.warnings {
        eprintln!("warning: {w}");
    }
    let printed = if args.json {
        print_json(&outcome)
    } else {
        to_stdout(|out| write_text(out, &outcome, &args.file))
    };
    if !outcome.refused.is_empty() {
        eprintln!(
            "refused: this plan cannot replace the plan of {:?} in state {}; nothing changed:",
            outcome.migration, outcome.state
        );
        for r in &outcome.refused {
            eprintln!("  - {r}");
        }
        return exit_after_printing(printed, ExitCode::from(2));
    }
    // An applied plan whose routing could not be published says so first, whatever became of
    // the report.
    if let Some(e) = &outcome.publish_error {
        return Err(CliError::new(
            1,
            format!(
                "the new plan is applied, but {e}; the next migrate command retries the publication"
            ),
        ));
    }
    printed.map(|()| ExitCode::SUCCESS)
}

fn write_text(
    out: &mut impl Write,
    o: &PlanApplyOutcome,
    file: &std::path::Path,
) -> std::io::Result<()> {
    if o.unchanged {
        return writeln!(
            out,
            "{}: the same text as the stored plan of {:?}: nothing to apply",
            file.display(),
            o.migration
        );
    }
    write!(out, "{}", o.diff)?;
    writeln!(
        out,
        "plan of {:?} (state {}): sha256 {} -> {}",
        o.migration,
        o.state,
        short(&o.old_hash),
        short(&o.new_hash)
    )?;
    if !o.refused.is_empty() {
        return Ok(());
    }
    match o.version {
        None => writeln!(out, "dry run: the change would be applied; nothing written"),
        Some(v) => writeln!(
            out,
            "applied (version {v}{}): the daemon, bridges and every command use the new plan from their next read; `migrate history {}` shows the change",
            if o.republished {
                ", routing published again"
            } else {
                ""
            },
            o.migration
        ),
    }
}
