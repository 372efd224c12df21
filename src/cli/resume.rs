//! `migrate resume NAME`: Allow advancing again.

use clap::Args;

use super::{CliResult, Ctx, transition};
use crate::machine::Command;

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The migration.
    pub name: String,
    /// Why (kept in the journal).
    #[arg(long)]
    pub reason: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: ResumeArgs) -> CliResult {
    transition::run(
        ctx,
        &args.name,
        None,
        Command::Resume,
        args.reason,
        args.json,
    )
    .await
}
