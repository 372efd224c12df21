//! Gate evaluation: pure, no IO, no clock.
//!
//! A gate turns an [`Observation`] (what a source answered, or why it could not) into an
//! [`Evaluation`] with one of four verdicts:
//! - **pass** — the condition holds (for `for:` gates: has held at every evaluation for that long);
//! - **soaking** — the condition holds, but not yet for its `for:` (the [`Soak`] says how far);
//! - **no data** — the source is down, the result empty or NaN, a query error, too few samples:
//!   never advances, never rolls back, and always says why (naming the source), with its
//!   [`NoDataCause`] (what [`crate::standing`] tells a source down from one that answered);
//! - **fail** — the condition is false: "not yet" for an exit gate, a breach for a guard.
//!
//! Soaking and no data never advance and never roll back; they differ in what a person should
//! do: wait, or look at the source. Rows stored before the split say `hold`: they read back as
//! one of the two ([`Verdict::from_stored`]).
//!
//! A `for:` streak counts only what was seen: an evaluation that reads no usable number breaks
//! it, and so does a gap longer than the gate's `for_max_gap` between two evaluations (a daemon
//! down, a CLI run rarely): the streak restarts at the evaluation after the gap.
//!
//! [`ready_to_advance`] combines a phase's evaluations with its minimum time.

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::indicators::cause::{NoDataCause, Unread};
use crate::plan::{Check, DEFAULT_FOR_MAX_GAP, Gate, Requirement};

/// The four outcomes of a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    /// The condition holds, its `for:` not yet elapsed.
    Soaking,
    /// No usable number (source down, empty, NaN, too few samples). Journal evidence written
    /// before the split says `hold`.
    #[serde(alias = "hold")]
    NoData,
    Fail,
}

impl Verdict {
    /// Every verdict, in the order views and `/metrics` list them.
    pub const ALL: [Verdict; 4] = [
        Verdict::Pass,
        Verdict::Soaking,
        Verdict::NoData,
        Verdict::Fail,
    ];

    /// As stored, served and exported: `pass`, `soaking`, `no_data`, `fail`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Soaking => "soaking",
            Verdict::NoData => "no_data",
            Verdict::Fail => "fail",
        }
    }

    /// As a person reads it in a table: `PASS`, `SOAKING`, `NO DATA`, `FAIL`.
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Pass => "PASS",
            Verdict::Soaking => "SOAKING",
            Verdict::NoData => "NO DATA",
            Verdict::Fail => "FAIL",
        }
    }

    /// Neither advances nor rolls back (soaking, no data).
    pub fn is_waiting(self) -> bool {
        matches!(self, Verdict::Soaking | Verdict::NoData)
    }

    /// One of the four stored names (`hold`, the name before the split, reads as no data;
    /// [`Verdict::from_stored`] tells a stored soak from it).
    pub fn parse(s: &str) -> Option<Verdict> {
        match s {
            "pass" => Some(Verdict::Pass),
            "soaking" => Some(Verdict::Soaking),
            "no_data" | "hold" => Some(Verdict::NoData),
            "fail" => Some(Verdict::Fail),
            _ => None,
        }
    }

    /// A stored row's verdict. A row stored as `hold` with a value was a condition that held
    /// (under its `for:`: soaking; under `min_samples`: too few samples, no data); without a
    /// value the source gave no usable number.
    pub fn from_stored(s: &str, value: Option<f64>, reason: &str) -> Option<Verdict> {
        if s == "hold" && value.is_some() && reason.contains("; held for ") {
            return Some(Verdict::Soaking);
        }
        Verdict::parse(s)
    }
}

/// How far a soaking gate is: true for `held_ms` of the `need_ms` its `for:` asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Soak {
    pub held_ms: i64,
    pub need_ms: i64,
}

impl Soak {
    /// `5s of 20s`.
    pub fn text(self) -> String {
        format!(
            "{} of {}",
            crate::time::human_ms(self.held_ms),
            crate::time::human_ms(self.need_ms)
        )
    }
}

/// What a gate's source answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// One number (threshold gates, requirements).
    Value(f64),
    /// Both sides of a `compare` gate, read at the same moment.
    Pair { new: f64, old: f64 },
    /// Both sides' counts since the step began, for a `judge` gate.
    Counts {
        new: crate::judge::Counts,
        old: crate::judge::Counts,
    },
    /// Both sides' histograms since the step began, for a latency `judge` gate: cumulative
    /// counts at each `le` of the gate, then at `+Inf`.
    Buckets { new: Vec<f64>, old: Vec<f64> },
    /// The producers the daemon saw on the routing long-poll, for a `routing_applied` gate, and
    /// the generation they must have applied (the step's).
    Followers {
        need: u64,
        followers: Vec<routing_applied::Follower>,
        /// When the daemon last forgot a producer to keep its cap (ms), if ever.
        evicted_at_ms: Option<i64>,
    },
    /// No usable number, and why (source down, empty result, parse error with its line...).
    Unavailable(Unread),
}

impl Observation {
    /// A `judge` gate's observation from its readings, in the order of its
    /// [`queries`](crate::plan::JudgeCheck::queries); the first that failed, named, makes it
    /// unavailable.
    pub fn of_judge(
        check: &crate::plan::JudgeCheck,
        reads: impl IntoIterator<Item = Result<f64, Unread>>,
    ) -> Observation {
        let names = check.queries().len();
        let mut values = Vec::with_capacity(names);
        for (i, read) in reads.into_iter().enumerate().take(names) {
            match read {
                Ok(v) => values.push(v),
                Err(e) => {
                    return Observation::Unavailable(
                        e.map(|why| format!("{}: {why}", judge_read(check, i))),
                    );
                }
            }
        }
        match &check.form {
            crate::plan::JudgeForm::Counts { .. } => {
                let at = |i: usize| values.get(i).copied().unwrap_or(0.0);
                Observation::Counts {
                    new: crate::judge::Counts {
                        events: at(0),
                        failures: at(1),
                    },
                    old: crate::judge::Counts {
                        events: at(2),
                        failures: at(3),
                    },
                }
            }
            crate::plan::JudgeForm::Latency(l) => {
                let old = values.split_off(l.le_labels.len().min(values.len()));
                Observation::Buckets { new: values, old }
            }
        }
    }
}

/// What a judge's `i`th reading is, in words.
fn judge_read(check: &crate::plan::JudgeCheck, i: usize) -> String {
    match &check.form {
        crate::plan::JudgeForm::Counts { .. } => [
            "new side's events",
            "new side's failures",
            "old side's events",
            "old side's failures",
        ]
        .get(i)
        .map_or_else(|| "a reading".into(), |s| (*s).to_string()),
        crate::plan::JudgeForm::Latency(l) => {
            let n = l.le_labels.len();
            let side = if i < n { "new" } else { "old" };
            let le = l.le_labels.get(i % n.max(1)).map_or("?", String::as_str);
            format!("{side} side's bucket le={le}")
        }
    }
}

/// What the gate remembers between evaluations (kept in the store per step).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Memory {
    /// Since when the condition has held at every evaluation (ms since the epoch).
    pub held_since_ms: Option<i64>,
    /// Evaluations with a value in the current step, before this one.
    pub samples: u32,
    /// The highest value seen in the current step (for `require_peak`).
    pub peak: Option<f64>,
    /// When the gate was last evaluated in the current step (ms since the epoch; `None`: not
    /// yet): a `for:` streak whose previous evaluation is further back than the gate's
    /// `for_max_gap` restarts.
    pub evaluated_at_ms: Option<i64>,
    /// A `judge` gate's ledger ([`crate::judge::Ledger`]: where its last interval ended, its
    /// wealths, the counts of its budget); `None` for the other gates and before a judge's
    /// first reading.
    pub judge: Option<crate::judge::Ledger>,
}

impl Memory {
    /// The memory as a step counts from `from_ms` on (the step's start, or the migration's last
    /// resume in it: [`crate::judge::counting_from`]): a `for:` streak held since before then
    /// counts from `from_ms`, so time spent paused never counts toward a `for:` (issue 56).
    pub fn counting_from(self, from_ms: i64) -> Memory {
        Memory {
            held_since_ms: self.held_since_ms.map(|since| since.max(from_ms)),
            ..self
        }
    }
}

/// The earliest instant a step counting from `counting_from_ms` (its start or last resume) can
/// advance: its minimum time and its exit gates' longest `for:` both run from then. A minimum,
/// never a promise: every exit gate must pass too.
pub fn earliest_advance_ms(phase: &crate::plan::Phase, counting_from_ms: i64) -> i64 {
    let longest_for = phase
        .exit
        .iter()
        .filter_map(|g| g.hold_for)
        .max()
        .unwrap_or_default();
    counting_from_ms.saturating_add(crate::time::millis(phase.min_duration.max(longest_for)))
}

/// One gate's verdict with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    pub verdict: Verdict,
    /// The number the verdict rests on (`new` for a compare gate).
    pub value: Option<f64>,
    /// The `old` side of a compare gate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_value: Option<f64>,
    /// Why, in words a person reads at 3 a.m.
    pub reason: String,
    /// Evaluations with a value in the current step, this one included.
    pub samples: u32,
    /// Soaking: how long the condition has held of what its `for:` asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak: Option<Soak>,
    /// No data: which kind (the source down, no series, too few samples, no usable number).
    /// `None` for the other verdicts, and for rows stored before the cause was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cause: Option<NoDataCause>,
    /// The memory to keep for the next evaluation.
    #[serde(skip)]
    pub memory: Memory,
}

/// A number as reasons write it: an integer without decimals, else at most six, trailing zeros cut.
pub fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.6}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

pub(crate) fn no_data(unread: Unread, samples: u32, memory: Memory) -> Evaluation {
    Evaluation {
        verdict: Verdict::NoData,
        value: None,
        old_value: None,
        reason: unread.why,
        samples,
        soak: None,
        cause: Some(unread.cause),
        memory,
    }
}

/// No usable number in what the source answered (NaN, a mismatch), and why.
pub(crate) fn unusable(why: impl Into<String>) -> Unread {
    Unread::new(NoDataCause::Unusable, why)
}

/// The memory after an evaluation at `now_ms` that read no usable number: a hold breaks a
/// `for:` streak, since nobody saw the condition hold meanwhile.
fn unseen(memory: Memory, now_ms: i64) -> Memory {
    Memory {
        held_since_ms: None,
        evaluated_at_ms: Some(now_ms),
        ..memory
    }
}

/// A `for:` streak restarted because its previous evaluation was too long ago.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Restart {
    /// The time since the previous evaluation (ms).
    gap_ms: i64,
    /// The longest gap allowed between two evaluations (ms).
    max_gap_ms: i64,
}

impl Restart {
    /// What a reason adds when the streak restarted.
    fn note(self) -> String {
        format!(
            " (restarted: no evaluation for {}, over the {} allowed between two)",
            crate::time::human_ms(self.gap_ms),
            crate::time::human_ms(self.max_gap_ms)
        )
    }
}

/// Since when a gate whose condition holds at `now_ms` has held: the mark it remembered, or
/// `now_ms` when it has none, or when it is a `for:` gate whose previous evaluation is more
/// than its `for_max_gap` before `now_ms` (nobody looked in between: the restart says so).
///
/// The previous evaluation is the one the memory remembers, and never earlier than the mark:
/// an evaluation saw the condition hold at the mark.
fn held_since(gate: &Gate, memory: &Memory, now_ms: i64) -> (i64, Option<Restart>) {
    let Some(since) = memory.held_since_ms else {
        return (now_ms, None);
    };
    if gate.hold_for.is_none() {
        return (since, None);
    }
    let max_gap_ms = crate::time::millis(gate.for_max_gap.unwrap_or(DEFAULT_FOR_MAX_GAP));
    let previous = memory.evaluated_at_ms.map_or(since, |at| at.max(since));
    let gap_ms = now_ms.saturating_sub(previous);
    if gap_ms > max_gap_ms {
        (now_ms, Some(Restart { gap_ms, max_gap_ms }))
    } else {
        (since, None)
    }
}

/// What `check` reads in `observation`: the value, the old side of a compare, whether the
/// condition holds and how it reads; why there is no usable reading otherwise.
fn reading(
    check: &Check,
    observation: &Observation,
    now_ms: i64,
) -> Result<(f64, Option<f64>, bool, String), Unread> {
    match (check, observation) {
        (_, Observation::Unavailable(why)) => Err(why.clone()),
        (
            Check::RoutingApplied { window },
            Observation::Followers {
                need,
                followers,
                evicted_at_ms,
            },
        ) => {
            let (lagging, holds, describe) =
                routing_applied::reading(*window, *need, followers, *evicted_at_ms, now_ms)?;
            Ok((lagging, None, holds, describe))
        }
        (
            Check::Threshold {
                op,
                value: threshold,
                ..
            },
            Observation::Value(v),
        ) => {
            if !v.is_finite() {
                return Err(unusable(format!("not a finite number ({v})")));
            }
            let holds = op.holds(*v, *threshold);
            let describe = format!(
                "{} {} {}",
                fmt_num(*v),
                if holds {
                    op.as_str().to_string()
                } else {
                    format!("is not {}", op.as_str())
                },
                fmt_num(*threshold)
            );
            Ok((*v, None, holds, describe))
        }
        (
            Check::Compare {
                ratio, absolute, ..
            },
            Observation::Pair { new, old },
        ) => {
            if !new.is_finite() || !old.is_finite() {
                return Err(unusable(format!(
                    "not a finite number (new {new}, old {old})"
                )));
            }
            let limit = (old * ratio).max(old + absolute);
            let holds = *new <= limit;
            let describe = format!(
                "new {} {} limit {} (old {} ×{} or +{})",
                fmt_num(*new),
                if holds { "<=" } else { "is above" },
                fmt_num(limit),
                fmt_num(*old),
                fmt_num(*ratio),
                fmt_num(*absolute)
            );
            Ok((*new, Some(*old), holds, describe))
        }
        (Check::Judge(_) | Check::RoutingApplied { .. }, _)
        | (
            _,
            Observation::Counts { .. }
            | Observation::Buckets { .. }
            | Observation::Followers { .. },
        )
        | (Check::Threshold { .. }, Observation::Pair { .. })
        | (Check::Compare { .. }, Observation::Value(_)) => Err(unusable(
            "internal: observation does not match the gate's kind",
        )),
    }
}

/// Evaluate `gate` on `observation` at `now_ms`, given what it remembered.
pub fn evaluate(gate: &Gate, observation: &Observation, memory: Memory, now_ms: i64) -> Evaluation {
    let (value, old_value, holds, describe) = match reading(&gate.check, observation, now_ms) {
        Ok(reading) => reading,
        Err(why) => return no_data(why, memory.samples, unseen(memory, now_ms)),
    };
    let samples = memory.samples.saturating_add(1);
    let (held_since_ms, restart) = if holds {
        let (since, restart) = held_since(gate, &memory, now_ms);
        (Some(since), restart)
    } else {
        (None, None)
    };
    let memory = Memory {
        held_since_ms,
        samples,
        peak: Some(memory.peak.map_or(value, |p| p.max(value))),
        evaluated_at_ms: Some(now_ms),
        judge: None,
    };
    let restarted = restart.map(Restart::note).unwrap_or_default();
    let mut eval = Evaluation {
        verdict: Verdict::Pass,
        value: Some(value),
        old_value,
        reason: describe,
        samples,
        soak: None,
        cause: None,
        memory,
    };
    if !holds {
        eval.verdict = Verdict::Fail;
        return eval;
    }
    if samples < gate.min_samples {
        eval.verdict = Verdict::NoData;
        eval.cause = Some(NoDataCause::TooFewSamples);
        eval.reason = format!(
            "{}; {samples} of {} samples so far{restarted}",
            eval.reason, gate.min_samples
        );
        return eval;
    }
    if let (Some(need), Some(since)) = (gate.hold_for, held_since_ms) {
        let held = now_ms.saturating_sub(since);
        let need_ms = crate::time::millis(need);
        if held < need_ms {
            eval.verdict = Verdict::Soaking;
            eval.soak = Some(Soak {
                held_ms: held,
                need_ms,
            });
            eval.reason = format!(
                "{}; held for {} of {}{restarted}",
                eval.reason,
                crate::time::human_ms(held),
                crate::time::human_ms(need_ms)
            );
            return eval;
        }
        eval.reason = format!(
            "{}; held for {}{restarted}",
            eval.reason,
            crate::time::human_ms(held)
        );
    }
    eval
}

/// `require_peak`: the highest reading seen during the step must reach `at_least`.
pub fn evaluate_peak(req: &Requirement, observation: &Observation, memory: Memory) -> Evaluation {
    let at_least = req.at_least.unwrap_or(0.0);
    let peak = match observation {
        Observation::Value(v) if v.is_finite() => Some(memory.peak.map_or(*v, |p| p.max(*v))),
        _ => memory.peak,
    };
    let samples = match observation {
        Observation::Value(v) if v.is_finite() => memory.samples.saturating_add(1),
        _ => memory.samples,
    };
    let memory = Memory {
        peak,
        samples,
        held_since_ms: None,
        evaluated_at_ms: None,
        judge: None,
    };
    let why_missing = match observation {
        Observation::Unavailable(why) => Some(why.clone()),
        Observation::Value(v) if !v.is_finite() => {
            Some(unusable(format!("not a finite number ({v})")))
        }
        Observation::Pair { .. }
        | Observation::Counts { .. }
        | Observation::Buckets { .. }
        | Observation::Followers { .. } => {
            Some(unusable("internal: a requirement reads one number"))
        }
        Observation::Value(_) => None,
    };
    let (verdict, reason, cause) = match (peak, why_missing) {
        (Some(p), _) if p >= at_least => (
            Verdict::Pass,
            format!("peak {} >= {}", fmt_num(p), fmt_num(at_least)),
            None,
        ),
        (_, Some(why)) => (Verdict::NoData, why.why, Some(why.cause)),
        (Some(p), None) => (
            Verdict::Fail,
            format!(
                "peak so far {} is below {}: the step has not seen real traffic yet",
                fmt_num(p),
                fmt_num(at_least)
            ),
            None,
        ),
        (None, None) => (
            Verdict::NoData,
            "no reading yet".into(),
            Some(NoDataCause::TooFewSamples),
        ),
    };
    Evaluation {
        verdict,
        value: peak,
        old_value: None,
        reason,
        samples,
        soak: None,
        cause,
        memory,
    }
}

/// `require_deploy`: the reading, a process start time in seconds since the epoch, must be later
/// than the step's start (a consumer restarted under the new routing).
pub fn evaluate_deploy(observation: &Observation, step_started_ms: i64) -> Evaluation {
    let missing = match observation {
        Observation::Value(v) if v.is_finite() => {
            let started_ms = (v * 1000.0) as i64;
            let (verdict, reason) = if started_ms > step_started_ms {
                (Verdict::Pass, "a consumer restarted during this step")
            } else {
                (
                    Verdict::Fail,
                    "no consumer restart since the step began: deploy once under the new routing",
                )
            };
            return Evaluation {
                verdict,
                value: Some(*v),
                old_value: None,
                reason: reason.to_string(),
                samples: 1,
                soak: None,
                cause: None,
                memory: Memory::default(),
            };
        }
        Observation::Value(v) => unusable(format!("not a finite number ({v})")),
        Observation::Unavailable(why) => why.clone(),
        Observation::Pair { .. }
        | Observation::Counts { .. }
        | Observation::Buckets { .. }
        | Observation::Followers { .. } => unusable("internal: a requirement reads one number"),
    };
    no_data(missing, 0, Memory::default())
}

/// The word that opens an inconclusive judge's reason ([`crate::judge_verdict`]): it waits
/// for a person, and [`ready_to_advance`] holds on it.
pub const INCONCLUSIVE: &str = "INCONCLUSIVE";

/// Whether an evaluation is a judge's INCONCLUSIVE (it waits for a person: never advances).
pub fn is_inconclusive(e: &Evaluation) -> bool {
    e.verdict == Verdict::Soaking && e.reason.starts_with(INCONCLUSIVE)
}

/// Whether a phase may be left: why not, in words, or `Ok` when every exit gate and
/// requirement passes, no guard fails nor is an INCONCLUSIVE judge (it waits for a person), and
/// the minimum time is met. The minimum time counts from `counting_from_ms`: the step's start,
/// or the migration's last resume in it ([`crate::judge::counting_from`]: time spent paused
/// never counts).
///
/// # Errors
/// The list of reasons that keep the migration where it is.
pub fn ready_to_advance(
    exits: &[(&str, &Evaluation)],
    guards: &[(&str, &Evaluation)],
    counting_from_ms: i64,
    min_duration: Duration,
    now_ms: i64,
) -> Result<(), Vec<String>> {
    let mut why = Vec::new();
    for (name, e) in exits {
        if e.verdict != Verdict::Pass {
            why.push(format!("{name}: {} ({})", e.verdict.label(), e.reason));
        }
    }
    for (name, e) in guards {
        if e.verdict == Verdict::Fail {
            why.push(format!("guard {name} fails ({})", e.reason));
        } else if is_inconclusive(e) {
            // A judge that could not decide in its time waits for a person: never advances.
            why.push(format!("guard {name}: {}", e.reason));
        }
    }
    let min_ms = crate::time::millis(min_duration);
    let spent = now_ms.saturating_sub(counting_from_ms).max(0);
    if spent < min_ms {
        why.push(format!(
            "minimum time not met: {} of {} in this step",
            crate::time::human_ms(spent),
            crate::time::human_ms(min_ms)
        ));
    }
    if why.is_empty() { Ok(()) } else { Err(why) }
}

pub mod routing_applied;

#[cfg(test)]
mod tests;
