//! `migrate prune --older-than DURATION`: delete the gate evaluations, the memory of steps left,
//! the scrapes of complete migrations and the delivered outbox rows older than that, in batches,
//! and say what went per table. Never the journal, nor what a gate still reads, nor an outbox
//! row still to announce (src/store/retention.rs, docs/operations.md).

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use serde::Serialize;

use super::{CliError, CliResult, Ctx, nonzero_duration, print_json, to_stdout};
use crate::store::retention::{Prune, Pruned};
use crate::store::traits::*;

/// Rows one statement of `migrate prune` deletes at most, per table.
pub const BATCH: i64 = 5_000;

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Delete what is older than this (e.g. 14d, 36h): gate evaluations, the memory of steps
    /// left, the scrapes of complete migrations, delivered outbox rows. Never the journal, nor
    /// the memory of the step a migration is in, nor an undelivered outbox row.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = nonzero_duration("a zero age would delete the evaluations of this very round")
    )]
    pub older_than: Duration,
    /// Count what would go; delete nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Only this migration's rows.
    #[arg(long, value_name = "NAME")]
    pub migration: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What `migrate prune --json` prints.
#[derive(Debug, Serialize)]
struct Report {
    /// Rows older than this instant (RFC 3339).
    before: String,
    migration: Option<String>,
    dry_run: bool,
    /// Per table: rows deleted (or, for a dry run, that would be).
    removed: Pruned,
}

pub async fn run(ctx: &Ctx, args: PruneArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    if let Some(name) = &args.migration {
        // A mistyped name would delete nothing and say so as if all were well.
        store.get(name).await?;
    }
    let now = ctx.now_ms_in(&store).await?;
    let age = i64::try_from(args.older_than.as_millis()).unwrap_or(i64::MAX);
    let prune = Prune {
        before_ms: now.saturating_sub(age),
        migration: args.migration.clone(),
        batch: BATCH,
    };
    let removed = if args.dry_run {
        store.prunable(&prune).await?
    } else {
        let mut sum = Pruned::default();
        loop {
            let batch = store.prune(&prune).await.map_err(|e| {
                CliError::new(
                    1,
                    format!(
                        "pruning stopped after {} rows ({}): {e}; what went is gone, run it again to go on",
                        sum.total(),
                        per_table(&sum)
                    ),
                )
            })?;
            if batch.total() == 0 {
                break sum;
            }
            sum += batch;
        }
    };
    let report = Report {
        before: crate::time::rfc3339(prune.before_ms),
        migration: args.migration,
        dry_run: args.dry_run,
        removed,
    };
    if args.json {
        print_json(&report)?;
    } else {
        to_stdout(|out| {
            writeln!(
                out,
                "{} rows older than {}{}:",
                if report.dry_run {
                    "would remove"
                } else {
                    "removed"
                },
                report.before,
                report
                    .migration
                    .as_ref()
                    .map(|m| format!(" of migration {m}"))
                    .unwrap_or_default()
            )?;
            for (table, n) in report.removed.tables() {
                writeln!(out, "  {table:<16} {n:>10}")?;
            }
            if report.dry_run {
                writeln!(out, "dry run: nothing deleted")?;
            }
            Ok(())
        })?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `gate_evaluations 12, gate_memory 0, scrapes 3, outbox 0`.
fn per_table(p: &Pruned) -> String {
    p.tables()
        .iter()
        .map(|(t, n)| format!("{t} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}
