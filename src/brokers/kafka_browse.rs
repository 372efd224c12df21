//! Reading a Kafka topic without consuming it: [`browse`], what `migrate dlq triage
//! --from-broker` reads a dead-letter topic with.
//!
//! # Guarantees
//! - Read-only. The partitions are *assigned* at their low watermark, never subscribed: the
//!   reader joins no consumer group (no member appears, the topic's own consumers are not
//!   rebalanced) and commits nothing (auto-commit and the offset store are off, and no commit is
//!   made). It carries a group id, [`BROWSE_GROUP`], only because librdkafka assigns no
//!   partition without one ("Local: Unknown group"); that group is never joined and never gets
//!   an offset. Subscribing would be the other way to read, and the wrong one here: a member of
//!   the topic's own group takes partitions from its consumers and its commits move them past
//!   what triage read; a group of its own joins, shows in the cluster's group list, and starts
//!   from its commits rather than the first record kept. `kafka_dead_letters_are_triaged_without_being_consumed`
//!   (tests/integration/brokers/dlq_broker/kafka.rs) checks that neither that group nor the topic's own
//!   has an offset afterwards.
//! - A snapshot: each partition is read from its low watermark up to the high watermark read at
//!   the start; records appended meanwhile are not read (the next triage sees them).
//! - Whole, or an error. A partition is done at the last record of its snapshot or at
//!   librdkafka's end-of-partition event (which also ends one whose last offsets hold no record
//!   a reader gets: transaction markers, records of an open transaction). A partition that
//!   delivers nothing for [`STALL`] before it is done (its leader down, the cluster gone) is an
//!   error naming it and the offset it stopped at: never a shorter answer that looks whole, however
//!   long the whole read takes.
//! - `limit`: at most `limit` records of each partition are read, and the answer is the first
//!   `limit` of them by (timestamp, partition, offset): the oldest, as the records' timestamps
//!   say.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rdkafka::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::error::KafkaError;

use super::Message;
use super::kafka_client::{REQUEST_TIMEOUT, base_config, read_message};
use super::kafka_offsets;
use super::kafka_url::KafkaUrl;

/// The group id of the browsing reader: never joined, never committed to.
pub const BROWSE_GROUP: &str = "queue-migrate-browse";

/// How long a partition not read to its end may deliver nothing before the read fails.
pub(super) const STALL: Duration = REQUEST_TIMEOUT;

/// Where one partition's read stands.
#[derive(Debug)]
struct Partition {
    /// The high watermark when the read started: the offset after the last record to read.
    end: i64,
    /// The next offset expected (the last one read + 1).
    next: i64,
    /// Records read.
    read: usize,
}

/// A read of a snapshot of a topic: which partitions are still open and what was read. No IO
/// and no clock: the caller polls the cluster and says when.
#[derive(Debug)]
struct Reading {
    open: BTreeMap<i32, Partition>,
    /// (timestamp, partition, offset, record).
    got: Vec<(i64, i32, i64, Message)>,
    limit: usize,
    last_progress: Instant,
}

impl Reading {
    /// A read of the partitions `(id, low, high)` at `now`: those holding records (none when
    /// `limit` is 0).
    fn new(partitions: &[(i32, i64, i64)], limit: usize, now: Instant) -> Reading {
        let open = partitions
            .iter()
            .filter(|(_, low, high)| high > low && limit > 0)
            .map(|&(p, low, end)| {
                (
                    p,
                    Partition {
                        end,
                        next: low,
                        read: 0,
                    },
                )
            })
            .collect();
        Reading {
            open,
            got: Vec::new(),
            limit,
            last_progress: now,
        }
    }

    /// The partitions to assign and the offset to start each at.
    fn starts(&self) -> impl Iterator<Item = (i32, i64)> + '_ {
        self.open.iter().map(|(p, part)| (*p, part.next))
    }

    fn done(&self) -> bool {
        self.open.is_empty()
    }

    /// The record at `offset` of `partition`, read at `now`; `message` is called only for a
    /// record kept (of an open partition, below its snapshot's end).
    fn record(
        &mut self,
        partition: i32,
        offset: i64,
        timestamp: i64,
        message: impl FnOnce() -> Message,
        now: Instant,
    ) {
        let Some(part) = self.open.get_mut(&partition) else {
            return;
        };
        self.last_progress = now;
        if offset >= part.end {
            self.open.remove(&partition);
            return;
        }
        part.next = offset + 1;
        part.read += 1;
        self.got.push((timestamp, partition, offset, message()));
        if part.next >= part.end || part.read >= self.limit {
            self.open.remove(&partition);
        }
    }

    /// librdkafka's end-of-partition event for `partition` at `now`.
    fn end_of_partition(&mut self, partition: i32, now: Instant) {
        if self.open.remove(&partition).is_some() {
            self.last_progress = now;
        }
    }

    /// The error of a read still open whose partitions delivered nothing for [`STALL`].
    fn stalled(&self, now: Instant) -> Option<String> {
        if self.done() || now.saturating_duration_since(self.last_progress) < STALL {
            return None;
        }
        let where_: Vec<String> = self
            .open
            .iter()
            .map(|(p, part)| format!("partition {p} at offset {} of {}", part.next, part.end))
            .collect();
        Some(format!(
            "nothing came for {}s from {} (its leader down or unreachable?): not read to its \
             end, so no partial answer",
            STALL.as_secs(),
            where_.join(", ")
        ))
    }

    /// The first `limit` records read, oldest first by (timestamp, partition, offset).
    fn finish(mut self) -> Vec<Message> {
        self.got.sort_by_key(|(t, p, o, _)| (*t, *p, *o));
        self.got
            .into_iter()
            .take(self.limit)
            .map(|(_, _, _, m)| m)
            .collect()
    }
}

/// Up to `limit` records of `topic`, oldest first (see the module documentation).
///
/// # Errors
/// The topic does not exist, the cluster did not answer, or a partition stalled: a sentence
/// naming what.
pub(super) fn browse(url: &KafkaUrl, topic: &str, limit: usize) -> Result<Vec<Message>, String> {
    let consumer: BaseConsumer = base_config(url)
        .set("group.id", BROWSE_GROUP)
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("allow.auto.create.topics", "false")
        .create()
        .map_err(|e| e.to_string())?;
    let parts =
        kafka_offsets::partitions(url, topic)?.ok_or_else(|| format!("no topic {topic:?}"))?;
    let mut watermarks = Vec::with_capacity(parts.len());
    for p in parts {
        let (low, high) = consumer
            .fetch_watermarks(topic, p, REQUEST_TIMEOUT)
            .map_err(|e| format!("watermarks of partition {p}: {e}"))?;
        watermarks.push((p, low, high));
    }
    let mut reading = Reading::new(&watermarks, limit, Instant::now());
    if reading.done() {
        return Ok(Vec::new());
    }
    let mut list = rdkafka::TopicPartitionList::new();
    for (p, from) in reading.starts() {
        list.add_partition_offset(topic, p, rdkafka::Offset::Offset(from))
            .map_err(|e| e.to_string())?;
    }
    consumer.assign(&list).map_err(|e| e.to_string())?;
    while !reading.done() {
        if let Some(e) = reading.stalled(Instant::now()) {
            return Err(e);
        }
        match consumer.poll(Duration::from_millis(200)) {
            None => {}
            Some(Err(KafkaError::PartitionEOF(p))) => reading.end_of_partition(p, Instant::now()),
            Some(Err(e)) => return Err(e.to_string()),
            Some(Ok(m)) => {
                let timestamp = m.timestamp().to_millis().unwrap_or(0);
                let read = || read_message(&m);
                reading.record(m.partition(), m.offset(), timestamp, read, Instant::now());
            }
        }
    }
    Ok(reading.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(n: i64) -> Message {
        Message::new(n.to_string().into_bytes())
    }

    fn payloads(messages: &[Message]) -> Vec<String> {
        let text = |m: &Message| String::from_utf8_lossy(&m.payload).into_owned();
        messages.iter().map(text).collect()
    }

    /// Regression: the read had a total deadline of 10 s and returned what it had by then, so a
    /// large dead-letter topic (or a partition whose leader stopped answering) was triaged short
    /// without a word. A read that goes on making progress now goes on; one that stalls fails.
    #[test]
    fn a_partition_that_stalls_fails_the_read_and_a_slow_one_does_not() {
        let t0 = Instant::now();
        let mut r = Reading::new(&[(0, 0, 1_000), (1, 5, 8)], 10_000, t0);
        let mut now = t0;
        // Records keep coming for much longer than STALL: no error.
        for offset in 0..50 {
            now += STALL / 2;
            assert_eq!(r.stalled(now), None);
            r.record(0, offset, offset, || message(offset), now);
        }
        r.end_of_partition(0, now);
        assert_eq!(r.stalled(now + STALL / 2), None);
        let e = r
            .stalled(now + STALL)
            .expect("partition 1 gave nothing for STALL");
        assert!(e.contains("partition 1 at offset 5 of 8"), "{e}");
        assert!(!e.contains("partition 0"), "{e}");
    }

    #[test]
    fn a_partition_ends_at_its_snapshot_its_end_event_or_the_limit() {
        let t0 = Instant::now();
        let parts = [(0, 0, 2), (1, 0, 9), (2, 3, 3), (3, 0, 5)];
        let mut r = Reading::new(&parts, 3, t0);
        assert_eq!(r.starts().collect::<Vec<_>>(), [(0, 0), (1, 0), (3, 0)]);
        // Partition 0 ends with its last record of the snapshot; a later one is not read.
        r.record(0, 0, 10, || message(0), t0);
        r.record(0, 1, 11, || message(1), t0);
        r.record(0, 2, 1, || panic!("past the snapshot"), t0);
        // Partition 1 at the limit.
        for offset in 0..3 {
            r.record(1, offset, 20 + offset, || message(100 + offset), t0);
        }
        r.record(1, 3, 0, || panic!("past the limit"), t0);
        assert!(!r.done());
        // Partition 3's last offsets hold no record a reader gets: its end event ends it.
        r.record(3, 0, 5, || message(300), t0);
        r.end_of_partition(3, t0);
        assert!(r.done());
        assert_eq!(payloads(&r.finish()), ["300", "0", "1"], "the oldest three");
    }

    #[test]
    fn nothing_to_read_is_done_at_once() {
        let t0 = Instant::now();
        assert!(Reading::new(&[(0, 4, 4)], 10, t0).done());
        assert!(Reading::new(&[(0, 0, 4)], 0, t0).done());
        assert!(Reading::new(&[], 10, t0).finish().is_empty());
    }
}
