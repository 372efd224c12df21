//! The migrations' ticks of a leader's rounds, each apart (issue 54; the round itself is
//! [`super::round`]): no migration's slow or silent source, nor a store call of its tick that
//! does not return, delays another's evaluation or its breach action.
//!
//! - Each migration's tick is a task of its own under its own deadline
//!   ([`super::Config::tick_deadline`]); it
//!   commits a transition (a breach's rollback or pause) as soon as its own evaluation is done.
//! - A round waits for its ticks at most its `wait` (the daemon's: one interval); a tick still
//!   running then goes on, and the migration is skipped by the rounds that start meanwhile (it
//!   is never ticked twice at once). Its gate evaluations are committed by the first round that
//!   ends after it finished.
//! - At most [`MAX_TICKS_IN_FLIGHT`] ticks run at once: a few migrations on silent sources hold a
//!   few of them for one source timeout each, never the whole round.
//! - [`Progress`]: when the leader's rounds last completed, for the give-up rule of
//!   [`super::run`]'s renewer: a leader that cannot drive its rounds stops leading.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

use crate::controller::round::RoundBatch;

/// Most migration ticks running at once, over every round in flight. Each waits mostly on its
/// sources and on the store (whose own pool bounds the statements in flight).
pub const MAX_TICKS_IN_FLIGHT: usize = 64;

/// The migrations whose ticks are running, and the gate evaluations of those that finished
/// since the last commit.
#[derive(Debug)]
pub struct Lanes {
    /// By migration: its tick's task (`None` while it is being started).
    running: Mutex<HashMap<String, Option<AbortHandle>>>,
    /// The gate evaluations of the ticks finished since the last commit, by migration.
    done: Mutex<Vec<(String, RoundBatch)>>,
    permits: Arc<Semaphore>,
    /// When the leader's rounds last completed.
    pub progress: Progress,
}

impl Default for Lanes {
    fn default() -> Lanes {
        Lanes {
            running: Mutex::default(),
            done: Mutex::default(),
            permits: Arc::new(Semaphore::new(MAX_TICKS_IN_FLIGHT)),
            progress: Progress::default(),
        }
    }
}

impl Lanes {
    /// Claim `name` for a tick: false when one of its ticks is running still, or finished
    /// after the round's fleet read with its evaluations not committed yet (a tick on that read
    /// would decide on memory older than its own evaluations).
    pub(super) fn claim(&self, name: &str) -> bool {
        let uncommitted = self
            .done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .any(|(done, _)| done == name);
        if uncommitted {
            return false;
        }
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.retain(|_, task| task.as_ref().is_none_or(|t| !t.is_finished()));
        if running.contains_key(name) {
            return false;
        }
        running.insert(name.to_string(), None);
        true
    }

    pub(super) fn started(&self, name: &str, task: AbortHandle) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string(), Some(task));
    }

    pub(super) fn finished(&self, name: &str, batch: RoundBatch) {
        self.done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.to_string(), batch));
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }

    /// Everything finished since the last call, in one batch.
    pub(super) fn take_done(&self) -> RoundBatch {
        let batch = RoundBatch::default();
        let done = std::mem::take(&mut *self.done.lock().unwrap_or_else(PoisonError::into_inner));
        for (_, one) in done {
            batch.absorb(one);
        }
        batch
    }

    /// The turns of the ticks: at most [`MAX_TICKS_IN_FLIGHT`] at once.
    pub(super) fn permits(&self) -> Arc<Semaphore> {
        self.permits.clone()
    }

    /// How many ticks run now.
    pub fn running(&self) -> usize {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.retain(|_, task| task.as_ref().is_none_or(|t| !t.is_finished()));
        running.len()
    }

    /// Stop every tick still running (the daemon stops, or gave its lease up): what it had not
    /// committed is not.
    pub fn abort_all(&self) {
        for (_, task) in self
            .running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
        {
            if let Some(task) = task {
                task.abort();
            }
        }
    }
}

/// When the leader's rounds last completed (this process's monotonic clock).
#[derive(Debug)]
pub struct Progress {
    origin: Instant,
    /// Milliseconds from `origin` to the last completed round (or to the moment the lease was
    /// taken).
    at_ms: AtomicU64,
    /// Whether this daemon gave its lease up for want of completed rounds, and has not led
    /// since.
    gave_up: std::sync::atomic::AtomicBool,
}

impl Default for Progress {
    fn default() -> Progress {
        Progress {
            origin: Instant::now(),
            at_ms: AtomicU64::new(0),
            gave_up: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl Progress {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A round completed now (or the lease was just taken: its rounds start now).
    pub fn mark(&self) {
        self.at_ms.store(self.now_ms(), Ordering::SeqCst);
    }

    /// The lease was taken: its rounds start now.
    pub fn leads(&self) {
        self.gave_up.store(false, Ordering::SeqCst);
        self.mark();
    }

    /// The lease was given up for want of completed rounds (`true`), or another daemon holds
    /// it now (`false`: this one stands by for that reason).
    pub fn give_up(&self, given_up: bool) {
        self.gave_up.store(given_up, Ordering::SeqCst);
    }

    /// Whether the lease was given up for want of completed rounds, and not taken since.
    pub fn gave_up(&self) -> bool {
        self.gave_up.load(Ordering::SeqCst)
    }

    /// Whether the leader has driven no round for too long: none completed for longer than the
    /// lease TTL `ttl` plus one `interval` (rounds start an interval apart).
    pub fn stalled(&self, ttl: Duration, interval: Duration) -> bool {
        self.since() > ttl + interval
    }

    /// How long since the last completed round.
    pub fn since(&self) -> Duration {
        Duration::from_millis(
            self.now_ms()
                .saturating_sub(self.at_ms.load(Ordering::SeqCst)),
        )
    }
}
