//! [`DispositionStore`] on each backend (the harness of `store::tests`): decisions, seen
//! signatures and the replay ledger read back the same on SQLite and on PostgreSQL.

use super::{Backend, new_migration, on_postgres, on_sqlite};
use crate::store::StoreError;
use crate::store::dispositions::{Claim, DispositionStore, ReplayClaim, SeenSignature, Take};
use crate::store::dlq_rows::{Action, CloseReason, Disposition};
use crate::store::traits::*;

fn decision(action: Action, at: i64) -> Disposition {
    Disposition {
        id: 0,
        queue: "orders.dlq".into(),
        signature: "timeout after <n>ms".into(),
        signature_version: "v1".into(),
        error_class: "dependency_timeout".into(),
        consumer_version: "2.14.0".into(),
        affected_count: Some(9120),
        first_seen: Some("2026-03-01T10:00:00.000Z".into()),
        last_seen: Some("2026-03-01T12:00:00.000Z".into()),
        action,
        decided_by: "ana".into(),
        decided_at_ms: at,
        note: Some("incident INC-7".into()),
    }
}

on_each_backend_test! {
    #[tokio::test]
    async fn decisions_are_recorded_listed_oldest_first_and_purged() {
        on_each_backend(|b| async move {
            let s = b.open().await;
            let a = decision(Action::Close(CloseReason::WindowExpired), 2000);
            // Another group (one group has one decision, issue 54).
            let bb = Disposition {
                affected_count: None,
                last_seen: None,
                note: None,
                signature: "connection reset".into(),
                ..decision(Action::Replay, 1000)
            };
            let id_a = s.record(&a).await.expect("records");
            let id_b = s.record(&bb).await.expect("records");
            assert_ne!(id_a, id_b);
            let listed = DispositionStore::list(&s).await.expect("lists");
            assert_eq!(
                listed,
                vec![
                    Disposition { id: id_b, ..bb },
                    Disposition { id: id_a, ..a }
                ],
                "[{}]",
                b.kind
            );
            // The drain gate reads the same decisions through the store.
            assert_eq!(s.dlq_decisions().await.expect("reads"), listed);
            let purged = s.purge_before(1500).await.expect("purges");
            assert_eq!(purged.dispositions, 1);
            assert_eq!(DispositionStore::list(&s).await.expect("lists").len(), 1);
            // A reopened store still has them.
            assert_eq!(
                b.open().await.dlq_decisions().await.expect("reads").len(),
                1
            );
        })
        .await;
    }
}

on_each_backend_test! {
    #[tokio::test]
    async fn the_schema_refuses_a_reason_outside_the_list() {
        on_each_backend(|b: Backend| async move {
            let _ = b.open().await;
            for reason in ["'other'", "NULL"] {
                let bad = b
                    .raw_execute(format!(
                        "INSERT INTO dlq_dispositions (queue, signature, error_class, \
                         consumer_version, action, reason, decided_by, decided_at) \
                         VALUES ('q','s','c','v','close',{reason},'a',0)"
                    ))
                    .await;
                assert!(bad.is_err(), "[{}] close with reason {reason}", b.kind);
            }
            let bad = b
                .raw_execute(
                    "INSERT INTO dlq_dispositions (queue, signature, error_class, consumer_version, \
                     action, reason, decided_by, decided_at) \
                     VALUES ('q','s','c','v','replay','fixed_in_code','a',0)",
                )
                .await;
            assert!(bad.is_err(), "[{}] replay with a reason", b.kind);
        })
        .await;
    }
}

on_each_backend_test! {
    #[tokio::test]
    async fn signatures_keep_their_first_sighting() {
        on_each_backend(|b| async move {
            let s = b.open().await;
            let seen = |sig: &str| SeenSignature {
                queue: "q".into(),
                signature: sig.into(),
                error_class: "c".into(),
                consumer_version: "v".into(),
            };
            let first = s.note_signatures(&[seen("a")], 100).await.expect("notes");
            assert_eq!(first.get("a"), Some(&100));
            let again = s
                .note_signatures(&[seen("a"), seen("b")], 200)
                .await
                .expect("notes");
            assert_eq!((again.get("a"), again.get("b")), (Some(&100), Some(&200)));
            // Seen "again" at an earlier instant (a clock that went back): last seen stays 200.
            s.note_signatures(&[seen("a")], 50).await.expect("notes");
            let purged = s.purge_before(150).await.expect("purges");
            assert_eq!(purged.signatures, 0, "[{}] a was seen again at 200", b.kind);
            let purged = s.purge_before(201).await.expect("purges");
            assert_eq!(purged.signatures, 2, "[{}]", b.kind);
        })
        .await;
    }
}

fn claim(entry: &str, run: &str, at_ms: i64) -> ReplayClaim {
    ReplayClaim {
        queue: "orders.dlq".into(),
        destination: "migration:orders".into(),
        entry: entry.into(),
        run: run.into(),
        dead_lettered_at: "2026-11-29T10:05:00.000Z".into(),
        dead_lettered_ms: 1_000,
        at_ms,
    }
}

on_each_backend_test! {
    #[tokio::test]
    async fn a_replay_claim_is_taken_once_settled_sent_or_dropped_and_in_doubt_until_retaken() {
        on_each_backend(|b| async move {
            let s = b.open().await;
            let kind = b.kind;
            // Run 1 claims three entries: e1 is confirmed, e2 certainly not sent, e3 never settled.
            for e in ["e1", "e2", "e3"] {
                let c = claim(e, "run-1", 10);
                assert_eq!(
                    s.claim_replay(&c, false).await.unwrap(),
                    Claim::Taken,
                    "[{kind}] {e}"
                );
            }
            assert!(
                s.settle_replay(&claim("e1", "run-1", 11), true)
                    .await
                    .unwrap()
            );
            assert!(
                s.settle_replay(&claim("e2", "run-1", 11), false)
                    .await
                    .unwrap()
            );
            // Run 2: e1 was sent, e2 is free again, e3 is in doubt.
            let run2 = |e: &str| claim(e, "run-2", 20);
            assert_eq!(
                s.claim_replay(&run2("e1"), false).await.unwrap(),
                Claim::Sent
            );
            assert_eq!(
                s.claim_replay(&run2("e2"), false).await.unwrap(),
                Claim::Taken
            );
            assert_eq!(
                s.claim_replay(&run2("e3"), false).await.unwrap(),
                Claim::InDoubt
            );
            // Another destination or queue is another ledger.
            let elsewhere = ReplayClaim {
                destination: "file:/tmp/out.ndjson".into(),
                ..run2("e1")
            };
            assert_eq!(
                s.claim_replay(&elsewhere, false).await.unwrap(),
                Claim::Taken
            );
            // Asked to, run 3 takes e3 over; run 1 can then no longer settle it, and run 3 can.
            let run3 = claim("e3", "run-3", 30);
            assert_eq!(s.claim_replay(&run3, true).await.unwrap(), Claim::Taken);
            assert!(
                !s.settle_replay(&claim("e3", "run-1", 31), true)
                    .await
                    .unwrap()
            );
            assert!(s.settle_replay(&run3, true).await.unwrap());
            // A sent entry is never taken again, even when asked to retake those in doubt.
            assert_eq!(
                s.claim_replay(&claim("e1", "run-4", 40), true)
                    .await
                    .unwrap(),
                Claim::Sent
            );
            assert_eq!(
                s.claim_replay(&claim("e3", "run-4", 40), true)
                    .await
                    .unwrap(),
                Claim::Sent
            );
            // `dlq purge --decisions` drops the rows of entries dead-lettered before its cut.
            let purged = s.purge_before(1_001).await.unwrap();
            assert_eq!(purged.replays, 4, "[{kind}] e1, e2, e3 and e1 elsewhere");
            assert_eq!(
                s.claim_replay(&claim("e1", "run-5", 50), false)
                    .await
                    .unwrap(),
                Claim::Taken
            );
        })
        .await;
    }
}

on_each_backend_test! {
    #[tokio::test]
    async fn racing_replays_never_both_take_one_entry() {
        on_each_backend(|b| async move {
            let s = b.open().await;
            for round in 0..20 {
                let entry = format!("e{round}");
                let tasks: Vec<_> = (0..4)
                    .map(|i| {
                        let (s, c) = (s.clone(), claim(&entry, &format!("run-{i}"), 10));
                        tokio::spawn(async move { s.claim_replay(&c, false).await.unwrap() })
                    })
                    .collect();
                let mut taken = 0;
                for t in tasks {
                    if t.await.unwrap() == Claim::Taken {
                        taken += 1;
                    }
                }
                assert_eq!(taken, 1, "[{}] round {round}", b.kind);
            }
        })
        .await;
    }
}

on_each_backend_test! {
    /// Regression: PostgreSQL had no decision tables (decisions were "kept in a SQLite state store
    /// for now"): a store created by an older release gains them when opened, and keeps its
    /// migrations.
    #[tokio::test]
    async fn an_upgraded_store_keeps_its_decisions_apart_from_its_migrations() {
        on_each_backend(|b| async move {
            let old = b.open_at_version(8, 7).await;
            old.create(&new_migration("m", 1_000)).await.unwrap();
            drop(old);
            let s = b.open().await;
            let id = s
                .record(&decision(Action::Close(CloseReason::FixedInCode), 5))
                .await
                .unwrap();
            assert_eq!(s.dlq_decisions().await.unwrap()[0].id, id);
            assert_eq!(s.get("m").await.unwrap().name, "m");
        })
        .await;
    }
}

/// The refusal of a decision on a group already decided, in words.
fn refused<T: std::fmt::Debug>(r: crate::store::Result<T>) -> String {
    match r {
        Err(StoreError::AlreadyDecided(why)) => why,
        other => panic!("expected AlreadyDecided, got {other:?}"),
    }
}

on_each_backend_test! {
    /// Issue 54: two closes of one group with different reasons both recorded, and a replay of
    /// a closed group recorded a second decision. One decision per group, whatever the reasons;
    /// a replay holds the group before it sends, and a close meanwhile is refused.
    #[tokio::test]
    async fn one_decision_per_group_whatever_the_reasons() {
        on_each_backend(|b| async move {
            let s = b.open().await;
            let close = decision(Action::Close(CloseReason::WindowExpired), 2000);
            let id = s.record(&close).await.unwrap();
            let other = decision(Action::Close(CloseReason::AlreadyProcessed), 3000);
            let why = refused(s.record(&other).await);
            assert!(why.contains("already closed as window_expired"), "[{}] {why}", b.kind);
            // A replay of an entry the close covers holds nothing and is refused.
            let hold = Disposition { last_seen: None, ..decision(Action::Replay, 4000) };
            let covered = 1_772_359_200_000; // 2026-03-01T10:00:00Z
            let why = refused(s.take_replay(&hold, "run-1", covered).await);
            assert!(why.contains("already closed"), "[{}] {why}", b.kind);
            assert_eq!(DispositionStore::list(&s).await.unwrap().len(), 1);
            // Entries that came back later: a new decision may be taken, once.
            let later = 1_772_452_800_000; // 2026-03-02T12:00:00Z
            let Take::Held(held) = s.take_replay(&hold, "run-1", later).await.unwrap() else {
                panic!("[{}] not held", b.kind);
            };
            assert_eq!(
                s.take_replay(&hold, "run-2", later).await.unwrap(),
                Take::Joined(held),
                "[{}]",
                b.kind
            );
            let late_close = Disposition {
                last_seen: Some("2026-03-03T00:00:00.000Z".into()),
                ..decision(Action::Close(CloseReason::FixedInCode), 5000)
            };
            let why = refused(s.record(&late_close).await);
            assert!(why.contains("is being replayed"), "[{}] {why}", b.kind);
            // Holds are no decisions; finished, the hold is the replay decision.
            assert_eq!(DispositionStore::list(&s).await.unwrap().len(), 1);
            let replayed = Disposition {
                last_seen: Some("2026-03-02T12:00:00.000Z".into()),
                ..decision(Action::Replay, 6000)
            };
            assert!(s.finish_replay(held, &replayed).await.unwrap());
            let listed = DispositionStore::list(&s).await.unwrap();
            assert_eq!(listed.len(), 2, "[{}] {listed:?}", b.kind);
            assert_eq!((listed[0].id, listed[1].id), (id, held));
            assert_eq!(listed[1].action, Action::Replay);
            let why = refused(s.record(&other).await);
            assert!(why.contains("already replayed"), "[{}] {why}", b.kind);
            // A hold released (the run stopped short) leaves the group as it was.
            let even_later = 1_772_539_200_000; // 2026-03-03T12:00:00Z
            let Take::Held(again) = s.take_replay(&hold, "run-3", even_later).await.unwrap()
            else {
                panic!("[{}] not held", b.kind);
            };
            assert!(!s.release_replay(again, "run-4").await.unwrap());
            assert!(s.release_replay(again, "run-3").await.unwrap());
            assert_eq!(
                s.take_replay(&hold, "run-5", covered).await.unwrap(),
                Take::Covered,
                "[{}]",
                b.kind
            );
        })
        .await;
    }
}

on_each_backend_test! {
    /// The database itself refuses two rows superseding one decision (the unique index), and a
    /// store whose group has two decisions from before upgrades without losing either.
    #[tokio::test]
    async fn the_database_refuses_a_second_decision_superseding_one() {
        on_each_backend(|b| async move {
            let old = b.open_at_version(12, 12).await;
            for reason in ["window_expired", "already_processed"] {
                b.raw_execute(format!(
                    "INSERT INTO dlq_dispositions (queue, signature, error_class, \
                     consumer_version, action, reason, decided_by, decided_at) \
                     VALUES ('q','s','c','v','close','{reason}','a',0)"
                ))
                .await
                .unwrap();
            }
            drop(old);
            let s = b.open().await;
            assert_eq!(DispositionStore::list(&s).await.unwrap().len(), 2);
            let twice = b
                .raw_execute(
                    "INSERT INTO dlq_dispositions (queue, signature, error_class, \
                     consumer_version, action, reason, decided_by, decided_at, supersedes) \
                     VALUES ('q','s','c','v','close','fixed_in_code','a',0, 0)",
                )
                .await;
            assert!(twice.is_err(), "[{}] a second first decision", b.kind);
        })
        .await;
    }
}
