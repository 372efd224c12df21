//! `migrate demo`: a whole migration on this machine, nothing to install.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{CliError, CliResult, print_json};
use crate::sim::demo::{self, Options, Report};
use crate::sim::view::{Lines, Live, Quiet, View};
use crate::sim::world::Fault;

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The seed of the world: the same seed gives the same run.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Inject a fault: bad-deploy (the new route starts failing at a slice step: the guard rolls
    /// back one step and pauses, the team fixes and resumes), consumer-crash (mid-batch, acks
    /// lost), broker-outage (the new broker unreachable for 90 minutes: gates hold).
    #[arg(long, value_enum)]
    pub fault: Option<Fault>,
    /// Print the report as one JSON object (and nothing else on stdout).
    #[arg(long)]
    pub json: bool,
    /// Keep the state store, routing file and consumer database in this directory (default: a
    /// temporary directory, removed at the end).
    #[arg(long)]
    pub keep: Option<PathBuf>,
}

fn print_report(r: &Report) {
    println!();
    println!(
        "migration {} in {:.1} simulated hours (seed {}{})",
        r.final_state,
        r.simulated_hours,
        r.seed,
        r.fault
            .as_ref()
            .map(|f| format!(", fault {f}"))
            .unwrap_or_default()
    );
    println!("  produced             {:>8}", r.produced);
    println!(
        "  applied              {:>8}   (old {}, new {})",
        r.applied,
        r.applied_by_route.get("old").copied().unwrap_or(0),
        r.applied_by_route.get("new").copied().unwrap_or(0)
    );
    println!("  dead-lettered        {:>8}", r.dead_lettered);
    println!(
        "  lost                 {:>8}   (produced - applied - dead-lettered)",
        r.lost
    );
    println!(
        "  duplicates delivered {:>8}   (blocked by the consumer's dedup)",
        r.duplicates_delivered
    );
    println!("  duplicates applied   {:>8}", r.duplicates_applied);
    println!("  order violations     {:>8}", r.order_violations);
    println!("  redeliveries         {:>8}", r.redeliveries);
    println!("  dead letters replayed{:>8}", r.replayed_dead_letters);
    println!(
        "  guard breaches       {:>8}   rollbacks {}",
        r.breaches, r.rollbacks
    );
    println!("journal:");
    for e in &r.journal {
        println!(
            "  {:>3} {} {:<8} {} -> {}{}  by {}{}",
            e.seq,
            e.at,
            e.command,
            e.from,
            e.to,
            if e.to_paused { " [paused]" } else { "" },
            e.actor,
            e.reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    if r.ok {
        println!("ok: nothing lost, nothing applied twice, per-key order kept");
    } else {
        for v in &r.violations {
            println!("INVARIANT BROKEN: {v}");
        }
    }
}

pub async fn run(args: DemoArgs) -> CliResult {
    let (dir, temporary) = match &args.keep {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!(
                "queue-migrate-demo-{}-{}",
                std::process::id(),
                args.seed
            )),
            true,
        ),
    };
    if dir.join("state.db").exists() {
        return Err(CliError::input(format!(
            "{} already holds a demo run: pick another --keep directory or remove it",
            dir.display()
        )));
    }
    let opts = Options {
        seed: args.seed,
        fault: args.fault,
        dir: dir.clone(),
    };
    let mut view: Box<dyn View> = if args.json {
        Box::new(Quiet)
    } else if std::io::stdout().is_terminal() {
        Box::new(Live::new(std::io::stdout()))
    } else {
        Box::new(Lines::new(std::io::stdout()))
    };
    if !args.json {
        println!(
            "queue-migrate demo: moving a live order flow from rabbitmq to nats (simulated), seed {}{}",
            args.seed,
            args.fault
                .map(|f| format!(", fault {f:?}"))
                .unwrap_or_default()
        );
    }
    let result = demo::run(&opts, view.as_mut()).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = result.map_err(|e| CliError::new(1, format!("the demo failed: {e}")))?;
    if args.json {
        print_json(&report)?;
    } else {
        print_report(&report);
        if let Some(d) = &args.keep {
            println!(
                "kept in {}: try `migrate --state {}/state.db history demo`",
                d.display(),
                d.display()
            );
        }
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
