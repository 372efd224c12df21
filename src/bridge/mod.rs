//! `migrate bridge NAME`: for producers that cannot be changed.
//!
//! The producer keeps writing to one queue on the old broker (the plan's `bridge.ingress`). The
//! bridge reads it, computes each message's slice from its key (a header or a JSON field), and
//! forwards it by the live routing document — to `brokers.old.queue` (the queue the consumers read
//! on the old side) or to the new broker's queue/stream — stamped with the route `bridge`.
//!
//! # Guarantees
//! - An ingress message is acked only after its destination confirmed the publish. A crash (or a
//!   lost connection) in between redelivers it: the worst case is a duplicate, which the
//!   consumers' dedup absorbs, never a loss. On RabbitMQ the acks are coalesced
//!   ([`AckMode::Coalesced`]): one `basic.ack(multiple)` for the lowest run of confirmed messages,
//!   a few milliseconds later; a crash before it is sent redelivers those messages too. On a
//!   Kafka ingress the ack commits the partition's offset, never past an older record not
//!   confirmed yet; a revoked partition's later acks fail and its records come again from the
//!   last commit (docs/bridge.md, "Kafka ingress").
//! - Per-key order: one key is never in flight twice ([`order::KeyedQueue`]); the next message of a
//!   key is routed (by the routing document current at that moment) only once the previous one
//!   was confirmed.
//! - Exactly one bridge per migration forwards: it holds the store lease `bridge:NAME`, renewed
//!   every third of its TTL; a second instance waits and takes over when the lease expires or is
//!   released. A bridge stops taking messages before its lease runs out (the policy of
//!   [`LeaseKeeper`], kept with the database's clock it samples in one [`Lease`], as the
//!   daemon's).
//! - A publish that fails is retried with backoff, re-routed by the routing document of the
//!   moment (a rollback while the new broker is down sends the message back to old).
//! - A message the destination refuses for good ([`BrokerError::Refused`]: too large for NATS,
//!   a header it cannot carry) is parked as a dead-letter envelope ([`dead_letter`];
//!   `docs/design.md`, "Dead letters") in the old broker's `brokers.old.dead_letter` queue and
//!   acked once that publish is confirmed, so its key moves on; without a dead-letter queue it is
//!   retried (never dropped), reported once.
//! - What a message carries besides its payload goes with it as far as the destination can take
//!   it: RabbitMQ → RabbitMQ, every AMQP property and typed header (persistent always, `user_id`
//!   only when it is the publishing connection's user); RabbitMQ → NATS / Redis, the properties
//!   as `x-amqp-*` headers and typed headers as text ([`crate::brokers::Properties`]). The route
//!   stamp replaces same-named headers.
//!
//! Metrics ([`metrics::BridgeMetrics`]): the stale-producer check of each ingress message
//! ([`crate::stale`]: stale by producer and slice, unstamped apart), forwarded, confirmed, errors and pending by destination,
//! refused and dead-lettered messages by destination, messages without a key, ingress acks that failed, whether this instance is active, and
//! `queue_migrate_published_total{route="bridge"}` (at most [`metrics::MAX_PRODUCERS`] producer
//! label values, the rest under `other`).

pub mod dead_letter;
pub use crate::adapters::key;
pub mod metrics;
pub mod order;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use futures_util::stream::FuturesUnordered;

use crate::brokers::{
    AckMode, Adapter, BrokerError, Delivery, Message, SubscribeOptions, Subscription,
};
use crate::lease::Lease;
use crate::plan::BridgeKey;
use crate::router::Router;
use crate::routing::Side;
use crate::stamp::{HEADER_PRODUCER, RouteStamp};
use crate::store::LeaseStore;
#[cfg(doc)]
use crate::store::lease_keeper::LeaseKeeper;
use crate::store::lease_keeper::Renewal;
use crate::store::traits::*;

use metrics::BridgeMetrics;
use order::KeyedQueue;

/// Errors that end a bridge.
#[derive(Debug, thiserror::Error)]
pub enum BridgeError {
    /// The store could not be read or written (lease).
    #[error("state store: {0}")]
    Store(#[from] crate::store::StoreError),
    /// A broker failed in a way retrying will not fix.
    #[error(transparent)]
    Broker(#[from] BrokerError),
}

/// What a bridge forwards, and how.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The migration.
    pub migration: String,
    /// The queue on the old broker the producer writes to.
    pub ingress: String,
    /// Where the key is.
    pub key: BridgeKey,
    /// Most ingress messages being forwarded at once; with those waiting behind a message of
    /// their key, at most twice as many held ([`KeyedQueue::admits`]). A RabbitMQ ingress may
    /// hold up to ten times as many unacked: confirmed ones whose coalesced ack waits for an
    /// older one.
    pub prefetch: u16,
    /// The old-side queue consumers read (`brokers.old.queue`).
    pub old_queue: String,
    /// The old broker's dead-letter queue (`brokers.old.dead_letter`): where a message the
    /// destination refuses for good is parked (then acked). `None`: such a message is retried
    /// like any other, its key waiting, and reported once.
    pub dead_letter: Option<String>,
    /// The new broker's queue or stream.
    pub new_queue: String,
    /// The brokers' names, for the route stamp.
    pub old_name: String,
    /// See `old_name`.
    pub new_name: String,
    /// This bridge's `--id`: its consumer name, and the first part of its holder in the lease
    /// (`ID#INSTANCE`, the instance drawn at each [`run`]).
    pub holder: String,
    /// How long the lease lasts without renewal.
    pub lease_ttl: Duration,
    /// How long an unacked ingress message stays with this bridge (brokers with a visibility
    /// timeout).
    pub visibility_timeout: Duration,
}

impl Settings {
    /// The lease name: `bridge:MIGRATION`.
    pub fn lease(&self) -> String {
        format!("bridge:{}", self.migration)
    }

    fn queue(&self, side: Side) -> &str {
        match side {
            Side::Old => &self.old_queue,
            Side::New => &self.new_queue,
        }
    }

    fn broker_name(&self, side: Side) -> &str {
        match side {
            Side::Old => &self.old_name,
            Side::New => &self.new_name,
        }
    }
}

/// The two brokers' adapters: the ingress and the old destination are on `old`.
#[derive(Clone)]
pub struct Brokers {
    /// The old broker.
    pub old: Arc<Adapter>,
    /// The new broker.
    pub new: Arc<Adapter>,
}

impl Brokers {
    fn side(&self, side: Side) -> &Adapter {
        match side {
            Side::Old => &self.old,
            Side::New => &self.new,
        }
    }
}

/// Why an active session ended.
enum Ended {
    Shutdown,
    LeaseLost,
    Broker(BrokerError),
}

/// Run the bridge until `shutdown` resolves: wait for the lease, forward while holding it, stand
/// by when it is lost; on shutdown finish (or give back) what is in flight and release the lease.
///
/// `router` must be kept current by the caller (the CLI follows the store).
///
/// # Errors
/// Only when the store cannot be reached at all at start; broker errors are retried.
pub async fn run<S: Store>(
    store: S,
    settings: Settings,
    brokers: Brokers,
    router: Router,
    metrics: Arc<BridgeMetrics>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), BridgeError> {
    let lease = settings.lease();
    // Held as `--id#instance`, drawn per run: a second bridge with this `--id` stands by, and
    // each acquisition has an epoch of its own (issue 54).
    let instance = crate::store::lease_keeper::new_instance();
    let holder = crate::store::lease_keeper::instance_holder(&settings.holder, &instance);
    // The lease is measured on the database's clock, followed by the monotonic clock between
    // its samples: a skewed or jumping host clock neither stops the bridge early nor keeps it
    // past its lease.
    let held = Lease::new(
        store,
        &lease,
        &holder,
        settings.lease_ttl,
        crate::time::DbClock::default(),
    );
    let keeper = held.keeper();
    tokio::pin!(shutdown);
    // The stale-producer check's documents, each with the ingress queue's mark on the old broker
    // read when the bridge first sees it; stopped when `run` returns.
    let _marks = AbortOnDrop(tokio::spawn(crate::brokers::marks::follow_router(
        router.clone(),
        metrics.stale.clone(),
        brokers.old.clone(),
        settings.ingress.clone(),
    )));
    let mut announced_standby = false;
    loop {
        // Stand by until the lease is ours.
        let holder = tokio::select! {
            () = &mut shutdown => break,
            asked = held.ask(None) => asked.renewal,
        };
        match holder {
            Renewal::Held { .. } => {
                tracing::info!(lease = %lease, holder = %settings.holder, instance = %instance, "holding the lease: forwarding");
                announced_standby = false;
                metrics.set_active(true);
                let ended =
                    session(&held, &settings, &brokers, &router, &metrics, &mut shutdown).await;
                metrics.set_active(false);
                match ended {
                    Ended::Shutdown => break,
                    Ended::LeaseLost => {
                        tracing::warn!(lease = %lease, "lost the lease: standing by")
                    }
                    Ended::Broker(e) => {
                        tracing::warn!("{e}; reconnecting in 1s");
                        tokio::select! {
                            () = &mut shutdown => break,
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                        }
                    }
                }
            }
            Renewal::Taken {
                holder,
                db_now_ms,
                expires_at_ms,
                ..
            } => {
                if !announced_standby {
                    tracing::info!(holder = %holder, "another bridge holds {lease}: standing by");
                    announced_standby = true;
                }
                // Asked again when the lease may be taken, if before the next turn (as the
                // daemon's standby asks).
                let wait = held
                    .ask_again_in(db_now_ms, expires_at_ms)
                    .unwrap_or(keeper.renew_every());
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(wait) => {}
                }
            }
            // `acquire` waits for the store's answer: never unanswered.
            failed @ (Renewal::Failed(_) | Renewal::Unanswered) => {
                if let Renewal::Failed(e) = failed {
                    tracing::warn!("cannot take the lease {lease}: {e}");
                }
                tokio::select! {
                    () = &mut shutdown => break,
                    () = tokio::time::sleep(keeper.renew_every()) => {}
                }
            }
        }
    }
    if let Err(e) = keeper.release().await {
        tracing::warn!("cannot release the lease {lease}: {e}");
    }
    Ok(())
}

/// Aborts its task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// One forwarded message's outcome: its key (it was confirmed and acked).
type Done = String;

/// What every forwarding future needs, borrowed by each.
struct Shared {
    settings: Settings,
    brokers: Brokers,
    router: Router,
    metrics: Arc<BridgeMetrics>,
}

/// How long a stopping session gives its last ingress acks to reach the broker.
const ACK_FLUSH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a stopping session gives its unacked ingress messages to be given back.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// Forward while the lease is ours.
async fn session<S: LeaseStore>(
    held: &Lease<S>,
    settings: &Settings,
    brokers: &Brokers,
    router: &Router,
    metrics: &Arc<BridgeMetrics>,
    shutdown: &mut std::pin::Pin<&mut impl Future<Output = ()>>,
) -> Ended {
    let lease = held.name();
    let keeper = held.keeper();

    // Before its first document a router sends everything to old, which is wrong in every state
    // from `slices[0]` on (and strands messages on an unread queue from `disconnect`).
    if router.generation() == 0 {
        tracing::info!("waiting for the migration's routing document before taking messages");
        let mut changed = router.subscribe();
        tokio::select! {
            () = shutdown.as_mut() => return Ended::Shutdown,
            _ = changed.wait_for(|g| *g > 0) => {}
        }
    }
    let mut sub = match open_ingress(settings, brokers).await {
        Ok(s) => s,
        Err(e) => return Ended::Broker(e),
    };
    // The lease was taken before the waits above (a document, the declares, the subscription),
    // each of which may have outlasted it: renew it before the first message is taken.
    let (mut lease_until, epoch) = match renew_first(held).await {
        Ok(held) => held,
        Err(ended) => return ended,
    };
    // Fires when the lease is a margin away from running out unrenewed, whatever the renewals
    // answered meanwhile (a store that fails fast extends nothing).
    let stop_at = |until: i64| tokio::time::Instant::now() + keeper.left(held.now_ms(), until);
    let expiry = tokio::time::sleep_until(stop_at(lease_until));
    tokio::pin!(expiry);
    let shared = Shared {
        settings: settings.clone(),
        brokers: brokers.clone(),
        router: router.clone(),
        metrics: metrics.clone(),
    };
    let mut keyed: KeyedQueue<String, Delivery> = KeyedQueue::new();
    // The forwards run inside this session's task, not as tasks of their own: no spawn, no
    // hand-over between threads, per message.
    let mut inflight = FuturesUnordered::new();
    let mut renew = keeper.renewals();
    renew.tick().await;
    let capacity = usize::from(settings.prefetch.max(1));
    // The renewal runs beside the forwards, so a slow store does not pause them; if it is still
    // pending when the lease would run out unrenewed, the session stops.
    let mut renewal: Option<PendingRenewal<'_>> = None;

    let ended = loop {
        tokio::select! {
            biased;
            () = shutdown.as_mut() => break Ended::Shutdown,
            () = &mut expiry => {
                tracing::warn!("the lease {lease} runs out unrenewed: stopping");
                break Ended::LeaseLost;
            }
            _ = renew.tick(), if renewal.is_none() => {
                let now = held.now_ms();
                let left = keeper.left(now, lease_until);
                renewal = Some(Box::pin(async move { (now, held.ask(Some(left)).await.renewal) }));
            }
            (now, renewed) = pending_renewal(&mut renewal), if renewal.is_some() => {
                renewal = None;
                match renewed_until(renewed, epoch, lease) {
                    Err(ended) => break ended,
                    Ok(Some(until_ms)) => {
                        lease_until = until_ms;
                        expiry.as_mut().reset(stop_at(lease_until));
                    }
                    Ok(None) => {}
                }
                if now > keeper.acts_until(lease_until) {
                    break Ended::LeaseLost;
                }
            }
            Some(key) = inflight.next(), if !inflight.is_empty() => {
                if let Some(next) = keyed.complete(&key) {
                    inflight.push(forward(key, next, &shared));
                }
            }
            // Messages waiting behind their key take no place among the `prefetch` forwarded.
            // `next` is cancel-safe (`Subscription::next`): when another arm wins, the read it
            // started is resumed by the next pass, nothing lost or reordered.
            next = sub.next(), if keyed.admits(capacity) => {
                let delivery = match next {
                    Ok(Some(d)) => d,
                    Ok(None) => break Ended::Broker(BrokerError::Operation {
                        kind: brokers.old.kind().as_str(),
                        operation: "consume",
                        queue: settings.ingress.clone(),
                        reason: "the subscription ended".into(),
                    }),
                    Err(e) => break Ended::Broker(e),
                };
                let key = ingress_key(&delivery, &settings.key, metrics);
                if let Some(start) = keyed.push(key.clone(), delivery) {
                    inflight.push(forward(key, start, &shared));
                }
            }
        }
    };
    wind_down(&ended, inflight, sub, keyed).await;
    ended
}

/// Renews the lease taken before the session's waits (a document, the declares, the
/// subscription), each of which may have outlasted it, before the first message is taken: its
/// end and epoch, or how the session ends.
async fn renew_first<S: LeaseStore>(held: &Lease<S>) -> Result<(i64, i64), Ended> {
    match held.ask(None).await.renewal {
        Renewal::Held {
            until_ms, epoch, ..
        } => Ok((until_ms, epoch)),
        Renewal::Taken { .. } | Renewal::Unanswered => Err(Ended::LeaseLost),
        Renewal::Failed(e) => {
            let lease = held.name();
            tracing::warn!("cannot renew the lease {lease} before forwarding: {e}");
            Err(Ended::LeaseLost)
        }
    }
}

/// What a renewal of the lease held with `epoch` answered: its new end, nothing new (a failed
/// renewal, logged), or how the session ends.
fn renewed_until(renewed: Renewal, epoch: i64, lease: &str) -> Result<Option<i64>, Ended> {
    match renewed {
        // Another holder had it meanwhile (a new epoch): this session is over.
        Renewal::Held {
            epoch: now_epoch, ..
        } if now_epoch != epoch => {
            tracing::warn!(
                "fenced: the lease {lease} changed hands (epoch {epoch} -> {now_epoch}): stopping"
            );
            Err(Ended::LeaseLost)
        }
        // The database's clock was sampled by the lease ([`Lease::ask`]).
        Renewal::Held { until_ms, .. } => Ok(Some(until_ms)),
        Renewal::Taken { .. } => Err(Ended::LeaseLost),
        Renewal::Failed(e) => {
            tracing::warn!("cannot renew the lease {lease}: {e}");
            Ok(None)
        }
        Renewal::Unanswered => {
            tracing::warn!(
                "the renewal of the lease {lease} is still pending and the lease runs out: stopping"
            );
            Err(Ended::LeaseLost)
        }
    }
}

/// The key an ingress message is ordered by (the empty key, counted, when it has none).
fn ingress_key(delivery: &Delivery, key: &BridgeKey, metrics: &BridgeMetrics) -> String {
    match key::key_of(&delivery.message, key) {
        Ok(k) => k,
        Err(e) => {
            tracing::debug!("ingress message without a key: {e}");
            metrics.unkeyed();
            String::new()
        }
    }
}

/// Declare the ingress and both destinations, and subscribe to the ingress as the group's only
/// reader.
async fn open_ingress(settings: &Settings, brokers: &Brokers) -> Result<Subscription, BrokerError> {
    let options = SubscribeOptions {
        group: format!("queue-migrate-bridge-{}", settings.migration),
        consumer: settings.holder.clone(),
        // Unsettled at once: those being forwarded and those waiting behind their key.
        prefetch: settings.prefetch.saturating_mul(order::HELD_PER_WINDOW),
        visibility_timeout: settings.visibility_timeout,
        // The lease makes this session the group's only reader: it takes over at once what the
        // sessions before it (this bridge's or another's) held, ahead of newer messages.
        exclusive: true,
    };
    brokers.old.declare(&settings.ingress).await?;
    for side in [Side::Old, Side::New] {
        brokers.side(side).declare(settings.queue(side)).await?;
    }
    // The bridge settles out of delivery order (a busy key's next message is confirmed after
    // later ones): per-message acks would each cost RabbitMQ a walk of the unacked list.
    brokers
        .old
        .subscribe_acking(&settings.ingress, &options, AckMode::Coalesced)
        .await
}

/// End a session that `ended`: on shutdown give what is in flight a moment to be confirmed; send
/// the acks of what was confirmed (unless the broker failed); give back what was not acked.
async fn wind_down<F: Future<Output = Done>>(
    ended: &Ended,
    mut inflight: FuturesUnordered<F>,
    sub: Subscription,
    mut keyed: KeyedQueue<String, Delivery>,
) {
    match ended {
        Ended::Shutdown => {
            // Give what is in flight a moment to be confirmed and acked; the rest comes back.
            let grace = tokio::time::sleep(Duration::from_secs(5));
            tokio::pin!(grace);
            while !inflight.is_empty() {
                tokio::select! {
                    _ = inflight.next() => {}
                    () = &mut grace => break,
                }
            }
        }
        Ended::LeaseLost | Ended::Broker(_) => {}
    }
    drop(inflight);
    // Send the acks of what was confirmed (what is not acked comes back: duplicates only).
    if !matches!(ended, Ended::Broker(_)) {
        match tokio::time::timeout(ACK_FLUSH_TIMEOUT, sub.flush_acks()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!("last ingress acks not delivered (will come again): {e}"),
            Err(_) => tracing::warn!(
                "last ingress acks not delivered within {ACK_FLUSH_TIMEOUT:?} (will come again)"
            ),
        }
    }
    // Give back at once what this session holds and did not ack, so that the next session, this
    // bridge's or a standby's, gets it before newer messages (RabbitMQ, Redis; JetStream after
    // `ack_wait`); after a crash it comes back after the visibility timeout instead.
    keyed.clear();
    match tokio::time::timeout(RELEASE_TIMEOUT, sub.release()).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(
            "unacked ingress messages not given back (they come again after the visibility \
             timeout, maybe behind newer ones): {e}"
        ),
        Err(_) => tracing::warn!(
            "unacked ingress messages not given back within {RELEASE_TIMEOUT:?} (they come again \
             after the visibility timeout, maybe behind newer ones)"
        ),
    }
}

/// A lease renewal in flight: the instant it was asked at (the database's clock as followed),
/// and the store's answer ([`Renewal::Unanswered`] when the lease would have run out before it
/// came).
type Renewed = (i64, Renewal);

/// See [`Renewed`].
type PendingRenewal<'a> = std::pin::Pin<Box<dyn Future<Output = Renewed> + Send + 'a>>;

/// The answer of the renewal in flight (never, when there is none).
async fn pending_renewal(renewal: &mut Option<PendingRenewal<'_>>) -> Renewed {
    match renewal {
        Some(r) => r.await,
        None => std::future::pending().await,
    }
}

/// Publish one message to where its key goes now, retrying until confirmed; then ack the ingress.
/// A message the destination refuses for good ([`BrokerError::Refused`]) is parked in the old
/// broker's dead-letter queue when the plan names one, then acked; without one it is retried
/// like any other (never dropped), reported once. Answers the key, whose next message may go.
async fn forward(key: String, delivery: Delivery, shared: &Shared) -> Done {
    let Shared {
        settings,
        brokers,
        router,
        metrics,
    } = shared;
    let mut backoff = Duration::from_millis(100);
    let first_attempt_ms = crate::time::now_ms();
    let mut attempts: u32 = 0;
    let mut reported = Reported::default();
    metrics.check_ingress(&delivery.message, delivery.stale_facts());
    loop {
        let route = router.route(&key);
        let side = route.target;
        let mut message = stamped(&delivery.message, &route, settings);
        // Kafka partitions by the record key, which the adapter takes from `x-qm-key`: without
        // it a key's messages would spread over partitions and lose their order there.
        if brokers.side(side).kind() == crate::brokers::Kind::Kafka
            && message.header(crate::brokers::HEADER_KEY).is_none()
        {
            message
                .headers
                .insert(crate::brokers::HEADER_KEY.to_string(), key.clone());
        }
        attempts = attempts.saturating_add(1);
        let attempt = metrics.forwarded(side);
        let published = brokers
            .side(side)
            .publish(settings.queue(side), &message)
            .await;
        attempt.settled(published.is_ok());
        let error = match published {
            Ok(()) => {
                metrics.published(settings.broker_name(side), producer_of(&delivery.message));
                ack_ingress(delivery, metrics).await;
                return key;
            }
            Err(e) => e,
        };
        if !error.is_refused() {
            tracing::warn!(
                "publish to {} ({}) failed, retrying in {backoff:?}: {error}",
                settings.queue(side),
                side.as_str()
            );
        } else if let Some(dlq) = settings.dead_letter.as_deref() {
            if !reported.refused {
                reported.refused = true;
                metrics.refused(side);
            }
            let refusal = Refusal {
                key: &key,
                side,
                error: &error,
                attempts,
                first_attempt_ms,
            };
            if park(dlq, &delivery.message, &refusal, shared, &mut reported).await {
                metrics.dead_lettered(side);
                ack_ingress(delivery, metrics).await;
                return key;
            }
        } else if !reported.refused {
            reported.refused = true;
            metrics.refused(side);
            tracing::error!(
                "the {} broker refuses a message of key {key:?} for good, so the bridge retries it \
                 and the key's later messages wait (nothing is dropped: it stays unacked on {}): \
                 {error}. Set brokers.old.dead_letter in the plan so that refused messages are \
                 parked there (then `migrate plan apply` and restart the bridge), or fix the \
                 destination (e.g. raise the NATS server's max_payload)",
                side.as_str(),
                settings.ingress
            );
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// What one forward has already reported, so that a message retried for good logs once.
#[derive(Default)]
struct Reported {
    /// The destination's refusal (counted in `queue_migrate_bridge_refused_total`).
    refused: bool,
    /// The dead-letter queue's refusal of the envelope.
    park_refused: bool,
}

/// A message the destination refused for good, and what the dead letter says of it.
struct Refusal<'a> {
    key: &'a str,
    side: Side,
    error: &'a BrokerError,
    attempts: u32,
    first_attempt_ms: i64,
}

/// Publish the dead letter of a refused message to `dlq` on the old broker; whether it was
/// confirmed (only then may the ingress message be acked).
async fn park(
    dlq: &str,
    original: &Message,
    refusal: &Refusal<'_>,
    shared: &Shared,
    reported: &mut Reported,
) -> bool {
    let letter = dead_letter::message(
        original,
        &refusal.error.to_string(),
        refusal.attempts,
        refusal.first_attempt_ms,
        crate::time::now_ms(),
    );
    // A missing queue is created (a RabbitMQ publish to none is returned, for good); one that
    // exists is left as it is, and one declared with other arguments (a quorum queue) answers
    // an error that does not stop the publish.
    if let Err(e) = shared.brokers.old.declare(dlq).await {
        tracing::debug!("declaring the dead-letter queue {dlq}: {e}");
    }
    match shared.brokers.old.publish(dlq, &letter).await {
        Ok(()) => {
            tracing::warn!(
                "the {} broker refuses a message of key {:?} for good: dead-lettered to {dlq} on \
                 the old broker after {} attempt(s) (`migrate dlq triage`, errorClass {}): {}",
                refusal.side.as_str(),
                refusal.key,
                refusal.attempts,
                dead_letter::ERROR_CLASS,
                refusal.error
            );
            true
        }
        Err(e) if e.is_refused() => {
            if !reported.park_refused {
                reported.park_refused = true;
                tracing::error!(
                    "the {} broker refuses a message of key {:?} for good ({}), and the dead-letter \
                     queue {dlq} refuses its envelope too ({e}): the message stays unacked on {} \
                     and its key waits; fix the destination (e.g. raise the NATS server's \
                     max_payload) or the dead-letter queue",
                    refusal.side.as_str(),
                    refusal.key,
                    refusal.error,
                    shared.settings.ingress
                );
            }
            false
        }
        Err(e) => {
            tracing::warn!(
                "cannot dead-letter a refused message of key {:?} to {dlq} (retrying): {e}",
                refusal.key
            );
            false
        }
    }
}

/// Ack an ingress message whose publish (or dead letter) was confirmed.
async fn ack_ingress(delivery: Delivery, metrics: &BridgeMetrics) {
    if let Err(e) = delivery.ack().await {
        tracing::warn!("ingress ack failed after the confirm (will come again): {e}");
        metrics.ack_error();
    }
}

/// The producer name in the stamp: the producer's own, when it stamped the message, else
/// `bridge`.
fn producer_of(message: &Message) -> &str {
    message
        .header(HEADER_PRODUCER)
        .filter(|p| !p.is_empty())
        .unwrap_or("bridge")
}

/// The forwarded message: the original headers and payload, plus the route stamp of the bridge.
fn stamped(original: &Message, route: &crate::routing::Route, settings: &Settings) -> Message {
    let mut message = original.clone();
    let at_ms = crate::time::now_ms();
    let producer = producer_of(original);
    match RouteStamp::new(route, settings.broker_name(route.target), producer, at_ms) {
        Ok(stamp) => {
            for (name, value) in stamp.bridged().headers() {
                message.headers.retain(|k, _| !k.eq_ignore_ascii_case(name));
                message.headers.insert(name.to_string(), value);
            }
        }
        Err(e) => tracing::warn!("cannot stamp the message: {e}"),
    }
    message
}
