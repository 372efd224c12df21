//! What one daemon remembers of its deliveries of the store's outbox ([`super::outbox`]).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

/// What one daemon remembers of its deliveries.
#[derive(Debug, Default)]
pub struct Outbox(pub(super) Mutex<Memory>);

#[derive(Debug, Default)]
pub(super) struct Memory {
    /// Rows (migration, seq) being posted now.
    pub(super) in_flight: HashSet<(String, i64)>,
    /// Rows whose delivery failed, and when they are tried again.
    pub(super) retry_at: HashMap<(String, i64), Instant>,
    /// When the outbox was last read, and the watcher's mark then.
    pub(super) last_read: Option<(Instant, Option<(i64, i64)>)>,
}
