//! The `bridge` section and the synthetic phase's `probes`.

use serde_yaml::Value;

use super::cx::{Cx, Obj, describe, quote};
use crate::plan::lines::key_path;
use crate::plan::model::{Bridge, BridgeKey, Brokers, Probes};

pub(super) const BRIDGE_FIELDS: &[&str] = &["ingress", "key", "prefetch"];
const BRIDGE_KEY_FIELDS: &[&str] = &["header", "json"];
const PROBES_FIELDS: &[&str] = &["rate", "count", "repeat"];

/// Most probes per second the daemon will publish.
const MAX_PROBE_RATE: f64 = 1000.0;

/// Fewest probes per second (one every 1000 s): the pause between two is `1 / rate` seconds.
const MIN_PROBE_RATE: f64 = 0.001;

impl Cx<'_> {
    pub(super) fn bridge(
        &mut self,
        v: &Value,
        path: &str,
        brokers: Option<&Brokers>,
    ) -> Option<Bridge> {
        let o = Obj::new(self, v, path, "the bridge", BRIDGE_FIELDS)?;
        let ingress = o
            .req(
                self,
                "ingress",
                "the old-broker queue the unchangeable producer writes to",
            )
            .and_then(|(v, p)| self.nonempty_string(v, &p).map(|s| (s, p)));
        let key = o
            .req(self, "key", "`{ header: NAME }` or `{ json: FIELD }`")
            .and_then(|(v, p)| self.bridge_key(v, &p));
        let prefetch = match o.get("prefetch") {
            Some((v, p)) => self
                .uint(v, &p, 1, u64::from(u16::MAX))
                .and_then(|n| u16::try_from(n).ok()),
            None => Some(256),
        };
        let (ingress, ingress_path) = ingress?;
        if let Some(brokers) = brokers {
            match brokers.old.destination() {
                Some(old) if old == ingress => self.error(
                    &ingress_path,
                    format!(
                        "the ingress {} is also brokers.old.queue, the queue consumers read: the \
                         bridge would read its own output forever; point the producer at a \
                         separate queue (e.g. `{ingress}.ingress`)",
                        quote(&ingress)
                    ),
                ),
                Some(_) => {}
                None => self.error(
                    &key_path("brokers.old", "queue"),
                    "the bridge forwards old-routed messages to brokers.old.queue: name the queue \
                     the consumers read on the old broker",
                ),
            }
            if brokers.old.dead_letter.is_none() {
                self.warn(
                    "bridge",
                    "no brokers.old.dead_letter: a message the new broker refuses for good (e.g. \
                     larger than the NATS server's max_payload) cannot be parked, so the bridge \
                     retries it forever, its key waits and, once 2 × prefetch messages are held, \
                     the whole bridge; name a dead-letter queue on the old broker",
                );
            }
            if brokers.new.destination().is_none() {
                self.error(
                    "brokers.new",
                    "the bridge forwards new-routed messages to brokers.new.queue (or stream): \
                     name it",
                );
            }
        }
        Some(Bridge {
            ingress,
            key: key?,
            prefetch: prefetch?,
        })
    }

    fn bridge_key(&mut self, v: &Value, path: &str) -> Option<BridgeKey> {
        let o = Obj::new(self, v, path, "the bridge key", BRIDGE_KEY_FIELDS)?;
        match (o.get("header"), o.get("json")) {
            (Some((v, p)), None) => self.nonempty_string(v, &p).map(BridgeKey::Header),
            (None, Some((v, p))) => {
                let field = self.nonempty_string(v, &p)?;
                if field.starts_with('/') || !field.contains('/') {
                    Some(BridgeKey::Json(field))
                } else {
                    self.error(
                        &p,
                        format!(
                            "{} is neither a top-level field name nor a JSON pointer; a pointer \
                             starts with `/` (e.g. `/order/id`)",
                            quote(&field)
                        ),
                    );
                    None
                }
            }
            (Some(_), Some(_)) => {
                self.error(path, "give either `header` or `json`, not both");
                None
            }
            (None, None) => {
                self.error(
                    path,
                    "missing the key's place: `{ header: x-order-id }` or `{ json: orderId }`",
                );
                None
            }
        }
    }

    pub(super) fn probes(&mut self, v: &Value, path: &str) -> Option<Probes> {
        let o = Obj::new(self, v, path, "the probes", PROBES_FIELDS)?;
        let rate = o
            .req(self, "rate", "probes per second, e.g. `rate: 5`")
            .and_then(|(v, p)| {
                let r = self.number(v, &p)?;
                if (MIN_PROBE_RATE..=MAX_PROBE_RATE).contains(&r) {
                    Some(r)
                } else {
                    self.error(
                        &p,
                        format!(
                            "expected a rate from {MIN_PROBE_RATE} (one probe every 1000 s) to \
                             {MAX_PROBE_RATE} per second, found {}",
                            describe(v)
                        ),
                    );
                    None
                }
            });
        let count = o
            .req(
                self,
                "count",
                "how many latency probes in all, e.g. `count: 100`",
            )
            .and_then(|(v, p)| self.uint(v, &p, 1, 1_000_000))
            .and_then(|n| u32::try_from(n).ok());
        let repeat = match o.get("repeat") {
            Some((v, p)) => self.uint(v, &p, 2, 100).and_then(|n| u32::try_from(n).ok()),
            None => Some(5),
        };
        Some(Probes {
            rate: rate?,
            count: count?,
            repeat: repeat?,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::test_support::{FULL, edit, errors, line_of, lines, ok};
    use crate::plan::model::{BridgeKey, PhaseKind};

    #[test]
    fn bridge_and_probes_compile() {
        let yaml = edit(
            "  synthetic:\n    min_duration: 1h\n",
            "  synthetic:\n    min_duration: 1h\n    probes: { rate: 5, count: 100 }\n",
        ) + "bridge: { ingress: orders.ingress, key: { json: /order/id } }\n";
        let c = ok(&yaml);
        let bridge = c.plan.bridge.clone().expect("a bridge");
        assert_eq!(bridge.ingress, "orders.ingress");
        assert_eq!(bridge.key, BridgeKey::Json("/order/id".into()));
        assert_eq!(bridge.prefetch, 256);
        let probes = c
            .plan
            .phase(PhaseKind::Synthetic)
            .and_then(|p| p.probes.clone());
        assert_eq!(
            probes,
            Some(crate::plan::Probes {
                rate: 5.0,
                count: 100,
                repeat: 5
            })
        );
        assert_eq!(c.plan.brokers.old.destination(), Some("orders"));
        assert_eq!(c.plan.brokers.new.destination(), Some("ORDERS"));
    }

    /// Regression: a plan with a bridge and no dead-letter queue checked clean, though the
    /// bridge then cannot park a message the new broker refuses and stalls on it.
    #[test]
    fn a_bridge_without_a_dead_letter_queue_is_a_warning() {
        let with =
            format!("{FULL}bridge: {{ ingress: orders.ingress, key: {{ json: orderId }} }}\n");
        assert!(
            !lines(&ok(&with).warnings).contains("dead_letter"),
            "{}",
            lines(&ok(&with).warnings)
        );
        let without = with.replace(", dead_letter: orders.dlq", "");
        assert_ne!(without, with, "the fixture names a dead-letter queue");
        let c = ok(&without);
        let w = c.warnings.iter().find(|w| w.path == "bridge");
        assert!(
            w.is_some_and(|w| w.message.contains("brokers.old.dead_letter")
                && w.message.contains("max_payload")),
            "{}",
            lines(&c.warnings)
        );
        assert!(c.plan.bridge.is_some(), "a warning, not an error");
    }

    #[test]
    fn a_bridge_reading_the_consumers_queue_is_refused() {
        let yaml =
            format!("{FULL}bridge: {{ ingress: orders, key: {{ header: x-id, json: id }} }}\n");
        let errs = errors(&yaml);
        let text = lines(&errs);
        assert!(
            text.contains("bridge.ingress") && text.contains("read its own output"),
            "{text}"
        );
        assert!(
            text.contains("bridge.key") && text.contains("not both"),
            "{text}"
        );
        let errs = errors(&format!(
            "{FULL}bridge: {{ ingress: in, key: {{}}, prefetch: 0 }}\n"
        ));
        let text = lines(&errs);
        assert!(text.contains("missing the key's place"), "{text}");
        assert!(text.contains("bridge.prefetch"), "{text}");
        let errs = errors(&format!(
            "{FULL}bridge: {{ ingress: in, key: {{ json: a/b }} }}\n"
        ));
        assert!(lines(&errs).contains("JSON pointer"), "{}", lines(&errs));
    }

    #[test]
    fn probes_are_checked_and_belong_to_synthetic() {
        let bad = edit(
            "  synthetic:\n    min_duration: 1h\n",
            "  synthetic:\n    min_duration: 1h\n    probes: { rate: 0, count: 0, repeat: 1 }\n",
        );
        let text = lines(&errors(&bad));
        for path in [
            "phases.synthetic.probes.rate",
            "phases.synthetic.probes.count",
            "phases.synthetic.probes.repeat",
        ] {
            assert!(text.contains(path), "missing {path}\n{text}");
        }
        let misplaced = edit(
            "  drain:\n    quiet: auto\n",
            "  drain:\n    quiet: auto\n    probes: { rate: 1, count: 1 }\n",
        );
        let text = lines(&errors(&misplaced));
        assert!(
            text.contains("`probes` belongs to the synthetic phase"),
            "{text}"
        );
    }

    /// Regression: `probes.rate: 1e-20` passed `plan check`, then the daemon panicked in
    /// `Duration::from_secs_f64(1 / rate)`.
    #[test]
    fn a_probe_rate_too_small_to_pace_is_an_error_with_its_line() {
        for rate in ["1e-20", "0.0001", "5e-324"] {
            let bad = edit(
                "  synthetic:\n    min_duration: 1h\n",
                &format!(
                    "  synthetic:\n    min_duration: 1h\n    probes: {{ rate: {rate}, count: 5 }}\n"
                ),
            );
            let errs = errors(&bad);
            let e = errs
                .iter()
                .find(|d| d.path == "phases.synthetic.probes.rate")
                .unwrap_or_else(|| panic!("{rate}: {}", lines(&errs)));
            assert_eq!(e.line, line_of(&bad, "probes:"), "{e}");
            assert!(e.message.contains("0.001"), "{e}");
        }
        let fine = edit(
            "  synthetic:\n    min_duration: 1h\n",
            "  synthetic:\n    min_duration: 1h\n    probes: { rate: 0.001, count: 5 }\n",
        );
        assert!(ok(&fine).plan.phases.iter().any(|p| p.probes.is_some()));
    }
}
