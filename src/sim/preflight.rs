//! The demo's preflight: the embedded world's two brokers as the daemon's preflight reads them
//! ([`crate::daemon::preflight`]). They keep whatever they acknowledge (an outage makes them
//! unreachable, never forgetful), on one node each: the demo's plan waives `single_node` (and
//! the one-replica stream that follows from it), so its journal shows the waivers used.

use crate::daemon::preflight_reader::Reader;
use crate::plan::{Broker, Plan};
use crate::preflight::*;

/// The reader the demo's daemon uses.
pub fn reader() -> Reader {
    Reader::new(|plan: Plan| {
        Box::pin(async move {
            let settings = vec![
                simulated(Side::Old, &plan.brokers.old),
                simulated(Side::New, &plan.brokers.new),
            ];
            Preflighted::judge(settings, Vec::new(), &plan.preflight.waivers())
        })
    })
}

/// A simulated broker: one node, keeping what it acknowledges.
fn simulated(side: Side, broker: &Broker) -> BrokerSettings {
    let destination = broker.destination().unwrap_or_default().to_string();
    let detail = match Kind::of_plan_kind(&broker.kind) {
        Some(Kind::Nats) | None => Detail::Nats(NatsSettings {
            stream: destination.clone(),
            storage: Ok("file".into()),
            replicas: Ok(1),
            sync: Ok(NatsSync::Always),
        }),
        Some(Kind::Kafka) => Detail::Kafka(KafkaSettings {
            topic: destination.clone(),
            replication_factor: Ok(1),
            min_insync_replicas: Ok(1),
            unclean_leader_election: Ok(false),
            producer_acks: "all".into(),
        }),
        Some(Kind::RabbitMq) => Detail::RabbitMq(RabbitMqSettings {
            queue: destination.clone(),
            queue_type: Ok("quorum".into()),
            durable: Ok(true),
            publisher_confirms: true,
        }),
        Some(Kind::Redis) => Detail::Redis(RedisSettings {
            appendonly: Ok(true),
            appendfsync: Ok("always".into()),
            replicas: Ok(0),
            publisher_waits: false,
        }),
    };
    BrokerSettings {
        side,
        name: broker.name.clone(),
        destination,
        nodes: Ok(1),
        detail,
    }
}
