//! The routing document: what the controller publishes and every producer and consumer follows.
//!
//! Small JSON, the same wherever it is read (the daemon's endpoint, a file, an etcd key):
//! `{migration, generation, state, step, paused, slices_total, slices_migrated, consume, brokers,
//! updated_at}`. A message goes to the new broker when its key's slice is below
//! `slices_migrated`; `generation` increases with every transition, so a reader can tell newer from
//! older.
//!
//! ```
//! use queue_migrate_client::routing::{RoutingDocument, Side};
//!
//! let doc: RoutingDocument = serde_json::from_str(r#"{
//!     "migration": "orders", "generation": 7, "state": "slices", "step": 1, "paused": false,
//!     "slices_total": 128, "slices_migrated": 32, "consume": ["old", "new"],
//!     "brokers": {"old": "rabbitmq", "new": "nats"}, "updated_at": "2026-11-30T00:00:00Z"
//! }"#)?;
//! let route = doc.route("order-0"); // slice 8 of 128, below 32: new
//! assert_eq!((route.target, route.slice, route.generation), (Side::New, 8, 7));
//! assert_eq!(doc.broker_name(route.target), "nats");
//! # Ok::<(), serde_json::Error>(())
//! ```

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

use crate::slice::slice_of;

/// A broker side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The broker the flow leaves.
    Old,
    /// The broker the flow moves to.
    New,
}

impl Side {
    /// `old` or `new`: the wire form in the document's `consume`, and the route stamp's route.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Old => "old",
            Side::New => "new",
        }
    }
}

/// The display names of the two brokers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerNames {
    /// The old broker's name (the plan's `brokers.old.name`, e.g. `rabbitmq`).
    pub old: String,
    /// The new broker's name (the plan's `brokers.new.name`, e.g. `nats`).
    pub new: String,
}

/// The published routing of one migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutingDocument {
    /// The migration's name (the plan's `name`).
    pub migration: String,
    /// Increases with every transition of the migration.
    pub generation: u64,
    /// One of planned, consume_dual, synthetic, slices, drain, disconnect, complete.
    pub state: String,
    /// The index into the slice steps while in `slices`.
    pub step: Option<usize>,
    /// Whether an operator paused the migration (routing stays as it is meanwhile).
    pub paused: bool,
    /// The slice count keys are hashed into (the plan's `slices`).
    pub slices_total: u32,
    /// Slices `0..slices_migrated` go to the new broker.
    pub slices_migrated: u32,
    /// The brokers consumers read.
    pub consume: Vec<Side>,
    /// The brokers' names, as route stamps and metrics label them.
    pub brokers: BrokerNames,
    /// RFC 3339, UTC.
    pub updated_at: String,
}

/// Where one message goes, and under which generation that was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// The broker the message goes to.
    pub target: Side,
    /// The slice of its key.
    pub slice: u32,
    /// The generation of the document that decided it (0: no document yet, the safe default).
    pub generation: u64,
}

impl Route {
    /// A route as decided elsewhere: to `target`, the key's `slice`, under `generation` (a
    /// message's route read back from its stamp, a test's). [`Route::of`] decides one.
    pub fn new(target: Side, slice: u32, generation: u64) -> Route {
        Route {
            target,
            slice,
            generation,
        }
    }

    /// The route of `key` under a document of `generation` that splits keys into `slices_total`
    /// slices, the first `slices_migrated` of which go to new.
    #[inline]
    pub fn of(key: &str, slices_total: u32, slices_migrated: u32, generation: u64) -> Route {
        let slice = slice_of(key, slices_total);
        Route {
            target: if slice < slices_migrated {
                Side::New
            } else {
                Side::Old
            },
            slice,
            generation,
        }
    }
}

impl RoutingDocument {
    /// Route a message by its aggregate key.
    pub fn route(&self, key: &str) -> Route {
        Route::of(
            key,
            self.slices_total,
            self.slices_migrated,
            self.generation,
        )
    }

    /// The name of the broker on `side` (what a route stamp's `x-qm-broker` carries).
    pub fn broker_name(&self, side: Side) -> &str {
        match side {
            Side::Old => &self.brokers.old,
            Side::New => &self.brokers.new,
        }
    }
}

/// A document of migration `orders` in `slices[0]`, 128 slices, for the tests of this crate and
/// of `queue-migrate` (feature `test-fixtures`; not part of the API).
#[cfg(any(test, feature = "test-fixtures"))]
#[doc(hidden)]
pub fn sample_document(generation: u64, migrated: u32) -> RoutingDocument {
    RoutingDocument {
        migration: "orders".into(),
        generation,
        state: "slices".into(),
        step: Some(0),
        paused: false,
        slices_total: 128,
        slices_migrated: migrated,
        consume: vec![Side::Old, Side::New],
        brokers: BrokerNames {
            old: "rabbitmq".into(),
            new: "nats".into(),
        },
        updated_at: "2026-11-30T00:00:00Z".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(migrated: u32) -> RoutingDocument {
        sample_document(7, migrated)
    }

    #[test]
    fn a_key_goes_new_only_when_its_slice_migrated() {
        // order-0 is slice 8 of 128 (`tests/fixtures/vectors/slices.jsonl`).
        assert_eq!(doc(8).route("order-0").target, Side::Old);
        assert_eq!(doc(9).route("order-0").target, Side::New);
        assert_eq!(doc(9).route("order-0").generation, 7);
    }

    #[test]
    fn wire_format_is_stable() {
        let json = serde_json::to_value(doc(6)).unwrap();
        assert_eq!(json["consume"], serde_json::json!(["old", "new"]));
        assert_eq!(json["slices_migrated"], 6);
        assert_eq!(json["brokers"]["new"], "nats");
    }
}
