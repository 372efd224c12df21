//! `migrate routing NAME`: the routing document producers and consumers follow.

use std::process::ExitCode;

use clap::Args;

use super::{CliResult, Ctx, print_json};
use crate::controller::publish::document;

#[derive(Debug, Args)]
pub struct RoutingArgs {
    /// The migration.
    pub name: String,
}

pub async fn run(ctx: &Ctx, args: RoutingArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let c = ctx.controller(&store, &fetcher);
    let loaded = c.load(&args.name).await?;
    print_json(&document(&loaded.plan, &loaded.record))?;
    Ok(ExitCode::SUCCESS)
}
