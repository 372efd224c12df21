//! Replay: republish dead letters' original payloads, safely (docs/design.md, "Dead letters";
//! the dead-letter article's `replay`).
//!
//! What a run guarantees:
//! - **rate limit** — messages are spaced `1000 / rate` ms apart (drift-free: message *i* goes
//!   at `start + i × interval` at the earliest), so current traffic keeps priority;
//! - **canary** — after the first `canary` messages (default 50), when more remain, the run
//!   stops and hands control back: look at the effect, then run again with `--continue`, which
//!   skips the canary batch and does not pause again. A failure during the canary stops the run
//!   at once ([`Outcome::CanaryFailed`]), so `--continue` (which skips by position) is only ever
//!   offered after a canary that went out whole;
//! - **origin headers** — `x-replay-of` = `deadLetteredAt`, `x-replay-reason` = `errorClass`, so a
//!   failure of a replayed message is a known recurrence, not a new case;
//! - **automatic stop** — once at least `min_sample` messages (default: the canary size) went,
//!   the run aborts as soon as its own failure rate exceeds `abort_failure_rate` (default 0.2);
//! - **validity guard** — an entry first attempted longer than `max_age` ago is refused unless
//!   forced: a 14-month-old stock reservation replayed today debits stock sold long ago. An entry
//!   whose age cannot be computed is refused too (unless forced): the guard cannot vouch for it
//!   ([`ReplayPolicy::judge_age`], the one age check, also run on a whole file before a replay);
//! - **resume point** — every run that stops early says how many leading entries of the selection
//!   are known to have gone out ([`ResumePoint`]): a later run given that number as `skip`
//!   neither loses an entry nor, when no failure came before the stop, sends one twice;
//! - **never twice** — [`run_recorded`] claims each entry in a [`Ledger`] before publishing it
//!   and settles the claim once the outcome is known (flushed, for NDJSON): a later run skips
//!   what went out, and does not send again what was never settled (in doubt). A ledger that
//!   cannot record stops the run before the publish ([`Outcome::NotRecorded`]).
//!
//! [`ReplayMachine`] is the decision logic, pure (time is an argument). [`run`] drives it with a
//! [`Publisher`] and a [`Pacer`] (the clock and sleeping), both traits, so tests run it on a fake
//! clock. [`NdjsonPublisher`] writes each message as one JSON line to any `Write`;
//! `dlq::broker_publisher::BrokerPublisher` publishes it to a migration's brokers.

use std::borrow::Borrow;
use std::collections::BTreeMap;
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
    /// Where it goes cannot be decided (its key cannot be read): it was not published.
    #[error("{0}")]
    Unroutable(String),
    /// The broker did not confirm it, or cannot be reached: it may or may not be stored.
    #[error("not confirmed: {0}")]
    Broker(String),
    /// An earlier message of this key failed in this run: this one was not published, since it
    /// would arrive before that one, which can only be sent again later.
    #[error(
        "an earlier message of key {0:?} failed in this run: not sent, to keep the key's order; \
         run the replay again once the cause is fixed"
    )]
    KeyHeld(String),
    /// The broker cannot be reached (no connection): the message was not sent.
    #[error("not sent, so not confirmed: {0}")]
    Unreachable(String),
}

impl PublishError {
    /// The message certainly did not go out (a later run may send it): everything but a publish
    /// the broker did not confirm ([`PublishError::Broker`]), which may have been stored.
    pub fn certainly_not_sent(&self) -> bool {
        !matches!(self, PublishError::Broker(_))
    }
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
    /// Entries at the start of the selection that an earlier run sent (a [`ResumePoint`]):
    /// skipped, before the canary when `resume` is set too.
    pub skip: u64,
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
            skip: 0,
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

    /// The validity guard: whether an entry first attempted at `first_attempt_ms` (`None`:
    /// unknown) may be replayed at `now_ms`. An age that cannot be computed (unknown, or so far
    /// from now that the difference overflows) is refused like an old one: nobody can vouch for
    /// it. Everything is admitted without a `max_age_ms`, or with `force_old`.
    pub fn judge_age(&self, first_attempt_ms: Option<i64>, now_ms: i64) -> Age {
        let Some(max_age) = self.max_age_ms else {
            return Age::Admitted;
        };
        if self.force_old {
            return Age::Admitted;
        }
        match first_attempt_ms.and_then(|first| now_ms.checked_sub(first)) {
            None => Age::Unknown,
            Some(age_ms) if age_ms > max_age => Age::TooOld { age_ms },
            Some(_) => Age::Admitted,
        }
    }
}

/// What the validity guard says of an entry's age ([`ReplayPolicy::judge_age`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Age {
    /// Young enough, or replayed whatever its age.
    Admitted,
    /// First attempted longer than `max_age_ms` ago.
    TooOld {
        /// How old (ms).
        age_ms: i64,
    },
    /// Its age cannot be computed.
    Unknown,
}

/// Counters of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ReplayStats {
    /// Published.
    pub published: u64,
    /// Failed to publish.
    pub failed: u64,
    /// Not sent because an earlier message of their key failed in this run
    /// ([`PublishError::KeyHeld`]): consequences of that failure, not failures of their own, so
    /// not counted in [`ReplayStats::failure_rate`].
    pub held: u64,
    /// Skipped as sent by an earlier run (`skip`, the canary batch on `--continue`, and what
    /// the [`Ledger`] records as sent).
    pub skipped: u64,
    /// Not sent because an earlier run claimed them in the [`Ledger`] and never learnt whether
    /// they went out ([`Recorded::InDoubt`]).
    pub in_doubt: u64,
}

impl ReplayStats {
    /// Published + failed (held messages were neither sent nor tried).
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
    /// The canary batch went, all of it, and more remain: look, then `--continue`.
    PausedAfterCanary,
    /// A message of the canary batch failed: the run stopped at it.
    CanaryFailed,
    /// The replay's own failure rate passed the threshold.
    Aborted {
        /// The rate when it stopped.
        failure_rate: f64,
    },
    /// The final flush failed: which of this run's messages went out is unknown.
    FlushFailed {
        /// The publisher's error.
        error: String,
    },
    /// An entry is older than `max_age` (nothing after it was published).
    RefusedTooOld {
        /// Its `firstAttemptAt`.
        first_attempt_at: String,
        /// How old (ms).
        age_ms: i64,
    },
    /// The [`Ledger`] could not record what the run was about to send, or that it went out:
    /// the run stopped there (nothing after it was published; before the first claim, nothing
    /// at all).
    NotRecorded {
        /// The ledger's error.
        error: String,
    },
    /// An entry's age cannot be computed (its `firstAttemptAt` does not parse, or is so far from
    /// now that the difference overflows): the validity guard cannot vouch for it.
    RefusedUnknownAge {
        /// Its `firstAttemptAt`, as written.
        first_attempt_at: String,
    },
}

/// Where a later run can start without losing an entry: `skip` leading entries of the same
/// selection are known to have gone out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ResumePoint {
    /// Leading entries of the selection that went out (including those an earlier run sent).
    pub skip: u64,
    /// Entries after them that were published all the same (a run resumed at `skip` sends them
    /// again): those published after the first failure, or, when the final flush failed, every
    /// message of this run.
    pub sent_again: u64,
}

/// What to do with the next entry.
#[derive(Debug, Clone, PartialEq)]
pub enum Admission {
    /// Skip it: an earlier run sent it.
    SkipEarlier,
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
    /// Position (0-based, in the selection) of the first entry that failed.
    first_failure: Option<u64>,
    /// Published after the first failure.
    published_after_failure: u64,
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
            first_failure: None,
            published_after_failure: 0,
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

    /// Leading entries of the selection this run skips.
    fn skip_count(&self) -> u64 {
        let canary = if self.policy.resume {
            self.policy.canary
        } else {
            0
        };
        self.policy.skip.saturating_add(canary)
    }

    /// This run starts with a canary batch.
    fn has_canary(&self) -> bool {
        !self.policy.resume && self.policy.canary > 0
    }

    /// Where a later run can start (see [`ResumePoint`]).
    pub fn resume_point(&self) -> ResumePoint {
        match self.first_failure {
            Some(at) => ResumePoint {
                skip: at,
                sent_again: self.published_after_failure,
            },
            None => ResumePoint {
                skip: self.stats.skipped + self.stats.processed(),
                sent_again: 0,
            },
        }
    }

    /// Decide about the next entry, first attempted at `first_attempt_ms` (`None`: unknown,
    /// written as `first_attempt_at`), at `now_ms`.
    pub fn admit(
        &mut self,
        first_attempt_ms: Option<i64>,
        first_attempt_at: &str,
        now_ms: i64,
    ) -> Admission {
        self.seen += 1;
        if self.seen <= self.skip_count() {
            self.stats.skipped += 1;
            return Admission::SkipEarlier;
        }
        match self.policy.judge_age(first_attempt_ms, now_ms) {
            Age::Admitted => {}
            Age::TooOld { age_ms } => {
                return Admission::Stop(Outcome::RefusedTooOld {
                    first_attempt_at: first_attempt_at.to_string(),
                    age_ms,
                });
            }
            Age::Unknown => {
                return Admission::Stop(Outcome::RefusedUnknownAge {
                    first_attempt_at: first_attempt_at.to_string(),
                });
            }
        }
        let start = *self.started_ms.get_or_insert(now_ms);
        // `as` saturates: a huge slot (a tiny rate) is i64::MAX, and the sum saturates too.
        let slot = self.stats.processed() as f64 * self.policy.interval_ms();
        Admission::Publish {
            not_before_ms: start.saturating_add(slot.ceil() as i64),
        }
    }

    /// Record a message that was not sent because an earlier message of its key failed in this
    /// run. It takes no pacing slot and does not move the failure rate: one failed message of a
    /// key holds every later one of that key, and those are not failures of their own (a key
    /// with many messages must not abort the replay of every other key). The first failure's
    /// position, where a later run resumes, is before it.
    pub fn held(&mut self) {
        self.stats.held += 1;
    }

    /// Record an admitted entry the [`Ledger`] says an earlier run sent: skipped, like those
    /// skipped by position; it takes no pacing slot.
    pub fn sent_earlier(&mut self) {
        self.stats.skipped += 1;
    }

    /// Record an admitted entry the [`Ledger`] holds in doubt: not sent, not a failure of this
    /// run, but no later run may skip it by position.
    pub fn in_doubt(&mut self) {
        self.stats.in_doubt += 1;
        self.first_failure
            .get_or_insert(self.seen.saturating_sub(1));
    }

    /// Record that the message just written could not be flushed: it did not go out whole, and
    /// the run stops (a failure; a later run resumes at it).
    pub fn flush_failed(&mut self) {
        self.stats.failed += 1;
        self.first_failure
            .get_or_insert(self.seen.saturating_sub(1));
    }

    /// Record the result of the message just published; `more` says whether entries remain.
    /// `Some` ends the run.
    pub fn record(&mut self, ok: bool, more: bool) -> Option<Outcome> {
        if ok {
            self.stats.published += 1;
            if self.first_failure.is_some() {
                self.published_after_failure += 1;
            }
        } else {
            self.stats.failed += 1;
            self.first_failure
                .get_or_insert(self.seen.saturating_sub(1));
        }
        let processed = self.stats.processed();
        let in_canary = self.has_canary() && processed <= self.policy.canary;
        // Checked before the pause: `--continue` skips the canary by position, so it may only be
        // offered when every message of the canary went out.
        if in_canary && !ok {
            return Some(Outcome::CanaryFailed);
        }
        if self.has_canary() && processed == self.policy.canary && more {
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
///
/// # Guarantees
/// A line is written whole, in one `write_all`, or not at all as far as this publisher can
/// tell: once a write or a flush failed (a full disk), the output may end in part of a line, so
/// every later publish fails too instead of writing lines after that fragment.
#[derive(Debug)]
pub struct NdjsonPublisher<W> {
    out: W,
    /// A write or flush failed: nothing more is written.
    broken: bool,
}

impl<W: Write + Send> NdjsonPublisher<W> {
    /// Write to `out`.
    pub fn new(out: W) -> Self {
        NdjsonPublisher { out, broken: false }
    }

    fn refuse_if_broken(&self) -> Result<(), PublishError> {
        if self.broken {
            return Err(PublishError::Io(std::io::Error::other(
                "an earlier write to the output failed, so it may end in part of a line: \
                 nothing more is written after it",
            )));
        }
        Ok(())
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
        let value = serde_json::json!({ "payload": message.payload, "headers": headers });
        let mut line = serde_json::to_vec(&value).map_err(std::io::Error::from)?;
        line.push(b'\n');
        self.refuse_if_broken()?;
        let written = self.out.write_all(&line);
        self.broken = written.is_err();
        Ok(written?)
    }

    async fn flush(&mut self) -> Result<(), PublishError> {
        self.refuse_if_broken()?;
        let flushed = self.out.flush();
        self.broken = flushed.is_err();
        Ok(flushed?)
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
    /// Not sent: an earlier message of its key (the string) failed in this run.
    Held(&'a T, &'a str),
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
    /// Where a later run can start.
    pub resume: ResumePoint,
}

/// What a run did to one group's entries (see [`GroupTally`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GroupCount {
    /// Published by this run.
    pub published: u64,
    /// Failed to publish in this run.
    pub failed: u64,
    /// The smallest `firstAttemptAt` of the published entries.
    pub first_seen: Option<String>,
    /// The largest `firstAttemptAt` of the published entries.
    pub last_seen: Option<String>,
    /// Not sent because the [`Ledger`] holds them in doubt.
    pub in_doubt: u64,
}

/// Per group (`K`, e.g. class, version and signature), what a run published and what failed, to
/// decide which groups the run may record as replayed: only those none of whose messages failed.
/// A group with a failure stays open (the drain gate must not pass it) until a later run sends
/// what failed.
#[derive(Debug, Clone)]
pub struct GroupTally<K> {
    groups: BTreeMap<K, GroupCount>,
}

impl<K: Ord> Default for GroupTally<K> {
    fn default() -> Self {
        GroupTally {
            groups: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> GroupTally<K> {
    /// Count `entry` of group `key`: `published`, or failed.
    pub fn observe(&mut self, key: &K, entry: &DeadLetter, published: bool) {
        let count = match self.groups.get_mut(key) {
            Some(c) => c,
            None => self.groups.entry(key.clone()).or_default(),
        };
        if !published {
            count.failed += 1;
            return;
        }
        count.published += 1;
        let at = &entry.first_attempt_at;
        if count.first_seen.as_ref().is_none_or(|f| at < f) {
            count.first_seen = Some(at.clone());
        }
        if count.last_seen.as_ref().is_none_or(|l| at > l) {
            count.last_seen = Some(at.clone());
        }
    }

    /// Count an entry of group `key` the [`Ledger`] holds in doubt: the group stays open.
    pub fn observe_in_doubt(&mut self, key: &K) {
        match self.groups.get_mut(key) {
            Some(c) => c.in_doubt += 1,
            None => {
                self.groups.entry(key.clone()).or_default().in_doubt = 1;
            }
        }
    }

    /// Add what `other` counted (e.g. what the ledger says earlier runs sent).
    pub fn merge(&mut self, other: GroupTally<K>) {
        for (key, o) in other.groups {
            let c = self.groups.entry(key).or_default();
            c.published += o.published;
            c.failed += o.failed;
            c.in_doubt += o.in_doubt;
            if let Some(f) = o.first_seen
                && c.first_seen.as_ref().is_none_or(|mine| f < *mine)
            {
                c.first_seen = Some(f);
            }
            if let Some(l) = o.last_seen
                && c.last_seen.as_ref().is_none_or(|mine| l > *mine)
            {
                c.last_seen = Some(l);
            }
        }
    }

    /// The groups every message of which this run published (none failed, none in doubt), in
    /// key order: what a completed run records as replayed.
    pub fn replayed(&self) -> impl Iterator<Item = (&K, &GroupCount)> {
        self.groups
            .iter()
            .filter(|(_, c)| c.failed == 0 && c.in_doubt == 0 && c.published > 0)
    }

    /// The groups with at least one message that failed to publish or is in doubt, in key
    /// order: not replayed.
    pub fn unfinished(&self) -> impl Iterator<Item = (&K, &GroupCount)> {
        self.groups
            .iter()
            .filter(|(_, c)| c.failed > 0 || c.in_doubt > 0)
    }
}

/// What the [`Ledger`] says about an entry about to be published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Claimed for this run: publish it.
    Claimed,
    /// An earlier run sent it: skip it.
    SentEarlier,
    /// An earlier run claimed it and never learnt whether it went out: not sent again.
    InDoubt,
}

/// Where a run records what it sends (the state store's replay ledger, in `migrate dlq replay`):
/// [`run_recorded`] claims each entry before it publishes it, and settles the claim once it
/// knows. Whatever fails when, a later run never sends an entry twice: a claim that was never
/// settled stays in doubt.
pub trait Ledger<T>: Send {
    /// Before publishing `item` (nothing is sent when this fails).
    fn claim(&mut self, item: &T) -> impl Future<Output = Result<Recorded, String>> + Send;
    /// After: `sent` when it went out (published, and flushed), `false` when it certainly did
    /// not ([`PublishError::certainly_not_sent`]). A publish that may have gone out is not
    /// settled: it stays in doubt.
    fn settle(&mut self, item: &T, sent: bool) -> impl Future<Output = Result<(), String>> + Send;
}

/// Replay `entries` (dead letters, or anything that borrows as one) through `publisher`, paced by
/// `pacer`, calling `on_event` after each message. Records nothing: `migrate dlq replay` runs
/// [`run_recorded`].
pub async fn run<T, I, P, C, F>(
    machine: &mut ReplayMachine,
    entries: I,
    publisher: &mut P,
    pacer: &mut C,
    on_event: F,
) -> ReplaySummary
where
    T: Borrow<DeadLetter>,
    I: IntoIterator<Item = T>,
    P: Publisher,
    C: Pacer,
    F: FnMut(&Event<'_, T>, &ReplayStats),
{
    drive(
        machine,
        entries,
        publisher,
        pacer,
        None::<&mut Unrecorded>,
        on_event,
    )
    .await
}

/// [`run`], each entry claimed in `ledger` before it is published and settled after; every
/// message is flushed before its claim is settled as sent. A ledger that fails stops the run
/// ([`Outcome::NotRecorded`]): a claim that fails before anything was sent leaves nothing sent.
pub async fn run_recorded<T, I, P, C, L, F>(
    machine: &mut ReplayMachine,
    entries: I,
    publisher: &mut P,
    pacer: &mut C,
    ledger: &mut L,
    on_event: F,
) -> ReplaySummary
where
    T: Borrow<DeadLetter>,
    I: IntoIterator<Item = T>,
    P: Publisher,
    C: Pacer,
    L: Ledger<T>,
    F: FnMut(&Event<'_, T>, &ReplayStats),
{
    drive(machine, entries, publisher, pacer, Some(ledger), on_event).await
}

/// The ledger of [`run`]: none.
struct Unrecorded;

impl<T> Ledger<T> for Unrecorded {
    fn claim(&mut self, _: &T) -> impl Future<Output = Result<Recorded, String>> + Send {
        std::future::ready(Ok(Recorded::Claimed))
    }
    fn settle(&mut self, _: &T, _: bool) -> impl Future<Output = Result<(), String>> + Send {
        std::future::ready(Ok(()))
    }
}

async fn drive<T, I, P, C, L, F>(
    machine: &mut ReplayMachine,
    entries: I,
    publisher: &mut P,
    pacer: &mut C,
    mut ledger: Option<&mut L>,
    mut on_event: F,
) -> ReplaySummary
where
    T: Borrow<DeadLetter>,
    I: IntoIterator<Item = T>,
    P: Publisher,
    C: Pacer,
    L: Ledger<T>,
    F: FnMut(&Event<'_, T>, &ReplayStats),
{
    let mut entries = entries.into_iter().peekable();
    let mut outcome = Outcome::Completed;
    // Set when a flush after one message failed (recorded runs only).
    let mut flush_failed = None;
    while let Some(item) = entries.next() {
        let entry: &DeadLetter = item.borrow();
        match machine.admit(
            entry.first_attempt_ms(),
            &entry.first_attempt_at,
            pacer.now_ms(),
        ) {
            Admission::SkipEarlier => continue,
            Admission::Stop(o) => {
                outcome = o;
                break;
            }
            Admission::Publish { not_before_ms } => pacer.sleep_until(not_before_ms).await,
        }
        if let Some(ledger) = ledger.as_deref_mut() {
            match ledger.claim(&item).await {
                Ok(Recorded::Claimed) => {}
                Ok(Recorded::SentEarlier) => {
                    machine.sent_earlier();
                    continue;
                }
                Ok(Recorded::InDoubt) => {
                    machine.in_doubt();
                    continue;
                }
                Err(error) => {
                    outcome = Outcome::NotRecorded { error };
                    break;
                }
            }
        }
        let mut result = publisher.publish(&ReplayMessage::of(entry)).await;
        // Set when the ledger could not settle the claim: the run stops after this message.
        let mut not_recorded = None;
        if let Some(ledger) = ledger.as_deref_mut() {
            // A message counts as out once flushed; one not flushed did not go out whole.
            if result.is_ok()
                && let Err(e) = publisher.flush().await
            {
                flush_failed = Some(e.to_string());
                result = Err(e);
            }
            let settled = match &result {
                Ok(()) => Some(true),
                Err(e) if e.certainly_not_sent() => Some(false),
                // It may have gone out: the claim stays, in doubt.
                Err(_) => None,
            };
            if let Some(sent) = settled
                && let Err(error) = ledger.settle(&item, sent).await
            {
                not_recorded = Some(error);
            }
        }
        if flush_failed.is_some() {
            machine.flush_failed();
            if let Err(e) = &result {
                on_event(&Event::Failed(&item, e), &machine.stats());
            }
            if let Some(error) = not_recorded {
                outcome = Outcome::NotRecorded { error };
                flush_failed = None;
            }
            break;
        }
        let stop = if let Err(PublishError::KeyHeld(key)) = &result {
            machine.held();
            on_event(&Event::Held(&item, key), &machine.stats());
            None
        } else {
            let stop = machine.record(result.is_ok(), entries.peek().is_some());
            match &result {
                Ok(()) => on_event(&Event::Published(&item), &machine.stats()),
                Err(e) => on_event(&Event::Failed(&item, e), &machine.stats()),
            }
            stop
        };
        if let Some(error) = not_recorded {
            outcome = Outcome::NotRecorded { error };
            break;
        }
        if let Some(o) = stop {
            outcome = o;
            break;
        }
    }
    // A flush failure makes every message of this run suspect, whatever the outcome was: after
    // a pause, `--continue` would skip lines that were never written. (A recorded run flushed
    // each message: only the one whose flush failed did not go out.)
    let mut resume = machine.resume_point();
    if let Some(error) = flush_failed {
        outcome = Outcome::FlushFailed { error };
    } else if let Err(e) = publisher.flush().await {
        outcome = Outcome::FlushFailed {
            error: e.to_string(),
        };
        let stats = machine.stats();
        resume = ResumePoint {
            skip: stats.skipped,
            sent_again: stats.published,
        };
    }
    let remaining = entries.count() as u64;
    ReplaySummary {
        outcome,
        stats: machine.stats(),
        remaining,
        resume,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::format_timestamp;

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

    /// Fails the messages whose index is in `fail` (the index of the message in this run), and
    /// the flush when `flush_fails`.
    struct Flaky {
        n: usize,
        fail: fn(usize) -> bool,
        /// Answers [`PublishError::KeyHeld`] for these (the index in this run).
        held: fn(usize) -> bool,
        flush_fails: bool,
        out: NdjsonPublisher<Vec<u8>>,
    }

    impl Publisher for Flaky {
        async fn publish(&mut self, m: &ReplayMessage<'_>) -> Result<(), PublishError> {
            self.n += 1;
            if (self.fail)(self.n - 1) {
                return Err(PublishError::Rejected("nack".into()));
            }
            if (self.held)(self.n - 1) {
                return Err(PublishError::KeyHeld("K".into()));
            }
            self.out.publish(m).await
        }
        async fn flush(&mut self) -> Result<(), PublishError> {
            if self.flush_fails {
                return Err(PublishError::Io(std::io::Error::from(
                    std::io::ErrorKind::BrokenPipe,
                )));
            }
            Ok(())
        }
    }

    /// A disk that takes `room` more bytes, then writes what fits and fails; `room` can grow.
    struct FillingDisk {
        written: Vec<u8>,
        room: usize,
    }

    impl Write for FillingDisk {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.room == 0 {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            let n = buf.len().min(self.room);
            self.written.extend_from_slice(&buf[..n]);
            self.room -= n;
            Ok(n)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Regression: a line whose write failed half way (a full disk) stayed in the output as a
    /// fragment, and once the disk had room again the next line was written right after it:
    /// the consumer of the file read one line of garbage for two messages.
    #[test]
    fn a_line_cut_by_a_full_disk_is_not_followed_by_more_lines() {
        let list = entries(3, 1_000);
        let mut out = NdjsonPublisher::new(FillingDisk {
            written: Vec::new(),
            room: usize::MAX,
        });
        let first = futures_lite_block_on(out.publish(&ReplayMessage::of(&list[0])));
        assert!(first.is_ok());
        let whole = out.out.written.len();
        out.out.room = 10;
        let cut = futures_lite_block_on(out.publish(&ReplayMessage::of(&list[1])));
        assert!(cut.is_err(), "the disk filled");
        out.out.room = usize::MAX;
        let after = futures_lite_block_on(out.publish(&ReplayMessage::of(&list[2])));
        assert!(after.is_err(), "nothing is written after a fragment");
        assert!(futures_lite_block_on(out.flush()).is_err());
        let written = out.into_inner().written;
        assert_eq!(
            written.len(),
            whole + 10,
            "the first line and the fragment only"
        );
    }

    const NOW: i64 = 1_772_445_600_000;

    /// A publisher that fails the messages `fail` picks, answers [`PublishError::KeyHeld`] for
    /// those `held` picks (by index in the run), and fails the flush when `flush_fails`.
    fn flaky(fail: fn(usize) -> bool, held: fn(usize) -> bool, flush_fails: bool) -> Flaky {
        Flaky {
            n: 0,
            fail,
            held,
            flush_fails,
            out: NdjsonPublisher::new(Vec::new()),
        }
    }

    /// A fake clock at [`NOW`] that has not slept.
    fn clock() -> FakeClock {
        FakeClock {
            now: NOW,
            sleeps: Vec::new(),
        }
    }

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
        go_flush(policy, list, fail, false)
    }

    fn go_flush(
        policy: ReplayPolicy,
        list: Vec<DeadLetter>,
        fail: fn(usize) -> bool,
        flush_fails: bool,
    ) -> (ReplaySummary, FakeClock, Vec<u8>) {
        let mut machine = ReplayMachine::new(policy).expect("valid");
        let mut publisher = flaky(fail, |_| false, flush_fails);
        let mut clock = clock();
        let summary = futures_lite_block_on(run(
            &mut machine,
            list,
            &mut publisher,
            &mut clock,
            |_: &Event<'_, DeadLetter>, _| {},
        ));
        (summary, clock, publisher.out.into_inner())
    }

    /// The `x-replay-of` of each line written (which entry it was: `entries` numbers them).
    fn sent(out: &[u8]) -> Vec<String> {
        std::str::from_utf8(out)
            .expect("utf8")
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("json");
                v["headers"]["x-replay-of"]
                    .as_str()
                    .expect("header")
                    .to_string()
            })
            .collect()
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
            (s.stats.published, s.stats.skipped, s.remaining),
            (70, 50, 0)
        );
    }

    #[test]
    fn exactly_the_canary_size_completes() {
        let (s, _, _) = go(ReplayPolicy::default(), entries(50, 1000), |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
    }

    /// Regression: the messages held behind one failed message of their key counted as
    /// failures, so one key with many dead letters aborted the replay of every other key.
    #[test]
    fn messages_held_behind_one_failure_of_their_key_do_not_abort_the_run() {
        let policy = ReplayPolicy {
            canary: 0,
            min_sample: 10,
            ..ReplayPolicy::default()
        };
        let mut machine = ReplayMachine::new(policy).expect("valid");
        // Message 2 fails; 3..=40 are its key's later messages (held); 41..100 go.
        let mut publisher = flaky(|i| i == 2, |i| (3..=40).contains(&i), false);
        let mut clock = clock();
        let mut seen_held = 0;
        let summary = futures_lite_block_on(run(
            &mut machine,
            entries(100, 1000),
            &mut publisher,
            &mut clock,
            |e: &Event<'_, DeadLetter>, _| {
                if let Event::Held(_, key) = e {
                    assert_eq!(*key, "K");
                    seen_held += 1;
                }
            },
        ));
        assert_eq!(summary.outcome, Outcome::Completed);
        assert_eq!(
            (
                summary.stats.published,
                summary.stats.failed,
                summary.stats.held
            ),
            (61, 1, 38)
        );
        assert_eq!(seen_held, 38);
        // A later run starts at the failed message, and sends again what went after it.
        assert_eq!(
            summary.resume,
            ResumePoint {
                skip: 2,
                sent_again: 59
            }
        );
        // Held messages take no pacing slot: 62 sends, 62 slots.
        assert_eq!(clock.sleeps.len(), 100);
        let last = *clock.sleeps.last().expect("slept");
        let interval = ReplayPolicy::default().interval_ms();
        assert_eq!(last, NOW + (61.0 * interval).ceil() as i64);
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
        // During the canary the first failure stops the run (never a pause).
        let (s, _, _) = go(ReplayPolicy::default(), entries(200, 1000), |i| i % 2 == 0);
        assert_eq!(s.outcome, Outcome::CanaryFailed);
        assert_eq!((s.stats.published, s.stats.failed), (0, 1));
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

    /// All `n` entries of `entries(n, _)`, by `x-replay-of`.
    fn all(n: usize, age_ms: i64) -> Vec<String> {
        entries(n, age_ms)
            .into_iter()
            .map(|e| e.dead_lettered_at)
            .collect()
    }

    #[test]
    fn replay_continue_does_not_skip_a_failed_canary_entry() {
        // The canary's 4th message fails: the run stops there instead of pausing, so --continue
        // (which would skip the whole canary batch by position) is never offered.
        let (s, _, out) = go(ReplayPolicy::default(), entries(120, 1000), |i| i == 3);
        assert_eq!(s.outcome, Outcome::CanaryFailed);
        assert_eq!(
            (s.stats.published, s.stats.failed, s.remaining),
            (3, 1, 116)
        );
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 3,
                sent_again: 0
            }
        );
        // Resumed where it says (a new canary, then --continue), every entry goes exactly once.
        let resumed = ReplayPolicy {
            skip: s.resume.skip,
            ..ReplayPolicy::default()
        };
        let (s2, _, out2) = go(resumed.clone(), entries(120, 1000), |_| false);
        assert_eq!(s2.outcome, Outcome::PausedAfterCanary);
        let (s3, _, out3) = go(
            ReplayPolicy {
                resume: true,
                ..resumed
            },
            entries(120, 1000),
            |_| false,
        );
        assert_eq!(s3.outcome, Outcome::Completed);
        assert_eq!(s3.stats.skipped, 53);
        let mut everything = sent(&out);
        everything.extend(sent(&out2));
        everything.extend(sent(&out3));
        assert_eq!(everything, all(120, 1000));
    }

    #[test]
    fn replay_flush_failure_after_the_canary_is_not_a_pause() {
        // The canary's lines sit in a buffer and the flush fails: nothing says they went out, so
        // the run must not offer --continue (which would skip them).
        let (s, _, _) = go_flush(ReplayPolicy::default(), entries(120, 1000), |_| false, true);
        assert!(
            matches!(&s.outcome, Outcome::FlushFailed { error } if error.contains("broken pipe")),
            "{:?}",
            s.outcome
        );
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 0,
                sent_again: 50
            }
        );
        // On a continued run the resume point keeps what the earlier run sent.
        let resume = ReplayPolicy {
            resume: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go_flush(resume, entries(120, 1000), |_| false, true);
        assert!(matches!(s.outcome, Outcome::FlushFailed { .. }));
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 50,
                sent_again: 70
            }
        );
    }

    #[test]
    fn replay_abort_gives_a_resume_point_that_loses_nothing() {
        // No canary, every 4th fails: aborted at 50 with 12 failures, the first at entry 3.
        let policy = ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        };
        let (s, _, out) = go(policy.clone(), entries(200, 1000), |i| i % 4 == 3);
        assert!(matches!(s.outcome, Outcome::Aborted { .. }));
        assert_eq!((s.stats.published, s.stats.failed), (38, 12));
        // Entries 0–2 went; 35 of those after the first failure went too (and go again).
        assert_eq!(
            s.resume,
            ResumePoint {
                skip: 3,
                sent_again: 35
            }
        );
        let (s2, _, out2) = go(
            ReplayPolicy {
                skip: s.resume.skip,
                ..policy
            },
            entries(200, 1000),
            |_| false,
        );
        assert_eq!(s2.outcome, Outcome::Completed);
        let mut everything: std::collections::BTreeSet<String> = sent(&out).into_iter().collect();
        everything.extend(sent(&out2));
        assert_eq!(everything.len(), 200, "no entry lost");
        assert_eq!(sent(&out).len() + sent(&out2).len(), 200 + 35);
        // A run that completes has nothing to resume.
        assert_eq!(s2.resume.skip, 200);
    }

    #[test]
    fn replay_refuses_an_entry_whose_first_attempt_cannot_be_read() {
        let mut list = entries(3, 1000);
        list[1].first_attempt_at = "not a time".into();
        let (s, _, out) = go(ReplayPolicy::default(), list.clone(), |_| false);
        assert_eq!(
            s.outcome,
            Outcome::RefusedUnknownAge {
                first_attempt_at: "not a time".into()
            }
        );
        assert_eq!(sent(&out).len(), 1, "nothing from the unknown one on");
        let forced = ReplayPolicy {
            force_old: true,
            ..ReplayPolicy::default()
        };
        let (s, _, _) = go(forced, list, |_| false);
        assert_eq!(s.outcome, Outcome::Completed);
        // An instant so far away that now − it overflows is an unknown age, not a negative one.
        let mut machine = ReplayMachine::new(ReplayPolicy::default()).expect("valid");
        assert!(matches!(
            machine.admit(Some(i64::MIN), "far", NOW),
            Admission::Stop(Outcome::RefusedUnknownAge { .. })
        ));
        assert!(matches!(
            machine.admit(Some(i64::MIN + 1), "far", NOW),
            Admission::Stop(Outcome::RefusedUnknownAge { .. })
        ));
    }

    /// The one age check: the pre-scan of a file (`dlq::refused`) and [`ReplayMachine::admit`]
    /// both ask [`ReplayPolicy::judge_age`].
    #[test]
    fn the_validity_guard_admits_up_to_max_age_and_refuses_past_it_or_without_an_age() {
        let policy = ReplayPolicy {
            max_age_ms: Some(1000),
            ..ReplayPolicy::default()
        };
        assert_eq!(policy.judge_age(Some(NOW - 1000), NOW), Age::Admitted);
        assert_eq!(
            policy.judge_age(Some(NOW - 1001), NOW),
            Age::TooOld { age_ms: 1001 }
        );
        assert_eq!(policy.judge_age(None, NOW), Age::Unknown);
        assert_eq!(policy.judge_age(Some(i64::MIN), NOW), Age::Unknown);
        let forced = ReplayPolicy {
            force_old: true,
            ..policy.clone()
        };
        assert_eq!(forced.judge_age(None, NOW), Age::Admitted);
        let unbounded = ReplayPolicy {
            max_age_ms: None,
            ..policy
        };
        assert_eq!(unbounded.judge_age(Some(i64::MIN), NOW), Age::Admitted);
    }

    #[test]
    fn replay_pacing_does_not_overflow_at_a_tiny_rate() {
        let policy = ReplayPolicy {
            rate_per_second: 1e-300,
            ..ReplayPolicy::default()
        };
        let mut machine = ReplayMachine::new(policy).expect("valid");
        assert_eq!(
            machine.admit(Some(NOW), "now", NOW),
            Admission::Publish { not_before_ms: NOW }
        );
        assert_eq!(machine.record(true, true), None);
        assert_eq!(
            machine.admit(Some(NOW), "now", NOW),
            Admission::Publish {
                not_before_ms: i64::MAX
            }
        );
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

    /// A ledger in memory: `claims` answers per entry index (by `deadLetteredAt` order), what
    /// was settled, and a claim or settle that fails from a chosen call on.
    #[derive(Default)]
    struct Book {
        /// Answers for the entries an earlier run touched (by `deadLetteredAt`).
        earlier: std::collections::HashMap<String, Recorded>,
        /// The n-th claim (from 0) and every later one fail.
        claim_fails_from: Option<usize>,
        /// The n-th settle (from 0) and every later one fail.
        settle_fails_from: Option<usize>,
        claims: usize,
        settles: usize,
        /// (deadLetteredAt, sent) of each settle that succeeded.
        settled: Vec<(String, bool)>,
    }

    impl Ledger<DeadLetter> for Book {
        async fn claim(&mut self, e: &DeadLetter) -> Result<Recorded, String> {
            self.claims += 1;
            if self.claim_fails_from.is_some_and(|n| self.claims > n) {
                return Err("the store is read-only".into());
            }
            Ok(self
                .earlier
                .get(&e.dead_lettered_at)
                .copied()
                .unwrap_or(Recorded::Claimed))
        }
        async fn settle(&mut self, e: &DeadLetter, sent: bool) -> Result<(), String> {
            self.settles += 1;
            if self.settle_fails_from.is_some_and(|n| self.settles > n) {
                return Err("the store went away".into());
            }
            self.settled.push((e.dead_lettered_at.clone(), sent));
            Ok(())
        }
    }

    fn go_recorded(
        list: Vec<DeadLetter>,
        fail: fn(usize) -> bool,
        flush_fails: bool,
        book: &mut Book,
    ) -> (ReplaySummary, Vec<u8>) {
        let mut machine = ReplayMachine::new(ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        })
        .expect("valid");
        let mut publisher = flaky(fail, |_| false, flush_fails);
        let mut clock = clock();
        let summary = futures_lite_block_on(run_recorded(
            &mut machine,
            list,
            &mut publisher,
            &mut clock,
            book,
            |_: &Event<'_, DeadLetter>, _| {},
        ));
        (summary, publisher.out.into_inner())
    }

    /// Regression: a replay on a store that could not record published every message and only
    /// then failed to record the decision, so a re-run sent them all again.
    #[test]
    fn a_ledger_that_cannot_record_stops_the_run_before_the_first_publish() {
        let mut book = Book {
            claim_fails_from: Some(0),
            ..Book::default()
        };
        let (s, out) = go_recorded(entries(5, 60_000), |_| false, false, &mut book);
        assert!(out.is_empty(), "nothing may be published");
        assert_eq!(s.stats.published, 0);
        assert_eq!(
            s.outcome,
            Outcome::NotRecorded {
                error: "the store is read-only".into()
            }
        );
        assert_eq!(s.resume.skip, 0);
        assert!(book.settled.is_empty());
    }

    #[test]
    fn each_message_is_claimed_before_and_settled_after_and_what_went_out_earlier_is_skipped() {
        let list = entries(6, 60_000);
        let at = |i: usize| list[i].dead_lettered_at.clone();
        let mut book = Book::default();
        book.earlier.insert(at(1), Recorded::SentEarlier);
        book.earlier.insert(at(3), Recorded::InDoubt);
        // The third message this run publishes (entry 4) is refused by the broker.
        let (s, out) = go_recorded(list.clone(), |n| n == 2, false, &mut book);
        assert_eq!(s.outcome, Outcome::Completed);
        assert_eq!(sent(&out), [at(0), at(2), at(5)]);
        assert_eq!((s.stats.skipped, s.stats.in_doubt), (1, 1));
        assert_eq!(
            book.settled,
            [(at(0), true), (at(2), true), (at(4), false), (at(5), true)],
            "a refused message is settled as not sent: a later run sends it"
        );
        // Position 3 (in doubt) is where a run resuming by position starts.
        assert_eq!(s.resume.skip, 3);
    }

    #[test]
    fn a_publish_the_broker_did_not_confirm_stays_in_doubt() {
        struct Unconfirmed;
        impl Publisher for Unconfirmed {
            async fn publish(&mut self, _: &ReplayMessage<'_>) -> Result<(), PublishError> {
                Err(PublishError::Broker("no confirm within 5s".into()))
            }
            async fn flush(&mut self) -> Result<(), PublishError> {
                Ok(())
            }
        }
        let mut machine = ReplayMachine::new(ReplayPolicy {
            canary: 0,
            ..ReplayPolicy::default()
        })
        .expect("valid");
        let mut clock = clock();
        let mut book = Book::default();
        let s = futures_lite_block_on(run_recorded(
            &mut machine,
            entries(2, 60_000),
            &mut Unconfirmed,
            &mut clock,
            &mut book,
            |_: &Event<'_, DeadLetter>, _| {},
        ));
        assert_eq!(s.stats.failed, 2);
        assert_eq!(book.claims, 2);
        assert!(book.settled.is_empty(), "never settled: in doubt");
    }

    #[test]
    fn a_settle_that_fails_stops_the_run_after_the_message_that_went_out() {
        let list = entries(4, 60_000);
        let mut book = Book {
            settle_fails_from: Some(1),
            ..Book::default()
        };
        let (s, out) = go_recorded(list.clone(), |_| false, false, &mut book);
        assert_eq!(
            sent(&out),
            [
                list[0].dead_lettered_at.clone(),
                list[1].dead_lettered_at.clone()
            ]
        );
        assert_eq!(s.stats.published, 2);
        assert!(matches!(s.outcome, Outcome::NotRecorded { .. }), "{s:?}");
        assert_eq!(book.claims, 2, "nothing after it was claimed");
    }

    #[test]
    fn a_recorded_run_settles_a_message_as_sent_only_once_flushed() {
        let mut book = Book::default();
        let (s, _) = go_recorded(entries(3, 60_000), |_| false, true, &mut book);
        assert!(matches!(s.outcome, Outcome::FlushFailed { .. }), "{s:?}");
        assert_eq!(
            book.claims, 1,
            "the run stops at the first flush that fails"
        );
        assert_eq!(book.settled.len(), 1);
        assert!(!book.settled[0].1, "not flushed: not sent");
        assert_eq!((s.stats.published, s.resume.skip), (0, 0));
    }
}
