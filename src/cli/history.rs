//! `migrate history NAME`: the journal, oldest first.

use std::io::Write;
use std::process::ExitCode;

use clap::Args;

use super::{CliResult, Ctx, print_json, to_stdout};
use crate::controller::views::EntryView;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The migration.
    pub name: String,
    /// Print as JSON (an array, oldest first).
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: HistoryArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    let journal = store.journal(&args.name).await?;
    if args.json {
        print_json(&journal.iter().map(EntryView::of).collect::<Vec<_>>())?;
        return Ok(ExitCode::SUCCESS);
    }
    let views: Vec<EntryView> = journal.iter().map(EntryView::of).collect();
    // The command column as wide as its widest cell (a plan applied, a breach rollback...).
    let command_w = views
        .iter()
        .map(|v| v.command.chars().count())
        .max()
        .unwrap_or(0);
    to_stdout(|out| {
        for v in views {
            writeln!(
                out,
                "{:>4}  {}  {:<command_w$} {} -> {}{}  gen {}  by {}{}{}",
                v.seq,
                v.at,
                v.command,
                v.from,
                v.to,
                if v.to_paused { " [paused]" } else { "" },
                v.generation,
                // Free text through the one text rule: no control character reaches the terminal.
                crate::outgoing::line(&v.actor),
                if v.forced { "  FORCED" } else { "" },
                v.reason
                    .map(|r| format!("  — {}", crate::outgoing::line(&r)))
                    .unwrap_or_default(),
            )?;
        }
        Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
