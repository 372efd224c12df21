//! The database's clock as this process follows it ([`DbClock`]), and the steady clock that
//! durations are measured on while one process runs them ([`DbClock::steady_ms`]).
//!
//! The database's time is sampled at an instant of the monotonic clock
//! ([`std::time::Instant`]); between two samples it is that sample plus the monotonic time
//! elapsed since. A local wall clock that is skewed, or jumps, does not bend it.
//!
//! The database's own clock may step (an NTP correction, a VM restored, a person's `date -s`):
//! two samples whose readings moved more than [`STEP_MS`] apart from the monotonic time
//! between them. [`DbClock::sample`] says so ([`ClockStep`]) and counts it; the followed reading
//! ([`DbClock::now_ms`], what a lease is measured on: the database compares lease ends with
//! its own clock) takes the step, but the steady reading ([`DbClock::steady_ms`], what `observe`,
//! `min_duration` and `for:` are measured on) never runs faster than the monotonic clock and
//! never ahead of the followed reading: a step forward is not taken (the steady reading lags
//! the database's by it from then on, [`DbClock::lag_ms`]), a step back is. A duration measured
//! between two steady readings, or from an instant the database stamped to a steady reading, is
//! never longer than the monotonic time between them (issue 54): a step can lengthen a wait,
//! never shorten it.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use queue_migrate_client::time::{Millis, millis, now_ms};

/// How far two samples of the database's clock may move apart from the monotonic time between
/// them before it is a step (1 s), beyond what the round trips of the two questions allow.
pub const STEP_MS: i64 = 1_000;

/// A step of the database's clock between two samples: how far its readings moved beyond the
/// monotonic time between them (positive: forward).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockStep {
    pub by_ms: i64,
}

/// The database's clock as this process follows it; see the module's doc.
#[derive(Debug, Clone)]
pub struct DbClock(Arc<Mutex<Followed>>);

#[derive(Debug, Clone, Copy)]
struct Followed {
    /// The last sample: the database's reading, anchored at the instant its question was sent.
    db_ms: Millis,
    asked: Instant,
    /// When the last sample's answer came (`None`: no sample yet, the wall clock followed).
    answered: Option<Instant>,
    /// The steady reading: `steady_ms` at `steady_at`, then the monotonic time since.
    steady_ms: Millis,
    steady_at: Instant,
    /// Steps seen since the process started.
    steps: u64,
}

impl Followed {
    fn followed_at(&self, at: Instant) -> Millis {
        self.db_ms.saturating_add(since(self.asked, at))
    }

    fn steady_at(&self, at: Instant) -> Millis {
        self.steady_ms
            .saturating_add(since(self.steady_at, at))
            .min(self.followed_at(at))
    }
}

/// The monotonic time from `from` to `to`, in ms (0 when `to` is earlier).
fn since(from: Instant, to: Instant) -> Millis {
    millis(to.saturating_duration_since(from))
}

impl Default for DbClock {
    fn default() -> Self {
        DbClock::starting_at(now_ms())
    }
}

impl DbClock {
    /// A clock that reads `wall_ms` now (this host's wall clock) until its first
    /// [`DbClock::sample`]: [`DbClock::default`] with the wall clock read by its caller.
    pub fn starting_at(wall_ms: Millis) -> DbClock {
        let now = Instant::now();
        DbClock(Arc::new(Mutex::new(Followed {
            db_ms: wall_ms,
            asked: now,
            answered: None,
            steady_ms: wall_ms,
            steady_at: now,
            steps: 0,
        })))
    }

    fn read(&self) -> Followed {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Now, on the database's clock as last sampled (steps included): what a lease is measured
    /// on.
    pub fn now_ms(&self) -> Millis {
        self.read().followed_at(Instant::now())
    }

    /// Now, on the steady clock: the database's as first sampled, then the monotonic clock, never
    /// ahead of [`DbClock::now_ms`] (a step back is taken, a step forward is not). What
    /// durations are measured on.
    pub fn steady_ms(&self) -> Millis {
        self.steady_ms_at(Instant::now())
    }

    /// [`DbClock::steady_ms`] at the monotonic instant `at` (tests inject instants).
    pub fn steady_ms_at(&self, at: Instant) -> Millis {
        self.read().steady_at(at)
    }

    /// How far the steady reading runs behind the database's as followed (ms, 0 or more):
    /// the forward steps it did not take.
    pub fn lag_ms(&self) -> Millis {
        let f = self.read();
        let now = Instant::now();
        f.followed_at(now).saturating_sub(f.steady_at(now)).max(0)
    }

    /// Steps of the database's clock seen since this clock was made.
    pub fn steps(&self) -> u64 {
        self.read().steps
    }

    /// The database said `db_ms` no earlier than `asked` (the instant the question was sent:
    /// the followed clock errs ahead by the round trip, never behind), and its answer came now.
    /// A step since the last sample is counted and returned.
    pub fn sample(&self, db_ms: Millis, asked: Instant) -> Option<ClockStep> {
        self.sample_at(db_ms, asked, Instant::now())
    }

    /// [`DbClock::sample`] with the instant its answer came (tests inject instants).
    ///
    /// # Guarantees
    /// The steady reading never moves forward by more than the monotonic time elapsed: a step
    /// forward moves only the followed reading.
    pub fn sample_at(&self, db_ms: Millis, asked: Instant, answered: Instant) -> Option<ClockStep> {
        let mut f = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(last_answered) = f.answered else {
            // The first sample: both readings start on the database's clock.
            *f = Followed {
                db_ms,
                asked,
                answered: Some(answered),
                steady_ms: db_ms.saturating_add(since(asked, answered)),
                steady_at: answered,
                steps: f.steps,
            };
            return None;
        };
        // The two readings were taken somewhere within their questions' round trips.
        let moved = db_ms.saturating_sub(f.db_ms);
        let least = since(last_answered, asked);
        let most = since(f.asked, answered);
        let step = if moved > most.saturating_add(STEP_MS) {
            Some(moved - most)
        } else if moved < least.saturating_sub(STEP_MS) {
            Some(moved - least)
        } else {
            None
        }
        .map(|by_ms| ClockStep { by_ms });
        // The steady reading as it stands, kept when the new followed one is not below it.
        let steady = f.steady_at(answered);
        f.db_ms = db_ms;
        f.asked = asked;
        f.answered = Some(answered);
        f.steady_ms = steady.min(f.followed_at(answered));
        f.steady_at = answered;
        if step.is_some() {
            f.steps = f.steps.saturating_add(1);
        }
        step
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const S: i64 = 1_000;

    fn at(base: Instant, ms: u64) -> Instant {
        base + Duration::from_millis(ms)
    }

    /// Regression (issue 54): a +2 min step of the database host's clock let `observe 60s` and
    /// `for: 60s` pass in 10 s: the daemon's clock took the step. The steady clock does not.
    #[test]
    fn a_step_forward_of_the_database_clock_does_not_move_the_steady_clock() {
        let t = Instant::now();
        let c = DbClock::starting_at(0);
        assert_eq!(c.sample_at(1_000_000, t, at(t, 10)), None);
        let mark = c.steady_ms_at(at(t, 10));
        // 5 s later, the database reads 2 min and 5 s later.
        let step = c.sample_at(1_000_000 + 125 * S, at(t, 5_000), at(t, 5_010));
        assert_eq!(
            step,
            Some(ClockStep {
                by_ms: 120 * S - 10
            })
        );
        assert_eq!(c.steps(), 1);
        // 10 s after the mark, 10 s have passed on the steady clock, not 2 min 10 s.
        assert_eq!(c.steady_ms_at(at(t, 10_010)) - mark, 10 * S);
        // The followed reading (the lease's) took the step.
        assert!(c.read().followed_at(at(t, 10_010)) >= 1_000_000 + 130 * S);
        // A later sample without a step: no new step, the steady clock still monotonic.
        assert_eq!(
            c.sample_at(1_000_000 + 135 * S, at(t, 15_000), at(t, 15_010)),
            None
        );
        assert_eq!(c.steps(), 1);
        assert_eq!(c.steady_ms_at(at(t, 20_010)) - mark, 20 * S);
    }

    #[test]
    fn a_step_back_is_taken_and_counted_and_never_runs_the_steady_clock_fast_afterwards() {
        let t = Instant::now();
        let c = DbClock::starting_at(0);
        c.sample_at(1_000_000, t, t);
        let step = c.sample_at(1_000_000 + 5 * S - 60 * S, at(t, 5_000), at(t, 5_000));
        assert_eq!(step, Some(ClockStep { by_ms: -60 * S }));
        let low = c.steady_ms_at(at(t, 5_000));
        assert_eq!(low, 1_000_000 - 55 * S, "a step back is taken");
        // The database's clock is put right again (+60 s): counted, not taken.
        let step = c.sample_at(1_000_000 + 10 * S, at(t, 10_000), at(t, 10_000));
        assert_eq!(step, Some(ClockStep { by_ms: 60 * S }));
        assert_eq!(c.steps(), 2);
        assert_eq!(c.steady_ms_at(at(t, 10_000)) - low, 5 * S);
    }

    #[test]
    fn round_trips_and_drift_under_a_second_are_no_step() {
        let t = Instant::now();
        let c = DbClock::starting_at(0);
        c.sample_at(1_000_000, t, at(t, 5));
        // A slow answer (the database read its clock 1.5 s after the question was sent).
        assert_eq!(
            c.sample_at(1_000_000 + 6_500, at(t, 5_000), at(t, 6_600)),
            None
        );
        // 900 ms of drift.
        assert_eq!(
            c.sample_at(1_000_000 + 11_400, at(t, 10_000), at(t, 10_001)),
            None
        );
        assert_eq!(c.steps(), 0);
    }
}
