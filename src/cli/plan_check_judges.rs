//! What `plan check` says of a plan's judges: the migration's error budget and each judge's
//! share of it, and the raw counters each judge reads (issue 55).

use crate::plan::{Check, JudgeForm, Plan};

/// `0.25%`, `0.0010%`: a bound as a person reads it.
fn percent(p: f64) -> String {
    if p == 0.0 {
        return "0%".into();
    }
    let v = p * 100.0;
    if v >= 0.1 {
        format!("{v:.2}%")
    } else {
        format!("{v:.4}%")
    }
}

/// The counters a query reads (its selector), or why not (never for a compiled plan).
fn counters_of(query: &str) -> String {
    match crate::judge::counter::recognise(query) {
        Ok(c) => c.selector,
        Err(why) => format!("`{query}` (not readable as raw counters: {why})"),
    }
}

/// The budget line (`None` when the plan has no judge), then one line per judge.
pub(super) fn judge_lines(plan: &Plan) -> (Option<String>, Vec<String>) {
    let n = crate::plan::judge_steps(&plan.phases);
    if n == 0 {
        return (None, Vec::new());
    }
    let b = &plan.judge_budget;
    let share = b.share(n);
    let budget = format!(
        "false FAIL {} and false PASS {} per migration, split equally over its {n} \
         judge x step(s): {} and {} each, in each step (each judge's change detector keeps {} \
         of its false FAILs, {} of the migration's)",
        percent(b.false_fail),
        percent(b.false_pass),
        percent(share.fail),
        percent(share.pass),
        percent(b.detectors),
        percent(b.false_fail * b.detectors),
    );
    let mut lines = Vec::new();
    for phase in &plan.phases {
        let steps = crate::plan::steps_watched(phase);
        let kinds = phase
            .exit
            .iter()
            .map(|g| (g, "exit gate"))
            .chain(phase.guard.iter().map(|g| (g, "guard")));
        for (gate, kind) in kinds {
            let Check::Judge(j) = &gate.check else {
                continue;
            };
            let cfg = &j.config;
            let stricter = match cfg.confidence {
                Some(c) if 1.0 - c < share.fail || 1.0 - c < share.pass => {
                    format!(" (its confidence {c} is stricter than its share)")
                }
                Some(c) => format!(" (its confidence {c} is looser: the share holds)"),
                None => String::new(),
            };
            let reads = match &j.form {
                JudgeForm::Counts { new, old } => format!(
                    "new events {}, new failures {}, old events {}, old failures {}",
                    counters_of(&new.events),
                    counters_of(&new.failures),
                    counters_of(&old.events),
                    counters_of(&old.failures)
                ),
                JudgeForm::Latency(l) => format!(
                    "new {}, old {} at each le",
                    counters_of(&l.new),
                    counters_of(&l.old)
                ),
            };
            lines.push(format!(
                "`{}` ({} {kind}, {steps} step(s)): false FAIL {} and false PASS {} a step{stricter}; \
                 reads the raw counters of {reads} on source {}",
                gate.name,
                phase.kind,
                percent(cfg.alpha),
                percent(cfg.alpha_pass),
                gate.source
            ));
        }
    }
    (Some(budget), lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_check_states_the_budget_each_judges_share_and_the_counters_it_reads() {
        let yaml = include_str!("../../plans/demo.yaml");
        let plan = crate::plan::compile(yaml, None, &crate::plan::LoopbackResolve)
            .expect("the demo plan")
            .plan;
        let (budget, judges) = judge_lines(&plan);
        let budget = budget.expect("the demo has a judge");
        assert!(
            budget.starts_with("false FAIL 1.00% and false PASS 1.00% per migration")
                && budget.contains("over its 4 judge x step(s): 0.25% and 0.25% each"),
            "{budget}"
        );
        assert_eq!(judges.len(), 1);
        assert!(
            judges[0].contains("(slices guard, 4 step(s)): false FAIL 0.25% and false PASS 0.25%")
                && judges[0].contains(
                    r#"new failures demo_consumer_attempts_total{route="new",result="error"}"#
                ),
            "{}",
            judges[0]
        );
        // Without a judge: no budget line.
        let plain = crate::plan::compile(
            include_str!("../../plans/local.yaml"),
            None,
            &crate::plan::LoopbackResolve,
        )
        .expect("the local plan")
        .plan;
        assert_eq!(judge_lines(&plain), (None, Vec::new()));
    }
}
