//! `migrate history NAME`: the journal, oldest first.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::{CliResult, Ctx, print_json};
use crate::store::{JournalEntry, Store};
use crate::time::rfc3339;

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The migration.
    pub name: String,
    /// Print as JSON (an array, oldest first).
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct EntryView<'a> {
    seq: i64,
    at: String,
    command: &'a str,
    from: String,
    from_paused: bool,
    to: String,
    to_paused: bool,
    actor: &'a str,
    reason: Option<&'a str>,
    forced: bool,
    generation: i64,
    evidence: &'a serde_json::Value,
}

fn view(e: &JournalEntry) -> EntryView<'_> {
    EntryView {
        seq: e.seq,
        at: rfc3339(e.at_ms),
        command: &e.command,
        from: e.from.state.to_string(),
        from_paused: e.from.paused,
        to: e.to.state.to_string(),
        to_paused: e.to.paused,
        actor: &e.actor,
        reason: e.reason.as_deref(),
        forced: e.forced,
        generation: e.generation,
        evidence: &e.evidence,
    }
}

pub async fn run(ctx: &Ctx, args: HistoryArgs) -> CliResult {
    let store = ctx.store().await?;
    let journal = store.journal(&args.name).await?;
    if args.json {
        print_json(&journal.iter().map(view).collect::<Vec<_>>())?;
        return Ok(ExitCode::SUCCESS);
    }
    for e in &journal {
        let v = view(e);
        println!(
            "{:>4}  {}  {:<9} {} -> {}{}  gen {}  by {}{}{}",
            v.seq,
            v.at,
            v.command,
            v.from,
            v.to,
            if v.to_paused { " [paused]" } else { "" },
            v.generation,
            v.actor,
            if v.forced { "  FORCED" } else { "" },
            v.reason.map(|r| format!("  — {r}")).unwrap_or_default(),
        );
    }
    Ok(ExitCode::SUCCESS)
}
