//! `migrate status [NAME]`: phase, step, routing and every gate with its last value.

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;

use super::{CliError, CliResult, Ctx, GateRow, print_json, to_stdout, write_gate_rows};
use crate::controller::views::StatusView;
use crate::store::Store;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The migration (all of them when left out).
    pub name: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

fn write_view(out: &mut impl Write, v: &StatusView) -> io::Result<()> {
    // The state as the journal, `history` and `--from` write it: `slices[2]`.
    let step = v.step.map(|s| format!("[{s}]")).unwrap_or_default();
    writeln!(
        out,
        "{}: {}{}{}  (version {}, since {})",
        v.migration,
        v.state,
        step,
        if v.paused { " [PAUSED]" } else { "" },
        v.version,
        v.entered_at
    )?;
    writeln!(
        out,
        "  routing: generation {}, {} of {} slices to new, consumers read {}{}",
        v.routing.generation,
        v.routing.slices_migrated,
        v.routing.slices_total,
        v.routing
            .consume
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("+"),
        if v.routing_published {
            ""
        } else {
            "  (NOT yet published: the next command retries)"
        }
    )?;
    if let Some(e) = &v.publish_error {
        writeln!(out, "  publisher behind: {e}")?;
    }
    if let Some(e) = &v.plan_error {
        writeln!(
            out,
            "  NOT loadable with this environment's secrets (a daemon here answers 503 for it and does not act on it): {e}"
        )?;
    }
    if v.gates.is_empty() {
        writeln!(out, "  no gates in this state")?;
    }
    let rows: Vec<GateRow<'_>> = v
        .gates
        .iter()
        .map(|g| GateRow {
            kind: &g.kind,
            verdict: g.verdict.as_str(),
            name: &g.name,
            value: g.value,
            reason: &g.reason,
        })
        .collect();
    write_gate_rows(out, &rows)
}

pub async fn run(ctx: &Ctx, args: StatusArgs) -> CliResult {
    let store = ctx.existing_store().await?;
    let fetcher = ctx.fetcher()?;
    let c = ctx.controller(&store, &fetcher);
    let single = args.name.is_some();
    let names = match args.name {
        Some(n) => vec![n],
        None => store.list().await?.into_iter().map(|r| r.name).collect(),
    };
    let mut views = Vec::new();
    // Without a name, a migration that cannot be shown does not hide the others: they are
    // shown, then the command fails naming it.
    let mut failed: Vec<CliError> = Vec::new();
    for name in names {
        let view = match c.load(&name).await {
            Ok(loaded) => c.status_view(&loaded).await,
            Err(e) => Err(e),
        };
        match view {
            Ok(v) => views.push(v),
            Err(e) if single => return Err(e.into()),
            Err(e) => failed.push(e.into()),
        }
    }
    let printed = if args.json {
        match views.as_slice() {
            [one] if single => print_json(one),
            all => print_json(&all),
        }
    } else if views.is_empty() && failed.is_empty() {
        to_stdout(|out| {
            writeln!(
                out,
                "no migrations in {} (start with `migrate init PLAN`)",
                ctx.global.state
            )
        })
    } else {
        to_stdout(|out| views.iter().try_for_each(|v| write_view(out, v)))
    };
    // A migration that could not be shown fails the command, whatever became of the report.
    if let Some(first) = failed.first() {
        let code = first.code;
        let message = failed
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("\n");
        return Err(CliError::new(code, message));
    }
    printed.map(|()| ExitCode::SUCCESS)
}
