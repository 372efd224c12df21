//! The replay's [`Pacer`] on the wall clock: the instant the run started (ms since the epoch,
//! read once by the caller) plus the monotonic time elapsed since, and tokio's sleep.

use std::time::{Duration, Instant};

use super::replay::Pacer;

/// Paces a replay in real time.
#[derive(Debug, Clone, Copy)]
pub struct TokioPacer {
    base_ms: i64,
    started: Instant,
}

impl TokioPacer {
    /// A pacer whose clock reads `now_ms` now and moves on with the monotonic clock.
    pub fn starting_at(now_ms: i64) -> TokioPacer {
        TokioPacer {
            base_ms: now_ms,
            started: Instant::now(),
        }
    }
}

impl Pacer for TokioPacer {
    fn now_ms(&self) -> i64 {
        self.base_ms + i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX / 2)
    }
    async fn sleep_until(&mut self, at_ms: i64) {
        let wait = at_ms - self.now_ms();
        if wait > 0 {
            tokio::time::sleep(Duration::from_millis(wait.unsigned_abs())).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn sleeps_until_the_instant_and_not_for_one_past() {
        let mut pacer = TokioPacer::starting_at(1_000);
        assert!((1_000..1_100).contains(&pacer.now_ms()));
        let before = tokio::time::Instant::now();
        pacer.sleep_until(0).await;
        assert_eq!(
            before.elapsed(),
            Duration::ZERO,
            "an instant past: no sleep"
        );
        pacer.sleep_until(pacer.now_ms() + 250).await;
        assert!(before.elapsed() >= Duration::from_millis(250));
    }
}
