//! The old broker's own mark of "now" on a queue, for the stale-producer check (issue 58,
//! `docs/design.md#stale-producers`): read when a consumer (or the bridge) first sees a new
//! routing document, recorded with it in the [`StaleGuard`], and compared with each delivery's
//! [`Stored`](super::Stored) facts, so that a backlog enqueued before the publish is told by the
//! broker's own order rather than by its producer's clock.
//!
//! | broker | mark | a delivery is before it when |
//! |--------|------|------------------------------|
//! | NATS JetStream | [`Mark::Position`]: the stream's last sequence (stream info) | its stream sequence is at most the mark |
//! | Redis Streams | [`Mark::EnqueuedAt`]: the server's `TIME`, or the ms of the stream's last-generated id when that is later | its entry id's ms part is at most the mark |
//! | Kafka | [`Mark::PartitionEnds`]: every partition's high watermark | its offset is below its partition's mark |
//! | RabbitMQ | none (a classic queue has no position nor enqueue time) | — (the stamp's time, within the skew bound) |
//!
//! Redis: the server's clock, not the stream's last-generated id alone, since the id of an idle
//! stream is as old as its last entry, and every entry written after it and before the next
//! document would then look enqueued after the publish (a backlog told by its stamp, a false
//! trip when its producer's clock runs ahead). The last-generated id's ms is taken when it is
//! later than `TIME` (the server's clock stepped back, or ids given explicitly): every entry
//! already in the stream is then still before the mark.
//!
//! # Guarantees
//! - A mark is read after the document was published, so it is later than the publish: later is
//!   the safe side (it can only take a stale message for a backlog, never a backlog for a stale
//!   message; `crate::stale`, "Guarantees").
//! - [`follow_marked`] never fails and never waits longer than its deadline (connecting included
//!   where it connects): a mark that cannot be read is counted
//!   ([`crate::stale::MARK_UNREAD_METRIC`]), logged, and the document followed without one.
//!
//! # Limits
//! - Kafka's high watermark counts the records every in-sync replica has: a record the leader
//!   had and its followers not yet when the mark was read (an `acks=1` producer, a lagging
//!   replica) counts as after the mark, told by its stamp's time within the skew bound.
//! - A Redis entry written with an explicit id carries its writer's ms, not the server's: after
//!   the mark it is told by that ms.

use std::time::Duration;

use crate::routing::RoutingDocument;
use crate::stale::{Mark, StaleGuard};

use super::{Adapter, BrokerError, Result};

/// How long reading a mark may take (connecting, where the caller connects, included): past it
/// the document is followed without one.
pub const MARK_DEADLINE: Duration = Duration::from_secs(2);

impl Adapter {
    /// The broker's own mark of "now" on `queue`: what it stores next is after it (see the
    /// module documentation for each broker). `Ok(None)` for RabbitMQ, which has none.
    ///
    /// # Errors
    /// [`BrokerError::Operation`] when the queue does not exist (a JetStream stream, a Kafka
    /// topic) or the broker cannot be reached. No deadline of its own beyond the adapters'
    /// request timeouts: [`follow_marked`] gives it one.
    pub async fn stale_mark(&self, queue: &str) -> Result<Option<Mark>> {
        match self {
            Adapter::RabbitMq(_) => Ok(None),
            Adapter::Nats(b) => b.stale_mark(queue).await.map(Some),
            Adapter::Redis(b) => b.stale_mark(queue).await.map(Some),
            #[cfg(feature = "kafka")]
            Adapter::Kafka(b) => b.stale_mark(queue).await.map(Some),
        }
    }
}

/// Follows `doc` on `guard` (when it is newer than what the guard followed), dated now, with the
/// mark of `queue` on the old broker `old` read within `deadline`; without `old` (not connected)
/// or when the read fails or runs out of time, without a mark, counted and logged. Returns the
/// mark recorded.
pub async fn follow_marked(
    guard: &StaleGuard,
    doc: &RoutingDocument,
    old: Option<&Adapter>,
    queue: &str,
    deadline: Duration,
) -> Option<Mark> {
    if guard
        .latest_generation()
        .is_some_and(|g| g >= doc.generation)
    {
        return None;
    }
    // Seen now: the publish was earlier (later is the safe side for the date too).
    let seen_at = crate::time::now_ms();
    let read = match old {
        Some(old) => tokio::time::timeout(deadline, old.stale_mark(queue))
            .await
            .unwrap_or_else(|_| Err(unread(queue, format!("no answer within {deadline:?}")))),
        None => Err(unread(queue, "the old broker is not connected")),
    };
    let mark = match read {
        Ok(mark) => mark,
        Err(e) => {
            tracing::warn!(
                generation = doc.generation,
                "stale-producer check: the old broker's mark was not read ({e}); this move's backlog is told by the stamps' time"
            );
            guard.mark_unread();
            None
        }
    };
    guard.follow(doc, seen_at, mark.clone());
    mark
}

fn unread(queue: &str, reason: impl std::fmt::Display) -> BrokerError {
    BrokerError::operation("broker", "stale mark", queue, reason)
}

/// Follows every document `router` takes on `guard`, each with the old broker's mark of `queue`
/// ([`follow_marked`], [`MARK_DEADLINE`]). Runs until dropped (or its task aborted): it holds
/// a clone of `router`, whose documents never end.
#[cfg(feature = "router")]
pub async fn follow_router(
    router: crate::router::Router,
    guard: std::sync::Arc<StaleGuard>,
    old: std::sync::Arc<Adapter>,
    queue: String,
) {
    let mut changed = router.subscribe();
    loop {
        if let Some(doc) = router.document() {
            follow_marked(&guard, &doc, Some(&old), &queue, MARK_DEADLINE).await;
        }
        if changed.changed().await.is_err() {
            return;
        }
    }
}
