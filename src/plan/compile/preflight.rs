//! The `preflight` section: per side, the monitoring endpoint to read settings from and the
//! checks the plan waives, each with a reason (`docs/plan.md#preflight`).

use serde_yaml::Value;

use super::cx::{Cx, Obj, describe, quote};
use super::suggest::closest;
use crate::plan::lines::{index_path, key_path};
use crate::plan::model::{Brokers, Preflight, PreflightSide};
use crate::preflight::{Check, Kind, Side, Waiver};

const PREFLIGHT_FIELDS: &[&str] = &["old", "new"];
const SIDE_FIELDS: &[&str] = &["monitor", "waive"];
const WAIVER_FIELDS: &[&str] = &["check", "reason"];

impl Cx<'_> {
    pub(super) fn preflight(
        &mut self,
        v: &Value,
        path: &str,
        brokers: Option<&Brokers>,
    ) -> Option<Preflight> {
        let o = Obj::new(self, v, path, "the preflight", PREFLIGHT_FIELDS)?;
        let kind_of = |side: Side| {
            brokers.and_then(|b| {
                let broker = match side {
                    Side::Old => &b.old,
                    Side::New => &b.new,
                };
                Kind::of_plan_kind(&broker.kind)
            })
        };
        let side = |cx: &mut Self, s: Side| match o.get(s.as_str()) {
            Some((v, p)) => cx.preflight_side(v, &p, s, kind_of(s)),
            None => Some(PreflightSide::default()),
        };
        let old = side(self, Side::Old);
        let new = side(self, Side::New);
        Some(Preflight {
            old: old?,
            new: new?,
        })
    }

    fn preflight_side(
        &mut self,
        v: &Value,
        path: &str,
        side: Side,
        kind: Option<Kind>,
    ) -> Option<PreflightSide> {
        let o = Obj::new(self, v, path, "a broker's preflight", SIDE_FIELDS)?;
        let monitor = match o.get("monitor") {
            Some((v, p)) => self
                .secret(v, &p)
                .and_then(|s| self.http_url(s, &p, "monitoring"))
                .map(Some),
            None => Some(None),
        };
        let waive = match o.get("waive") {
            Some((Value::Sequence(items), p)) => {
                let mut out: Vec<Waiver> = Vec::new();
                let mut ok = true;
                for (i, item) in items.iter().enumerate() {
                    let ip = index_path(&p, i);
                    match self.waiver(item, &ip, side, kind) {
                        Some(w) if out.iter().any(|o| o.check == w.check) => {
                            self.error(
                                &key_path(&ip, "check"),
                                format!("{} is waived twice on brokers.{side}", w.check),
                            );
                            ok = false;
                        }
                        Some(w) => out.push(w),
                        None => ok = false,
                    }
                }
                ok.then_some(out)
            }
            Some((other, p)) => {
                self.error(
                    &p,
                    format!(
                        "expected a list of `{{ check: NAME, reason: \"...\" }}`, found {}",
                        describe(other)
                    ),
                );
                None
            }
            None => Some(Vec::new()),
        };
        Some(PreflightSide {
            monitor: monitor?,
            waive: waive?,
        })
    }

    fn waiver(&mut self, v: &Value, path: &str, side: Side, kind: Option<Kind>) -> Option<Waiver> {
        let o = Obj::new(self, v, path, "a waiver", WAIVER_FIELDS)?;
        let check = o
            .req(
                self,
                "check",
                "the name of the check waived, e.g. single_node",
            )
            .and_then(|(v, p)| self.nonempty_string(v, &p).map(|s| (s, p)));
        let reason = o
            .req(
                self,
                "reason",
                "why losing acknowledged writes is accepted here",
            )
            .and_then(|(v, p)| self.nonempty_string(v, &p));
        let (name, check_path) = check?;
        let names: Vec<&str> = Check::ALL.iter().map(|c| c.as_str()).collect();
        let Some(check) = Check::parse(&name) else {
            let mut message = format!(
                "unknown check {}; checks: {}",
                quote(&name),
                names.join(", ")
            );
            if let Some(near) = closest(&name, &names) {
                message.push_str(&format!(" (did you mean `{near}`?)"));
            }
            self.error(&check_path, message);
            return None;
        };
        if let Some(kind) = kind
            && !check.applies_to(kind)
        {
            let own: Vec<&str> = Check::of_kind(kind).map(Check::as_str).collect();
            self.error(
                &check_path,
                format!(
                    "{check} is a check of {} brokers; brokers.{side} is {}: its checks are {}",
                    check.kind().map_or("other", Kind::as_str),
                    kind.as_str(),
                    own.join(", ")
                ),
            );
            return None;
        }
        Some(Waiver {
            side,
            check,
            reason: reason?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{edit, errors, lines, ok};
    use crate::preflight::{Check, Side};

    const AT: &str = "retry: { max_backoff: 15m, visibility_timeout: 5m }\n";

    fn with(section: &str) -> String {
        edit(AT, &format!("{section}{AT}"))
    }

    #[test]
    fn waivers_and_a_monitor_compile_per_side() {
        let c = ok(&with(
            "preflight:\n  old:\n    waive:\n      - { check: single_node, reason: \"one node\" }\n      - { check: rabbitmq.queue_type, reason: \"classic\" }\n  new:\n    monitor: http://127.0.0.1:8222\n    waive:\n      - { check: nats.sync, reason: \"accepted\" }\n",
        ));
        let p = &c.plan.preflight;
        assert_eq!(p.old.waive.len(), 2);
        assert_eq!(p.old.waive[1].check, Check::RabbitMqQueueType);
        assert_eq!(p.new.waive[0].side, Side::New);
        assert_eq!(p.new.waive[0].reason, "accepted");
        assert!(p.new.monitor.is_some());
        assert!(ok(&with("")).plan.preflight.old.waive.is_empty());
    }

    #[test]
    fn every_malformed_waiver_is_reported_at_once_with_its_path() {
        let e = errors(&with(
            "preflight:\n  old:\n    waive:\n      - { check: singel_node, reason: \"x\" }\n      - { check: nats.sync, reason: \"x\" }\n      - { check: readable }\n      - { check: readable, reason: \"  \" }\n  new:\n    monitor: nats://127.0.0.1:8222\n    waive:\n      - { check: single_node, reason: \"a\" }\n      - { check: single_node, reason: \"b\" }\n      - just-a-name\n    wave: []\n",
        ));
        let all = lines(&e);
        for needle in [
            "preflight.old.waive[0].check: unknown check `singel_node`",
            "did you mean `single_node`?",
            "preflight.old.waive[1].check: nats.sync is a check of nats brokers; brokers.old is rabbitmq",
            "preflight.old.waive[2]: missing required field `reason`",
            "preflight.old.waive[3].reason: must not be empty",
            "preflight.new.monitor: a monitoring source URL must start with http://",
            "preflight.new.waive[1].check: single_node is waived twice on brokers.new",
            "preflight.new.waive[2]: expected a waiver",
            "preflight.new.wave: unknown field",
        ] {
            assert!(all.contains(needle), "{needle:?} not in:\n{all}");
        }
    }
}
