//! The decision logic of a run, pure (time is an argument): [`ReplayMachine`], its counters
//! ([`ReplayStats`]), how a run ends ([`Outcome`]) and where a later one starts ([`ResumePoint`]).

use serde::Serialize;

use super::error::ReplayError;
use super::policy::{Age, ReplayPolicy};

/// Counters of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ReplayStats {
    /// Published.
    pub published: u64,
    /// Failed to publish.
    pub failed: u64,
    /// Not sent because an earlier message of their key failed in this run
    /// ([`PublishError::KeyHeld`](super::PublishError::KeyHeld)): consequences of that failure, not failures of their own, so
    /// not counted in [`ReplayStats::failure_rate`].
    pub held: u64,
    /// Skipped as sent by an earlier run (`skip`, the canary batch on `--continue`, and what
    /// the [`Ledger`](super::Ledger) records as sent).
    pub skipped: u64,
    /// Not sent because an earlier run claimed them in the [`Ledger`](super::Ledger) and never learnt whether
    /// they went out ([`Recorded::InDoubt`](super::Recorded::InDoubt)).
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
    /// The [`Ledger`](super::Ledger) could not record what the run was about to send, or that it went out:
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

    /// Record an admitted entry the [`Ledger`](super::Ledger) says an earlier run sent: skipped, like those
    /// skipped by position; it takes no pacing slot.
    pub fn sent_earlier(&mut self) {
        self.stats.skipped += 1;
    }

    /// Record an admitted entry the [`Ledger`](super::Ledger) holds in doubt: not sent, not a failure of this
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
