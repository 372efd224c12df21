//! How to replay ([`ReplayPolicy`]: rate, canary, automatic stop, validity guard) and the one
//! age check ([`Age`]).

use super::error::ReplayError;

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
    /// Entries at the start of the selection that an earlier run sent (a [`ResumePoint`](super::ResumePoint)):
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
