//! [`BrokerPublisher`]: replay's [`Publisher`] onto a migration's two brokers, each message to
//! the side its key routes to now ([`super::replay_route`]), through the broker adapters.

use crate::brokers::Adapter;
use crate::brokers::from_plan::{self, PlanBrokerError};
use crate::plan::Broker;
use crate::router::Router;
use crate::routing::Side;

use super::replay::{PublishError, Publisher, ReplayMessage};
use super::replay_route::{DedupKey, KeySource, replay_key, route_replay};

/// One side of the migration: the plan's broker, the queue consumers read there, and the adapter
/// once connected.
struct Endpoint {
    broker: Broker,
    queue: String,
    adapter: Option<Adapter>,
}

impl Endpoint {
    /// The adapter, connecting first when there is none yet.
    async fn adapter(&mut self, side: Side) -> Result<&Adapter, PlanBrokerError> {
        let adapter = match self.adapter.take() {
            Some(adapter) => adapter,
            None => from_plan::connect(&self.broker, side).await?,
        };
        Ok(self.adapter.insert(adapter))
    }
}

/// Publishes each replayed message to `brokers.old.queue` or `brokers.new.queue` (or stream) by
/// its key's slice under the routing `router` holds, and returns once the broker confirmed it.
///
/// # Guarantees
/// - A message carries the dedup key `dedup` builds from its payload; one it cannot be built
///   for is an `Err` and is not sent (unless `dedup` is [`DedupKey::Off`]).
/// - A message goes to one side only, the one its key routes to under the router's document at
///   the moment it is published: the side a producer would send it to then.
/// - `publish` returns `Ok` only after the broker's confirm ([`Adapter::publish`]). A message
///   whose key cannot be read, a broker that cannot be reached (each side is connected on its
///   first message, and again on the next one after a failed connect), or a publish that is
///   not confirmed is an `Err` (counted by the replay's failure rate); nothing is retried here.
/// - [`Publisher::flush`] has nothing to do: every message was confirmed one by one.
pub struct BrokerPublisher {
    key: KeySource,
    dedup: DedupKey,
    router: Router,
    old: Endpoint,
    new: Endpoint,
    sent: [u64; 2],
}

impl BrokerPublisher {
    /// A publisher to `old` and `new` (a plan's brokers) and their consumers' queues, routing by
    /// `router` (kept current by the caller), keys found by `key`, dedup keys built by `dedup`.
    /// Connects to nothing yet.
    ///
    /// # Errors
    /// A broker's kind has no adapter, or its URL has no value here: checked before anything is
    /// sent.
    pub fn new(
        key: KeySource,
        dedup: DedupKey,
        router: Router,
        old: (&Broker, &str),
        new: (&Broker, &str),
    ) -> Result<BrokerPublisher, PlanBrokerError> {
        from_plan::resolve(old.0, Side::Old)?;
        from_plan::resolve(new.0, Side::New)?;
        let endpoint = |(broker, queue): (&Broker, &str)| Endpoint {
            broker: broker.clone(),
            queue: queue.to_string(),
            adapter: None,
        };
        Ok(BrokerPublisher {
            key,
            dedup,
            router,
            old: endpoint(old),
            new: endpoint(new),
            sent: [0, 0],
        })
    }

    /// Messages confirmed on `side` so far.
    pub fn sent(&self, side: Side) -> u64 {
        self.sent[side_index(side)]
    }
}

fn side_index(side: Side) -> usize {
    match side {
        Side::Old => 0,
        Side::New => 1,
    }
}

impl Publisher for BrokerPublisher {
    async fn publish(&mut self, message: &ReplayMessage<'_>) -> Result<(), PublishError> {
        let aggregate =
            replay_key(message, &self.key).map_err(|e| PublishError::Unroutable(e.to_string()))?;
        let Some(document) = self.router.document() else {
            return Err(PublishError::Unroutable(
                "no routing document of the migration yet".into(),
            ));
        };
        let at_ms = u64::try_from(crate::time::now_ms()).unwrap_or(0);
        let routed = route_replay(message, &aggregate, &self.dedup, &document, at_ms)
            .map_err(|e| PublishError::Unroutable(e.to_string()))?;
        let side = routed.side;
        let endpoint = match side {
            Side::Old => &mut self.old,
            Side::New => &mut self.new,
        };
        let queue = endpoint.queue.clone();
        let adapter = endpoint
            .adapter(side)
            .await
            .map_err(|e| PublishError::Broker(e.to_string()))?;
        adapter
            .publish(&queue, &routed.message)
            .await
            .map_err(|e| PublishError::Broker(format!("to the {} side: {e}", side.as_str())))?;
        self.sent[side_index(side)] += 1;
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), PublishError> {
        Ok(())
    }
}
