//! The `bridge` section and the synthetic phase's `probes`.

use serde_yaml::Value;

use super::{Cx, Obj, describe, key_path, quote};
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
