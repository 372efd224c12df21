//! Where a migration stands, and why it is not moving: one pure function, [`standing`], from a
//! snapshot of the migration (its state, its pause, its gates as last evaluated, its minimum
//! time, whether a daemon drives it) to one of nine answers, each with a sentence a person
//! reads at 3 a.m. and the details a program reads.
//!
//! Every view prints what it returns: `status` (its first line), `status --watch`, the API's
//! `standing` object, the console's pill, `/metrics` (`queue_migrate_standing`), the demo's live
//! view, and a webhook when it changes. No IO, no clock: `now_ms` is an input.
//!
//! When several things keep a migration where it is, the one a person must act on first wins:
//! complete, aborted, paused (needs a person), nothing driving it (not driven: no daemon holds
//! the lease, or its newest evaluation is older than a few intervals: [`Drive`]; every reading
//! is stale then), a source nobody can read (blind), a failing guard,
//! a failing or data-less exit gate (blocked), an exit gate whose source answered with too few
//! samples yet (waiting for data), then what only takes time (soaking or the minimum time,
//! whichever ends later), gates awaiting their first evaluation, a point of no return that
//! needs confirmation, and moving.
//!
//! NO DATA is told apart by its [`NoDataCause`]: only a source that could not be read
//! (`source_down`: unreachable, `source_http_error`, `source_unparsable`: each worded so) makes
//! a migration blind; a source that answered with no series or no usable
//! number blocks the exit gate that reads it ("no data, the query returned no series"), and one
//! that answered with too few samples (a `rate()` window holding one sample, `min_samples` not
//! reached) only takes time ("waiting for data"). An evaluation stored before the cause was kept
//! has none: it reads as it did then (no data without a value counts toward a blind source, no
//! data with one blocks), so a store upgraded mid-step says what it said until the next round.

use serde::Serialize;

pub mod last_round;

pub use last_round::GuardReading;

use crate::gate::{NoDataCause, Soak, Verdict};
use crate::plan::GateKind;
use crate::time::human_ms;

/// Why a paused migration is paused: the journal entry that paused it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pause {
    /// The command that paused it (`pause`, `abort`, `rollback` after a breach...).
    pub command: String,
    pub reason: Option<String>,
    pub actor: String,
    pub at_ms: i64,
    /// The guards the round that paused it read failing (a breach's pause; none for a person's).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub breach: Vec<GuardReading>,
}

impl Pause {
    /// The newest entry of `journal` that went from running to paused (`None` when none did).
    pub fn of(journal: &[crate::store::JournalEntry]) -> Option<Pause> {
        journal
            .iter()
            .rev()
            .find(|e| e.to.paused && !e.from.paused)
            .map(|e| Pause {
                command: e.command.clone(),
                reason: e.reason.clone(),
                actor: e.actor.clone(),
                at_ms: e.at_ms,
                breach: last_round::failing_guards(&e.evidence),
            })
    }
}

/// One gate of the current step as the standing reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct GateInput {
    pub name: String,
    pub kind: GateKind,
    /// The source it reads.
    pub source: String,
    pub verdict: Verdict,
    pub value: Option<f64>,
    /// The threshold as the plan writes it (`< 0.01`), when it has a fixed one.
    pub threshold: Option<String>,
    pub reason: String,
    /// `false`: awaiting its first evaluation in the step.
    pub evaluated: bool,
    /// When it was last evaluated in the step (ms), when known.
    pub evaluated_at_ms: Option<i64>,
    pub soak: Option<Soak>,
    /// No data: why (`None` for the other verdicts, and for evaluations stored before the
    /// cause was kept: see the module's doc).
    pub cause: Option<NoDataCause>,
}

impl GateInput {
    /// No data because its source could not be read: unreachable, an HTTP error, an answer
    /// that could not be parsed (stored without a cause: no data and no value, as before causes
    /// were kept).
    fn source_down(&self) -> bool {
        self.evaluated
            && self.verdict == Verdict::NoData
            && match self.cause {
                Some(cause) => cause.source_unread(),
                None => self.value.is_none(),
            }
    }

    /// No data because its source answered with too few samples yet: only time helps.
    fn too_few_samples(&self) -> bool {
        self.evaluated
            && self.verdict == Verdict::NoData
            && self.cause == Some(NoDataCause::TooFewSamples)
    }
}

/// An exit gate whose source answered with too few samples yet, and why in its words
/// (`source world: not enough samples (have 1, need 2 within 1h)`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DataWait {
    pub gate: String,
    pub reason: String,
}

/// Whether anything drives a migration: who holds the daemons' lease, and how old the step's
/// newest evaluation is (issue 56). A view made by the daemon that drives it passes none.
#[derive(Debug, Clone, PartialEq)]
pub struct Drive {
    /// Whoever holds the daemons' lease now, by the database's clock (`None`: nobody: no
    /// daemon runs, or the last one stopped).
    pub holder: Option<String>,
    /// The newest evaluation of the current step's gates (ms), `None`: none in this step.
    pub evaluated_at_ms: Option<i64>,
    /// Since when the step has been what it is (its start, or its last resume, ms): a step
    /// younger than `stale_after_ms` is not stale for want of an evaluation yet.
    pub since_ms: i64,
    /// How old the newest evaluation may be while a daemon drives the migration: a few of
    /// the daemon's intervals ([`DRIVEN_INTERVALS`]).
    pub stale_after_ms: i64,
}

/// How many of a daemon's intervals an evaluation may be old while it drives the migration.
pub const DRIVEN_INTERVALS: i64 = 4;

/// The daemon's interval that views which do not know it assume (`migrate run`'s default).
pub const DEFAULT_INTERVAL_MS: i64 = 15_000;

/// The least age at which an evaluation is stale, however short the interval (a round that
/// takes a few seconds is not a daemon gone).
pub const MIN_STALE_MS: i64 = 10_000;

impl Drive {
    /// Not driven at `now_ms`: how long nothing evaluated it (ms; from the step's start or
    /// resume when it was never evaluated since), or `None` when a daemon drives it. A step
    /// without gates (`planned`) has nothing to evaluate: only the lease tells.
    fn idle_ms(&self, now_ms: i64, gated: bool) -> Option<i64> {
        let last = self
            .evaluated_at_ms
            .map_or(self.since_ms, |at| at.max(self.since_ms));
        let idle = now_ms.saturating_sub(last).max(0);
        let stale = gated && idle > self.stale_after_ms;
        (self.holder.is_none() || stale).then_some(idle)
    }
}

/// What [`standing`] reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot<'a> {
    pub migration: &'a str,
    /// The state as the journal names it (`slices[2]`).
    pub state: &'a str,
    pub complete: bool,
    /// `Some` when paused, with the journal entry that paused it when there is one.
    pub paused: Option<Option<&'a Pause>>,
    pub gates: &'a [GateInput],
    /// Since when the step's minimum time counts (its start, or the migration's last resume in
    /// it: time paused never counts), and that minimum time (ms).
    pub counting_from_ms: i64,
    pub min_ms: i64,
    /// The next state, when it is the point of no return (`complete`), needing a confirmation.
    pub next_needs_confirmation: Option<&'a str>,
    /// The plan's `auto_advance`.
    pub auto_advance: bool,
    /// Whether a daemon drives it; `None`: the view is the driving daemon's own.
    pub drive: Option<&'a Drive>,
    /// The state it advances to next (`slices[1]`), said after what only takes time.
    pub next: Option<&'a str>,
    pub now_ms: i64,
}

/// What a person must do.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "for", rename_all = "snake_case")]
pub enum Person {
    /// Confirm the point of no return.
    Confirmation { to: String },
    /// Resume (or roll back) a paused migration.
    Paused {
        by: Option<String>,
        why: Option<String>,
        at_ms: Option<i64>,
        /// A guard that fails by its newest reading (a resume would breach again): this
        /// step's evaluation, or the round that paused it when none of the guard is newer.
        failing_guard: Option<String>,
        /// The reading of `failing_guard` when it is the round that paused it: no round has
        /// evaluated the guard in this step since (a breach's rollback enters a new step).
        #[serde(skip_serializing_if = "Option::is_none")]
        last_round: Option<GuardReading>,
        /// Every guard of this step has been evaluated in it (`false`: "no guard fails now"
        /// would not be known).
        guards_evaluated: bool,
    },
    /// `auto_advance: false`: advance by hand.
    Advance,
}

/// Where a migration stands.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Standing {
    /// Every gate passes: the next round moves it (or it is entering its first step).
    Moving,
    /// Only time keeps it: an exit gate's source with too few samples yet (`data`), the
    /// minimum time (`left_ms` of `need_ms`), or gates awaiting their first evaluation
    /// (`awaiting`).
    Waiting {
        left_ms: i64,
        need_ms: i64,
        awaiting: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        data: Option<DataWait>,
        /// What happens once it is over ("it advances to slices[1]"), when the view knows.
        #[serde(skip_serializing_if = "Option::is_none")]
        then: Option<String>,
    },
    /// A gate is true, its `for:` not yet elapsed.
    Soaking {
        gate: String,
        held_ms: i64,
        need_ms: i64,
        /// What happens once it is over ("it advances to slices[1]"), when the view knows.
        #[serde(skip_serializing_if = "Option::is_none")]
        then: Option<String>,
    },
    /// A gate fails, or has no data while its source answers (no series, no usable number) or
    /// answers for others.
    Blocked {
        gate: String,
        gate_kind: GateKind,
        verdict: Verdict,
        value: Option<f64>,
        threshold: Option<String>,
        reason: String,
        /// No data: why (absent for a failing gate, and for an evaluation stored without it).
        #[serde(skip_serializing_if = "Option::is_none")]
        cause: Option<NoDataCause>,
    },
    /// A source could not be read by any gate that reads it, guards included.
    Blind {
        source: String,
        reason: String,
        gates: Vec<String>,
        /// Why, as the first of its gates says: `source_down` (unreachable),
        /// `source_http_error` or `source_unparsable` (`source_down` for an evaluation stored
        /// without a cause).
        cause: NoDataCause,
    },
    /// A person must act.
    NeedsPerson {
        person: Person,
    },
    /// Nothing drives it: no daemon holds the lease, or the one that does has not evaluated
    /// it for a few intervals (`idle_ms`: since the newest evaluation, or the step's start):
    /// guards do not run, nothing advances by itself, and every reading is that old.
    NotDriven {
        holder: Option<String>,
        idle_ms: i64,
        /// Whether the step's gates were ever evaluated in it.
        evaluated: bool,
        /// What its last readings say (the standing were it driven), every one of them stale.
        readings: Box<Standing>,
    },
    /// Aborted: every slice back on the old broker, paused.
    Aborted {
        by: Option<String>,
        why: Option<String>,
        at_ms: Option<i64>,
    },
    Complete,
}

impl Standing {
    /// Every kind, as `/metrics` and the API name them.
    pub const KINDS: [&'static str; 9] = [
        "moving",
        "waiting",
        "soaking",
        "blocked",
        "blind",
        "needs_person",
        "not_driven",
        "aborted",
        "complete",
    ];

    /// `moving`, `waiting`, ..., `needs_person`.
    pub fn kind(&self) -> &'static str {
        match self {
            Standing::Moving => "moving",
            Standing::Waiting { .. } => "waiting",
            Standing::Soaking { .. } => "soaking",
            Standing::Blocked { .. } => "blocked",
            Standing::Blind { .. } => "blind",
            Standing::NeedsPerson { .. } => "needs_person",
            Standing::NotDriven { .. } => "not_driven",
            Standing::Aborted { .. } => "aborted",
            Standing::Complete => "complete",
        }
    }

    /// As a pill shows it: `needs a person`, `blind`...
    pub fn label(&self) -> &'static str {
        match self {
            Standing::NeedsPerson { .. } => "needs a person",
            Standing::NotDriven { .. } => "not driven",
            other => other.kind(),
        }
    }

    /// The sentence every view prints.
    pub fn sentence(&self) -> String {
        match self {
            Standing::Moving => "moving: every gate passes".into(),
            Standing::Waiting {
                left_ms,
                need_ms,
                awaiting,
                data,
                then,
            } => {
                let then = then_text(then.as_deref());
                if let Some(DataWait { gate, reason }) = data {
                    format!("waiting for data: {gate}: {reason}")
                } else if *left_ms > 0 {
                    format!(
                        "waiting: minimum time, {} left of {}{then}",
                        human_ms(*left_ms),
                        human_ms(*need_ms)
                    )
                } else {
                    format!(
                        "waiting: awaiting first evaluation of {}",
                        awaiting.join(", ")
                    )
                }
            }
            Standing::Soaking {
                gate,
                held_ms,
                need_ms,
                then,
            } => format!(
                "soaking: {gate} true for {} of {}{}",
                human_ms(*held_ms),
                human_ms(*need_ms),
                then_text(then.as_deref())
            ),
            Standing::Blocked {
                gate,
                gate_kind,
                verdict,
                value,
                threshold,
                reason,
                cause,
            } => {
                let guard = if *gate_kind == GateKind::Guard {
                    "guard "
                } else {
                    ""
                };
                match (verdict, value, threshold) {
                    (Verdict::Fail, Some(v), Some(t)) => {
                        format!(
                            "blocked: {guard}{gate}: {} vs {t}",
                            crate::gate::fmt_num(*v)
                        )
                    }
                    (Verdict::Fail, _, _) => format!("blocked: {guard}{gate}: {reason}"),
                    _ => match cause {
                        None | Some(NoDataCause::SourceDown) => {
                            format!("blocked: {guard}{gate}: no data ({reason})")
                        }
                        Some(cause) => {
                            format!(
                                "blocked: {guard}{gate}: no data, {} ({reason})",
                                cause.text()
                            )
                        }
                    },
                }
            }
            Standing::Blind {
                source,
                reason,
                gates,
                cause,
            } => format!(
                "blind: {} ({reason}): {} hold{}",
                unread(source, *cause, reason),
                gates.join(", "),
                if gates.len() == 1 { "s" } else { "" }
            ),
            Standing::NeedsPerson { person } => match person {
                Person::Confirmation { to } => {
                    format!("needs a person: confirm {to}, the point of no return")
                }
                Person::Advance => "needs a person: ready, auto_advance is off".into(),
                Person::Paused {
                    by,
                    why,
                    at_ms,
                    failing_guard,
                    last_round,
                    guards_evaluated,
                } => format!(
                    "needs a person: paused{}{}",
                    who(by, why, *at_ms),
                    last_round::sentence(
                        failing_guard.as_deref(),
                        last_round.as_ref(),
                        *guards_evaluated
                    )
                ),
            },
            Standing::NotDriven {
                holder,
                idle_ms,
                evaluated,
                readings,
            } => not_driven(holder.as_deref(), *idle_ms, *evaluated, readings),
            Standing::Aborted { by, why, at_ms } => format!("aborted{}", who(by, why, *at_ms)),
            Standing::Complete => "complete: the old broker may be decommissioned".into(),
        }
    }

    /// What the API serves: the standing with its sentence.
    pub fn view(&self) -> StandingView {
        StandingView {
            sentence: self.sentence(),
            standing: self.clone(),
        }
    }
}

/// The sentence of [`Standing::NotDriven`].
fn not_driven(holder: Option<&str>, idle_ms: i64, evaluated: bool, readings: &Standing) -> String {
    let what = if evaluated {
        format!("for {}", human_ms(idle_ms))
    } else {
        format!("in this step ({} since it began)", human_ms(idle_ms))
    };
    let then = if evaluated {
        format!("; its last readings: {}", readings.sentence())
    } else {
        String::new()
    };
    match holder {
        None => format!(
            "not driven: no daemon has evaluated it {what}; start `migrate run` or advance by hand{then}"
        ),
        Some(h) => format!(
            "not driven: {h} holds the lease but has not evaluated it {what}; look at that daemon (its log, /readyz) or advance by hand{then}"
        ),
    }
}

/// What could not be read of `source`, told by `cause`: `source prom unreachable`, `source prom
/// answered HTTP 503` (the status as `reason` quotes it, else `with an HTTP error`), `source
/// prom's answer could not be parsed`.
pub fn unread(source: &str, cause: NoDataCause, reason: &str) -> String {
    match cause {
        NoDataCause::SourceHttpError => match http_status(reason) {
            Some(code) => format!("source {source} answered HTTP {code}"),
            None => format!("source {source} answered with an HTTP error"),
        },
        NoDataCause::SourceUnparsable => format!("source {source}'s answer could not be parsed"),
        _ => format!("source {source} unreachable"),
    }
}

/// The first `HTTP NNN` status code a reason quotes (`HTTP 503 Service Unavailable from ...`).
fn http_status(reason: &str) -> Option<&str> {
    reason.match_indices("HTTP ").find_map(|(at, _)| {
        let code = reason.get(at + 5..at + 8)?;
        let ends = reason[at + 8..]
            .chars()
            .next()
            .is_none_or(|c| !c.is_ascii_digit());
        (code.bytes().all(|b| b.is_ascii_digit()) && ends).then_some(code)
    })
}

/// `; then it advances to slices[1]`, or nothing.
fn then_text(then: Option<&str>) -> String {
    then.map(|t| format!("; then {t}")).unwrap_or_default()
}

/// What happens once only time kept the migration where it is: `it advances to slices[1]`
/// (`a person advances it` with `auto_advance: false`; `a person confirms` the point of no
/// return), when the snapshot names the next state.
fn what_next(s: &Snapshot<'_>) -> Option<String> {
    let next = s.next?;
    Some(if s.next_needs_confirmation.is_some() {
        format!("a person confirms {next}, the point of no return")
    } else if s.auto_advance {
        format!("it advances to {next}")
    } else {
        format!("a person advances it to {next} (auto_advance is off)")
    })
}

/// ` by ana at 2026-11-30T00:00:00Z: disk alarm`.
fn who(by: &Option<String>, why: &Option<String>, at_ms: Option<i64>) -> String {
    let mut s = String::new();
    if let Some(by) = by {
        s.push_str(&format!(" by {by}"));
    }
    if let Some(at) = at_ms {
        s.push_str(&format!(" at {}", crate::time::rfc3339(at)));
    }
    if let Some(why) = why {
        s.push_str(&format!(": {why}"));
    }
    s
}

/// The `standing` object of the API: `kind`, `sentence`, and the kind's details.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StandingView {
    #[serde(flatten)]
    pub standing: Standing,
    pub sentence: String,
}

/// Where the migration of `s` stands (see the module's doc for the order).
pub fn standing(s: &Snapshot<'_>) -> Standing {
    if s.complete {
        return Standing::Complete;
    }
    let failing_guard = s
        .gates
        .iter()
        .find(|g| g.kind == GateKind::Guard && g.evaluated && g.verdict == Verdict::Fail);
    if let Some(pause) = s.paused {
        let (by, why, at_ms) = match pause {
            Some(p) => (Some(p.actor.clone()), p.reason.clone(), Some(p.at_ms)),
            None => (None, None, None),
        };
        if pause.is_some_and(|p| p.command == "abort") {
            return Standing::Aborted { by, why, at_ms };
        }
        let guards = paused_guards(s.gates, pause);
        return Standing::NeedsPerson {
            person: Person::Paused {
                by,
                why,
                at_ms,
                failing_guard: guards.failing,
                last_round: guards.last_round,
                guards_evaluated: guards.all_evaluated,
            },
        };
    }
    let readings = driven(s, failing_guard);
    let gated = !s.gates.is_empty();
    match s.drive.and_then(|d| Some((d, d.idle_ms(s.now_ms, gated)?))) {
        Some((d, idle_ms)) => Standing::NotDriven {
            holder: d.holder.clone(),
            idle_ms,
            evaluated: d.evaluated_at_ms.is_some(),
            readings: Box::new(readings),
        },
        None => readings,
    }
}

/// What the guards of a paused migration say by their newest readings.
#[derive(Debug, Clone, PartialEq)]
struct PausedGuards {
    /// A guard failing by its newest reading.
    failing: Option<String>,
    /// That reading, when it is the round that paused it (no evaluation of the guard in this
    /// step since).
    last_round: Option<GuardReading>,
    /// Every guard of the step has been evaluated in it.
    all_evaluated: bool,
}

/// The guards of a paused migration: `gates` of this step, `pause` the entry that paused it.
fn paused_guards(gates: &[GateInput], pause: Option<&Pause>) -> PausedGuards {
    let guards = || gates.iter().filter(|g| g.kind == GateKind::Guard);
    let all_evaluated = guards().all(|g| g.evaluated);
    // This step's evaluation of `name`, when it is at least as new as `at_ms`.
    let newer_here = |name: &str, at_ms: i64| {
        guards().any(|g| {
            g.name == name && g.evaluated && g.evaluated_at_ms.is_none_or(|at| at >= at_ms)
        })
    };
    let breach = pause.map_or(&[][..], |p| p.breach.as_slice());
    if let Some(g) = guards().find(|g| {
        g.evaluated
            && g.verdict == Verdict::Fail
            && breach
                .iter()
                .all(|b| b.gate != g.name || newer_here(&g.name, b.at_ms))
    }) {
        return PausedGuards {
            failing: Some(g.name.clone()),
            last_round: None,
            all_evaluated,
        };
    }
    match breach.iter().find(|b| !newer_here(&b.gate, b.at_ms)) {
        Some(b) => PausedGuards {
            failing: Some(b.gate.clone()),
            last_round: Some(b.clone()),
            all_evaluated,
        },
        None => PausedGuards {
            failing: None,
            last_round: None,
            all_evaluated,
        },
    }
}

/// Where an unpaused migration stands by its readings, as if a daemon drove it.
fn driven(s: &Snapshot<'_>, failing_guard: Option<&GateInput>) -> Standing {
    if let Some(blind) = blind(s.gates) {
        return blind;
    }
    let blocked = failing_guard.or_else(|| {
        s.gates.iter().find(|g| {
            g.kind == GateKind::Exit
                && g.evaluated
                && matches!(g.verdict, Verdict::Fail | Verdict::NoData)
                && !g.too_few_samples()
        })
    });
    if let Some(g) = blocked {
        return Standing::Blocked {
            gate: g.name.clone(),
            gate_kind: g.kind,
            verdict: g.verdict,
            value: g.value,
            threshold: g.threshold.clone(),
            reason: g.reason.clone(),
            cause: g.cause.filter(|_| g.verdict == Verdict::NoData),
        };
    }
    let spent = s.now_ms.saturating_sub(s.counting_from_ms).max(0);
    let min_left = s.min_ms.saturating_sub(spent).max(0);
    let awaiting: Vec<String> = s
        .gates
        .iter()
        .filter(|g| !g.evaluated)
        .map(|g| g.name.clone())
        .collect();
    // An exit gate with too few samples yet: nothing is wrong, the next samples decide.
    if let Some(g) = s
        .gates
        .iter()
        .find(|g| g.kind == GateKind::Exit && g.too_few_samples())
    {
        return Standing::Waiting {
            left_ms: min_left,
            need_ms: s.min_ms,
            awaiting,
            data: Some(DataWait {
                gate: g.name.clone(),
                reason: g.reason.clone(),
            }),
            then: None,
        };
    }
    // The soak that ends last: the one to wait for.
    let soak = s
        .gates
        .iter()
        .filter(|g| g.evaluated && g.verdict == Verdict::Soaking)
        .max_by_key(|g| g.soak.map_or(0, |k| k.need_ms - k.held_ms));
    if let Some(g) = soak {
        let k = g.soak.unwrap_or(Soak {
            held_ms: 0,
            need_ms: 0,
        });
        if k.need_ms - k.held_ms >= min_left {
            return Standing::Soaking {
                gate: g.name.clone(),
                held_ms: k.held_ms,
                need_ms: k.need_ms,
                then: what_next(s),
            };
        }
    }
    if min_left > 0 || !awaiting.is_empty() {
        // Said only when time alone keeps it: nothing awaits a first evaluation.
        let then = awaiting.is_empty().then(|| what_next(s)).flatten();
        return Standing::Waiting {
            left_ms: min_left,
            need_ms: s.min_ms,
            awaiting,
            then,
            data: None,
        };
    }
    if let Some(to) = s.next_needs_confirmation {
        return Standing::NeedsPerson {
            person: Person::Confirmation { to: to.to_string() },
        };
    }
    if !s.auto_advance {
        return Standing::NeedsPerson {
            person: Person::Advance,
        };
    }
    Standing::Moving
}

/// The first source (in gate order) that every evaluated gate reading it could not read,
/// guards included ([`GateInput::source_down`]): not one that answered with no series, too few
/// samples or no usable number.
fn blind(gates: &[GateInput]) -> Option<Standing> {
    gates
        .iter()
        .filter(|g| g.source_down())
        .find(|first| {
            gates
                .iter()
                .filter(|g| g.source == first.source && g.evaluated)
                .all(GateInput::source_down)
        })
        .map(|first| Standing::Blind {
            source: first.source.clone(),
            reason: first.reason.clone(),
            cause: first.cause.unwrap_or(NoDataCause::SourceDown),
            gates: gates
                .iter()
                .filter(|g| g.source == first.source && g.evaluated)
                .map(|g| g.name.clone())
                .collect(),
        })
}

#[cfg(test)]
mod tests;
