//! [`BrokerPublisher`]: replay's [`Publisher`] onto a migration's two brokers, each message to
//! the side its key routes to now ([`super::replay_route`]), through the broker adapters.

use std::collections::HashSet;

use crate::adapters::from_plan::{self, PlanBrokerError};
use crate::brokers::{Adapter, BrokerError};
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
///   Of those, only an unconfirmed publish may have been stored ([`PublishError::Broker`], in
///   doubt); one the broker refused for itself ([`PublishError::Rejected`]) was not.
/// - A key's messages go out in the order given, and never one after a failed one: once a message
///   of a key fails (whatever the cause, once its key was read), every later message of that key
///   in this run is an `Err` ([`PublishError::KeyHeld`]) and is not sent, since the failed one can
///   only come back after it (a re-run). Other keys go on. The replay counts those apart from
///   failures ([`super::replay::ReplayStats::held`]).
/// - [`Publisher::flush`] has nothing to do: every message was confirmed one by one.
pub struct BrokerPublisher {
    key: KeySource,
    dedup: DedupKey,
    router: Router,
    old: Endpoint,
    new: Endpoint,
    sent: [u64; 2],
    failed_keys: HashSet<String>,
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
            failed_keys: HashSet::new(),
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

impl BrokerPublisher {
    /// Route and publish `message`, whose key is `aggregate`.
    async fn send(
        &mut self,
        message: &ReplayMessage<'_>,
        aggregate: &str,
    ) -> Result<(), PublishError> {
        let Some(document) = self.router.document() else {
            return Err(PublishError::Unroutable(
                "no routing document of the migration yet".into(),
            ));
        };
        let at_ms = crate::time::now_ms();
        let routed = route_replay(message, aggregate, &self.dedup, &document, at_ms)
            .map_err(|e| PublishError::Unroutable(e.to_string()))?;
        let side = routed.side;
        let endpoint = match side {
            Side::Old => &mut self.old,
            Side::New => &mut self.new,
        };
        let queue = endpoint.queue.clone();
        // No connection: certainly not sent (a later run sends it); a publish that is not
        // confirmed may have been stored (in doubt).
        let adapter = endpoint
            .adapter(side)
            .await
            .map_err(|e| PublishError::Unreachable(e.to_string()))?;
        adapter
            .publish(&queue, &routed.message)
            .await
            .map_err(|e| publish_error(side, &e))?;
        self.sent[side_index(side)] += 1;
        Ok(())
    }
}

/// A failed publish to `side` as the replay counts it: a message the broker or its client
/// refused for itself stored nothing ([`BrokerError::Refused`]: a record over Kafka's or NATS's
/// size limit), so it certainly did not go out and a re-run sends it again; any other error may
/// have stored it (in doubt).
fn publish_error(side: Side, e: &BrokerError) -> PublishError {
    let text = format!("to the {} side: {e}", side.as_str());
    if e.is_refused() {
        PublishError::Rejected(text)
    } else {
        PublishError::Broker(text)
    }
}

impl Publisher for BrokerPublisher {
    async fn publish(&mut self, message: &ReplayMessage<'_>) -> Result<(), PublishError> {
        let aggregate =
            replay_key(message, &self.key).map_err(|e| PublishError::Unroutable(e.to_string()))?;
        if self.failed_keys.contains(&aggregate) {
            return Err(PublishError::KeyHeld(aggregate));
        }
        let sent = self.send(message, &aggregate).await;
        if sent.is_err() {
            self.failed_keys.insert(aggregate);
        }
        sent
    }

    async fn flush(&mut self) -> Result<(), PublishError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlq::envelope::{DeadLetter, Payload};
    use crate::plan::Secret;
    use crate::routing::{BrokerNames, RoutingDocument};

    fn dead(payload: &str) -> DeadLetter {
        crate::dlq::envelope::sample_dead_letter(Payload::Bytes(payload.as_bytes().to_vec()))
    }

    /// A RabbitMQ nobody listens for (port 1): every publish to it fails.
    fn down(name: &str) -> Broker {
        Broker {
            name: name.into(),
            kind: "rabbitmq".into(),
            url: Secret::literal("amqp://guest:guest@127.0.0.1:1/%2f"),
            queue: Some("gone".into()),
            stream: None,
            dead_letter: None,
        }
    }

    /// Regression: a message the broker refused for itself (nothing stored) was counted in doubt,
    /// like one whose confirm never came, so a re-run did not send it again.
    #[test]
    fn a_refused_message_certainly_did_not_go_out_and_a_missing_confirm_may_have() {
        let refused = BrokerError::Refused {
            kind: "kafka",
            queue: "orders".into(),
            reason: "Message size too large".into(),
        };
        let e = publish_error(Side::New, &refused);
        assert!(matches!(e, PublishError::Rejected(_)), "{e:?}");
        assert!(e.certainly_not_sent());
        assert!(e.to_string().contains("to the new side"), "{e}");
        let unconfirmed = BrokerError::NotConfirmed {
            kind: "kafka",
            queue: "orders".into(),
            reason: "Local: Message timed out".into(),
        };
        let e = publish_error(Side::Old, &unconfirmed);
        assert!(matches!(e, PublishError::Broker(_)), "{e:?}");
        assert!(!e.certainly_not_sent());
    }

    /// Regression: after v3 of a key failed, v4 of the same key was still published, so v3 could
    /// only come back (on a re-run) after v4.
    #[tokio::test]
    async fn after_a_failed_publish_the_keys_later_messages_are_held_and_other_keys_go_on() {
        let router = Router::builder("orders").slices(8).build();
        router
            .offer(RoutingDocument {
                migration: "orders".into(),
                generation: 1,
                state: "slices".into(),
                step: Some(0),
                paused: false,
                slices_total: 8,
                slices_migrated: 0,
                consume: vec![Side::Old, Side::New],
                brokers: BrokerNames {
                    old: "rabbitmq".into(),
                    new: "nats".into(),
                },
                updated_at: "2026-11-30T00:00:00Z".into(),
            })
            .expect("a document");
        let (old, new) = (down("rabbitmq"), down("nats"));
        let mut publisher = BrokerPublisher::new(
            KeySource::choose(Some("orderId"), None).expect("a key"),
            DedupKey::Off,
            router,
            (&old, "gone"),
            (&new, "gone"),
        )
        .expect("a publisher");
        let v3 = dead(r#"{"orderId":"K","version":3}"#);
        let v4 = dead(r#"{"orderId":"K","version":4}"#);
        let other = dead(r#"{"orderId":"L","version":1}"#);

        let first = publisher.publish(&ReplayMessage::of(&v3)).await;
        assert!(
            matches!(first, Err(PublishError::Unreachable(_))),
            "{first:?}"
        );
        assert!(
            first.as_ref().is_err_and(PublishError::certainly_not_sent),
            "a broker that cannot be reached got nothing: a re-run sends it"
        );
        let second = publisher.publish(&ReplayMessage::of(&v4)).await;
        match second {
            Err(PublishError::KeyHeld(key)) => assert_eq!(key, "K"),
            other => panic!("v4 of K was sent after v3 failed: {other:?}"),
        }
        // Another key is still tried: it fails only because the broker is down.
        let third = publisher.publish(&ReplayMessage::of(&other)).await;
        assert!(
            matches!(third, Err(PublishError::Unreachable(_))),
            "{third:?}"
        );
        assert!(
            PublishError::KeyHeld("K".into())
                .to_string()
                .contains("to keep the key's order")
        );
    }
}
