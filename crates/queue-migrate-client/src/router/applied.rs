//! What a router tells about itself: its producer id (sent on every routing long-poll with the
//! generation it applied, so that the daemon learns who follows and how far) and the metric
//! that says the same (`queue_migrate_routing_applied_generation`).
//!
//! # Guarantees
//! - A router always has an id: the one given to [`super::RouterBuilder::producer`], else
//!   `HOSTNAME-PID-N` (`producer` when `HOSTNAME` is unset; N counts the routers of the
//!   process from 1), so that two routers of one process are two followers.
//! - The metric's labels go through [`crate::metrics_text`]'s escaping.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::metrics_text::{self, Kind};

/// The metric a router exposes: the generation it applied, by migration and producer.
pub const APPLIED_METRIC: &str = "queue_migrate_routing_applied_generation";

/// The id of a router built without one: `HOSTNAME-PID-N`.
pub(super) fn default_producer() -> String {
    static N: AtomicU64 = AtomicU64::new(1);
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .unwrap_or_else(|| "producer".to_string());
    format!(
        "{}-{}-{}",
        host.trim(),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The metrics text of a router of `migration` (empty before a deprecated router's first
/// document: no migration to name) whose producer `producer` applied `generation`.
pub(super) fn metrics(migration: Option<&str>, producer: &str, generation: u64) -> String {
    let mut out = String::new();
    metrics_text::family(
        &mut out,
        APPLIED_METRIC,
        Kind::Gauge,
        "The routing document's generation this producer applied (0: none yet, every key to old).",
    );
    if let Some(migration) = migration {
        metrics_text::sample(
            &mut out,
            APPLIED_METRIC,
            &[("migration", migration), ("producer", producer)],
            generation,
        );
    }
    out
}
