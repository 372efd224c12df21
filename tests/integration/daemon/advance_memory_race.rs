//! `migrate advance` (and the API's) against a daemon's round that writes the same gates' memory
//! between the advance's evaluation and its commit: the advance decides again on the memory as it
//! is now instead of failing, and one forced past a failure written meanwhile says it was forced;
//! one whose migration another actor moved meanwhile does not decide again from the new step, and
//! one that loses every attempt gives up after its retries without moving.
//! A store that runs the other writer inside `commit`, before it commits, makes the race happen
//! every time.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::hooked::{Hooked, Race};
use common::{Indicators, MapResolve, T0, controller, local_plan_named};
use queue_migrate::controller::{Actor, AdvanceOptions, ControllerError};
use queue_migrate::machine::{Snapshot, State};
use queue_migrate::store::any::AnyStore;
use queue_migrate::store::sqlite::SqliteStore;
use queue_migrate::store::traits::*;
use queue_migrate::store::{Commit, GateRecord, RoundRecord, StoreError};

const GATE: &str = "error ratio low";
const MINUTE: i64 = 60_000;

/// `local` in `slices[0]` since `T0`, its exit gate held for 5 minutes when `held` (evaluated
/// up to 10 minutes apart: the tests below evaluate it sparsely on purpose).
async fn in_slices(dir: &std::path::Path, held: bool) -> (AnyStore, Indicators, Arc<MapResolve>) {
    let indicators = Indicators::start();
    indicators.all_green();
    let resolve = Arc::new(MapResolve::of(&indicators));
    // The tests' instants tell the story (`--now`'s store): the step starts at `T0`.
    let store: AnyStore = SqliteStore::open(dir.join("state.db").to_str().unwrap())
        .await
        .unwrap()
        .with_writer_clock();
    let path = local_plan_named(dir, "local");
    if held {
        let yaml = std::fs::read_to_string(&path).unwrap();
        let with_for = yaml.replacen(
            r#"pass_if: "< 0.01" }"#,
            r#"pass_if: "< 0.01", for: 5m, for_max_gap: 10m }"#,
            1,
        );
        assert_ne!(with_for, yaml);
        std::fs::write(&path, with_for).unwrap();
    }
    let fetcher = queue_migrate::indicators::fetch::Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: Some("set up".into()),
    };
    controller(&store, &fetcher, &resolve)
        .init(&path, &actor, T0 * 1000)
        .await
        .unwrap();
    common::enter_first_slice(&store, "local", T0 * 1000).await;
    (store, indicators, resolve)
}

/// The other writer: a round that evaluates `GATE` again and writes it, passing (with the mark it
/// read) or failing.
fn round_writing(store: &AnyStore, passes: bool, at_ms: i64) -> Race {
    let store = store.clone();
    Box::pin(async move {
        let record = store.get("local").await.unwrap();
        let fleet = store.fleet().await.unwrap();
        let read: GateRecord = fleet.memory["local"]
            .iter()
            .find(|g| g.gate == GATE)
            .expect("the advance wrote the gate's memory before its commit")
            .clone();
        let written = if passes {
            GateRecord { at_ms, ..read }
        } else {
            GateRecord {
                held_since_ms: None,
                verdict: "fail".into(),
                value: Some(0.5),
                at_ms,
                ..read
            }
        };
        store
            .record_rounds(&[RoundRecord {
                name: "local".into(),
                plan_hash: Some(record.plan_hash),
                records: vec![written],
                sources: vec![],
            }])
            .await
            .unwrap();
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advance_whose_gates_a_round_rewrote_before_its_commit_decides_again_and_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _indicators, resolve) = in_slices(dir.path(), false).await;
    let hooked = Hooked::new(store.clone());
    let now = T0 * 1000 + 10 * MINUTE;
    hooked
        .before_commits
        .lock()
        .unwrap()
        .push_back(round_writing(&store, true, now));
    let fetcher = queue_migrate::indicators::fetch::Fetcher::new(Duration::from_secs(2)).unwrap();
    let person = controller(&hooked, &fetcher, &resolve);
    let actor = Actor {
        name: "alice".into(),
        reason: None,
    };
    let outcome = person
        .advance("local", &AdvanceOptions::default(), &actor, now)
        .await
        .expect("the advance decides again instead of failing on the round's write");
    assert!(outcome.applied.is_some(), "{outcome:?}");
    assert!(
        hooked.before_commits.lock().unwrap().is_empty(),
        "the race ran"
    );
    let after = store.get("local").await.unwrap();
    assert_eq!(after.state, State::Slices(1));
    let journal = store.journal("local").await.unwrap();
    let advances = journal
        .iter()
        .filter(|e| e.to.state == State::Slices(1))
        .count();
    assert_eq!(advances, 1, "moved once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_advance_over_a_failure_written_before_its_commit_is_journaled_as_forced() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _indicators, resolve) = in_slices(dir.path(), true).await;
    let fetcher = queue_migrate::indicators::fetch::Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: Some("change window closes".into()),
    };
    // The gate starts holding a minute into the step (the advance is gated: held 0 of 5m).
    let c = controller(&store, &fetcher, &resolve);
    let gated = c
        .advance(
            "local",
            &AdvanceOptions::default(),
            &actor,
            T0 * 1000 + MINUTE,
        )
        .await
        .unwrap();
    assert!(gated.applied.is_none() && !gated.blockers.is_empty());
    // Seven minutes in, it has held for six: every gate passes, and a round writes a failure
    // between this --force advance's evaluation and its commit.
    let now = T0 * 1000 + 7 * MINUTE;
    let hooked = Hooked::new(store.clone());
    hooked
        .before_commits
        .lock()
        .unwrap()
        .push_back(round_writing(&store, false, now));
    let person = controller(&hooked, &fetcher, &resolve);
    let opts = AdvanceOptions {
        force: true,
        ..AdvanceOptions::default()
    };
    let outcome = person.advance("local", &opts, &actor, now).await.unwrap();
    assert!(outcome.applied.is_some(), "{outcome:?}");
    assert!(
        outcome.forced,
        "moved past a failure committed before it, yet not journaled as forced: {outcome:?}"
    );
    let journal = store.journal("local").await.unwrap();
    let last = journal.last().unwrap();
    assert_eq!(last.to.state, State::Slices(1));
    assert!(last.forced, "the journal says the gates held: {last:?}");
}

/// The other actor: an advance of `local` to `slices[1]`, committed by "bob".
fn another_advance(store: &AnyStore, at_ms: i64) -> Race {
    let store = store.clone();
    Box::pin(async move {
        let record = store.get("local").await.unwrap();
        store
            .commit(
                "local",
                &Commit {
                    expected_version: record.version,
                    command: "advance".into(),
                    to: Snapshot {
                        state: State::Slices(1),
                        paused: false,
                    },
                    at_ms,
                    actor: "bob".into(),
                    reason: Some("the other runbook".into()),
                    forced: true,
                    evidence: serde_json::json!({}),
                    memory: Vec::new(),
                },
            )
            .await
            .unwrap();
    })
}

/// Moves into `slices[1]` in the journal of `local`.
async fn moves_to_slices_1(store: &AnyStore) -> Vec<String> {
    let journal = store.journal("local").await.unwrap();
    journal
        .iter()
        .filter(|e| e.to.state == State::Slices(1))
        .map(|e| e.actor.clone())
        .collect()
}

/// An advance whose commit met a round's write, and whose migration another actor moved before it
/// decided again, must not decide again from the new step (that would move the migration twice):
/// it answers a conflict, or "not in state" when it was given `--from`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advance_whose_migration_moved_between_two_attempts_does_not_move_it_again() {
    for from in [None, Some("slices[0]")] {
        let dir = tempfile::tempdir().unwrap();
        let (store, _indicators, resolve) = in_slices(dir.path(), false).await;
        let hooked = Hooked::new(store.clone());
        let now = T0 * 1000 + 10 * MINUTE;
        hooked
            .before_commits
            .lock()
            .unwrap()
            .push_back(round_writing(&store, true, now));
        *hooked.after_commit.lock().unwrap() = Some(another_advance(&store, now));
        let fetcher =
            queue_migrate::indicators::fetch::Fetcher::new(Duration::from_secs(2)).unwrap();
        let actor = Actor {
            name: "alice".into(),
            reason: None,
        };
        let opts = AdvanceOptions {
            from: from.map(String::from),
            ..AdvanceOptions::default()
        };
        let outcome = controller(&hooked, &fetcher, &resolve)
            .advance("local", &opts, &actor, now)
            .await;
        assert!(
            hooked.after_commit.lock().unwrap().is_none(),
            "the race ran"
        );
        match (from, &outcome) {
            (None, Err(ControllerError::Store(StoreError::Conflict { .. }))) => {}
            (Some(_), Err(ControllerError::NotInState { actual, .. })) => {
                assert_eq!(actual, "slices[1]");
            }
            _ => panic!("from {from:?}: {outcome:?}"),
        }
        assert_eq!(store.get("local").await.unwrap().state, State::Slices(1));
        assert_eq!(moves_to_slices_1(&store).await, ["bob"], "from {from:?}");
        let journal = store.journal("local").await.unwrap();
        assert!(
            journal.iter().all(|e| e.to.state != State::Slices(2)),
            "moved twice: {journal:?}"
        );
    }
}

/// An advance that a round beats to the gates' memory at every attempt gives up after its
/// retries with the stale-memory conflict (exit 4), and moves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_advance_that_loses_every_attempt_to_a_round_gives_up_without_moving() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _indicators, resolve) = in_slices(dir.path(), false).await;
    let hooked = Hooked::new(store.clone());
    let now = T0 * 1000 + 10 * MINUTE;
    hooked
        .before_commits
        .lock()
        .unwrap()
        .push_back(round_writing(&store, true, now));
    // The three retries meet a round each, and a fourth round stays queued: never reached.
    for _ in 0..4 {
        hooked
            .before_commits
            .lock()
            .unwrap()
            .push_back(round_writing(&store, true, now));
    }
    let fetcher = queue_migrate::indicators::fetch::Fetcher::new(Duration::from_secs(2)).unwrap();
    let actor = Actor {
        name: "alice".into(),
        reason: None,
    };
    let outcome = controller(&hooked, &fetcher, &resolve)
        .advance("local", &AdvanceOptions::default(), &actor, now)
        .await;
    assert!(
        matches!(
            outcome,
            Err(ControllerError::Store(StoreError::StaleMemory { .. }))
        ),
        "{outcome:?}"
    );
    assert_eq!(
        hooked.before_commits.lock().unwrap().len(),
        1,
        "one attempt and three retries, each met by a round"
    );
    assert_eq!(store.get("local").await.unwrap().state, State::Slices(0));
    assert!(moves_to_slices_1(&store).await.is_empty());
    let exit = queue_migrate::cli::CliError::from(outcome.unwrap_err());
    assert_eq!(exit.code, 4, "a stale memory is a conflict to retry");
}
