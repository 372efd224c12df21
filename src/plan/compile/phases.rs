//! The `phases` section: each phase's minimum time, gates and breach action, the slice steps and
//! requirements of `slices`, and the warnings about phases a plan leaves out.

use std::collections::HashMap;
use std::time::Duration;

use serde_yaml::{Mapping, Value};

use super::cx::{Cx, MAX_SLICES, Obj, describe, quote};
use super::gates::GateCtx;
use crate::plan::duration_serde::format as human;
use crate::plan::lines::{index_path, key_path};
use crate::plan::model::{BreachAction, Phase, PhaseKind, Requirement};

// The fields each mapping allows (what an "unknown field" error offers instead).
const PHASE_NAMES: &[&str] = &["consume_dual", "synthetic", "slices", "drain", "disconnect"];
const CONSUME_DUAL_FIELDS: &[&str] = &["min_duration", "exit", "guard", "on_breach"];
const SYNTHETIC_FIELDS: &[&str] = &["min_duration", "probes", "exit", "guard", "on_breach"];
const SLICES_FIELDS: &[&str] = &[
    "steps",
    "observe",
    "require_peak",
    "require_deploy",
    "exit",
    "guard",
    "on_breach",
];
const DRAIN_FIELDS: &[&str] = &["min_duration", "quiet", "exit", "guard", "on_breach"];
const DISCONNECT_FIELDS: &[&str] = &["retain", "exit", "guard", "on_breach"];
const PEAK_FIELDS: &[&str] = &["source", "query", "at_least"];
const DEPLOY_FIELDS: &[&str] = &["source", "query"];

fn phase_fields(kind: PhaseKind) -> &'static [&'static str] {
    match kind {
        PhaseKind::ConsumeDual => CONSUME_DUAL_FIELDS,
        PhaseKind::Synthetic => SYNTHETIC_FIELDS,
        PhaseKind::Slices => SLICES_FIELDS,
        PhaseKind::Drain => DRAIN_FIELDS,
        PhaseKind::Disconnect => DISCONNECT_FIELDS,
    }
}

/// The field that holds a phase's minimum time.
fn min_duration_field(kind: PhaseKind) -> &'static str {
    match kind {
        PhaseKind::Slices => "observe",
        PhaseKind::Disconnect => "retain",
        PhaseKind::ConsumeDual | PhaseKind::Synthetic | PhaseKind::Drain => "min_duration",
    }
}

impl Cx<'_> {
    /// `slices`: the plan's total and whether it was written (for messages).
    pub(super) fn phases(
        &mut self,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
        slices: Option<(u32, bool)>,
    ) -> Option<Vec<Phase>> {
        let o = Obj::new(self, v, path, "phases", PHASE_NAMES)?;
        let mut out = Vec::new();
        let mut ok = true;
        for kind in PhaseKind::ALL {
            match o.get_raw(kind.as_str()) {
                Some((v, p)) => match self.phase(kind, v, &p, gates, slices) {
                    Some(phase) => out.push(phase),
                    None => ok = false,
                },
                None if kind == PhaseKind::Slices => {
                    self.error(
                        path,
                        "missing required phase `slices` (the steps that move producers to the \
                         new broker)",
                    );
                    ok = false;
                }
                None => {}
            }
        }
        ok.then_some(out)
    }

    fn phase(
        &mut self,
        kind: PhaseKind,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
        slices: Option<(u32, bool)>,
    ) -> Option<Phase> {
        let empty = Value::Mapping(Mapping::new());
        let v = if matches!(v, Value::Null) { &empty } else { v };
        let what = format!("the {kind} phase");
        let o = Obj::new(self, v, path, &what, phase_fields(kind))?;

        let min_duration = match o.get(min_duration_field(kind)) {
            Some((v, p)) => self.duration(v, &p),
            None => Some(Duration::ZERO),
        };
        let exit = match o.get("exit") {
            Some((v, p)) => self.gates(v, &p, gates),
            None => Some(Vec::new()),
        };
        let guard = match o.get("guard") {
            Some((v, p)) => self.gates(v, &p, gates),
            None => Some(Vec::new()),
        };
        let on_breach = match o.get("on_breach") {
            Some((v, p)) => self.breach_action(v, &p),
            None => Some(BreachAction::default()),
        };
        let (mut steps, mut require_peak, mut require_deploy) =
            (Some(Vec::new()), Some(None), Some(None));
        if kind == PhaseKind::Slices {
            steps = o
                .req(self, "steps", "e.g. `steps: [6, 32, 64, 128]`")
                .and_then(|(v, p)| self.steps(v, &p, slices));
            require_peak = match o.get("require_peak") {
                Some((v, p)) => self.requirement(v, &p, gates, true).map(Some),
                None => Some(None),
            };
            require_deploy = match o.get("require_deploy") {
                Some((v, p)) => self.requirement(v, &p, gates, false).map(Some),
                None => Some(None),
            };
        }
        let probes = match o.get("probes") {
            Some((v, p)) => self.probes(v, &p).map(Some),
            None => Some(None),
        };
        let unique = self.unique_gate_names(&o);
        let (exit, guard) = (exit?, guard?);
        unique?;
        Some(Phase {
            kind,
            min_duration: min_duration?,
            exit,
            guard,
            on_breach: on_breach?,
            steps: steps?,
            require_peak: require_peak?,
            require_deploy: require_deploy?,
            probes: probes?,
        })
    }

    /// Gate names are unique within a phase, across exit and guard. Read from the YAML itself so
    /// that a duplicate is reported even when one of the two gates has other errors.
    fn unique_gate_names(&mut self, o: &Obj<'_>) -> Option<()> {
        let mut seen: HashMap<&str, String> = HashMap::new();
        let mut ok = true;
        for list in ["exit", "guard"] {
            let Some((Value::Sequence(items), list_path)) = o.get(list) else {
                continue;
            };
            for (i, item) in items.iter().enumerate() {
                let Some(Value::String(name)) = item.get("name") else {
                    continue;
                };
                let gate_path = index_path(&list_path, i);
                if matches!(name.as_str(), "require_peak" | "require_deploy") {
                    // The requirements are recorded under these names: a gate sharing one shares
                    // its "held since" mark, so its `for:` may never be met (it holds). A warning,
                    // not an error: a plan stored before this check still loads.
                    self.warn(
                        &key_path(&gate_path, "name"),
                        format!(
                            "the gate name {} is the name the slices phase's requirement is \
                             recorded under: the two share a \"held since\" mark (the gate may \
                             hold for ever); call the gate something else",
                            quote(name)
                        ),
                    );
                }
                if let Some(first) = seen.get(name.as_str()) {
                    let at = match self.line(first) {
                        Some(line) => format!("{first}, line {line}"),
                        None => first.clone(),
                    };
                    self.error(
                        &key_path(&gate_path, "name"),
                        format!(
                            "duplicate gate name {} (first at {at}): gate names must be unique \
                             within a phase, across exit and guard, because status, the journal \
                             and \"held since\" marks refer to gates by name",
                            quote(name)
                        ),
                    );
                    ok = false;
                } else {
                    seen.insert(name, gate_path);
                }
            }
        }
        ok.then_some(())
    }

    fn breach_action(&mut self, v: &Value, path: &str) -> Option<BreachAction> {
        let s = self.string(v, path)?;
        match s.as_str() {
            "rollback" => Some(BreachAction::Rollback),
            "pause" => Some(BreachAction::Pause),
            "alert" => Some(BreachAction::Alert),
            _ => {
                self.error(
                    path,
                    format!(
                        "on_breach is one of rollback, pause, alert; got {}",
                        quote(&s)
                    ),
                );
                None
            }
        }
    }

    fn steps(&mut self, v: &Value, path: &str, slices: Option<(u32, bool)>) -> Option<Vec<u32>> {
        let Value::Sequence(items) = v else {
            self.error(
                path,
                format!(
                    "expected a list of slice counts, e.g. [6, 32, 64, 128], found {}",
                    describe(v)
                ),
            );
            return None;
        };
        if items.is_empty() {
            self.error(
                path,
                "needs at least one step (the last one migrates every slice)",
            );
            return None;
        }
        let mut out = Vec::with_capacity(items.len());
        let mut ok = true;
        let mut prev: Option<u32> = None;
        for (i, item) in items.iter().enumerate() {
            let p = index_path(path, i);
            let Some(step) = self
                .uint(item, &p, 1, u64::from(MAX_SLICES))
                .and_then(|n| u32::try_from(n).ok())
            else {
                ok = false;
                prev = None;
                continue;
            };
            if let Some(prev) = prev
                && step <= prev
            {
                self.error(
                    &p,
                    format!("steps must be strictly increasing ({step} after {prev})"),
                );
                ok = false;
            }
            if let Some((total, _)) = slices
                && step > total
            {
                self.error(
                    &p,
                    format!("step {step} is more than the plan's {total} slices"),
                );
                ok = false;
            }
            prev = Some(step);
            out.push(step);
        }
        if let (Some((total, written)), Some(&last)) = (slices, out.last())
            && ok
            && last != total
            && out.len() == items.len()
        {
            let default = if written {
                String::new()
            } else {
                format!(" (`slices` is not set, so it is the default {total})")
            };
            self.error(
                &index_path(path, items.len() - 1),
                format!("the last step must migrate every slice: {total}{default}, found {last}"),
            );
            ok = false;
        }
        ok.then_some(out)
    }

    fn requirement(
        &mut self,
        v: &Value,
        path: &str,
        gates: &GateCtx<'_>,
        peak: bool,
    ) -> Option<Requirement> {
        let (what, fields) = if peak {
            ("require_peak", PEAK_FIELDS)
        } else {
            ("require_deploy", DEPLOY_FIELDS)
        };
        let o = Obj::new(self, v, path, what, fields)?;
        let source = o
            .req(self, "source", "the name of a declared source")
            .and_then(|(v, p)| self.source_ref(v, &p, gates));
        let query = o
            .req(self, "query", "the query to read")
            .and_then(|(v, p)| {
                let q = self.nonempty_string(v, &p)?;
                self.check_query(source.as_ref(), &q, &p)?;
                Some(q)
            });
        let at_least = if peak {
            o.req(self, "at_least", "the lowest peak reading accepted")
                .and_then(|(v, p)| self.number(v, &p))
                .map(Some)
        } else {
            Some(None)
        };
        Some(Requirement {
            source: source?.0,
            query: query?,
            at_least: at_least?,
        })
    }

    pub(super) fn phase_warnings(&mut self, phases: &[Phase], quiet: Duration) {
        let has = |k: PhaseKind| phases.iter().any(|p| p.kind == k);
        if !has(PhaseKind::ConsumeDual) {
            self.warn(
                "phases",
                "no `consume_dual` phase: consumers never read both brokers before producers \
                 move, so the first slice step publishes to a broker nobody has proven to \
                 consume from, and an abort has no dual-read state of its own to fall back to",
            );
        }
        if !has(PhaseKind::Drain) {
            self.warn(
                "phases",
                "no `drain` phase: nothing checks that the old queue (and its dead-letter \
                 queue) is empty before consumers stop reading it",
            );
        }
        for phase in phases {
            let path = key_path("phases", phase.kind.as_str());
            if phase.exit.is_empty() {
                self.warn(
                    &path,
                    format!(
                        "no exit gates: this phase advances on time alone ({} {}); allowed, \
                         but nothing measured says it is safe to move on",
                        min_duration_field(phase.kind),
                        human(phase.min_duration)
                    ),
                );
            }
            if phase.kind == PhaseKind::Slices && phase.guard.is_empty() {
                self.warn(
                    &path,
                    "no guard gates: nothing watches the migrated slices between evaluations, \
                     so a regression on the new route does not roll back by itself",
                );
            }
            if phase.kind == PhaseKind::Drain
                && !phase
                    .exit
                    .iter()
                    .any(|g| g.hold_for.is_some_and(|d| d >= quiet))
            {
                self.warn(
                    &path,
                    format!(
                        "no exit gate uses `for: quiet` ({}): an old queue that reads 0 once may \
                         still get messages back from retries and visibility timeouts",
                        human(quiet)
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::test_support::{FULL, edit, errors, line_of, lines};

    #[test]
    fn duplicate_names_are_reported_even_when_a_gate_is_broken() {
        let yaml =
            edit("name: error rate breach", "name: error rate").replacen("for: 5m", "for: 5", 1);
        let errs = errors(&yaml);
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            vec!["phases.slices.guard[0].name", "phases.slices.guard[0].for"],
            "{}",
            lines(&errs)
        );
    }

    #[test]
    fn missing_slices_phase() {
        let start = FULL.find("  slices:\n").unwrap_or(0);
        let end = FULL.find("  drain:\n").unwrap_or(0);
        let yaml = format!("{}{}", &FULL[..start], &FULL[end..]);
        let errs = errors(&yaml);
        assert_eq!(errs.len(), 1, "{}", lines(&errs));
        assert_eq!(errs[0].path, "phases");
        assert_eq!(errs[0].line, line_of(&yaml, "phases:"));
        assert!(errs[0].message.contains("missing required phase `slices`"));
    }
}
