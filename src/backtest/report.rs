//! The answer of a rehearsal, for a person and for tools: pure, no IO, no clock.

use std::io::{self, Write};

use serde::Serialize;

use super::simulate::{Breach, End, GateShare, Rehearsal, Step};
use super::{Outage, Outcome, WhatIf};
use crate::time::{human_ms, rfc3339};

/// What `--json` prints.
#[derive(Debug, Clone, Serialize)]
pub struct Report<'a> {
    pub plan: &'a str,
    pub from: String,
    pub to: String,
    pub step: String,
    pub start_at: String,
    /// Sources that cannot answer for the past, and what else a person should know of them.
    pub sources: Vec<String>,
    /// When a source could not be reached (its gates had no data then).
    pub outages: &'a [Outage],
    pub verdict: String,
    /// Milliseconds from the window's start to `complete` (`None`: not reached).
    pub completed_after_ms: Option<i64>,
    pub timeline: &'a [Step],
    pub moves: &'a [super::simulate::Move],
    pub breaches: &'a [Breach],
    pub end: &'a End,
    pub gates: &'a [GateShare],
    pub what_if: Option<WhatIfReport<'a>>,
}

/// The rerun with `--what-if`.
#[derive(Debug, Clone, Serialize)]
pub struct WhatIfReport<'a> {
    pub changes: &'a [WhatIf],
    pub verdict: String,
    pub completed_after_ms: Option<i64>,
    /// How much sooner (negative: later) it completes than the plan as written; `None` unless
    /// both complete.
    pub sooner_ms: Option<i64>,
    pub timeline: &'a [Step],
    pub moves: &'a [super::simulate::Move],
    pub breaches: &'a [Breach],
    pub end: &'a End,
    pub gates: &'a [GateShare],
}

/// How long after the window's start the migration completed.
pub fn completed_after(r: &Rehearsal) -> Option<i64> {
    match r.end {
        End::Completed { at_ms } => Some(at_ms - r.start_ms),
        _ => None,
    }
}

/// A share as a whole percentage.
fn pct(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

/// The verdict line: `would have completed in 4d 6h`, ``would still be in slices[2] after 7d:
/// `errors quiet` failed 38% of the time in it``, `would have stopped ...`.
pub fn verdict(r: &Rehearsal) -> String {
    match &r.end {
        End::Completed { at_ms } => format!(
            "would have completed in {} (at {})",
            human_ms(at_ms - r.start_ms),
            rfc3339(*at_ms)
        ),
        End::Stopped {
            at_ms,
            command,
            from,
            to,
        } => {
            let guards = r
                .breaches
                .iter()
                .rev()
                .find(|b| b.ended)
                .map(|b| b.guards.join("; "))
                .unwrap_or_default();
            let what = if *command == "rollback" {
                format!("rolled back to {to} and paused")
            } else {
                format!("paused in {from}")
            };
            format!(
                "would have stopped in {from} after {} (at {}): guard breach, {what}; the rehearsal ends there (a person would resume): {guards}",
                human_ms(at_ms - r.start_ms),
                rfc3339(*at_ms)
            )
        }
        End::Undecided {
            at_ms,
            state,
            gates,
        } => format!(
            "would have paused in {state} after {} (at {}): a judge could not decide, a person decides; the rehearsal ends there: {}",
            human_ms(at_ms - r.start_ms),
            rfc3339(*at_ms),
            gates.join("; ")
        ),
        End::Unfinished { state, .. } => {
            let after = human_ms(r.end_ms - r.start_ms);
            let Some(step) = r.steps.last() else {
                return format!("would still be in {state} after {after}");
            };
            // The gate that kept it there most.
            let worst = step
                .gates
                .iter()
                .filter(|g| g.not_passed_ms() > 0)
                .max_by_key(|g| g.not_passed_ms());
            // Every gate of the step is judged at each of its rounds: any one's total is the
            // step's time.
            let spent: i64 = step
                .gates
                .first()
                .map_or(0, |g| g.passed_ms + g.not_passed_ms())
                .max(1);
            match worst {
                Some(g) => {
                    let (verb, ms) = [
                        ("failed", g.failed_ms),
                        ("had no data", g.no_data_ms),
                        (
                            "was soaking (true, its `for:` not yet elapsed)",
                            g.soaking_ms,
                        ),
                    ]
                    .into_iter()
                    .fold(
                        ("failed", -1),
                        |best, x| if x.1 > best.1 { x } else { best },
                    );
                    format!(
                        "would still be in {state} after {after}: `{}` {verb} {} of the time in it",
                        g.name,
                        pct(ms as f64 / spent as f64)
                    )
                }
                None => format!(
                    "would still be in {state} after {after}: its minimum time ({}) was not met",
                    human_ms(step.min_time_ms)
                ),
            }
        }
    }
}

/// The verdict line, unless a source could not be reached while the rehearsal was stuck in its
/// last step: then it says so (`source prom unreachable from T to T (why)`) instead of a
/// verdict that reads like a plan problem.
pub fn verdict_given(r: &Rehearsal, outages: &[Outage]) -> String {
    if let End::Unfinished { state, .. } = &r.end {
        let since = r.steps.last().map_or(r.start_ms, |s| s.entered_ms);
        let blind: Vec<String> = outages
            .iter()
            .filter(|o| o.to_ms >= since)
            .map(Outage::sentence)
            .collect();
        if !blind.is_empty() {
            return format!(
                "{}: no verdict on the plan for that time (its gates had no data); it got as far as {state}",
                blind.join("; ")
            );
        }
    }
    verdict(r)
}

/// The report `--json` prints.
pub fn report<'a>(
    plan: &'a str,
    outcome: &'a Outcome,
    step_ms: i64,
    start_at: String,
    sources: Vec<String>,
) -> Report<'a> {
    let r = &outcome.rehearsal;
    let done = completed_after(r);
    Report {
        plan,
        from: rfc3339(r.start_ms),
        to: rfc3339(r.end_ms),
        step: human_ms(step_ms),
        start_at,
        sources,
        outages: &outcome.outages,
        verdict: verdict_given(r, &outcome.outages),
        completed_after_ms: done,
        timeline: &r.steps,
        moves: &r.moves,
        breaches: &r.breaches,
        end: &r.end,
        gates: &outcome.shares,
        what_if: outcome.what_if.as_ref().map(|(changes, w, shares)| {
            let theirs = completed_after(w);
            WhatIfReport {
                changes,
                verdict: verdict_given(w, &outcome.outages),
                completed_after_ms: theirs,
                sooner_ms: done.zip(theirs).map(|(a, b)| a - b),
                timeline: &w.steps,
                moves: &w.moves,
                breaches: &w.breaches,
                end: &w.end,
                gates: shares,
            }
        }),
    }
}

fn write_timeline(out: &mut impl Write, steps: &[Step], breaches: &[Breach]) -> io::Result<()> {
    writeln!(out, "timeline:")?;
    for s in steps {
        let stay = match s.left_ms {
            Some(left) => format!("for {}", human_ms(left - s.entered_ms)),
            None => "until the window's end".into(),
        };
        let last = s
            .last_to_pass
            .as_deref()
            .map(|g| format!("; last to pass: {g}"))
            .unwrap_or_default();
        writeln!(
            out,
            "  {}  {:<14} {stay}{last}",
            rfc3339(s.entered_ms),
            s.state.to_string()
        )?;
        for g in s.gates.iter().filter(|g| g.not_passed_ms() > 0) {
            let mut parts = Vec::new();
            if g.soaking_ms > 0 {
                parts.push(format!("soaking {}", human_ms(g.soaking_ms)));
            }
            if g.no_data_ms > 0 {
                parts.push(format!("no data {}", human_ms(g.no_data_ms)));
            }
            if g.failed_ms > 0 {
                parts.push(format!("failed {}", human_ms(g.failed_ms)));
            }
            writeln!(
                out,
                "      {} {}: {}{}",
                g.kind,
                g.name,
                parts.join(", "),
                g.last_reason
                    .as_deref()
                    .map(|r| format!(" (last: {r})"))
                    .unwrap_or_default()
            )?;
        }
    }
    if breaches.is_empty() {
        writeln!(out, "breaches: none")?;
    } else {
        writeln!(out, "breaches:")?;
        for b in breaches {
            writeln!(
                out,
                "  {}  in {}: on_breach {:?}{}: {}",
                rfc3339(b.at_ms),
                b.state,
                b.action,
                if b.ended { " (ends the rehearsal)" } else { "" },
                b.guards.join("; ")
            )?;
        }
    }
    Ok(())
}

fn write_shares(out: &mut impl Write, shares: &[GateShare]) -> io::Result<()> {
    writeln!(
        out,
        "gates over the whole window (as if each phase began at its start):"
    )?;
    let width = shares.iter().map(|g| g.name.len()).max().unwrap_or(0);
    for g in shares {
        let closest = g
            .closest
            .as_ref()
            .map(|m| {
                format!(
                    "closest margin {:+} (value {} at {})",
                    round(m.margin),
                    round(m.value),
                    rfc3339(m.at_ms)
                )
            })
            .unwrap_or_else(|| "no margin".into());
        writeln!(
            out,
            "  {:<13} {:<5} {:<width$}  passed {:>4}  soaking {:>4}  no data {:>4}  failed {:>4}  {closest}",
            g.phase,
            g.kind,
            g.name,
            pct(g.passed),
            pct(g.soaking),
            pct(g.no_data),
            pct(g.failed),
        )?;
    }
    Ok(())
}

/// Six decimals at most, and never `-0`: a margin that rounds to zero reads `+0`.
fn round(v: f64) -> f64 {
    // Adding 0.0 turns -0.0 into 0.0 and leaves every other number as it is.
    (v * 1e6).round() / 1e6 + 0.0
}

/// The report as a person reads it.
pub fn write_text(out: &mut impl Write, r: &Report<'_>) -> io::Result<()> {
    writeln!(
        out,
        "backtest of {} from {} to {} every {}, starting in {}",
        r.plan, r.from, r.to, r.step, r.start_at
    )?;
    for s in &r.sources {
        writeln!(out, "  note: {s}")?;
    }
    for o in r.outages {
        writeln!(out, "  note: {}: its gates had no data then", o.sentence())?;
    }
    write_timeline(out, r.timeline, r.breaches)?;
    write_shares(out, r.gates)?;
    writeln!(out, "verdict: {}", r.verdict)?;
    if let Some(w) = &r.what_if {
        let changes: Vec<String> = w
            .changes
            .iter()
            .map(|c| format!("{}={}", c.gate, c.threshold))
            .collect();
        writeln!(out)?;
        writeln!(out, "what if {}:", changes.join(", "))?;
        write_timeline(out, w.timeline, w.breaches)?;
        let shift = match w.sooner_ms {
            Some(ms) if ms > 0 => format!(" ({} sooner)", human_ms(ms)),
            Some(ms) if ms < 0 => format!(" ({} later)", human_ms(-ms)),
            Some(_) => " (no sooner)".into(),
            None => String::new(),
        };
        writeln!(out, "verdict with the change: {}{shift}", w.verdict)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Issue 44: backtest printed `closest margin -0`.
    #[test]
    fn a_margin_that_rounds_to_zero_is_never_minus_zero() {
        for v in [-0.0, -1e-9, -4e-7, 0.0, 1e-9] {
            let text = format!("{:+}", super::round(v));
            assert_eq!(text, "+0", "{v}");
        }
        assert_eq!(format!("{:+}", super::round(-0.0125)), "-0.0125");
        assert_eq!(format!("{:+}", super::round(0.5)), "+0.5");
    }
}
