//! What rollback, pause, resume and abort share: run one machine command and print it.

use super::{CliResult, Ctx, print_applied};
use crate::machine::Command;

pub async fn run(
    ctx: &Ctx,
    name: &str,
    from: Option<&str>,
    command: Command,
    reason: Option<String>,
    json: bool,
) -> CliResult {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let c = ctx.controller(&store, &fetcher);
    let now = ctx.now_ms_in(&store).await?;
    let applied = c
        .command_from(
            name,
            &command,
            from,
            &ctx.actor(reason),
            serde_json::json!({}),
            now,
        )
        .await?;
    print_applied(&applied, json)
}
