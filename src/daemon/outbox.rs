//! The leader's delivery of the store's outbox (issue 54): every committed transition is
//! announced at least once, by whoever leads when it is found undelivered.
//!
//! A transition commits its journal entry and an outbox row in one transaction
//! ([`crate::store::outbox`]). The leader reads the undelivered rows whenever the store moved
//! (the watcher's mark) and at least once an interval, posts each transition's event to the
//! webhooks of its migration's plan, and only then marks the row delivered, in a write fenced
//! by its lease. A leader paused or killed between its commit and this delivery leaves the row
//! undelivered: the next leader delivers it.
//!
//! # Guarantees
//! - Only a leader delivers; a row is marked delivered only after every webhook took its event
//!   (a row without webhooks: once logged), and only while the lease is still held under the
//!   epoch the mark proves.
//! - The event is built once, from the committed journal entry (its state, step, instant,
//!   actor): whoever delivers it, whenever, posts the same event but for `epoch`, the
//!   deliverer's. Its idempotency key is `MIGRATION:SEQ` (the journal entry's), in the body and
//!   the `Idempotency-Key` header: a receiver drops repeats.
//! - A row whose delivery failed (a webhook gave up, the plan does not load) is tried again
//!   [`RETRY_AFTER`] later; a row in flight is not posted twice by one daemon at once.
//!
//! Not promised: exactly once. A leader that posted an event and lost its lease before the mark
//! leaves the row to the next leader, which posts it again (same key).

use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use super::Shared;
use super::notify::{Event, EventKind};
use crate::store::{OutboxEntry, Store};

/// Most rows one read of the outbox takes.
pub const BATCH: u32 = 100;

/// How long after a failed delivery a row is tried again.
pub const RETRY_AFTER: Duration = Duration::from_secs(30);

/// The event of an outbox row, as every leader posts it, under `epoch` (the deliverer's).
pub fn transition_event(row: &OutboxEntry, epoch: Option<i64>) -> Event {
    let e = &row.entry;
    let text = format!(
        "{}: {} {} -> {}{} by {}{}",
        row.migration,
        e.command,
        e.from.state,
        e.to.state,
        if e.to.paused { " (paused)" } else { "" },
        e.actor,
        e.reason
            .as_ref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    );
    Event {
        event: EventKind::Transition,
        migration: row.migration.clone(),
        state: e.to.state.name().to_string(),
        step: e.to.state.step(),
        text,
        at: crate::time::rfc3339(e.at_ms),
        details: serde_json::to_value(crate::controller::views::EntryView::of(e))
            .unwrap_or_default(),
        epoch,
        idempotency_key: format!("{}:{}", row.migration, e.seq),
    }
}

impl<S: Store + Clone + 'static> Shared<S> {
    /// While this daemon leads: read the outbox if due (the store moved since the last read,
    /// or an interval passed) and start the delivery of every undelivered row not in flight
    /// nor waiting for a retry. Answers how many deliveries it started. Never waits for a
    /// webhook.
    pub async fn deliver_outbox(self: &Arc<Self>) -> usize {
        let fence = self.store.fence();
        if !self.is_leader() || (fence.is_armed() && fence.epoch().is_none()) {
            return 0;
        }
        let mark = *self
            .views
            .watch_mark
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let due = {
            let memory = self
                .announce
                .outbox
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            memory.last_read.is_none_or(|(at, seen)| {
                seen != mark || at.elapsed() >= self.config.interval.min(RETRY_AFTER)
            })
        };
        if !due {
            return 0;
        }
        let rows = match self.store.outbox_pending(BATCH).await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::warn!("cannot read the outbox (tried again at the next round): {e}");
                return 0;
            }
        };
        let mut memory = self
            .announce
            .outbox
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // A full batch: read again at once.
        memory.last_read = (rows.len() < BATCH as usize).then(|| (Instant::now(), mark));
        let now = Instant::now();
        memory.retry_at.retain(|_, at| *at > now);
        let mut started = 0;
        for row in rows {
            let key = (row.migration.clone(), row.entry.seq);
            if memory.retry_at.contains_key(&key) || !memory.in_flight.insert(key.clone()) {
                continue;
            }
            let shared = Arc::clone(self);
            tokio::spawn(async move {
                let delivered = shared.deliver_row(&row).await;
                let mut memory = shared
                    .announce
                    .outbox
                    .0
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner);
                memory.in_flight.remove(&key);
                if !delivered {
                    memory.retry_at.insert(key, Instant::now() + RETRY_AFTER);
                }
            });
            started += 1;
        }
        started
    }

    /// Post one row's event to its plan's webhooks, then mark it delivered: whether it was.
    async fn deliver_row(&self, row: &OutboxEntry) -> bool {
        let c = self.controller(true);
        let hooks = match c.load_cached(&row.migration, &self.rounds.plans).await {
            Ok(loaded) => loaded.plan.notify.webhooks.clone(),
            Err(e) => {
                tracing::warn!(
                    migration = %row.migration,
                    "cannot announce transition {} (tried again later): {e}",
                    row.entry.seq
                );
                return false;
            }
        };
        let epoch = self.store.fence().epoch();
        if !self.is_leader() {
            return false;
        }
        let event = transition_event(row, epoch);
        if !self
            .announce
            .notifier
            .post(self.fetcher.client(), &hooks, event)
            .await
        {
            return false;
        }
        match self
            .store
            .outbox_delivered(&row.migration, row.entry.seq)
            .await
        {
            Ok(()) => true,
            Err(e) => {
                // Fenced: the lease changed hands; the next leader posts it again (same key).
                tracing::warn!(
                    migration = %row.migration,
                    "transition {} announced but not marked delivered: {e}",
                    row.entry.seq
                );
                false
            }
        }
    }
}
