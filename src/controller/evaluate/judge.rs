//! The pure judgment of a phase's gates (no IO, no clock): what each item of the phase is, and
//! its verdict on what was read of it, given its memory of the step.

use std::collections::HashMap;

use crate::gate::{self, Evaluation, Memory, Observation};
use crate::plan::{Check, Gate, GateKind, Phase, Requirement};
use crate::store::GateRecord;

use super::report::GateReport;

/// One thing a phase judges: a gate (with its kind), `require_peak` or `require_deploy`.
pub(crate) enum Item<'p> {
    Gate(&'p Gate, GateKind),
    Peak(&'p Requirement),
    Deploy(&'p Requirement),
}

impl Item<'_> {
    pub(crate) fn name(&self) -> &str {
        match self {
            Item::Gate(g, _) => &g.name,
            Item::Peak(_) => "require_peak",
            Item::Deploy(_) => "require_deploy",
        }
    }
    pub(crate) fn kind(&self) -> GateKind {
        match self {
            Item::Gate(_, kind) => *kind,
            Item::Peak(_) | Item::Deploy(_) => GateKind::Exit,
        }
    }
    pub(crate) fn source(&self) -> &str {
        match self {
            Item::Gate(g, _) => &g.source,
            Item::Peak(r) | Item::Deploy(r) => &r.source,
        }
    }
    pub(crate) fn queries(&self) -> Vec<&str> {
        match self {
            Item::Gate(g, _) => match &g.check {
                Check::Threshold { query, .. } => vec![query.as_str()],
                Check::Compare { new, old, .. } => vec![new.as_str(), old.as_str()],
                Check::Judge(j) => j.queries().to_vec(),
                Check::RoutingApplied { .. } => Vec::new(),
            },
            Item::Peak(r) | Item::Deploy(r) => vec![r.query.as_str()],
        }
    }
    /// The query as a report shows it (`new: A | old: B` for a compare gate).
    pub(crate) fn query_text(&self) -> String {
        match self {
            Item::Gate(
                Gate {
                    check: Check::Compare { new, old, .. },
                    ..
                },
                _,
            ) => format!("new: {new} | old: {old}"),
            Item::Gate(
                Gate {
                    check: Check::Judge(j),
                    ..
                },
                _,
            ) => match &j.form {
                crate::plan::JudgeForm::Counts { new, old } => format!(
                    "new: {} of {} | old: {} of {}",
                    new.failures, new.events, old.failures, old.events
                ),
                crate::plan::JudgeForm::Latency(l) => format!(
                    "p{} of new: {} | old: {} (le {})",
                    l.buckets.quantile * 100.0,
                    l.new,
                    l.old,
                    l.le_labels.join(", ")
                ),
            },
            _ => self.queries().join(" | "),
        }
    }
}

/// The items of `phase` in the order they are evaluated: the exit gates, `require_peak`,
/// `require_deploy`, then the guards.
pub(crate) fn phase_items(phase: &Phase) -> Vec<Item<'_>> {
    let mut items: Vec<Item<'_>> = Vec::new();
    items.extend(phase.exit.iter().map(|g| Item::Gate(g, GateKind::Exit)));
    if let Some(r) = &phase.require_peak {
        items.push(Item::Peak(r));
    }
    if let Some(r) = &phase.require_deploy {
        items.push(Item::Deploy(r));
    }
    items.extend(phase.guard.iter().map(|g| Item::Gate(g, GateKind::Guard)));
    items
}

/// What was read of one item this round: its observation, and what a dead-letter reading adds
/// to the reason of a verdict that rests on a number.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reading {
    pub observation: Observation,
    pub note: Option<String>,
    /// A `kafka_lag` gate's largest partition lag, shown beside its value.
    pub largest: Option<crate::indicators::kafka_lag::LargestPartition>,
}

impl Reading {
    /// No usable number, and why.
    pub(crate) fn unavailable(why: gate::Unread) -> Reading {
        Reading {
            observation: Observation::Unavailable(why),
            note: None,
            largest: None,
        }
    }
}

/// The pure judgment of one item (no IO, no clock): its verdict on `observation` at `now_ms`,
/// given its `memory` of the step entered at `step.entered_ms` (a judge counts from
/// `step.counting_from_ms`); `note` (what a dead-letter
/// reading adds) goes into the reason of a verdict that rests on a number. The controller and
/// `migrate plan backtest` both judge through here.
pub(crate) fn judge(
    item: &Item<'_>,
    observation: &Observation,
    memory: Memory,
    now_ms: i64,
    step: StepTimes,
    note: Option<String>,
) -> Evaluation {
    let step_entered_ms = step.entered_ms;
    let eval = match item {
        Item::Gate(
            Gate {
                check: Check::Judge(j),
                ..
            },
            _,
        ) => crate::judge_verdict::evaluate_judge(
            j,
            observation,
            memory,
            now_ms,
            step.counting_from_ms,
        ),
        // A `for:` streak counts from the step's last resume at the earliest (issue 56).
        Item::Gate(g, _) => gate::evaluate(
            g,
            observation,
            memory.counting_from(step.counting_from_ms),
            now_ms,
        ),
        Item::Peak(r) => gate::evaluate_peak(r, observation, memory),
        Item::Deploy(_) => gate::evaluate_deploy(observation, step_entered_ms),
    };
    match note {
        Some(note) if eval.verdict != gate::Verdict::NoData || eval.value.is_some() => Evaluation {
            reason: format!("{}: {note}", eval.reason),
            ..eval
        },
        _ => eval,
    }
}

/// When a step began, and since when its judges count (the later of that and the migration's
/// last resume: [`crate::judge::counting_from`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepTimes {
    pub entered_ms: i64,
    pub counting_from_ms: i64,
}

impl StepTimes {
    /// A step nobody paused or resumed (a rehearsal): judges count from its start.
    pub(crate) fn entered(entered_ms: i64) -> StepTimes {
        StepTimes {
            entered_ms,
            counting_from_ms: entered_ms,
        }
    }
}

/// The step whose gates are judged.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Step<'a> {
    /// The phase's name, as reports show it.
    pub phase: &'a str,
    /// When the migration entered the step (ms since the epoch).
    pub entered_ms: i64,
    /// Since when its judges count ([`crate::judge::counting_from`]).
    pub counting_from_ms: i64,
}

/// The gate's memory as a stored evaluation of the step left it.
fn memory_of(record: &GateRecord) -> Memory {
    Memory {
        held_since_ms: record.held_since_ms,
        samples: record.samples,
        peak: record.peak,
        evaluated_at_ms: Some(record.at_ms),
        // A ledger that does not read (written by another version) starts a new count.
        judge: record
            .judge_ledger
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok()),
    }
}

/// Judge each of `items` on its reading (`readings[i]` is of `items[i]`) at `now_ms`, with the
/// memory the step's stored evaluations (`memory`: rows of gates the phase no longer has are
/// never looked up; of two rows of one gate, the later counts) hold of it.
pub(crate) fn judge_phase(
    items: &[Item<'_>],
    readings: Vec<Reading>,
    memory: &[GateRecord],
    step: Step<'_>,
    now_ms: i64,
) -> Vec<GateReport> {
    let memory: HashMap<(&str, &str), &GateRecord> = memory
        .iter()
        .map(|r| ((r.gate.as_str(), r.kind.as_str()), r))
        .collect();
    items
        .iter()
        .zip(readings)
        .map(|(item, reading)| {
            let read = memory.get(&(item.name(), item.kind().as_str()));
            let mem = read.map(|r| memory_of(r)).unwrap_or_default();
            let eval = judge(
                item,
                &reading.observation,
                mem,
                now_ms,
                StepTimes {
                    entered_ms: step.entered_ms,
                    counting_from_ms: step.counting_from_ms,
                },
                reading.note,
            );
            GateReport {
                phase: step.phase.to_string(),
                name: item.name().to_string(),
                kind: item.kind(),
                source: item.source().to_string(),
                query: item.query_text(),
                eval,
                largest_partition: reading.largest,
                evaluated_at_ms: now_ms,
                memory_read: read.and_then(|r| r.revision),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::gate::Verdict;
    use crate::machine::State;
    use crate::plan::{BreachAction, CmpOp, PhaseKind};

    fn lag(min_samples: u32) -> Gate {
        Gate {
            name: "lag".into(),
            source: "prom".into(),
            check: Check::Threshold {
                query: "lag_seconds".into(),
                op: CmpOp::Lt,
                value: 10.0,
            },
            hold_for: None,
            for_max_gap: None,
            min_samples,
        }
    }

    fn phase(exit: Vec<Gate>, guard: Vec<Gate>) -> Phase {
        Phase {
            kind: PhaseKind::Drain,
            min_duration: Duration::ZERO,
            exit,
            guard,
            on_breach: BreachAction::Rollback,
            steps: Vec::new(),
            require_peak: None,
            require_deploy: None,
            probes: None,
        }
    }

    fn row(kind: &str, samples: u32, revision: i64) -> GateRecord {
        GateRecord {
            step_entered_ms: 1_000,
            state: State::Planned,
            gate: "lag".into(),
            kind: kind.into(),
            query: "lag_seconds".into(),
            value: Some(1.0),
            old_value: None,
            samples,
            verdict: "hold".into(),
            reason: String::new(),
            no_data_cause: None,
            held_since_ms: None,
            peak: None,
            judge_ledger: None,
            largest_partition: None,
            at_ms: 2_000,
            revision: Some(revision),
        }
    }

    fn value(v: f64) -> Reading {
        Reading {
            observation: Observation::Value(v),
            note: None,
            largest: None,
        }
    }

    const STEP: Step<'static> = Step {
        phase: "drain",
        entered_ms: 1_000,
        counting_from_ms: 1_000,
    };

    #[test]
    fn items_are_the_exit_gates_the_requirements_then_the_guards() {
        let requirement = Requirement {
            source: "prom".into(),
            query: "q".into(),
            at_least: Some(5.0),
        };
        let mut p = phase(vec![lag(1)], vec![lag(1)]);
        p.require_peak = Some(requirement.clone());
        p.require_deploy = Some(requirement);
        let items = phase_items(&p);
        let keys: Vec<(&str, GateKind)> = items.iter().map(|i| (i.name(), i.kind())).collect();
        assert_eq!(
            keys,
            [
                ("lag", GateKind::Exit),
                ("require_peak", GateKind::Exit),
                ("require_deploy", GateKind::Exit),
                ("lag", GateKind::Guard),
            ]
        );
        assert_eq!(keys, p.gate_keys(), "stored under the keys the phase names");
    }

    #[test]
    fn each_item_is_judged_with_the_memory_of_its_own_name_and_kind() {
        let p = phase(vec![lag(2)], vec![lag(2)]);
        let items = phase_items(&p);
        // Only the exit gate has a row: its second sample passes, the guard's first holds.
        let memory = [row("exit", 1, 4)];
        let reports = judge_phase(&items, vec![value(1.0), value(1.0)], &memory, STEP, 3_000);
        assert_eq!(reports.len(), 2);
        let (exit, guard) = (&reports[0], &reports[1]);
        assert_eq!(
            (exit.kind, exit.eval.verdict),
            (GateKind::Exit, Verdict::Pass)
        );
        assert_eq!(exit.eval.samples, 2);
        assert_eq!(exit.memory_read, Some(4));
        assert_eq!(
            (guard.kind, guard.eval.verdict),
            (GateKind::Guard, Verdict::NoData)
        );
        assert_eq!(guard.eval.samples, 1);
        assert_eq!(guard.memory_read, None);
        for r in &reports {
            assert_eq!((r.phase.as_str(), r.name.as_str()), ("drain", "lag"));
            assert_eq!(
                (r.source.as_str(), r.query.as_str()),
                ("prom", "lag_seconds")
            );
            assert_eq!(r.evaluated_at_ms, 3_000);
        }
    }

    #[test]
    fn of_two_stored_rows_of_one_gate_the_later_is_its_memory() {
        let p = phase(vec![lag(3)], Vec::new());
        let items = phase_items(&p);
        let memory = [row("exit", 0, 1), row("exit", 2, 2)];
        let reports = judge_phase(&items, vec![value(1.0)], &memory, STEP, 3_000);
        assert_eq!(reports[0].eval.samples, 3);
        assert_eq!(reports[0].eval.verdict, Verdict::Pass);
        assert_eq!(reports[0].memory_read, Some(2));
    }

    #[test]
    fn a_note_goes_into_the_reason_of_a_verdict_on_a_number_only() {
        let p = phase(vec![lag(1)], Vec::new());
        let items = phase_items(&p);
        let noted = |observation| {
            judge(
                &items[0],
                &observation,
                Memory::default(),
                3_000,
                StepTimes::entered(1_000),
                Some("3 entries".into()),
            )
        };
        let on_number = noted(Observation::Value(20.0));
        assert_eq!(on_number.verdict, Verdict::Fail);
        assert!(
            on_number.reason.ends_with(": 3 entries"),
            "{}",
            on_number.reason
        );
        let unavailable = noted(Observation::Unavailable(gate::Unread::down(
            "export unreadable",
        )));
        assert_eq!(unavailable.verdict, Verdict::NoData);
        assert_eq!(unavailable.reason, "export unreadable");
    }

    #[test]
    fn a_compare_gate_shows_both_of_its_queries() {
        let gate = Gate {
            check: Check::Compare {
                new: "n".into(),
                old: "o".into(),
                ratio: 1.1,
                absolute: 0.0,
            },
            ..lag(1)
        };
        let p = phase(Vec::new(), vec![gate]);
        let items = phase_items(&p);
        assert_eq!(items[0].queries(), ["n", "o"]);
        assert_eq!(items[0].query_text(), "new: n | old: o");
    }
}
