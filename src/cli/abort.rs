//! `migrate abort NAME`: Send every slice back to the old broker at once; consumers keep reading both; pauses.

use clap::Args;

use super::{CliResult, Ctx, transition};
use crate::machine::Command;

#[derive(Debug, Args)]
pub struct AbortArgs {
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

pub async fn run(ctx: &Ctx, args: AbortArgs) -> CliResult {
    transition::run(
        ctx,
        &args.name,
        args.from.as_deref(),
        Command::Abort,
        Some(args.reason),
        args.json,
    )
    .await
}
