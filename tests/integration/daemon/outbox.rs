//! The transactional outbox and fenced alerts (issue 54, item 4): a committed transition is
//! announced by whoever leads, at least once, with the deliverer's epoch and the idempotency key
//! of its journal entry; an alert decided under an epoch that has since changed is not sent.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use common::daemon_world::DaemonWorld;
use common::{T0, daemon_config};
use queue_migrate::controller::round::RoundBatch;
use queue_migrate::controller::{Actor, AdvanceOptions};
use queue_migrate::daemon::Shared;
use queue_migrate::daemon::tick::{Action, Read, tick_in_round};
use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::store::fence::{FenceCell, in_round};
use queue_migrate::store::traits::*;

use super::core::{at_slices_0_with_a_failing_guard, plan, webhook_receiver};

/// Regression (issue 54, item 4; the Jepsen suite's pause between commit and publish): a leader
/// that stopped between its commit and its announcement never announced the transition, and
/// the next leader did not either (it announced only what moved while it watched): no webhook,
/// though the journal had it. The commit writes an outbox row; the next leader delivers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transition_committed_by_a_leader_stopped_before_announcing_it_is_announced_by_the_next()
{
    let (yaml, got) = webhook_receiver(&plan()).await;
    let w = DaemonWorld::new(&yaml).await;
    // The old leader: holds the lease, commits a transition through its fenced store...
    let holder = "node-1#old";
    let old = w
        .store
        .clone()
        .fenced(FenceCell::armed("controller", holder));
    let lease = old
        .acquire_lease("controller", holder, 0, 60_000)
        .await
        .unwrap();
    old.fence().set_epoch(Some(lease.epoch));
    let fetcher = Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "node-1".into(),
        reason: None,
    };
    common::controller(&old, &fetcher, &w.resolve)
        .advance(
            "local",
            &AdvanceOptions::default(),
            &actor,
            T0 * 1000 + 1_000,
        )
        .await
        .unwrap();
    let seq = w.store.get("local").await.unwrap().version;
    assert_eq!(seq, 2, "the old leader committed the advance");
    // ... and stops before announcing it (no webhook yet), its lease given up.
    assert!(got.lock().unwrap().is_empty());
    old.release_lease("controller", holder).await.unwrap();
    // The next leader announces it.
    let d = w.start(|_| {}).await;
    let transition = || {
        got.lock()
            .unwrap()
            .iter()
            .find(|e| e["event"] == "transition")
            .cloned()
    };
    common::poll_until_async(
        "the next leader's webhook of the committed transition",
        Duration::from_secs(10),
        || transition().is_some(),
    )
    .await;
    let event = transition().unwrap();
    assert_eq!(event["idempotency_key"], format!("local:{seq}"), "{event}");
    assert_eq!(event["state"], "consume_dual", "{event}");
    // The deliverer's epoch (the next lease), and the entry's own (the old one) in its details.
    assert!(event["epoch"].as_i64().unwrap() > lease.epoch, "{event}");
    assert_eq!(event["details"]["epoch"], lease.epoch, "{event}");
    // Marked delivered: nothing left to announce.
    let mut left = usize::MAX;
    for _ in 0..200 {
        left = w.store.outbox_pending(10).await.unwrap().len();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(left, 0, "the delivered row is marked");
    d.stop().await;
}

/// Regression (issue 54, item 4): an `on_breach: alert` follows no write, so nothing fenced it:
/// an alert computed before a pause was sent after the lease changed hands. It is sent only
/// while the lease is held under the epoch its round started with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alert_computed_under_an_epoch_that_has_since_changed_is_not_sent() {
    let (yaml, got) =
        webhook_receiver(&plan().replace("on_breach: rollback", "on_breach: alert")).await;
    let w = DaemonWorld::new(&yaml).await;
    let entered = at_slices_0_with_a_failing_guard(&w).await;
    let cell = FenceCell::armed("controller", "a");
    let clock = Arc::new(AtomicI64::new(entered + 1_000));
    let shared = Shared::new(
        w.store.clone().fenced(cell.clone()),
        daemon_config(clock),
        w.resolve.clone(),
    )
    .unwrap();
    shared.leader.store(true, Ordering::SeqCst);
    // The round starts under epoch 7; the lease changes hands (held again, under 8) before
    // its alert goes out. (Its evaluations stay in the round's batch: nothing is written.)
    cell.set_epoch(Some(8));
    let batch = RoundBatch::default();
    let stale = in_round(
        Some(7),
        tick_in_round(
            &shared,
            &shared.fetcher,
            Some(&batch),
            Read::Store("local"),
            entered + 1_000,
        ),
    )
    .await
    .unwrap();
    assert!(matches!(stale, Action::Breach { .. }), "{stale:?}");
    // A round under the epoch held decides the same and sends it: once, under 8.
    let batch = RoundBatch::default();
    let fresh = in_round(
        Some(8),
        tick_in_round(
            &shared,
            &shared.fetcher,
            Some(&batch),
            Read::Store("local"),
            entered + 2_000,
        ),
    )
    .await
    .unwrap();
    assert!(matches!(fresh, Action::Breach { .. }), "{fresh:?}");
    let breaches = || -> Vec<serde_json::Value> {
        got.lock()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "breach")
            .cloned()
            .collect()
    };
    common::poll_until_async("the alert", Duration::from_secs(10), || {
        !breaches().is_empty()
    })
    .await;
    let sent = breaches();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(
        sent[0]["epoch"], 8,
        "the alert decided under epoch 7 was sent: {sent:?}"
    );
}
