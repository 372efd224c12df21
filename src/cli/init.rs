//! `migrate init FILE`: register a migration in the state store.

use clap::Args;
use std::io::Write;
use std::path::PathBuf;

use super::{CliResult, Ctx, committed, print_json, to_stdout, write_applied};

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The plan file; its `name` becomes the migration's name.
    pub file: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(ctx: &Ctx, args: InitArgs) -> CliResult {
    let store = ctx.store().await?;
    let fetcher = ctx.fetcher()?;
    let controller = ctx.controller(&store, &fetcher);
    let now = ctx.now_ms_in(&store).await?;
    let (applied, compiled) = controller.init(&args.file, &ctx.actor(None), now).await?;
    for w in &compiled.warnings {
        eprintln!("warning: {w}");
    }
    // Committed: whatever becomes of the report, the migration is registered.
    let printed = if args.json {
        print_json(&applied)
    } else {
        to_stdout(|out| {
            write_applied(out, &applied)?;
            writeln!(
                out,
                "next: `migrate status {0}`, then `migrate advance {0}` when the team is ready",
                compiled.plan.name
            )
        })
    };
    committed(&applied, printed)
}
