//! An in-memory broker with the behaviour that makes migrations hard: at-least-once delivery, a
//! visibility timeout with redelivery, retries with exponential backoff, a dead-letter queue after
//! N attempts, and outages. Pure: time is passed in.

use std::collections::{BTreeMap, VecDeque};

/// A message as the broker carries it.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    /// The business key (`type:aggregate:event`).
    pub key: String,
    pub aggregate: String,
    pub version: u64,
    pub payload: String,
    /// Route stamp: which slice and generation sent it here, and which broker.
    pub slice: u32,
    pub generation: u64,
    /// Route stamp: who published it and when (ms), by its own clock.
    pub producer: &'static str,
    pub at_ms: i64,
    /// The broker's position of this copy (assigned at publish, from 1; 0 before).
    pub position: u64,
    /// A marked synthetic probe (no business effect).
    pub probe: bool,
    /// Delivery attempts so far.
    pub attempts: u32,
}

/// A delivery handed to a consumer: ack or nack it by `tag`.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub tag: u64,
    pub message: Message,
}

/// Why the broker refused an operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    /// The broker is down (an injected outage).
    #[error("broker unreachable")]
    Unreachable,
}

/// Retry and dead-letter policy.
#[derive(Debug, Clone, Copy)]
pub struct Policy {
    pub visibility_timeout_ms: i64,
    pub base_backoff_ms: i64,
    pub max_backoff_ms: i64,
    /// Attempts before a message goes to the dead-letter queue.
    pub max_attempts: u32,
}

/// One broker with one queue and its dead-letter queue.
#[derive(Debug)]
pub struct Broker {
    pub name: &'static str,
    policy: Policy,
    ready: VecDeque<Message>,
    inflight: BTreeMap<u64, (Message, i64)>,
    delayed: Vec<(i64, Message)>,
    pub dead: Vec<Message>,
    next_tag: u64,
    pub down: bool,
    pub published: u64,
    pub delivered: u64,
    pub redelivered: u64,
}

impl Broker {
    pub fn new(name: &'static str, policy: Policy) -> Broker {
        Broker {
            name,
            policy,
            ready: VecDeque::new(),
            inflight: BTreeMap::new(),
            delayed: Vec::new(),
            dead: Vec::new(),
            next_tag: 1,
            down: false,
            published: 0,
            delivered: 0,
            redelivered: 0,
        }
    }

    /// Publish with confirmation: `Ok` means the broker has it.
    ///
    /// # Errors
    /// [`BrokerError::Unreachable`] during an outage.
    pub fn publish(&mut self, mut message: Message) -> Result<(), BrokerError> {
        if self.down {
            return Err(BrokerError::Unreachable);
        }
        self.published += 1;
        message.position = self.published;
        self.ready.push_back(message);
        Ok(())
    }

    /// The last position assigned (0 before the first publish): what a consumer records at a
    /// routing publish to tell a backlog from what came after.
    pub fn position(&self) -> u64 {
        self.published
    }

    /// Move what is due: expired visibility timeouts back to ready (redelivery), delayed retries
    /// whose backoff elapsed.
    pub fn advance(&mut self, now_ms: i64) {
        let expired: Vec<u64> = self
            .inflight
            .iter()
            .filter(|(_, (_, until))| *until <= now_ms)
            .map(|(tag, _)| *tag)
            .collect();
        for tag in expired {
            if let Some((m, _)) = self.inflight.remove(&tag) {
                self.redelivered += 1;
                self.requeue(m, now_ms);
            }
        }
        let mut due = Vec::new();
        self.delayed.retain(|(at, m)| {
            if *at <= now_ms {
                due.push((*at, m.clone()));
                false
            } else {
                true
            }
        });
        due.sort_by_key(|(at, _)| *at);
        self.ready.extend(due.into_iter().map(|(_, m)| m));
    }

    /// Up to `max` deliveries, each invisible until acked or its visibility timeout passes.
    ///
    /// # Errors
    /// [`BrokerError::Unreachable`] during an outage.
    pub fn receive(&mut self, max: usize, now_ms: i64) -> Result<Vec<Delivery>, BrokerError> {
        if self.down {
            return Err(BrokerError::Unreachable);
        }
        let mut out = Vec::new();
        while out.len() < max {
            let Some(mut m) = self.ready.pop_front() else {
                break;
            };
            m.attempts += 1;
            let tag = self.next_tag;
            self.next_tag += 1;
            self.inflight
                .insert(tag, (m.clone(), now_ms + self.policy.visibility_timeout_ms));
            self.delivered += 1;
            out.push(Delivery { tag, message: m });
        }
        Ok(out)
    }

    /// Done with it. An ack after the visibility timeout expired is lost (the message was already
    /// redelivered): that is how duplicates happen.
    pub fn ack(&mut self, tag: u64) -> bool {
        !self.down && self.inflight.remove(&tag).is_some()
    }

    /// Failed: retry after a backoff, or dead-letter after `max_attempts`.
    pub fn nack(&mut self, tag: u64, now_ms: i64) {
        if self.down {
            return;
        }
        if let Some((m, _)) = self.inflight.remove(&tag) {
            self.requeue(m, now_ms);
        }
    }

    fn requeue(&mut self, m: Message, now_ms: i64) {
        if m.attempts >= self.policy.max_attempts {
            self.dead.push(m);
            return;
        }
        let exp = m.attempts.saturating_sub(1).min(20);
        let backoff = (self.policy.base_backoff_ms << exp).min(self.policy.max_backoff_ms);
        self.delayed.push((now_ms + backoff, m));
    }

    /// Ready + unacked + delayed: what the drain phase waits on.
    pub fn depth(&self) -> usize {
        self.ready.len() + self.inflight.len() + self.delayed.len()
    }

    pub fn ready(&self) -> usize {
        self.ready.len()
    }

    /// Every message the queue holds: ready, unacked and delayed (not the dead letters).
    pub fn queued(&self) -> impl Iterator<Item = &Message> {
        self.ready
            .iter()
            .chain(self.inflight.values().map(|(m, _)| m))
            .chain(self.delayed.iter().map(|(_, m)| m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(key: &str) -> Message {
        Message {
            key: key.into(),
            aggregate: "a".into(),
            version: 1,
            payload: String::new(),
            slice: 0,
            generation: 0,
            producer: "test",
            at_ms: 0,
            position: 0,
            probe: false,
            attempts: 0,
        }
    }

    fn broker() -> Broker {
        Broker::new(
            "old",
            Policy {
                visibility_timeout_ms: 1_000,
                base_backoff_ms: 100,
                max_backoff_ms: 400,
                max_attempts: 3,
            },
        )
    }

    #[test]
    fn unacked_messages_come_back_after_the_visibility_timeout() {
        let mut b = broker();
        b.publish(msg("k")).unwrap();
        let d = b.receive(10, 0).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(b.depth(), 1);
        b.advance(999);
        assert!(b.receive(10, 999).unwrap().is_empty());
        b.advance(1_000);
        // Redelivered after the timeout (backoff 100 ms for a second attempt).
        b.advance(1_100);
        let again = b.receive(10, 1_100).unwrap();
        assert_eq!(again[0].message.attempts, 2);
        // The late ack of the first delivery is lost.
        assert!(!b.ack(d[0].tag));
        assert!(b.ack(again[0].tag));
        assert_eq!(b.depth(), 0);
    }

    #[test]
    fn retries_back_off_then_dead_letter() {
        let mut b = broker();
        b.publish(msg("k")).unwrap();
        let mut now = 0;
        for attempt in 1..=3 {
            b.advance(now);
            let d = b.receive(1, now).unwrap();
            assert_eq!(d.len(), 1, "attempt {attempt}");
            b.nack(d[0].tag, now);
            now += 400;
        }
        assert_eq!(b.dead.len(), 1);
        assert_eq!(b.depth(), 0);
    }

    #[test]
    fn an_outage_refuses_publish_and_receive_but_keeps_messages() {
        let mut b = broker();
        b.publish(msg("k")).unwrap();
        b.down = true;
        assert_eq!(b.publish(msg("j")), Err(BrokerError::Unreachable));
        assert!(b.receive(1, 0).is_err());
        b.down = false;
        assert_eq!(b.receive(5, 0).unwrap().len(), 1);
    }
}
