//! The rehearsal itself: pure, no IO, no clock.
//!
//! [`rehearse`] walks the window instant by instant as the daemon's rounds would have: at each
//! instant it judges the current phase's gates through the controller's own judgment
//! (`controller::evaluate::judge`, with the step's memory kept as the store keeps it),
//! asks [`crate::controller::decide::decide`] what to do, and applies it through the state
//! machine ([`crate::machine::handle`]): an advance when every exit gate passes and the minimum
//! time is met, a guard's `on_breach` when one fails. A rollback or a pause ends the rehearsal
//! there (a person would have to resume); an `alert` is noted and the rehearsal goes on.
//!
//! [`gate_shares`] judges every gate of the plan over the whole window, as if its phase had been
//! entered at the window's start: the share of the window each passed, held and failed, and how
//! close it came to its threshold.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde::Serialize;

use crate::controller::GateReport;
use crate::controller::decide::{Decision, decide};
use crate::controller::evaluate::{Item, StepTimes, judge, phase_items};
use crate::gate::{self, Evaluation, Memory, Verdict};
use crate::machine::{self, Command, Ladder, MachineError, Snapshot, State, Transition};
use crate::plan::{BreachAction, Check, CmpOp, GateKind, Plan};

use super::table::Readings;

/// One move of the rehearsed migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Move {
    pub at_ms: i64,
    /// `advance`, `rollback` or `pause`.
    pub command: &'static str,
    #[serde(serialize_with = "as_text")]
    pub from: State,
    #[serde(serialize_with = "as_text")]
    pub to: State,
    /// Whether the migration is paused after it (a breach's rollback or pause).
    pub paused: bool,
}

impl Move {
    /// The move `t` made from `from` at `at_ms`.
    fn of(t: &Transition, from: State, at_ms: i64) -> Self {
        Move {
            at_ms,
            command: t.command,
            from,
            to: t.to.state,
            paused: t.to.paused,
        }
    }
}

fn as_text<S: serde::Serializer>(state: &State, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(state)
}

/// How long one gate spent in each verdict during one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateTime {
    pub name: String,
    /// `exit` (requirements included) or `guard`.
    pub kind: GateKind,
    pub passed_ms: i64,
    /// SOAKING: true, its `for:` not yet elapsed.
    pub soaking_ms: i64,
    /// NO DATA: its source down, an empty answer, NaN, too few samples.
    pub no_data_ms: i64,
    pub failed_ms: i64,
    /// The reason of its last verdict that was not a pass (`None`: it always passed).
    pub last_reason: Option<String>,
    /// The first instant of the step it passed at (`None`: it never passed in the step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_pass_ms: Option<i64>,
    /// The first instant of the step it failed at, with that verdict's reason (`None`: it never
    /// failed in the step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_fail: Option<(i64, String)>,
}

impl GateTime {
    /// Soaking, without data or failing.
    pub fn not_passed_ms(&self) -> i64 {
        self.soaking_ms + self.no_data_ms + self.failed_ms
    }
}

/// One step of the timeline.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    #[serde(serialize_with = "as_text")]
    pub state: State,
    pub entered_ms: i64,
    /// When it was left (`None`: still there at the window's end).
    pub left_ms: Option<i64>,
    /// The step's minimum time.
    pub min_time_ms: i64,
    pub gates: Vec<GateTime>,
    /// What was last to allow the advance: a gate's name, or `minimum time` (`None`: the step
    /// was not left by an advance).
    pub last_to_pass: Option<String>,
}

/// A guard breach that would have fired.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Breach {
    pub at_ms: i64,
    #[serde(serialize_with = "as_text")]
    pub state: State,
    /// The failing guards with their readings.
    pub guards: Vec<String>,
    pub action: BreachAction,
    /// Whether it ended the rehearsal (a rollback or a pause waits for a person).
    pub ended: bool,
}

impl Breach {
    fn at(
        at_ms: i64,
        state: State,
        guards: Vec<String>,
        action: BreachAction,
        ended: bool,
    ) -> Breach {
        Breach {
            at_ms,
            state,
            guards,
            action,
            ended,
        }
    }
}

/// How the rehearsal ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum End {
    /// The migration entered `complete`.
    Completed { at_ms: i64 },
    /// A breach rolled back or paused it: a person would have had to resume.
    Stopped {
        at_ms: i64,
        command: &'static str,
        #[serde(serialize_with = "as_text")]
        from: State,
        #[serde(serialize_with = "as_text")]
        to: State,
    },
    /// A judge could not decide within its `max_duration`: the daemon pauses there for a person.
    Undecided {
        at_ms: i64,
        #[serde(serialize_with = "as_text")]
        state: State,
        /// The undecided judges, with their reasons.
        gates: Vec<String>,
    },
    /// The window ended with the migration in `state`.
    Unfinished {
        #[serde(serialize_with = "as_text")]
        state: State,
        since_ms: i64,
    },
}

impl End {
    /// The end of a rehearsal stopped by `t` (a breach's rollback or pause) from `from` at `at_ms`.
    fn stopped(t: &Transition, from: State, at_ms: i64) -> End {
        End::Stopped {
            at_ms,
            command: t.command,
            from,
            to: t.to.state,
        }
    }
}

/// What a plan would have done over the window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rehearsal {
    pub start_ms: i64,
    pub end_ms: i64,
    pub steps: Vec<Step>,
    pub moves: Vec<Move>,
    pub breaches: Vec<Breach>,
    pub end: End,
}

/// The memory the store gives back of an evaluation at `at_ms` (what the controller reads at
/// the next round: [`crate::store::GateRecord`]'s columns).
fn stored(memory: Memory, at_ms: i64) -> Memory {
    Memory {
        held_since_ms: memory.held_since_ms,
        samples: memory.samples,
        peak: memory.peak,
        evaluated_at_ms: Some(at_ms),
        judge: memory.judge,
    }
}

/// The evaluations of one phase's `items` at instant `i`, with their memory.
fn judge_all(
    items: &[Item<'_>],
    readings: &Readings,
    memory: &mut HashMap<(String, GateKind), Memory>,
    i: usize,
    step_entered_ms: i64,
    phase: &str,
) -> Vec<GateReport> {
    let at = readings.instants.at(i);
    items
        .iter()
        .map(|item| {
            let observation = readings.observe(item, i, step_entered_ms);
            let key = (item.name().to_string(), item.kind());
            let mem = memory.get(&key).copied().unwrap_or_default();
            let eval = judge(
                item,
                &observation,
                mem,
                at,
                StepTimes::entered(step_entered_ms),
                None,
            );
            memory.insert(key, stored(eval.memory, at));
            GateReport {
                phase: phase.to_string(),
                name: item.name().to_string(),
                kind: item.kind(),
                source: item.source().to_string(),
                query: String::new(),
                eval,
                largest_partition: None,
                evaluated_at_ms: at,
                memory_read: None,
            }
        })
        .collect()
}

/// A step entered at `at_ms`.
fn step(plan: &Plan, state: State, at_ms: i64) -> Step {
    Step {
        state,
        entered_ms: at_ms,
        left_ms: None,
        min_time_ms: state
            .phase()
            .and_then(|k| plan.phase(k))
            .map_or(0, |p| crate::time::millis(p.min_duration)),
        gates: Vec::new(),
        last_to_pass: None,
    }
}

/// Rehearse `plan` over the readings' window from `start_at`, entered at the window's start,
/// advancing as the daemon would (auto-advance, `complete` confirmed).
pub fn rehearse(plan: &Plan, readings: &Readings, start_at: State) -> Rehearsal {
    let ladder = Ladder::of(plan);
    // The rehearsal is of auto-advance: a plan that waits for a person is rehearsed as if the
    // person said yes at once.
    let mut auto = plan.clone();
    auto.auto_advance = true;
    let instants = readings.instants;
    let start_ms = instants.at(0);
    let mut state = start_at;
    let mut current = step(plan, state, start_ms);
    let mut memory: HashMap<(String, GateKind), Memory> = HashMap::new();
    // Per item: since when it has allowed the advance (an exit passing, a guard not failing).
    let mut ok_since: HashMap<(String, GateKind), i64> = HashMap::new();
    let mut failing_before: HashSet<String> = HashSet::new();
    let mut steps = Vec::new();
    let mut moves = Vec::new();
    let mut breaches = Vec::new();
    let mut end = None;
    for i in 0..instants.count {
        let at = instants.at(i);
        let phase = state.phase().and_then(|k| plan.phase(k));
        let items = phase.map(phase_items).unwrap_or_default();
        let phase_name = state.phase().map_or("", |k| k.as_str());
        let gates = judge_all(
            &items,
            readings,
            &mut memory,
            i,
            current.entered_ms,
            phase_name,
        );
        account(&mut current, &gates, &mut ok_since, at, instants.step_ms);
        let min = phase.map(|p| p.min_duration).unwrap_or_default();
        let blockers = blockers(&gates, current.entered_ms, min, at);
        let next = ladder.next(state);
        let failing_now = failing_guards(&gates);
        let snapshot = Snapshot {
            state,
            paused: false,
        };
        match decide(&auto, state, false, next, &gates, blockers, true) {
            Decision::Done => {
                end = Some(End::Completed { at_ms: at });
                break;
            }
            Decision::Breach { action, guards } => {
                let Some(command) = breach_command(action) else {
                    // Announced once per episode, as the daemon does.
                    if failing_now.iter().any(|g| !failing_before.contains(g)) {
                        breaches.push(Breach::at(at, state, guards, action, false));
                    }
                    failing_before = failing_now;
                    continue;
                };
                let t = stop(&ladder, &plan.name, snapshot, &command);
                breaches.push(Breach::at(at, state, guards, action, true));
                if let Ok(t) = t {
                    moves.push(Move::of(&t, state, at));
                    current.left_ms = Some(at);
                    end = Some(End::stopped(&t, state, at));
                }
                break;
            }
            Decision::Advance => {
                let confirm = Some(plan.name.clone());
                let Ok(t) =
                    machine::handle(&ladder, &plan.name, snapshot, &Command::Advance { confirm })
                else {
                    failing_before = failing_now;
                    continue;
                };
                moves.push(Move::of(&t, state, at));
                current.left_ms = Some(at);
                current.last_to_pass = last_to_pass(&current, &ok_since);
                state = t.to.state;
                let left = std::mem::replace(&mut current, step(plan, state, at));
                steps.push(left);
                memory.clear();
                ok_since.clear();
                if state == State::Complete {
                    end = Some(End::Completed { at_ms: at });
                    break;
                }
            }
            // The daemon pauses for a person: the window stops there, undecided.
            Decision::Undecided { gates } => {
                end = Some(End::Undecided {
                    at_ms: at,
                    state,
                    gates,
                });
                break;
            }
            Decision::ReadyForHuman { .. } | Decision::Wait { .. } => {}
        }
        failing_before = failing_now;
    }
    let since_ms = current.entered_ms;
    if current.state != State::Complete {
        steps.push(current);
    }
    Rehearsal {
        start_ms,
        end_ms: instants.last(),
        steps,
        moves,
        breaches,
        end: end.unwrap_or(End::Unfinished { state, since_ms }),
    }
}

/// Why the step cannot advance at `at` (nothing when it can): its exit gates and guards as
/// `gate::ready_to_advance` reads them, the step entered at `entered_ms`.
fn blockers(gates: &[GateReport], entered_ms: i64, min: Duration, at: i64) -> Vec<String> {
    let exits: Vec<(&str, &Evaluation)> = gates
        .iter()
        .filter(|g| g.kind == GateKind::Exit)
        .map(|g| (g.name.as_str(), &g.eval))
        .collect();
    let guards: Vec<(&str, &Evaluation)> = gates
        .iter()
        .filter(|g| g.kind == GateKind::Guard)
        .map(|g| (g.name.as_str(), &g.eval))
        .collect();
    gate::ready_to_advance(&exits, &guards, entered_ms, min, at)
        .err()
        .unwrap_or_default()
}

/// The guards failing this round, by name.
fn failing_guards(gates: &[GateReport]) -> HashSet<String> {
    gates
        .iter()
        .filter(|g| g.kind == GateKind::Guard && g.eval.verdict == Verdict::Fail)
        .map(|g| g.name.clone())
        .collect()
}

/// The command a breach's action runs (an alert runs none).
fn breach_command(action: BreachAction) -> Option<Command> {
    match action {
        BreachAction::Rollback => Some(Command::Rollback { then_pause: true }),
        BreachAction::Pause => Some(Command::Pause),
        BreachAction::Alert => None,
    }
}

/// The breach's `command` on the machine; a rollback with nothing to roll back pauses instead.
fn stop(
    ladder: &Ladder,
    name: &str,
    snapshot: Snapshot,
    command: &Command,
) -> Result<Transition, MachineError> {
    match machine::handle(ladder, name, snapshot, command) {
        Err(MachineError::NothingToRollBack) => {
            machine::handle(ladder, name, snapshot, &Command::Pause)
        }
        other => other,
    }
}

/// Count one round's verdicts into the step (each lasts until the next round, `step_ms`).
fn account(
    current: &mut Step,
    gates: &[GateReport],
    ok_since: &mut HashMap<(String, GateKind), i64>,
    at: i64,
    step_ms: i64,
) {
    for g in gates {
        let key = (g.name.clone(), g.kind);
        let ok = match g.kind {
            GateKind::Guard => g.eval.verdict != Verdict::Fail,
            GateKind::Exit => g.eval.verdict == Verdict::Pass,
        };
        if ok {
            ok_since.entry(key).or_insert(at);
        } else {
            ok_since.remove(&key);
        }
        let time = match current
            .gates
            .iter_mut()
            .find(|t| t.name == g.name && t.kind == g.kind)
        {
            Some(t) => t,
            None => {
                current.gates.push(GateTime {
                    name: g.name.clone(),
                    kind: g.kind,
                    passed_ms: 0,
                    soaking_ms: 0,
                    no_data_ms: 0,
                    failed_ms: 0,
                    last_reason: None,
                    first_pass_ms: None,
                    first_fail: None,
                });
                let last = current.gates.len() - 1;
                &mut current.gates[last]
            }
        };
        match g.eval.verdict {
            Verdict::Pass => time.passed_ms += step_ms,
            Verdict::Soaking => time.soaking_ms += step_ms,
            Verdict::NoData => time.no_data_ms += step_ms,
            Verdict::Fail => time.failed_ms += step_ms,
        }
        if g.eval.verdict != Verdict::Pass {
            time.last_reason = Some(g.eval.reason.clone());
        }
        if g.eval.verdict == Verdict::Pass && time.first_pass_ms.is_none() {
            time.first_pass_ms = Some(at);
        }
        if g.eval.verdict == Verdict::Fail && time.first_fail.is_none() {
            time.first_fail = Some((at, g.eval.reason.clone()));
        }
    }
}

/// What allowed the advance last: the gate whose last streak began latest, or the minimum
/// time when it ran out after every gate allowed the advance.
fn last_to_pass(current: &Step, ok_since: &HashMap<(String, GateKind), i64>) -> Option<String> {
    let latest = current
        .gates
        .iter()
        .filter_map(|g| Some((ok_since.get(&(g.name.clone(), g.kind))?, &g.name)))
        .fold(None::<(i64, &String)>, |best, (at, name)| match best {
            Some((b, _)) if b >= *at => best,
            _ => Some((*at, name)),
        });
    let min_met = current.entered_ms.saturating_add(current.min_time_ms);
    match latest {
        Some((at, _)) if current.min_time_ms > 0 && min_met >= at => Some("minimum time".into()),
        Some((_, name)) => Some(name.clone()),
        None if current.min_time_ms > 0 => Some("minimum time".into()),
        None => None,
    }
}

/// How close a gate came to its threshold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Margin {
    /// The distance to the threshold, positive on the passing side (the limit minus `new` for a
    /// compare gate, the peak minus `at_least` for `require_peak`).
    pub margin: f64,
    /// The reading it rests on.
    pub value: f64,
    pub at_ms: i64,
}

/// One gate over the whole window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateShare {
    pub phase: String,
    pub name: String,
    pub kind: GateKind,
    /// Shares of the window's instants (0 to 1).
    pub passed: f64,
    pub soaking: f64,
    pub no_data: f64,
    pub failed: f64,
    /// The reading nearest the threshold (`None`: never a number, or `require_deploy`).
    pub closest: Option<Margin>,
}

/// The signed distance of `eval` to `item`'s threshold (positive: passing side).
fn margin(item: &Item<'_>, eval: &Evaluation) -> Option<f64> {
    let value = eval.value?;
    match item {
        Item::Gate(g, _) => match &g.check {
            Check::Threshold {
                op, value: limit, ..
            } => Some(match op {
                CmpOp::Lt | CmpOp::Le => limit - value,
                CmpOp::Gt | CmpOp::Ge => value - limit,
                CmpOp::Eq => -(value - limit).abs(),
                CmpOp::Ne => (value - limit).abs(),
            }),
            Check::Compare {
                ratio, absolute, ..
            } => {
                let old = eval.old_value?;
                Some((old * ratio).max(old + absolute) - value)
            }
            // The estimated ratio against `1 + tolerance`.
            Check::Judge(_) => Some(eval.old_value? - value),
            // Lagging producers: none passes.
            Check::RoutingApplied { .. } => Some(-value),
        },
        Item::Peak(r) => Some(value - r.at_least.unwrap_or(0.0)),
        Item::Deploy(_) => None,
    }
}

/// Every gate of the plan judged at every instant of the window, its memory kept from the
/// window's start (as if its phase had been entered then).
pub fn gate_shares(plan: &Plan, readings: &Readings) -> Vec<GateShare> {
    let instants = readings.instants;
    let start_ms = instants.at(0);
    let mut out = Vec::new();
    for phase in &plan.phases {
        for item in phase_items(phase) {
            let (mut passed, mut soaking, mut no_data, mut failed) =
                (0usize, 0usize, 0usize, 0usize);
            let mut closest: Option<Margin> = None;
            let mut mem = Memory::default();
            for i in 0..instants.count {
                let at = instants.at(i);
                let observation = readings.observe(&item, i, start_ms);
                let eval = judge(
                    &item,
                    &observation,
                    mem,
                    at,
                    StepTimes::entered(start_ms),
                    None,
                );
                mem = stored(eval.memory, at);
                match eval.verdict {
                    Verdict::Pass => passed += 1,
                    Verdict::Soaking => soaking += 1,
                    Verdict::NoData => no_data += 1,
                    Verdict::Fail => failed += 1,
                }
                if let (Some(m), Some(value)) = (margin(&item, &eval), eval.value)
                    && closest.as_ref().is_none_or(|c| m.abs() < c.margin.abs())
                {
                    closest = Some(Margin {
                        margin: m,
                        value,
                        at_ms: at,
                    });
                }
            }
            let n = instants.count.max(1) as f64;
            out.push(GateShare {
                phase: phase.kind.as_str().to_string(),
                name: item.name().to_string(),
                kind: item.kind(),
                passed: passed as f64 / n,
                soaking: soaking as f64 / n,
                no_data: no_data as f64 / n,
                failed: failed as f64 / n,
                closest,
            });
        }
    }
    out
}
