//! A consumer group's position on a Kafka topic (blocking librdkafka calls): the partitions of
//! a topic, each one's committed offset and watermarks, and the lag they make. The adapter's
//! `depth` and the controller's `kafka_lag` source read the same numbers.

use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::{Offset, TopicPartitionList};

use super::kafka_client::{REQUEST_TIMEOUT, base_config};
use super::kafka_url::KafkaUrl;

/// One partition of a topic as a consumer group stands on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionLag {
    /// The partition id.
    pub partition: i32,
    /// The group's committed offset (the next record it will read), `None` when it committed
    /// none on this partition.
    pub committed: Option<i64>,
    /// The partition's first offset still stored.
    pub low: i64,
    /// The partition's high watermark: the offset the next record will get.
    pub high: i64,
}

impl PartitionLag {
    /// Records the group has still to read: from its committed offset (or the low watermark
    /// when it committed none, or committed below what retention kept) to the high watermark;
    /// never negative.
    pub fn lag(&self) -> u64 {
        let from = self.committed.unwrap_or(self.low).max(self.low);
        u64::try_from(self.high.saturating_sub(from)).unwrap_or(0)
    }
}

/// The partition ids of `topic`, or `None` when the cluster does not know it.
///
/// # Errors
/// The cluster did not answer within the request timeout.
pub(super) fn partitions(url: &KafkaUrl, topic: &str) -> Result<Option<Vec<i32>>, String> {
    let consumer: BaseConsumer = base_config(url)
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| e.to_string())?;
    let metadata = consumer
        .fetch_metadata(Some(topic), REQUEST_TIMEOUT)
        .map_err(|e| e.to_string())?;
    let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Ok(None);
    };
    if t.error().is_some() || t.partitions().is_empty() {
        return Ok(None);
    }
    Ok(Some(t.partitions().iter().map(|p| p.id()).collect()))
}

/// Each partition of `topic` and its high watermark (the offset its next record gets).
///
/// # Errors
/// The topic does not exist, or the cluster did not answer within the request timeout.
pub(super) fn partition_ends(
    url: &KafkaUrl,
    topic: &str,
) -> Result<std::collections::BTreeMap<u32, u64>, String> {
    let parts = partitions(url, topic)?.ok_or_else(|| format!("no topic {topic:?}"))?;
    let consumer: BaseConsumer = base_config(url)
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| e.to_string())?;
    let mut ends = std::collections::BTreeMap::new();
    for p in parts {
        let (_, high) = consumer
            .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
            .map_err(|e| format!("watermarks of partition {p}: {e}"))?;
        let (Ok(p), Ok(high)) = (u32::try_from(p), u64::try_from(high)) else {
            return Err(format!("partition {p}: high watermark {high}"));
        };
        ends.insert(p, high);
    }
    Ok(ends)
}

/// Per partition of `topic`: `group`'s committed offset and the watermarks, on the cluster of
/// the Kafka URL `url` (a bare `host:port,...` list too; its security settings are used).
///
/// # Errors
/// The URL is malformed, the topic does not exist, or the cluster did not answer within the
/// request timeout.
pub fn group_lag(url: &str, group: &str, topic: &str) -> Result<Vec<PartitionLag>, String> {
    group_lag_at(&KafkaUrl::parse(url)?, group, topic)
}

/// [`group_lag`] with the URL read.
pub(super) fn group_lag_at(
    url: &KafkaUrl,
    group: &str,
    topic: &str,
) -> Result<Vec<PartitionLag>, String> {
    let parts = partitions(url, topic)?.ok_or_else(|| format!("no topic {topic:?}"))?;
    let consumer: BaseConsumer = base_config(url)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| e.to_string())?;
    let mut list = TopicPartitionList::new();
    for p in &parts {
        list.add_partition(topic, *p);
    }
    let committed = consumer
        .committed_offsets(list, REQUEST_TIMEOUT)
        .map_err(|e| format!("committed offsets of group {group:?}: {e}"))?;
    let mut out = Vec::with_capacity(parts.len());
    for p in parts {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
            .map_err(|e| format!("watermarks of partition {p}: {e}"))?;
        let committed = committed
            .find_partition(topic, p)
            .and_then(|e| match e.offset() {
                Offset::Offset(o) if o >= 0 => Some(o),
                _ => None,
            });
        out.push(PartitionLag {
            partition: p,
            committed,
            low,
            high,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(committed: Option<i64>, low: i64, high: i64) -> u64 {
        PartitionLag {
            partition: 0,
            committed,
            low,
            high,
        }
        .lag()
    }

    #[test]
    fn lag_counts_from_the_commit_or_the_first_stored_record() {
        assert_eq!(at(Some(7), 0, 10), 3);
        assert_eq!(at(Some(10), 0, 10), 0);
        assert_eq!(
            at(None, 4, 10),
            6,
            "no commit: everything stored is still to read"
        );
        assert_eq!(
            at(Some(2), 4, 10),
            6,
            "retention removed what the commit points at"
        );
        assert_eq!(
            at(Some(12), 0, 10),
            0,
            "a commit past the end is no negative lag"
        );
        assert_eq!(at(None, 0, 0), 0);
    }
}
