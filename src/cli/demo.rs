//! `migrate demo`: a whole migration on this machine, nothing to install.

use std::io::{self, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{CliError, CliResult, colour_allowed, print_json, to_stdout};
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

fn write_report(out: &mut impl Write, r: &Report) -> io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "migration {} in {:.1} simulated hours (seed {}{})",
        r.final_state,
        r.simulated_hours,
        r.seed,
        r.fault
            .as_ref()
            .map(|f| format!(", fault {f}"))
            .unwrap_or_default()
    )?;
    writeln!(out, "  produced             {:>8}", r.produced)?;
    writeln!(
        out,
        "  applied              {:>8}   (old {}, new {})",
        r.applied,
        r.applied_by_route.get("old").copied().unwrap_or(0),
        r.applied_by_route.get("new").copied().unwrap_or(0)
    )?;
    writeln!(out, "  dead-lettered        {:>8}", r.dead_lettered)?;
    writeln!(
        out,
        "  lost                 {:>8}   (produced - applied - dead-lettered)",
        r.lost
    )?;
    writeln!(
        out,
        "  duplicates delivered {:>8}   (blocked by the consumer's dedup)",
        r.duplicates_delivered
    )?;
    writeln!(out, "  duplicates applied   {:>8}", r.duplicates_applied)?;
    writeln!(out, "  order violations     {:>8}", r.order_violations)?;
    writeln!(out, "  redeliveries         {:>8}", r.redeliveries)?;
    writeln!(out, "  dead letters replayed{:>8}", r.replayed_dead_letters)?;
    writeln!(
        out,
        "  guard breaches       {:>8}   rollbacks {}",
        r.breaches, r.rollbacks
    )?;
    writeln!(out, "journal:")?;
    for e in &r.journal {
        writeln!(
            out,
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
        )?;
    }
    if r.ok {
        writeln!(
            out,
            "ok: nothing lost, nothing applied twice, per-key order kept"
        )?;
    } else {
        for v in &r.violations {
            writeln!(out, "INVARIANT BROKEN: {v}")?;
        }
    }
    Ok(())
}

/// `text` line by line, each line longer than `width` (when there is one) wrapped under its own
/// indent, deeper by four.
fn write_fitted(out: &mut impl Write, text: &str, width: Option<usize>) -> io::Result<()> {
    for line in text.lines() {
        match width {
            Some(w) if line.chars().count() > w => {
                let body = line.trim_start();
                let lead = &line[..line.len() - body.len()];
                for l in super::fit::wrap(body, w, lead, &format!("{lead}    ")) {
                    writeln!(out, "{l}")?;
                }
            }
            _ => writeln!(out, "{line}")?,
        }
    }
    Ok(())
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
    let live =
        std::io::stdout().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    // On a terminal the text around the live view fits its width too (wrapped, not cut);
    // elsewhere it is printed as it is.
    let width = live.then(super::fit::width);
    let mut view: Box<dyn View> = if args.json {
        Box::new(Quiet)
    } else if live {
        let colour = colour_allowed(std::env::var_os("NO_COLOR").as_deref());
        Box::new(Live::new(std::io::stdout(), colour))
    } else {
        Box::new(Lines::new(std::io::stdout()))
    };
    if !args.json {
        let line = format!(
            "queue-migrate demo: moving a live order flow from rabbitmq to nats (simulated), seed {}{}",
            args.seed,
            args.fault
                .map(|f| format!(", fault {}", f.name()))
                .unwrap_or_default()
        );
        to_stdout(|out| write_fitted(out, &line, width))?;
    }
    let result = demo::run(&opts, view.as_mut()).await;
    if temporary {
        let _ = std::fs::remove_dir_all(&dir);
    }
    let report = result.map_err(|e| CliError::new(1, format!("the demo failed: {e}")))?;
    if args.json {
        print_json(&report)?;
    } else {
        let mut text = Vec::new();
        write_report(&mut text, &report).map_err(CliError::stdout)?;
        if let Some(d) = &args.keep {
            writeln!(
                text,
                "kept in {}: try `migrate --state {}/state.db history demo`",
                d.display(),
                d.display()
            )
            .map_err(CliError::stdout)?;
        }
        let text = String::from_utf8_lossy(&text);
        to_stdout(|out| write_fitted(out, &text, width))?;
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
