//! `migrate advance NAME`: evaluate the exit gates now; move one step if they all pass.

use std::process::ExitCode;

use clap::Args;

use super::{CliError, CliResult, Ctx, print_applied, print_json};
use crate::controller::AdvanceOptions;

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
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: AdvanceArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let c = ctx.controller(&store, &fetcher);
    let now = ctx.now_ms()?;
    let opts = AdvanceOptions {
        dry_run: args.dry_run,
        force: args.force,
        confirm: args.confirm.clone(),
    };
    let outcome = c
        .advance(&args.name, &opts, &ctx.actor(args.reason.clone()), now)
        .await?;
    let gated = !outcome.blockers.is_empty() && !outcome.forced;
    if args.json {
        print_json(&outcome)?;
    } else {
        println!("{}: {}", outcome.migration, outcome.state);
        if outcome.gates.is_empty() {
            println!("  no gates in this state");
        }
        for g in &outcome.gates {
            println!(
                "  {:<5} {:<5} {:<28} {:>12}  {}",
                g.kind,
                g.eval.verdict.as_str().to_uppercase(),
                g.name,
                g.eval
                    .value
                    .map(|v| format!("{v}"))
                    .unwrap_or_else(|| "-".into()),
                g.eval.reason
            );
        }
        if gated {
            println!("not advancing:");
            for b in &outcome.blockers {
                println!("  - {b}");
            }
        } else if outcome.forced {
            println!("FORCED past:");
            for b in &outcome.blockers {
                println!("  - {b}");
            }
        }
        if outcome.dry_run
            && let Some(r) = &outcome.routing
        {
            println!(
                "dry run: advancing would publish generation {} ({} of {} slices to new, state {}); nothing changed",
                r.generation, r.slices_migrated, r.slices_total, r.state
            );
        }
    }
    if gated {
        return Ok(ExitCode::from(3));
    }
    match &outcome.applied {
        Some(applied) if !args.json => print_applied(applied, false),
        Some(applied) => match &applied.publish_error {
            Some(e) => Err(CliError::new(1, e.clone())),
            None => Ok(ExitCode::SUCCESS),
        },
        None => Ok(ExitCode::SUCCESS),
    }
}
