//! Kafka: the topic's replication factor and resolved configuration, the brokers, and our
//! producer's `acks`.

use rdkafka::admin::{AdminClient, AdminOptions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer as _};

use super::common::Target;
use crate::brokers::kafka_client::{REQUEST_TIMEOUT, base_config, blocking};
use crate::brokers::kafka_url::KafkaUrl;
use crate::preflight::{BrokerSettings, Detail, KafkaSettings, Known};

pub(super) async fn read(t: &Target<'_>) -> Result<BrokerSettings, String> {
    let url = KafkaUrl::parse(t.url)?;
    let topic = t.destination.to_string();
    let (brokers, replication_factor) = {
        let url = url.clone();
        let topic = topic.clone();
        blocking(move || metadata(&url, &topic)).await?
    };
    let admin: AdminClient<DefaultClientContext> = base_config(&url)
        .create()
        .map_err(|e| crate::redact::error(&e))?;
    let options = AdminOptions::new().request_timeout(Some(REQUEST_TIMEOUT));
    let described = admin
        .describe_configs([&ResourceSpecifier::Topic(&topic)], &options)
        .await;
    let entry = |name: &str| -> Known<String> {
        let resources = described
            .as_ref()
            .map_err(|e| format!("DescribeConfigs: {}", crate::redact::error(e)))?;
        let resource = resources
            .iter()
            .find_map(|r| r.as_ref().ok())
            .ok_or_else(|| format!("DescribeConfigs of topic {topic} answered with an error"))?;
        resource
            .get(name)
            .and_then(|e| e.value.clone())
            .ok_or_else(|| format!("the topic's configuration has no {name}"))
    };
    let min_insync_replicas = entry("min.insync.replicas").and_then(|v| {
        v.parse()
            .map_err(|_| format!("min.insync.replicas is {v:?}"))
    });
    let unclean_leader_election = entry("unclean.leader.election.enable").and_then(|v| {
        v.parse()
            .map_err(|_| format!("unclean.leader.election.enable is {v:?}"))
    });
    let producer = crate::brokers::kafka::producer_config(&url);
    Ok(BrokerSettings {
        side: t.side,
        name: t.name.to_string(),
        destination: topic.clone(),
        nodes: Ok(brokers),
        detail: Detail::Kafka(KafkaSettings {
            topic,
            replication_factor,
            min_insync_replicas,
            unclean_leader_election,
            producer_acks: producer.get("acks").unwrap_or("unset").to_string(),
        }),
    })
}

/// The cluster's brokers and the topic's least replica count among its partitions.
fn metadata(url: &KafkaUrl, topic: &str) -> Result<(u32, Known<u32>), String> {
    let consumer: BaseConsumer = base_config(url)
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| e.to_string())?;
    let metadata = consumer
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let brokers = u32::try_from(metadata.brokers().len()).unwrap_or(u32::MAX);
    let replicas = match metadata.topics().iter().find(|t| t.name() == topic) {
        Some(t) if t.error().is_none() && !t.partitions().is_empty() => Ok(t
            .partitions()
            .iter()
            .map(|p| u32::try_from(p.replicas().len()).unwrap_or(u32::MAX))
            .min()
            .unwrap_or(0)),
        _ => Err(format!(
            "no topic {topic} yet: migrate would declare it with the URL's replication (or the broker's default); create it as it should be first"
        )),
    };
    Ok((brokers, replicas))
}
