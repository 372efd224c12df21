//! `plan backtest --windows DURATION`: the window cut into consecutive windows of one length,
//! each rehearsed on its own from the same start step, through the same [`rehearse`] as one
//! window: the readings are read once for the whole range, each window sees only its own
//! instants, and starts with a fresh memory, as a migration entering the step then would.
//!
//! Per window: how the rehearsal ended (its verdict line) and each judge of the start step's
//! first decision in it (PASS or FAIL, and how long after the window's start), or none. Over
//! all windows, per judge: how many passed, failed and decided nothing, and the median and p90
//! time to a decision with the undecided windows counted as deciding after the window's end
//! (censored: a quantile that falls among them is "over the window", never a number).
//! Pure, no IO, no clock.

use serde::Serialize;

use crate::machine::State;
use crate::plan::{Check, GateKind, Plan};

use super::error::BacktestError;
use super::simulate::{End, Rehearsal, rehearse};
use super::table::{Instants, Readings};

/// Most windows one run rehearses.
pub const MAX_WINDOWS: usize = 100_000;

/// The windows of `window_ms` that `instants` holds: (index of the first instant, instants in
/// it). Window `w` runs from instant `w * n` to instant `(w + 1) * n` included (`n` steps a
/// window): its last instant is the next one's first, each interval counted in one window only.
/// A remainder shorter than a window is left out.
///
/// # Errors
/// A window that is not a whole number of steps, longer than the range, or more than
/// [`MAX_WINDOWS`] windows.
pub fn cuts(instants: &Instants, window_ms: i64) -> Result<Vec<(usize, usize)>, BacktestError> {
    let step = instants.step_ms;
    if window_ms <= 0 || window_ms % step != 0 {
        return Err(BacktestError::Window(format!(
            "--windows {} is not a whole number of steps of {}",
            crate::time::human_ms(window_ms),
            crate::time::human_ms(step)
        )));
    }
    let n = usize::try_from(window_ms / step).unwrap_or(usize::MAX);
    let whole = instants.count.saturating_sub(1) / n;
    if whole == 0 {
        return Err(BacktestError::Window(format!(
            "--windows {}: the range from --from to --to holds no whole window",
            crate::time::human_ms(window_ms)
        )));
    }
    if whole > MAX_WINDOWS {
        return Err(BacktestError::Window(format!(
            "{whole} windows: at most {MAX_WINDOWS} per run; use longer --windows or a shorter range"
        )));
    }
    Ok((0..whole).map(|w| (w * n, n + 1)).collect())
}

/// A judge's first decision in one window's start step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeDecision {
    pub name: String,
    pub kind: GateKind,
    /// `pass`, `fail`, or `None`: it decided nothing in the step (DECIDING, INCONCLUSIVE or no
    /// data until the step or the window ended).
    pub decision: Option<&'static str>,
    /// Milliseconds from the window's start to the decision.
    pub after_ms: Option<i64>,
    /// A FAIL's reason; when undecided, the reason of its last verdict.
    pub reason: Option<String>,
}

/// One window's rehearsal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Window {
    pub from_ms: i64,
    pub to_ms: i64,
    /// The rehearsal's verdict line, as one window's.
    pub verdict: String,
    pub end: End,
    /// The start step's judges, in the plan's order (exit gates, then guards).
    pub judges: Vec<JudgeDecision>,
}

/// One judge over all windows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JudgeSummary {
    pub name: String,
    pub kind: GateKind,
    pub windows: usize,
    pub passed: usize,
    pub failed: usize,
    pub undecided: usize,
    /// Median and p90 time to a decision over all windows, undecided ones counted as after the
    /// window (`None`: the quantile falls among the undecided, "over the window").
    pub median_ms: Option<i64>,
    pub p90_ms: Option<i64>,
}

/// Every window, and each judge over them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Windows {
    pub window_ms: i64,
    pub judges: Vec<JudgeSummary>,
    pub windows: Vec<Window>,
}

/// The judges of `start_at`'s phase: (name, kind), exit gates then guards.
fn judges_of(plan: &Plan, start_at: State) -> Vec<(String, GateKind)> {
    let Some(phase) = start_at.phase().and_then(|k| plan.phase(k)) else {
        return Vec::new();
    };
    let exits = phase.exit.iter().map(|g| (g, GateKind::Exit));
    let guards = phase.guard.iter().map(|g| (g, GateKind::Guard));
    exits
        .chain(guards)
        .filter(|(g, _)| matches!(g.check, Check::Judge(_)))
        .map(|(g, kind)| (g.name.clone(), kind))
        .collect()
}

/// The first decision of the judge `name` (`kind`) in the rehearsal's first step.
fn decision(r: &Rehearsal, name: &str, kind: GateKind) -> JudgeDecision {
    let time = r
        .steps
        .first()
        .and_then(|s| s.gates.iter().find(|g| g.name == name && g.kind == kind));
    let pass = time.and_then(|t| t.first_pass_ms);
    let fail = time.and_then(|t| t.first_fail.clone());
    let (decision, at, reason) = match (pass, fail) {
        (Some(p), Some((f, _))) if p < f => (Some("pass"), Some(p), None),
        (_, Some((f, why))) => (Some("fail"), Some(f), Some(why)),
        (Some(p), None) => (Some("pass"), Some(p), None),
        (None, None) => (None, None, time.and_then(|t| t.last_reason.clone())),
    };
    JudgeDecision {
        name: name.to_string(),
        kind,
        decision,
        after_ms: at.map(|at| at - r.start_ms),
        reason,
    }
}

/// The `q` quantile (0 to 1) of the decision times, the undecided counted as after every
/// decided one (`None`: the quantile falls among them).
fn censored_quantile(decided: &[i64], undecided: usize, q: f64) -> Option<i64> {
    crate::rank::censored(decided, undecided, q)
}

/// Each judge over `windows`.
fn summarise(judges: &[(String, GateKind)], windows: &[Window]) -> Vec<JudgeSummary> {
    judges
        .iter()
        .enumerate()
        .map(|(j, (name, kind))| {
            let decisions = windows.iter().filter_map(|w| w.judges.get(j));
            let (mut passed, mut failed, mut undecided) = (0, 0, 0);
            let mut times = Vec::new();
            for d in decisions {
                match d.decision {
                    Some("pass") => passed += 1,
                    Some(_) => failed += 1,
                    None => undecided += 1,
                }
                times.extend(d.after_ms);
            }
            times.sort_unstable();
            JudgeSummary {
                name: name.clone(),
                kind: *kind,
                windows: windows.len(),
                passed,
                failed,
                undecided,
                median_ms: censored_quantile(&times, undecided, 0.5),
                p90_ms: censored_quantile(&times, undecided, 0.9),
            }
        })
        .collect()
}

/// Rehearse `plan` from `start_at` over each window of `window_ms` the readings hold.
///
/// # Errors
/// A window length the range cannot be cut into ([`cuts`]).
pub fn rehearse_windows(
    plan: &Plan,
    readings: &Readings,
    start_at: State,
    window_ms: i64,
) -> Result<Windows, BacktestError> {
    let judges = judges_of(plan, start_at);
    let mut windows = Vec::new();
    for (first, count) in cuts(&readings.instants, window_ms)? {
        let part = readings.window(first, count)?;
        let r = rehearse(plan, &part, start_at);
        windows.push(Window {
            from_ms: r.start_ms,
            to_ms: r.end_ms,
            verdict: super::report::verdict(&r),
            judges: judges
                .iter()
                .map(|(name, kind)| decision(&r, name, *kind))
                .collect(),
            end: r.end,
        });
    }
    Ok(Windows {
        window_ms,
        judges: summarise(&judges, &windows),
        windows,
    })
}

/// What `--windows` prints (`--json`: this, as JSON).
#[derive(Debug, Clone, Serialize)]
pub struct WindowsReport<'a> {
    pub plan: &'a str,
    pub from: String,
    pub to: String,
    pub step: String,
    pub window: String,
    pub start_at: String,
    /// Sources that cannot answer for the past, and what else a person should know of them.
    pub sources: Vec<String>,
    /// When a source could not be reached (its gates had no data then).
    pub outages: &'a [super::Outage],
    pub judges: &'a [JudgeSummary],
    pub windows: &'a [Window],
}

/// A share of `n` as a percentage with one decimal.
fn share(k: usize, n: usize) -> String {
    format!("{:.1}%", 100.0 * k as f64 / n.max(1) as f64)
}

/// A censored quantile: seconds, or "over the window".
fn seconds(ms: Option<i64>) -> String {
    ms.map_or_else(|| "over the window".into(), |ms| format!("{} s", ms / 1000))
}

/// The text form: the notes, each judge over the windows, then one line per window.
///
/// # Errors
/// A failed write.
pub fn write_text(out: &mut impl std::io::Write, r: &WindowsReport<'_>) -> std::io::Result<()> {
    for note in &r.sources {
        writeln!(out, "note: {note}")?;
    }
    for o in r.outages {
        writeln!(out, "note: {}", o.sentence())?;
    }
    writeln!(
        out,
        "{} windows of {} from {} to {} every {}, each rehearsed from {} on its own",
        r.windows.len(),
        r.window,
        r.from,
        r.to,
        r.step,
        r.start_at
    )?;
    if r.judges.is_empty() {
        writeln!(
            out,
            "no judge in {}: only each window's verdict",
            r.start_at
        )?;
    }
    for j in r.judges {
        writeln!(
            out,
            "judge `{}` ({}): PASS {} ({}), FAIL {} ({}), undecided {} ({}); time to a decision median {}, p90 {} (undecided windows counted as deciding after the window)",
            j.name,
            j.kind.as_str(),
            j.passed,
            share(j.passed, j.windows),
            j.failed,
            share(j.failed, j.windows),
            j.undecided,
            share(j.undecided, j.windows),
            seconds(j.median_ms),
            seconds(j.p90_ms)
        )?;
    }
    for w in r.windows {
        let judges: Vec<String> = w
            .judges
            .iter()
            .map(|d| match (d.decision, d.after_ms) {
                (Some(v), Some(ms)) => {
                    format!("{} {} after {} s", d.name, v.to_uppercase(), ms / 1000)
                }
                _ => format!("{} undecided", d.name),
            })
            .collect();
        writeln!(
            out,
            "{}  {}  {}",
            crate::time::rfc3339(w.from_ms),
            judges.join(", "),
            w.verdict
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_range_is_cut_into_whole_windows_sharing_their_edges() {
        // 2h 30m every 10 min: 16 instants, two whole windows of 1h (7 instants each).
        let range = Instants::new(0, 9_000_000, 600_000).expect("range");
        assert_eq!(cuts(&range, 3_600_000).expect("cuts"), vec![(0, 7), (6, 7)]);
        assert!(
            cuts(&range, 900_000).is_err(),
            "not a whole number of steps"
        );
        assert!(cuts(&range, 36_000_000).is_err(), "longer than the range");
        assert!(cuts(&range, 0).is_err());
    }

    #[test]
    fn a_censored_quantile_is_a_number_only_among_the_decided() {
        // 10 windows: 6 decided, 4 not.
        let decided = [10, 20, 30, 40, 50, 60];
        assert_eq!(censored_quantile(&decided, 4, 0.5), Some(50));
        assert_eq!(censored_quantile(&decided, 4, 0.6), Some(60));
        assert_eq!(censored_quantile(&decided, 4, 0.9), None);
        assert_eq!(censored_quantile(&[], 0, 0.5), None);
        assert_eq!(censored_quantile(&[5], 0, 0.9), Some(5));
    }
}
