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
    /// lost), broker-outage (the new broker unreachable for 90 minutes: gates hold),
    /// stale-producer (one producer instance stops following the routing document: the
    /// stale-producer guard names it and pauses, the team restarts it and resumes).
    #[arg(long, value_enum)]
    pub fault: Option<Fault>,
    /// Print the report as one JSON object (and nothing else on stdout).
    #[arg(long)]
    pub json: bool,
    /// Keep the state store, routing file and consumer database in this directory (default: a
    /// temporary directory, removed at the end).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Simulated time per real second: `1000` (a simulated hour in 3.6 s: the whole story in
    /// about 45-60 s), `5000`, or `max` (as fast as it can). Default: 1000 on a terminal, `max`
    /// with --json or when stdout is not a terminal.
    #[arg(long, value_parser = parse_speed, value_name = "N|max")]
    pub speed: Option<Speed>,
}

/// How fast the demo's clock runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Speed {
    /// Simulated seconds per real second.
    Times(f64),
    Max,
}

/// The live view's pace when none is given.
pub const DEFAULT_SPEED: f64 = 1000.0;

fn parse_speed(text: &str) -> Result<Speed, String> {
    if text.eq_ignore_ascii_case("max") {
        return Ok(Speed::Max);
    }
    match text.trim_end_matches(['x', 'X']).parse::<f64>() {
        Ok(n) if n.is_finite() && n >= 1.0 => Ok(Speed::Times(n)),
        _ => Err(format!(
            "{text:?}: a number of simulated seconds per real second (at least 1), or max"
        )),
    }
}

/// The fault's window and what happened in it, in two lines (none without a fault).
fn write_fault(out: &mut impl Write, r: &Report) -> io::Result<()> {
    let Some(f) = &r.fault_effects else {
        return Ok(());
    };
    let what = match f.kind.as_str() {
        "bad-deploy" => "the new route's consumer failing 40% of messages",
        "consumer-crash" => "the consumer down after a crash mid-batch",
        "broker-outage" => "the new broker unreachable",
        "stale-producer" => "one producer instance not following the routing document",
        _ => "active",
    };
    let window = match (&f.from_t, &f.to_t, &f.from, &f.to) {
        (Some(ft), Some(tt), Some(from), Some(to)) => {
            format!(
                "from {ft} to {tt} ({} to {})",
                clock_time(from),
                clock_time(to)
            )
        }
        (Some(ft), None, Some(from), None) => {
            format!("from {ft} ({}) to the end", clock_time(from))
        }
        _ => "never struck".into(),
    };
    writeln!(out, "fault {}: {what} {window}", f.kind)?;
    let mut during = format!(
        "  while it lasted: {} transition{}, gates held in {} of {} rounds",
        f.transitions_during,
        if f.transitions_during == 1 { "" } else { "s" },
        f.ticks_with_holds_during,
        f.ticks_during
    );
    if f.outbox_peak > 0 {
        during.push_str(&format!(
            ", up to {} messages in the producers' outboxes",
            crate::sim::view::thousands(f.outbox_peak)
        ));
    }
    writeln!(out, "{during}")
}

/// `2026-11-30T05:46:00Z` as `05:46` (the demo's runs start on one day at midnight, UTC).
fn clock_time(rfc3339: &str) -> String {
    rfc3339
        .get(11..16)
        .map_or_else(|| rfc3339.to_string(), |t| format!("{t} UTC"))
}

/// The report's last line: the verdict.
fn verdict(r: &Report) -> String {
    if !r.ok {
        return format!("FAILED: {}", r.violations.join("; "));
    }
    let dead = if r.dead_lettered > 0 {
        format!(
            " + {} dead-lettered",
            crate::sim::view::thousands(r.dead_lettered)
        )
    } else {
        String::new()
    };
    let mut s = format!(
        "ok: nothing lost, nothing applied twice, per-key order kept ({} produced = {} applied{dead}); \
         complete in {:.1} simulated hours",
        crate::sim::view::thousands(r.produced),
        crate::sim::view::thousands(r.applied),
        r.simulated_hours
    );
    if let Some(f) = &r.fault_effects {
        s.push_str(&match f.kind.as_str() {
            "bad-deploy" => format!(
                "; the bad deploy caught by the guard ({} rollback{}, paused until resumed)",
                r.rollbacks,
                if r.rollbacks == 1 { "" } else { "s" }
            ),
            "consumer-crash" => format!(
                "; the crash's redeliveries absorbed ({} duplicates blocked by dedup)",
                r.duplicates_delivered
            ),
            "broker-outage" => format!(
                "; {} step{} taken while the new broker was unreachable",
                f.transitions_during,
                if f.transitions_during == 1 { "" } else { "s" }
            ),
            "stale-producer" => format!(
                "; the stale producer {} caught by the guard ({} message{} written to the old \
                 broker after their slices moved, every one applied; paused until resumed)",
                f.stale_producers
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                f.stale_producers.values().sum::<u64>(),
                if f.stale_producers.values().sum::<u64>() == 1 {
                    ""
                } else {
                    "s"
                }
            ),
            _ => String::new(),
        });
    }
    s
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
    write_fault(out, r)?;
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
    for v in &r.violations {
        writeln!(out, "INVARIANT BROKEN: {v}")?;
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
    let live =
        std::io::stdout().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    let speed = match args.speed {
        Some(Speed::Times(n)) => Some(n),
        Some(Speed::Max) => None,
        None => (live && !args.json).then_some(DEFAULT_SPEED),
    };
    let opts = Options {
        seed: args.seed,
        fault: args.fault,
        dir: dir.clone(),
        speed,
    };
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
            "queue-migrate demo: moving a live order flow from rabbitmq to nats (simulated), seed {}{}{}",
            args.seed,
            args.fault
                .map(|f| format!(", fault {}", f.name()))
                .unwrap_or_default(),
            speed
                .map(|n| format!(", simulated time at {n}x (--speed max: as fast as it can)"))
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
        writeln!(text, "{}", verdict(&report)).map_err(CliError::stdout)?;
        let text = String::from_utf8_lossy(&text);
        to_stdout(|out| write_fitted(out, &text, width))?;
    }
    Ok(if report.ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
