//! The producers that follow a migration's routing document, as the API and the console show
//! them: each one the daemon saw on the long-poll within the window, the generation it applied,
//! and which of them lag behind the generation the migration's step published.
//!
//! # Guarantees
//! - The window is the current phase's first `routing_applied` gate's, else
//!   [`crate::plan::DEFAULT_ROUTING_WINDOW`]: the list says what that gate judges.
//! - Ids are shown as [`crate::indicators::followers`] kept them (through
//!   [`crate::outgoing`]'s rule at intake).

use std::time::Duration;

use serde::Serialize;

use crate::controller::Loaded;
use crate::gate::routing_applied::{Follower, applied};
use crate::indicators::followers::Followers;
use crate::plan::{Check, DEFAULT_ROUTING_WINDOW};

/// What `GET /v1/migrations/{name}` answers under `producers`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProducersView {
    /// The generation the migration's step published: what each producer must have applied.
    pub generation: u64,
    /// How far back a producer counts as following.
    pub window: String,
    /// Producers seen within the window, by id.
    pub seen: Vec<Follower>,
    /// Those of them below `generation`, lowest generation first.
    pub lagging: Vec<Follower>,
    /// Producers this daemon remembers now, across all migrations, and at most.
    pub tracked: usize,
    pub cap: usize,
    /// Producers forgotten to keep the cap, since the daemon started.
    pub evicted: u64,
}

/// The window of the current phase's first `routing_applied` gate (exit or guard).
fn window(loaded: &Loaded) -> Duration {
    let phase = loaded
        .record
        .state
        .phase()
        .and_then(|k| loaded.plan.phase(k));
    phase
        .into_iter()
        .flat_map(|p| p.exit.iter().chain(&p.guard))
        .find_map(|g| match g.check {
            Check::RoutingApplied { window } => Some(window),
            _ => None,
        })
        .unwrap_or(DEFAULT_ROUTING_WINDOW)
}

/// The producers of `loaded`'s migration at `now_ms` (the gates' clock).
pub fn view(followers: &Followers, loaded: &Loaded, now_ms: i64) -> ProducersView {
    let window = window(loaded);
    let need = u64::try_from(loaded.record.generation).unwrap_or(0);
    let all = followers.of(&loaded.record.name);
    let window_ms = crate::time::millis(window);
    let seen: Vec<Follower> = all
        .iter()
        .filter(|f| now_ms.saturating_sub(f.seen_ms) <= window_ms)
        .cloned()
        .collect();
    let lagging = applied(window, need, &seen, now_ms).lagging;
    ProducersView {
        generation: need,
        window: crate::time::format_duration(window),
        seen,
        lagging,
        tracked: followers.len(),
        cap: followers.cap(),
        evicted: followers.evicted(),
    }
}
