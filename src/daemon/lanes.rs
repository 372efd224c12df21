//! A leader's round with each migration ticked apart (issue 54): no migration's slow or silent
//! source, nor a store call of its tick that does not return, delays another's evaluation or
//! its breach action.
//!
//! - Each migration's tick is a task of its own under its own deadline ([`tick_deadline`]); it
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

use super::{Config, Shared, tick};
use crate::controller::round::RoundBatch;
use crate::indicators::fetch::Fetcher;
use crate::store::{Fleet, Store, fence};

/// Most migration ticks running at once, over every round in flight. Each waits mostly on its
/// sources and on the store (whose own pool bounds the statements in flight).
pub const MAX_TICKS_IN_FLIGHT: usize = 64;

/// How long one migration's tick may run: its sources' timeout (they are asked all at once)
/// plus [`store_deadline`] for its store calls. A tick cut there changes nothing it had not
/// committed; its gates are evaluated again by the next round.
pub fn tick_deadline(config: &Config) -> Duration {
    config.source_timeout + store_deadline(config)
}

/// How long a round's own store calls (the fleet read, the commit of its gate evaluations) and
/// a tick's may wait in all: a third of the lease TTL (as a lease renewal), at least a second.
/// A call cut there is a failure, its connection dropped, never waited on.
pub fn store_deadline(config: &Config) -> Duration {
    (config.lease_ttl / 3).max(Duration::from_secs(1))
}

/// The migrations whose ticks are running, and the gate evaluations of those that finished
/// since the last commit.
#[derive(Debug)]
pub struct Lanes {
    /// By migration: its tick's task (`None` while it is being started).
    running: Mutex<HashMap<String, Option<AbortHandle>>>,
    done: Mutex<Vec<RoundBatch>>,
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
    /// Claim `name` for a tick: false when one of its ticks is running still.
    fn claim(&self, name: &str) -> bool {
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        running.retain(|_, task| task.as_ref().is_none_or(|t| !t.is_finished()));
        if running.contains_key(name) {
            return false;
        }
        running.insert(name.to_string(), None);
        true
    }

    fn started(&self, name: &str, task: AbortHandle) {
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name.to_string(), Some(task));
    }

    fn finished(&self, name: &str, batch: RoundBatch) {
        self.done
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(batch);
        self.running
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }

    /// Everything finished since the last call, in one batch.
    fn take_done(&self) -> RoundBatch {
        let batch = RoundBatch::default();
        let done = std::mem::take(&mut *self.done.lock().unwrap_or_else(PoisonError::into_inner));
        for one in done {
            batch.absorb(one);
        }
        batch
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

    /// How long since the last completed round.
    pub fn since(&self) -> Duration {
        Duration::from_millis(
            self.now_ms()
                .saturating_sub(self.at_ms.load(Ordering::SeqCst)),
        )
    }
}

/// One round of the leader: read the fleet, start a tick for each migration that has none
/// running, wait for them at most `wait` (`None`: until each is done or cut at its deadline),
/// and commit the gate evaluations of every tick that
/// finished since the last commit. Returns whether the round completed (the fleet read and the
/// commit answered): the renewer's give-up rule counts on it.
pub(super) async fn round<S: Store + Clone + 'static>(
    shared: &Arc<Shared<S>>,
    epoch: Option<i64>,
    wait: Option<Duration>,
) -> bool {
    let deadline = store_deadline(&shared.config);
    let Fleet {
        records,
        mut memory,
    } = match tokio::time::timeout(deadline, shared.store.fleet()).await {
        Ok(Ok(fleet)) => fleet,
        Ok(Err(e)) => {
            tracing::warn!("cannot list migrations: {e}");
            return false;
        }
        Err(_) => {
            tracing::warn!(
                "cannot list migrations: the store did not answer within {}",
                crate::time::human(deadline)
            );
            return false;
        }
    };
    let names: Vec<String> = records.iter().map(|r| r.name.clone()).collect();
    shared.plans.retain(&names);
    let now = shared.now_ms();
    let fetcher = shared
        .fetcher
        .for_round_within(shared.config.source_timeout);
    let mut tasks = Vec::new();
    for record in records {
        let name = record.name.clone();
        if !shared.lanes.claim(&name) {
            tracing::debug!(migration = %name, "its tick of an earlier round still runs: skipped");
            continue;
        }
        let m = memory.remove(&name).unwrap_or_default();
        let read = tick::Read::Fleet(record, m);
        let task = tokio::spawn(fence::in_round(
            epoch,
            one(shared.clone(), fetcher.clone(), read, now),
        ));
        shared.lanes.started(&name, task.abort_handle());
        tasks.push(task);
    }
    match wait {
        Some(wait) => {
            let until = tokio::time::Instant::now() + wait;
            for task in tasks {
                if tokio::time::timeout_at(until, task).await.is_err() {
                    break;
                }
            }
        }
        None => {
            futures_util::future::join_all(tasks).await;
        }
    }
    if !shared.is_leader() {
        // The lease ran out during the round: another daemon may be leading; leave the store
        // to it.
        return false;
    }
    commit(shared, shared.lanes.take_done(), deadline).await
}

/// The tick of one migration, under its own deadline; its gate evaluations left with the lanes
/// for the next commit.
async fn one<S: Store + Clone + 'static>(
    shared: Arc<Shared<S>>,
    fetcher: Fetcher,
    read: tick::Read<'static>,
    now: i64,
) {
    let name = read.name().to_string();
    let batch = RoundBatch::default();
    // Waiting for a turn is not part of the tick's deadline.
    let permit = shared.lanes.permits.clone().acquire_owned().await;
    let limit = tick_deadline(&shared.config);
    let ticked = tokio::time::timeout(
        limit,
        tick::tick_in_round(&shared, &fetcher, Some(&batch), read, now),
    )
    .await;
    drop(permit);
    match ticked {
        Ok(Ok(action)) => tracing::debug!(migration = %name, ?action, "tick"),
        Ok(Err(crate::controller::ControllerError::Store(e))) if super::is_lock_timeout(&e) => {
            super::say_locked(&shared, &name, "this round");
        }
        Ok(Err(e)) => tracing::warn!(migration = %name, "tick failed: {e}"),
        Err(_) => {
            tracing::warn!(
                migration = %name,
                "tick cut at its deadline ({}: the source timeout and the store's): nothing it had not committed was; the next round evaluates it again",
                crate::time::human(limit)
            );
            shared.metrics.tick_cut(&name);
        }
    }
    shared.lanes.finished(&name, batch);
}

/// Commit `batch` (every tick finished since the last commit) within `deadline`: whether it
/// was written.
async fn commit<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    batch: RoundBatch,
    deadline: Duration,
) -> bool {
    let written = batch.commit_or_skip_locked(
        &shared.store,
        Some(&shared.histories),
        super::is_lock_timeout,
    );
    match tokio::time::timeout(deadline, written).await {
        Ok(Ok(skipped)) => {
            for name in skipped {
                super::say_locked(shared, &name, "its gate evaluations");
            }
            true
        }
        Ok(Err(e)) => {
            tracing::warn!(
                "cannot record the round's gate evaluations (the next round goes on from the one before): {e}"
            );
            false
        }
        Err(_) => {
            tracing::warn!(
                "cannot record the round's gate evaluations: the store did not answer within {} (the next round goes on from the one before)",
                crate::time::human(deadline)
            );
            false
        }
    }
}
