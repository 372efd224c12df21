//! Replay: republish dead letters' original payloads, safely (seed 001's `replay`).
//!
//! The four properties the seed calls non-optional, plus its validity question:
//! - **rate limit** — messages are spaced `1000 / rate` ms apart (drift-free: message *i* goes
//!   at `start + i × interval` at the earliest), so current traffic keeps priority;
//! - **canary** — after the first `canary` messages (default 50), when more remain, the run
//!   stops and hands control back: look at the effect, then run again with `--continue`, which
//!   skips the canary batch and does not pause again;
//! - **origin headers** — `x-replay-of` = `deadLetteredAt`, `x-replay-reason` = `errorClass`, so a
//!   failure of a replayed message is a known recurrence, not a new case;
//! - **automatic stop** — once at least `min_sample` messages (default: the canary size) went,
//!   the run aborts as soon as its own failure rate exceeds `abort_failure_rate` (default 0.2);
//!   as in the seed, the canary pause is checked first;
//! - **validity guard** — an entry first attempted longer than `max_age` ago is refused unless
//!   forced: a 14-month-old stock reservation replayed today debits stock sold long ago.
//!
//! [`ReplayMachine`] is the decision logic, pure (time is an argument). [`run`] drives it with a
//! [`Publisher`] and a [`Pacer`] (the clock and sleeping), both traits, so tests run it on a fake
//! clock. [`NdjsonPublisher`] writes each message as one JSON line to any `Write`.

use std::borrow::Borrow;
use std::future::Future;
use std::io::Write;

use serde::Serialize;

use super::envelope::{DeadLetter, Payload};

/// Errors of this module.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// A policy value out of range.
    #[error("{field}: {message}")]
    Policy {
        /// The option.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
}

/// Why one message could not be published (counted; it does not stop the run by itself).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// Writing failed.
    #[error("write failed: {0}")]
    Io(#[from] std::io::Error),
    /// The broker refused it.
    #[error("rejected: {0}")]
    Rejected(String),
}

/// How to replay.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayPolicy {
    /// Messages per second (> 0).
    pub rate_per_second: f64,
    /// Pause after this many (0: no canary).
    pub canary: u64,
    /// Abort when failed / processed exceeds this.
    pub abort_failure_rate: f64,
    /// Check the failure rate only once this many were processed.
    pub min_sample: u64,
    /// Refuse entries first attempted longer ago than this (ms).
    pub max_age_ms: Option<i64>,
    /// Replay old entries anyway.
    pub force_old: bool,
    /// The canary was looked at: skip it and do not pause.
    pub resume: bool,
}

impl Default for ReplayPolicy {
    fn default() -> Self {
        ReplayPolicy {
            rate_per_second: 20.0,
            canary: 50,
            abort_failure_rate: 0.2,
            min_sample: 50,
            max_age_ms: Some(7 * 86_400_000),
            force_old: false,
            resume: false,
        }
    }
}

impl ReplayPolicy {
    /// Check the values.
    ///
    /// # Errors
    /// [`ReplayError::Policy`].
    pub fn validate(&self) -> Result<(), ReplayError> {
        if !(self.rate_per_second.is_finite() && self.rate_per_second > 0.0) {
            return Err(ReplayError::Policy {
                field: "rate",
                message: format!(
                    "must be a positive number of messages per second, not {}",
                    self.rate_per_second
                ),
            });
        }
        if !(0.0..=1.0).contains(&self.abort_failure_rate) {
            return Err(ReplayError::Policy {
                field: "abort-failure-rate",
                message: format!("must be between 0 and 1, not {}", self.abort_failure_rate),
            });
        }
        if self.max_age_ms.is_some_and(|a| a <= 0) {
            return Err(ReplayError::Policy {
                field: "max-age",
                message: "must be positive".into(),
            });
        }
        Ok(())
    }

    /// Milliseconds between two messages.
    pub fn interval_ms(&self) -> f64 {
        1000.0 / self.rate_per_second
    }
}

/// Counters of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ReplayStats {
    /// Published.
    pub published: u64,
    /// Failed to publish.
    pub failed: u64,
    /// Skipped as the canary of an earlier run (`--continue`).
    pub skipped_canary: u64,
}

impl ReplayStats {
    /// Published + failed.
    pub fn processed(&self) -> u64 {
        self.published + self.failed
    }
    /// failed / processed (0 before anything).
    pub fn failure_rate(&self) -> f64 {
        if self.processed() == 0 {
            0.0
        } else {
            self.failed as f64 / self.processed() as f64
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// Everything selected went.
    Completed,
    /// The canary batch went and more remain: look, then `--continue`.
    PausedAfterCanary,
    /// The replay's own failure rate passed the threshold.
    Aborted {
        /// The rate when it stopped.
        failure_rate: f64,
    },
    /// An entry is older than `max_age` (nothing after it was published).
    RefusedTooOld {
        /// Its `firstAttemptAt`.
        first_attempt_at: String,
        /// How old (ms).
        age_ms: i64,
    },
}

/// What to do with the next entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Skip it: it was in the canary batch of the run being continued.
    SkipCanary,
    /// Publish it, not before this instant (ms).
    Publish {
        /// The earliest instant.
        not_before_ms: i64,
    },
    /// Stop the run.
    Stop(Outcome),
}

/// The decision logic of a run, pure.
#[derive(Debug, Clone)]
pub struct ReplayMachine {
    policy: ReplayPolicy,
    stats: ReplayStats,
    started_ms: Option<i64>,
    seen: u64,
}

impl ReplayMachine {
    /// A machine for `policy`.
    ///
    /// # Errors
    /// The policy is invalid.
    pub fn new(policy: ReplayPolicy) -> Result<ReplayMachine, ReplayError> {
        policy.validate()?;
        Ok(ReplayMachine {
            policy,
            stats: ReplayStats::default(),
            started_ms: None,
            seen: 0,
        })
    }

    /// The counters so far.
    pub fn stats(&self) -> ReplayStats {
        self.stats
    }

    /// The policy.
    pub fn policy(&self) -> &ReplayPolicy {
        &self.policy
    }

    /// Decide about the next entry, first attempted at `first_attempt_ms`, at `now_ms`.
    pub fn admit(
        &mut self,
        first_attempt_ms: i64,
        first_attempt_at: &str,
        now_ms: i64,
    ) -> Admission {
        self.seen += 1;
        if self.policy.resume && self.seen <= self.policy.canary {
            self.stats.skipped_canary += 1;
            return Admission::SkipCanary;
        }
        if let Some(max_age) = self.policy.max_age_ms {
            let age = now_ms - first_attempt_ms;
            if age > max_age && !self.policy.force_old {
                return Admission::Stop(Outcome::RefusedTooOld {
                    first_attempt_at: first_attempt_at.to_string(),
                    age_ms: age,
                });
            }
        }
        let start = *self.started_ms.get_or_insert(now_ms);
        let slot = self.stats.processed() as f64 * self.policy.interval_ms();
        Admission::Publish {
            not_before_ms: start + slot.ceil() as i64,
        }
    }

    /// Record the result of the message just published; `more` says whether entries remain.
    /// `Some` ends the run.
    pub fn record(&mut self, ok: bool, more: bool) -> Option<Outcome> {
        if ok {
            self.stats.published += 1;
        } else {
            self.stats.failed += 1;
        }
        let processed = self.stats.processed();
        if !self.policy.resume && self.policy.canary > 0 && processed == self.policy.canary && more
        {
            return Some(Outcome::PausedAfterCanary);
        }
        if processed >= self.policy.min_sample.max(1)
            && self.stats.failure_rate() > self.policy.abort_failure_rate
        {
            return Some(Outcome::Aborted {
                failure_rate: self.stats.failure_rate(),
            });
        }
        None
    }
}

/// One message to republish: the original payload and the origin headers.
#[derive(Debug, Clone, Copy)]
pub struct ReplayMessage<'a> {
    /// The original body.
    pub payload: &'a Payload,
    /// `x-replay-of` and `x-replay-reason`.
    pub headers: [(&'static str, &'a str); 2],
}

impl<'a> ReplayMessage<'a> {
    /// The message for a dead letter.
    pub fn of(entry: &'a DeadLetter) -> ReplayMessage<'a> {
        ReplayMessage {
            payload: &entry.payload,
            headers: [
                ("x-replay-of", entry.dead_lettered_at.as_str()),
                ("x-replay-reason", entry.error_class.as_str()),
            ],
        }
    }
}

/// Where replayed messages go: a broker adapter, or [`NdjsonPublisher`].
pub trait Publisher: Send {
    /// Publish one message.
    fn publish(
        &mut self,
        message: &ReplayMessage<'_>,
    ) -> impl Future<Output = Result<(), PublishError>> + Send;
    /// Make sure everything published so far is out.
    fn flush(&mut self) -> impl Future<Output = Result<(), PublishError>> + Send;
}

/// Writes `{"payload": ..., "headers": {"x-replay-of": ..., "x-replay-reason": ...}}` lines (the
/// payload in the envelope's form: a string, or `{"base64": ...}`).
#[derive(Debug)]
pub struct NdjsonPublisher<W> {
    out: W,
}

impl<W: Write + Send> NdjsonPublisher<W> {
    /// Write to `out`.
    pub fn new(out: W) -> Self {
        NdjsonPublisher { out }
    }
    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write + Send> Publisher for NdjsonPublisher<W> {
    async fn publish(&mut self, message: &ReplayMessage<'_>) -> Result<(), PublishError> {
        let headers: serde_json::Map<String, serde_json::Value> = message
            .headers
            .iter()
            .map(|(k, v)| {
                (
                    (*k).to_string(),
                    serde_json::Value::String((*v).to_string()),
                )
            })
            .collect();
        let line = serde_json::json!({ "payload": message.payload, "headers": headers });
        serde_json::to_writer(&mut self.out, &line).map_err(std::io::Error::from)?;
        self.out.write_all(b"\n")?;
        Ok(())
    }

    async fn flush(&mut self) -> Result<(), PublishError> {
        self.out.flush()?;
        Ok(())
    }
}

/// The clock and sleeping, for [`run`].
pub trait Pacer: Send {
    /// Now (ms).
    fn now_ms(&self) -> i64;
    /// Wait until `at_ms` (return at once if it passed).
    fn sleep_until(&mut self, at_ms: i64) -> impl Future<Output = ()> + Send;
}

/// What [`run`] reports as it goes (`T` is the item the entries come as).
#[derive(Debug)]
pub enum Event<'a, T> {
    /// Published.
    Published(&'a T),
    /// Failed, and why.
    Failed(&'a T, &'a PublishError),
}

/// The end of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySummary {
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// Counters.
    #[serde(flatten)]
    pub stats: ReplayStats,
    /// Entries selected and not processed (not counted for a refusal, which stops reading).
    pub remaining: u64,
}

/// Replay `entries` (dead letters, or anything that borrows as one) through `publisher`, paced by
/// `pacer`, calling `on_event` after each message.
pub async fn run<T, I, P, C, F>(
    machine: &mut ReplayMachine,
    entries: I,
    publisher: &mut P,
    pacer: &mut C,
    mut on_event: F,
) -> ReplaySummary
where
    T: Borrow<DeadLetter>,
    I: IntoIterator<Item = T>,
    P: Publisher,
    C: Pacer,
    F: FnMut(&Event<'_, T>, &ReplayStats),
{
    let mut entries = entries.into_iter().peekable();
    let mut outcome = Outcome::Completed;
    while let Some(item) = entries.next() {
        let entry: &DeadLetter = item.borrow();
        let first_ms = entry.first_attempt_ms().unwrap_or(i64::MIN);
        match machine.admit(first_ms, &entry.first_attempt_at, pacer.now_ms()) {
            Admission::SkipCanary => continue,
            Admission::Stop(o) => {
                outcome = o;
                break;
            }
            Admission::Publish { not_before_ms } => pacer.sleep_until(not_before_ms).await,
        }
        let result = publisher.publish(&ReplayMessage::of(entry)).await;
        let ok = result.is_ok();
        let stop = machine.record(ok, entries.peek().is_some());
        match &result {
            Ok(()) => on_event(&Event::Published(&item), &machine.stats()),
            Err(e) => on_event(&Event::Failed(&item, e), &machine.stats()),
        }
        if let Some(o) = stop {
            outcome = o;
            break;
        }
    }
    // A flush failure after the last message makes the whole tail suspect: count it.
    if publisher.flush().await.is_err() && outcome == Outcome::Completed {
        outcome = Outcome::Aborted {
            failure_rate: machine.stats().failure_rate(),
        };
    }
    let remaining = entries.count() as u64;
    ReplaySummary {
        outcome,
        stats: machine.stats(),
        remaining,
    }
}

#[cfg(test)]
mod tests {
    use super::super::envelope::format_timestamp;
    use super::*;

    struct FakeClock {
        now: i64,
        sleeps: Vec<i64>,
    }

    impl Pacer for FakeClock {
        fn now_ms(&self) -> i64 {
            self.now
        }
        async fn sleep_until(&mut self, at_ms: i64) {
            self.sleeps.push(at_ms);
            self.now = self.now.max(at_ms);
        }
    }

    /// Fails the messages whose index is in `fail`.
    struct Flaky {
        n: usize,
        fail: fn(usize) -> bool,
        out: NdjsonPublisher<Vec<u8>>,
    }

    impl Publisher for Flaky {
        async fn publish(&mut self, m: &ReplayMessage<'_>) -> Result<(), PublishError> {
            self.n += 1;
            if (self.fail)(self.n - 1) {
                return Err(PublishError::Rejected("nack".into()));
            }
            self.out.publish(m).await
        }
        async fn flush(&mut self) -> Result<(), PublishError> {
            Ok(())
        }
    }

    const NOW: i64 = 1_772_445_600_000;

    fn entries(n: usize, age_ms: i64) -> Vec<DeadLetter> {
        (0..n)
            .map(|i| DeadLetter {
                payload: Payload::Bytes(if i % 2 == 0 { vec![b'a'] } else { vec![0xFF] }),
                error_class: "dependency_timeout".into(),
                error_message: "t".into(),
                consumer_version: "1".into(),
                trace_id: None,
                attempts: 3,
                first_attempt_at: format_timestamp(NOW - age_ms),
                dead_lettered_at: format_timestamp(NOW - age_ms + i as i64),
            })
            .collect()
    }

    fn go(
        policy: ReplayPolicy,
        list: Vec<DeadLetter>,
        fail: fn(usize) -> bool,
    ) -> (ReplaySummary, FakeClock, Vec<u8>) {
        let mut machine = ReplayMachine::new(policy).expect("valid");
        let mut publisher = Flaky {
            n: 0,
            fail,
            out: NdjsonPublisher::new(Vec::new()),
        };
        let mut clock = FakeClock {
            now: NOW,
            sleeps: Vec::new(),
        };
        let summary = futures_lite_block_on(run(
            &mut machine,
            list,
            &mut publisher,
            &mut clock,
            |_: &Event<'_, DeadLetter>, _| {},
        ));
        (summary, clock, publisher.out.into_inner())
    }

    fn futures_lite_block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime")
            .block_on(f)
    }

    #[test]
    fn pauses_after_the_canary_then_continues_without_pausing() {
        let (s, clock, out) = go(ReplayPolicy::default(), entries(120, 3_600_000), |_| false);
        assert_eq!(s.outcome, Outcome::PausedAfterCanary);
        assert_eq!((s.stats.published, s.remaining), (50, 70));
        // 20/s: 50 ms apart, from the start.
        assert_eq!(clock.sleeps[0], NOW);
        assert_eq!(clock.sleeps[49], NOW + 49 * 50);
        let first: serde_json::Value = serde_json::from_str(
            std::str::from_utf8(&out)
                .expect("utf8")
                .lines()
                .next()
                .expect("line"),
        )
        .expect("json");
        assert_eq!(first["headers"]["x-replay-reason"], "dependency_timeout");
        assert_eq!(
            first["headers"]["x-replay-of"],
            format_timestamp(NOW - 3_600_000)
        );
        let second = std::str::from_utf8(&out)
            .expect("utf8")
            .lines()
            .nth(1)
            .expect("line")
            .to_string();
        assert!(
            second.contains(r#""payload":{"base64":"/w=="}"#),
            "{second}"
        );

        let resume = ReplayPolicy {
            resume: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(resume, entries(120, 3_600_000), |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
        assert_eq!(
            (s.stats.published, s.stats.skipped_canary, s.remaining),
            (70, 50, 0)
        );
    }

    #[test]
    fn exactly_the_canary_size_completes() {
        let (s, _, _) = go(ReplayPolicy::default(), entries(50, 1000), |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
    }

    #[test]
    fn aborts_on_its_own_failure_rate_after_the_sample() {
        // Every 4th fails (25% > 20%), no canary: checked from message 50 on.
        let policy = ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(policy, entries(200, 1000), |i| i % 4 == 3);
        assert!(matches!(s.outcome, Outcome::Aborted { failure_rate } if failure_rate > 0.2));
        assert_eq!(s.stats.processed(), 50);
        assert_eq!(s.remaining, 150);
        // During the canary the pause wins, as in the seed.
        let (s, _, _) = go(ReplayPolicy::default(), entries(200, 1000), |i| i % 2 == 0);
        assert_eq!(s.outcome, Outcome::PausedAfterCanary);
        assert_eq!(s.stats.failed, 25);
        // A continued run with the same failures aborts at its own sample.
        let resume = ReplayPolicy {
            resume: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(resume, entries(200, 1000), |i| i % 2 == 0);
        assert!(matches!(s.outcome, Outcome::Aborted { .. }));
    }

    #[test]
    fn refuses_old_entries_unless_forced() {
        let old = 8 * 86_400_000;
        let (s, _, out) = go(ReplayPolicy::default(), entries(3, old), |_| false);
        assert!(matches!(s.outcome, Outcome::RefusedTooOld { age_ms, .. } if age_ms == old));
        assert!(out.is_empty());
        let forced = ReplayPolicy {
            force_old: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(forced, entries(3, old), |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
    }

    #[test]
    fn policy_is_checked() {
        assert!(
            ReplayMachine::new(ReplayPolicy {
                rate_per_second: 0.0,
                ..ReplayPolicy::default()
            })
            .is_err()
        );
        assert!(
            ReplayMachine::new(ReplayPolicy {
                abort_failure_rate: 2.0,
                ..ReplayPolicy::default()
            })
            .is_err()
        );
    }
}
