//! `migrate pause NAME`: Stop advancing; rollback and abort still work.

use clap::Args;

use super::{CliResult, Ctx, transition};
use crate::machine::Command;

#[derive(Debug, Args)]
pub struct PauseArgs {
    /// The migration.
    pub name: String,
    /// Why (kept in the journal).
    #[arg(long)]
    pub reason: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: PauseArgs) -> CliResult {
    transition::run(
        ctx,
        &args.name,
        None,
        Command::Pause,
        args.reason,
        args.json,
    )
    .await
}
