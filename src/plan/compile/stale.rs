//! The `stale_producers` section: the source the old broker's consumers export their
//! stale-producer counts to, the grace (derived from the measured propagation unless written),
//! the clock-skew bound and the guard's window; and the built-in guard it adds to `slices`,
//! `drain` and `disconnect` (issue 58, `docs/design.md#stale-producers`).

use std::time::Duration;

use serde_yaml::Value;

use super::cx::{Cx, Obj};
use super::sources::SourceKind;
use crate::plan::model::{
    Check, CmpOp, Gate, Phase, PhaseKind, STALE_GUARD, Source, StaleProducers,
};

const FIELDS: &[&str] = &["source", "grace", "clock_skew", "window"];

/// The grace when the plan writes `auto` or nothing: the routing's measured propagation to 1,000
/// long-polling producers (p99 63 ms via the CLI, BENCHMARKS.md "Routing propagation", within its
/// 200 ms target) plus the long-poll follower's 1 s minimum between two polls after a failed
/// one, doubled and rounded up: 3 s.
pub const AUTO_GRACE: Duration = Duration::from_secs(3);
/// The default bound on a producer's clock against the controller's (the daemon's own
/// `--max-clock-skew` default).
pub const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(2);
/// The default window of the guard: a stale message counted within it trips it.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(60);

/// The guard's query: stale messages counted within `window`, every producer and slice.
pub fn guard_query(window: Duration) -> String {
    format!(
        "sum(increase({}[{}s]))",
        crate::stale::STALE_TOTAL_METRIC,
        window.as_secs().max(1)
    )
}

impl Cx<'_> {
    pub(super) fn stale_producers(
        &mut self,
        v: &Value,
        path: &str,
        sources: Option<&super::sources::Sources>,
    ) -> Option<StaleProducers> {
        let o = Obj::new(self, v, path, "the stale-producer guard", FIELDS)?;
        let source = o
            .req(
                self,
                "source",
                "the source reading the old broker's consumers' /metrics",
            )
            .and_then(|(v, p)| {
                let name = self.nonempty_string(v, &p)?;
                let Some(sources) = sources else {
                    return Some(name);
                };
                match (sources.valid.get(&name), sources.declared.get(&name)) {
                    (Some(Source::Scrape { .. } | Source::Prometheus { .. }), _) => Some(name),
                    // Declared, and its entry already reported: a second error would only
                    // repeat the first.
                    (None, Some(None | Some(SourceKind::Scrape | SourceKind::Prometheus))) => {
                        Some(name)
                    }
                    (None, None) => {
                        self.error(
                            &p,
                            format!("unknown source `{name}`; declare it under `sources`"),
                        );
                        None
                    }
                    _ => {
                        self.error(
                            &p,
                            format!(
                                "source `{name}` is not a scrape or Prometheus source of this plan"
                            ),
                        );
                        None
                    }
                }
            });
        let (grace, grace_auto) = match o.get("grace") {
            Some((Value::String(s), _)) if s == "auto" => (Some(AUTO_GRACE), true),
            Some((v, p)) => (self.duration(v, &p), false),
            None => (Some(AUTO_GRACE), true),
        };
        let clock_skew = match o.get("clock_skew") {
            Some((v, p)) => self.duration(v, &p),
            None => Some(DEFAULT_CLOCK_SKEW),
        };
        let window = match o.get("window") {
            Some((v, p)) => self.duration(v, &p).filter(|w| {
                let ok = *w >= Duration::from_secs(1);
                if !ok {
                    self.error(&p, "the window must be at least 1s (two scrapes must fit)");
                }
                ok
            }),
            None => Some(DEFAULT_WINDOW),
        };
        Some(StaleProducers {
            source: source?,
            grace: grace?,
            grace_auto,
            clock_skew: clock_skew?,
            window: window?,
        })
    }
}

/// The built-in guard of `stale`.
pub fn guard(stale: &StaleProducers) -> Gate {
    Gate {
        name: STALE_GUARD.to_string(),
        source: stale.source.clone(),
        check: Check::Threshold {
            query: guard_query(stale.window),
            op: CmpOp::Eq,
            value: 0.0,
        },
        hold_for: None,
        for_max_gap: None,
        min_samples: 1,
    }
}

/// Adds the built-in guard to `slices`, `drain` and `disconnect` (after the plan's own guards),
/// unless a phase already has a gate of that name.
pub fn add_guards(phases: &mut [Phase], stale: &StaleProducers) {
    for phase in phases.iter_mut().filter(|p| {
        matches!(
            p.kind,
            PhaseKind::Slices | PhaseKind::Drain | PhaseKind::Disconnect
        )
    }) {
        if phase.guard.iter().any(|g| g.name == STALE_GUARD) {
            continue;
        }
        phase.guard.push(guard(stale));
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{edit, errors, lines, ok};
    use super::*;
    use crate::plan::model::BreachAction;

    const SECTION: &str = "routing: { file: \"orders.routing.json\" }\n";

    #[test]
    fn the_built_in_guard_watches_slices_drain_and_disconnect() {
        let yaml = edit(
            SECTION,
            &format!("{SECTION}stale_producers: {{ source: consumer }}\n"),
        );
        let plan = ok(&yaml).plan;
        let stale = plan.stale_producers.clone().unwrap();
        assert_eq!(
            (
                stale.grace,
                stale.grace_auto,
                stale.clock_skew,
                stale.window
            ),
            (AUTO_GRACE, true, DEFAULT_CLOCK_SKEW, DEFAULT_WINDOW)
        );
        for phase in &plan.phases {
            let has = phase.guard.iter().any(|g| g.name == STALE_GUARD);
            let wants = matches!(
                phase.kind,
                PhaseKind::Slices | PhaseKind::Drain | PhaseKind::Disconnect
            );
            assert_eq!(has, wants, "{}", phase.kind);
        }
        let slices = plan.phase(PhaseKind::Slices).unwrap();
        assert_eq!(slices.on_breach, BreachAction::Rollback);
        let g = slices.guard.last().unwrap();
        assert_eq!(
            g.check,
            Check::Threshold {
                query: "sum(increase(queue_migrate_stale_messages_total[60s]))".into(),
                op: CmpOp::Eq,
                value: 0.0
            }
        );
        // Without the section, no built-in guard.
        let plain = ok(&edit(SECTION, SECTION)).plan;
        assert!(plain.stale_producers.is_none());
        assert!(
            plain
                .phases
                .iter()
                .all(|p| p.guard.iter().all(|g| g.name != STALE_GUARD))
        );
    }

    #[test]
    fn written_bounds_and_a_wrong_source_are_checked() {
        let yaml = edit(
            SECTION,
            &format!(
                "{SECTION}stale_producers: {{ source: prom, grace: 10s, clock_skew: 500ms, window: 2m }}\n"
            ),
        );
        let stale = ok(&yaml).plan.stale_producers.unwrap();
        assert_eq!(
            (
                stale.grace,
                stale.grace_auto,
                stale.clock_skew,
                stale.window
            ),
            (
                Duration::from_secs(10),
                false,
                Duration::from_millis(500),
                Duration::from_secs(120)
            )
        );
        let bad = edit(
            SECTION,
            &format!("{SECTION}stale_producers: {{ source: nowhere, graze: 1s }}\n"),
        );
        let text = lines(&errors(&bad));
        assert!(text.contains("nowhere"), "{text}");
        assert!(text.contains("graze"), "{text}");
    }
}
