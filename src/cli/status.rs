//! `migrate status [NAME]`: phase, step, routing and every gate with its last value.

use std::process::ExitCode;

use clap::Args;
use serde::Serialize;

use super::{CliResult, Ctx, print_json};
use crate::controller::publish::document;
use crate::controller::{Controller, GateView, Loaded};
use crate::routing::RoutingDocument;
use crate::store::Store;
use crate::time::rfc3339;

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The migration (all of them when left out).
    pub name: Option<String>,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The `status --json` contract.
#[derive(Debug, Serialize)]
pub struct StatusView {
    pub migration: String,
    pub state: String,
    pub step: Option<usize>,
    pub paused: bool,
    pub version: i64,
    pub entered_at: String,
    pub routing: RoutingDocument,
    /// False when the routing of the current generation has not reached every publisher yet.
    pub routing_published: bool,
    pub gates: Vec<GateView>,
}

async fn view<S: Store>(
    c: &Controller<'_, S>,
    loaded: &Loaded,
) -> Result<StatusView, super::CliError> {
    let r = &loaded.record;
    Ok(StatusView {
        migration: r.name.clone(),
        state: r.state.name().to_string(),
        step: r.state.step(),
        paused: r.paused,
        version: r.version,
        entered_at: rfc3339(r.entered_at_ms),
        routing: document(&loaded.plan, r),
        routing_published: r.published_generation >= r.generation,
        gates: c.last_gates(loaded).await?,
    })
}

fn print_view(v: &StatusView) {
    let step = v.step.map(|s| format!(" step {s}")).unwrap_or_default();
    println!(
        "{}: {}{}{}  (version {}, since {})",
        v.migration,
        v.state,
        step,
        if v.paused { " [PAUSED]" } else { "" },
        v.version,
        v.entered_at
    );
    println!(
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
    );
    if v.gates.is_empty() {
        println!("  no gates in this state");
    }
    for g in &v.gates {
        println!(
            "  {:<5} {:<5} {:<28} {:>12}  {}",
            g.kind,
            g.verdict.as_str().to_uppercase(),
            g.name,
            g.value
                .map(|v| format!("{v}"))
                .unwrap_or_else(|| "-".into()),
            g.reason
        );
    }
}

pub async fn run(ctx: &Ctx, args: StatusArgs) -> CliResult {
    let store = ctx.store().await?;
    let fetcher = ctx.fetcher()?;
    let c = ctx.controller(&store, &fetcher);
    let single = args.name.is_some();
    let names = match args.name {
        Some(n) => vec![n],
        None => store.list().await?.into_iter().map(|r| r.name).collect(),
    };
    let mut views = Vec::new();
    for name in names {
        let loaded = c.load(&name).await?;
        views.push(view(&c, &loaded).await?);
    }
    if args.json {
        match views.as_slice() {
            [one] if single => print_json(one)?,
            all => print_json(&all)?,
        }
    } else if views.is_empty() {
        println!(
            "no migrations in {} (start with `migrate init PLAN`)",
            ctx.global.state
        );
    } else {
        for v in &views {
            print_view(v);
        }
    }
    Ok(ExitCode::SUCCESS)
}
