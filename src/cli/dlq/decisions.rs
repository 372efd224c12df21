//! `migrate dlq decisions`: the recorded decisions, oldest first.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::Args;

use super::output::emit;
use super::queue::QueueArg;
use crate::cli::{CliResult, Ctx, print_json};
use crate::dlq::disposition::{CloseReason, Disposition};
use crate::store::dispositions::DispositionStore;
use crate::time::format_timestamp;

#[derive(Debug, Args)]
pub struct DecisionsArgs {
    #[command(flatten)]
    pub queue: QueueArg,
    /// Every queue's decisions (the default without --queue).
    #[arg(long)]
    pub all_queues: bool,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

pub(super) async fn decisions(ctx: &Ctx, a: DecisionsArgs) -> CliResult {
    let store = ctx.store().await?;
    let all: Vec<Disposition> = DispositionStore::list(&store)
        .await?
        .into_iter()
        // Without --queue: every queue's (issue 42: `default` alone hid the others).
        .filter(|d| a.all_queues || a.queue.queue.as_deref().is_none_or(|q| d.queue == q))
        .collect();
    if a.json {
        print_json(&all)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = String::new();
    if all.is_empty() {
        match a.queue.queue.as_deref().filter(|_| !a.all_queues) {
            Some(queue) => {
                let _ = writeln!(out, "no decisions recorded for queue {queue:?}");
            }
            None => {
                let _ = writeln!(out, "no decisions recorded");
            }
        }
    }
    // Each column as wide as its widest cell: a long queue or class name keeps its row in line.
    let what = |d: &Disposition| d.action.reason().map_or("replayed", CloseReason::as_str);
    let width = |cell: &dyn Fn(&Disposition) -> usize| all.iter().map(cell).max().unwrap_or(0);
    let id_w = width(&|d| d.id.to_string().len());
    let by_w = width(&|d| d.decided_by.chars().count());
    let what_w = width(&|d| what(d).len());
    let queue_w = width(&|d| d.queue.chars().count());
    let class_w = width(&|d| d.error_class.chars().count());
    let version_w = width(&|d| d.consumer_version.chars().count());
    for d in &all {
        let _ = writeln!(
            out,
            "{:>id_w$}  {}  {:<by_w$} {:<what_w$} {:<queue_w$} {:<class_w$} {:<version_w$} {:?}{}{}",
            d.id,
            format_timestamp(d.decided_at_ms)
                .get(..16)
                .unwrap_or_default(),
            d.decided_by,
            what(d),
            d.queue,
            d.error_class,
            d.consumer_version,
            d.signature,
            d.affected_count
                .map(|n| format!("  ×{n}"))
                .unwrap_or_default(),
            d.note
                .as_deref()
                .map(|n| format!("  — {n}"))
                .unwrap_or_default(),
        );
    }
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}
