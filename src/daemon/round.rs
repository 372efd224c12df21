//! A leader's round (issue 54): each migration's tick a task of its own under its own deadline
//! ([`super::lanes`] keeps them), the round waiting for them at most its `wait`, and the gate
//! evaluations of the ticks that finished committed together.

use std::sync::Arc;
use std::time::Duration;

use super::shared::Shared;
use super::tick;
use crate::controller::round::RoundBatch;
use crate::indicators::fetch::Fetcher;
use crate::store::{Fleet, Store, fence};

/// One round of the leader: commit the evaluations of the ticks that finished after the last
/// round's commit (so that the fleet read sees them), read the fleet, start a tick for each
/// migration that has none running, wait for them at most `wait` (`None`: until each is done or
/// cut at its deadline), and commit the gate evaluations of every tick that finished since the
/// last commit. Returns whether the round completed (the fleet read and the commit answered):
/// the renewer's give-up rule counts on it.
pub(super) async fn round<S: Store + Clone + 'static>(
    shared: &Arc<Shared<S>>,
    epoch: Option<i64>,
    wait: Option<Duration>,
) -> bool {
    let deadline = shared.config.store_deadline();
    let late = shared.rounds.lanes.take_done();
    if !late.is_empty() && !commit(shared, late, deadline).await {
        return false;
    }
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
    shared.rounds.plans.retain(&names);
    let now = shared.now_ms();
    let fetcher = shared
        .fetcher
        .for_round_within(shared.config.source_timeout);
    let mut tasks = Vec::new();
    for record in records {
        let name = record.name.clone();
        if !shared.rounds.lanes.claim(&name) {
            tracing::debug!(migration = %name, "its tick of an earlier round still runs: skipped");
            continue;
        }
        let m = memory.remove(&name).unwrap_or_default();
        let read = tick::Read::Fleet(record, m);
        let task = tokio::spawn(fence::in_round(
            epoch,
            one(shared.clone(), fetcher.clone(), read, now),
        ));
        shared.rounds.lanes.started(&name, task.abort_handle());
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
    commit(shared, shared.rounds.lanes.take_done(), deadline).await
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
    let permit = shared.rounds.lanes.permits().acquire_owned().await;
    let limit = shared.config.tick_deadline();
    let ticked = tokio::time::timeout(
        limit,
        tick::tick_in_round(&shared, &fetcher, Some(&batch), read, now),
    )
    .await;
    drop(permit);
    match ticked {
        Ok(Ok(action)) => tracing::debug!(migration = %name, ?action, "tick"),
        Ok(Err(crate::controller::ControllerError::Store(e))) if is_lock_timeout(&e) => {
            say_locked(&shared.metrics, &name, "this round");
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
    shared.rounds.lanes.finished(&name, batch);
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
        Some(&shared.rounds.histories),
        is_lock_timeout,
    );
    match tokio::time::timeout(deadline, written).await {
        Ok(Ok(skipped)) => {
            for name in skipped {
                say_locked(&shared.metrics, &name, "its gate evaluations");
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

/// A round skipped `name` (`what` of it): another session (an ex-leader paused or cut off)
/// holds its lock past `--db-lock-timeout`. Logged and counted; the other migrations go on.
fn say_locked(metrics: &super::metrics::Metrics, name: &str, what: &str) {
    tracing::warn!(
        migration = %name,
        "skipped {what}: another session holds the migration's lock (longer than --db-lock-timeout); the guards of the other migrations ran, and this one is tried again next round"
    );
    metrics.lock_skipped(name);
}

/// Whether `e` is a lock not taken within the session's `lock_timeout`.
fn is_lock_timeout(e: &crate::store::StoreError) -> bool {
    crate::store::postgres::is_lock_timeout(e)
}
