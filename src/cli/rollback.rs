//! `migrate rollback NAME`: Move exactly one step back: slices[i] to slices[i-1], slices[0] to synthetic, drain to the last slice step, disconnect to drain.

use clap::Args;

use super::{CliResult, Ctx, transition};
use crate::machine::Command;
use crate::store::traits::*;

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The migration.
    pub name: String,
    /// Why (required; kept in the journal).
    #[arg(long)]
    pub reason: String,
    /// Act only if the migration is in this state (as `migrate status` and `history` print it, e.g.
    /// `slices[2]`); otherwise change nothing and exit 5. A retried command cannot move it twice.
    #[arg(long, value_name = "STATE")]
    pub from: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: RollbackArgs) -> CliResult {
    let code = transition::run(
        ctx,
        &args.name,
        args.from.as_deref(),
        Command::Rollback { then_pause: false },
        Some(args.reason),
        args.json,
    )
    .await?;
    // A person's rollback does not pause (a guard's does): say what a daemon will do next,
    // unless the migration was paused already.
    let store = ctx.existing_store().await?;
    if store.get(&args.name).await.is_ok_and(|r| r.paused) {
        return Ok(code);
    }
    eprintln!(
        "note: the migration is not paused by a rollback; with `auto_advance`, a running daemon \
         advances it again once this step's gates pass and its minimum time is met. To stay \
         here: migrate pause {}",
        args.name
    );
    Ok(code)
}
