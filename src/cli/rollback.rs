//! `migrate rollback NAME`: Move exactly one step back: slices[i] to slices[i-1], slices[0] to synthetic, drain to the last slice step, disconnect to drain.

use clap::Args;

use super::{CliResult, Ctx, transition};
use crate::machine::Command;

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The migration.
    pub name: String,
    /// Why (required; kept in the journal).
    #[arg(long)]
    pub reason: String,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: RollbackArgs) -> CliResult {
    transition::run(
        ctx,
        &args.name,
        Command::Rollback { then_pause: false },
        Some(args.reason),
        args.json,
    )
    .await
}
