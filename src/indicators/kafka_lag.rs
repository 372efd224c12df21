//! The `kafka_lag` source: a consumer group's lag per topic and partition, read from the Kafka
//! cluster itself (committed offset vs high watermark: the group coordinator and the partition
//! leaders answer), so a drain gate on a Kafka old side needs no exporter.
//!
//! A reading is a set of samples named as kafka-exporter names them,
//! `kafka_consumergroup_lag{consumergroup="G",topic="T",partition="N"}`, and a gate's query is
//! the `scrape:` query language over that one reading: `kafka_consumergroup_lag{topic="orders"}`
//! is the topic's total lag, `max(kafka_consumergroup_lag)` the largest partition's. A plan that
//! moves to a Prometheus with kafka-exporter keeps its queries (wrapped in `sum(...)`).
//! `rate()` and `increase()` need a history and have none here: such a query is "no data".
//!
//! [`samples`] and [`evaluate`] are pure; [`read`] is the IO (feature `kafka`: without it, a
//! reading is unavailable and says so).

use crate::indicators::cause::{NoDataCause, Unread};
use crate::indicators::exposition::Sample;
use crate::indicators::history::History;
use crate::indicators::query::parse_query;

/// The metric a reading's samples carry (kafka-exporter's name).
pub const LAG_METRIC: &str = "kafka_consumergroup_lag";

/// One partition's lag: `(topic, partition, lag)`.
pub type Lag = (String, i32, u64);

/// The metric of each topic's partition count in a reading (kafka-exporter's name): a guard
/// `kafka_topic_partitions{topic="orders"}` with `pass_if: "== 12"` breaches when partitions
/// are added during the migration (which moves keys to other partitions).
pub const PARTITIONS_METRIC: &str = "kafka_topic_partitions";

/// The samples of one reading of `group`: each partition's lag, and each topic's partition
/// count (the partitions the reading saw).
pub fn samples(group: &str, lags: &[Lag]) -> Vec<Sample> {
    let mut out: Vec<Sample> = lags
        .iter()
        .map(|(topic, partition, lag)| Sample {
            name: LAG_METRIC.to_string(),
            labels: vec![
                ("consumergroup".to_string(), group.to_string()),
                ("topic".to_string(), topic.clone()),
                ("partition".to_string(), partition.to_string()),
            ],
            value: *lag as f64,
            timestamp_ms: None,
        })
        .collect();
    let mut counts: std::collections::BTreeMap<&str, usize> = std::collections::BTreeMap::new();
    for (topic, _, _) in lags {
        *counts.entry(topic.as_str()).or_default() += 1;
    }
    out.extend(counts.into_iter().map(|(topic, n)| Sample {
        name: PARTITIONS_METRIC.to_string(),
        labels: vec![("topic".to_string(), topic.to_string())],
        value: n as f64,
        timestamp_ms: None,
    }));
    out
}

/// `query` over one reading's `samples`, taken at `now_ms`.
///
/// # Errors
/// A sentence: the query does not parse, or it has no data in the reading (no series matches,
/// a `rate()` over one reading).
pub fn evaluate(query: &str, samples: &[Sample], now_ms: i64) -> Result<f64, Unread> {
    let q = parse_query(query).map_err(|e| Unread::new(NoDataCause::Unusable, e.to_string()))?;
    let mut history = History::new();
    history.record(now_ms, samples, &q.selectors());
    q.evaluate(&history, now_ms)
        .map(|r| r.value)
        .map_err(|e| Unread::new(e.cause, e.reason))
}

/// The partition with the largest lag among those a gate's query selects: shown beside the
/// gate's value (which is usually their sum), so that one stuck partition is seen in `status`,
/// the console and `/metrics` without a gate per partition.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LargestPartition {
    pub topic: String,
    pub partition: i32,
    pub lag: u64,
}

impl LargestPartition {
    /// How `status` writes it: `max 900 on orders/3`.
    pub fn text(&self) -> String {
        format!(
            "max {} on {}/{}",
            thousands(self.lag),
            self.topic,
            self.partition
        )
    }
}

/// `1,234`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The largest lag among the partitions of `lags` that `query`'s lag selectors pick (of two
/// equal lags, the first topic and partition in order); `None` when the query does not parse
/// or selects no partition's lag (a `kafka_topic_partitions` guard).
pub fn largest(query: &str, group: &str, lags: &[Lag]) -> Option<LargestPartition> {
    let q = parse_query(query).ok()?;
    let selectors: Vec<_> = q
        .selectors()
        .into_iter()
        .filter(|s| s.metric == LAG_METRIC)
        .collect();
    lags.iter()
        .zip(samples(group, lags))
        .filter(|(_, sample)| selectors.iter().any(|s| s.matches(sample)))
        .map(|(lag, _)| lag)
        .min_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)).then(a.1.cmp(&b.1)))
        .map(|(topic, partition, lag)| LargestPartition {
            topic: topic.clone(),
            partition: *partition,
            lag: *lag,
        })
}

/// Reads `group`'s lag on each of `topics` from the cluster at `url` (`kafka://host:port,...`,
/// with its security settings: [`crate::brokers::KafkaUrl`]).
///
/// # Errors
/// A sentence naming what failed: the URL, a topic the cluster does not know, no answer within
/// the request timeout, or (built without the `kafka` feature) that this build cannot.
#[cfg(feature = "kafka")]
pub async fn read(url: &str, group: &str, topics: &[String]) -> Result<Vec<Lag>, String> {
    // Read once here so that a malformed URL is one error, not one per topic.
    crate::brokers::KafkaUrl::parse(url)?;
    let (url, group, topics) = (url.to_string(), group.to_string(), topics.to_vec());
    let task = tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        for topic in &topics {
            let lags = crate::brokers::group_lag(&url, &group, topic)
                .map_err(|e| format!("topic {topic}: {e}"))?;
            out.extend(lags.iter().map(|p| (topic.clone(), p.partition, p.lag())));
        }
        Ok(out)
    });
    task.await
        .map_err(|e| format!("the lag reader failed: {e}"))?
}

/// Without the `kafka` feature: always unavailable, saying why.
///
/// # Errors
/// Always.
#[cfg(not(feature = "kafka"))]
pub async fn read(_url: &str, _group: &str, _topics: &[String]) -> Result<Vec<Lag>, String> {
    Err(
        "this migrate was built without the `kafka` feature: it cannot read a kafka_lag source \
         (build with `--features kafka`, or read the lag from Prometheus and kafka-exporter)"
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading() -> Vec<Sample> {
        samples(
            "workers",
            &[
                ("orders".into(), 0, 3),
                ("orders".into(), 1, 0),
                ("orders".into(), 2, 9),
                ("audit".into(), 0, 5),
            ],
        )
    }

    #[test]
    fn queries_sum_pick_and_max_partitions() {
        let s = reading();
        assert_eq!(
            evaluate(r#"kafka_consumergroup_lag{topic="orders"}"#, &s, 1_000),
            Ok(12.0)
        );
        assert_eq!(evaluate("kafka_consumergroup_lag", &s, 1_000), Ok(17.0));
        assert_eq!(evaluate("max(kafka_consumergroup_lag)", &s, 1_000), Ok(9.0));
        assert_eq!(
            evaluate(
                r#"kafka_consumergroup_lag{topic="orders",partition="1"}"#,
                &s,
                1_000
            ),
            Ok(0.0)
        );
    }

    /// Regression (issue 57): partitions added to a topic during a migration (keys move to
    /// other partitions) were not seen; a reading now carries each topic's partition count.
    #[test]
    fn a_reading_counts_each_topics_partitions_for_a_growth_guard() {
        let s = reading();
        let q = r#"kafka_topic_partitions{topic="orders"}"#;
        assert_eq!(evaluate(q, &s, 1_000), Ok(3.0));
        assert_eq!(
            evaluate(r#"kafka_topic_partitions{topic="audit"}"#, &s, 1_000),
            Ok(1.0)
        );
        let grown = samples(
            "workers",
            &[
                ("orders".into(), 0, 0),
                ("orders".into(), 1, 0),
                ("orders".into(), 2, 0),
                ("orders".into(), 3, 0),
            ],
        );
        assert_eq!(evaluate(q, &grown, 1_000), Ok(4.0));
        // The lag queries are unchanged by the count beside them.
        assert_eq!(evaluate("kafka_consumergroup_lag", &s, 1_000), Ok(17.0));
    }

    /// Issue 57: a gate summing a topic's lag showed one number; the largest partition's lag
    /// (and which) is now read beside it, among the partitions its query selects.
    #[test]
    fn the_largest_partition_is_among_those_the_query_selects() {
        let lags: Vec<Lag> = vec![
            ("orders".into(), 0, 3),
            ("orders".into(), 1, 0),
            ("orders".into(), 2, 9),
            ("audit".into(), 0, 50),
        ];
        let at = |topic: &str, partition, lag| {
            Some(LargestPartition {
                topic: topic.into(),
                partition,
                lag,
            })
        };
        let orders = r#"kafka_consumergroup_lag{topic="orders"}"#;
        assert_eq!(largest(orders, "workers", &lags), at("orders", 2, 9));
        assert_eq!(
            largest("sum(kafka_consumergroup_lag)", "workers", &lags),
            at("audit", 0, 50)
        );
        assert_eq!(
            largest(
                r#"kafka_consumergroup_lag{consumergroup="other"}"#,
                "workers",
                &lags
            ),
            None
        );
        assert_eq!(largest("kafka_topic_partitions", "workers", &lags), None);
        assert_eq!(largest("kafka_consumergroup_lag{", "workers", &lags), None);
        // Of equal lags, the first topic and partition in order.
        let ties: Vec<Lag> = vec![("b".into(), 1, 4), ("a".into(), 2, 4), ("a".into(), 1, 4)];
        assert_eq!(
            largest("kafka_consumergroup_lag", "g", &ties),
            at("a", 1, 4)
        );
        assert_eq!(
            at("orders", 3, 1_234).map(|l| l.text()).as_deref(),
            Some("max 1,234 on orders/3")
        );
    }

    #[test]
    fn a_query_matching_nothing_or_needing_history_has_no_data() {
        let s = reading();
        assert!(evaluate(r#"kafka_consumergroup_lag{topic="nope"}"#, &s, 1_000).is_err());
        assert!(evaluate("rate(kafka_consumergroup_lag[5m])", &s, 1_000).is_err());
        assert!(evaluate("kafka_consumergroup_lag{", &s, 1_000).is_err());
    }
}
