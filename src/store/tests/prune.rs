//! Retention ([`EvaluationStore::prune`], [`EvaluationStore::prunable`]) on every backend: what goes, and what never
//! does (the journal, the memory of the step a migration is in, the scrapes of a migration still
//! evaluated).

use super::*;
use crate::store::retention::{Prune, Pruned};

fn prune(before_ms: i64, migration: Option<&str>, batch: i64) -> Prune {
    Prune {
        before_ms,
        migration: migration.map(str::to_string),
        batch,
    }
}

/// What is left that a prune of everything could take: the whole history, the memory of steps
/// left, the scrapes of complete migrations, the delivered outbox rows.
async fn left(store: &AnyStore, migration: Option<&str>) -> Pruned {
    store
        .prunable(&prune(i64::MAX, migration, 1))
        .await
        .unwrap()
}

/// Prune in batches until nothing is left; answer the sum and the number of batches.
async fn prune_all(store: &AnyStore, p: &Prune) -> (Pruned, usize) {
    let mut sum = Pruned::default();
    for batches in 1..1_000 {
        let one = store.prune(p).await.unwrap();
        assert!(
            one.gate_evaluations <= p.batch as u64
                && one.gate_memory <= p.batch as u64
                && one.scrapes <= p.batch as u64
                && one.outbox <= p.batch as u64,
            "a batch deleted more than {}: {one:?}",
            p.batch
        );
        if one.total() == 0 {
            return (sum, batches);
        }
        sum += one;
    }
    panic!("prune never finished");
}

/// Two migrations: `m` in `synthetic` (entered at 5,000) after `consume_dual` (entered at
/// 2,000), its current step last evaluated long ago (5,100) and scraped long ago (3,000);
/// `done` complete, with old and young scrapes.
async fn two_migrations(store: &AnyStore) {
    store.create(&new_migration("m", 1_000)).await.unwrap();
    store
        .commit(
            "m",
            &commit(1, "advance", snap(State::ConsumeDual, false), 2_000, None),
        )
        .await
        .unwrap();
    for at in [2_100, 2_200, 2_300] {
        let rows = [gate(2_000, "lag", "exit", Some(1.0), at)];
        store.record_evaluations("m", &rows).await.unwrap();
    }
    store
        .commit(
            "m",
            &commit(2, "advance", snap(State::Synthetic, false), 5_000, None),
        )
        .await
        .unwrap();
    // The current step's memory: a `for:` span held since 4,600 and a peak, evaluated at 5,100.
    let mut held = gate(5_000, "lag", "exit", Some(3.0), 5_100);
    held.peak = Some(7.0);
    store
        .record_evaluations(
            "m",
            &[held, gate(5_000, "depth", "require_peak", Some(7.0), 5_100)],
        )
        .await
        .unwrap();
    store
        .save_points("m", "app", &[point("a", 3_000, 1.0)], &[3_000], 0)
        .await
        .unwrap();

    store.create(&new_migration("done", 1_000)).await.unwrap();
    store
        .commit(
            "done",
            &commit(1, "advance", snap(State::Complete, false), 1_500, None),
        )
        .await
        .unwrap();
    for at in [3_000, 4_000, 60_000] {
        store
            .save_points("done", "app", &[point("a", at, 1.0)], &[at], 0)
            .await
            .unwrap();
    }
    store
        .record_evaluations("done", &[gate(1_000, "lag", "exit", Some(1.0), 60_000)])
        .await
        .unwrap();
}

on_each_backend_test! {
    #[tokio::test]
    async fn retention_prunes_the_history_and_steps_left_never_the_journal_nor_what_a_gate_reads() {
        on_each_backend(|b| async move {
            let store = b.open().await;
            two_migrations(&store).await;
            let journal_before = store.journal("m").await.unwrap();
            let all = prune(10_000, None, 1);
            // The dry run counts what the batches then delete, and deletes nothing.
            let would = store.prunable(&all).await.unwrap();
            assert_eq!(
                would,
                Pruned {
                    // m's five evaluations before 10,000 (three of the step left, two of the
                    // current one); not done's at 60,000.
                    gate_evaluations: 5,
                    // m's gate of the step left; not the two of its current step.
                    gate_memory: 1,
                    // done's two old scrapes; not m's (still evaluated), nor done's young one.
                    scrapes: 2,
                    outbox: 0,
                },
                "[{}]",
                b.kind
            );
            assert_eq!(store.prunable(&all).await.unwrap(), would, "[{}]", b.kind);
            // One row per table per statement.
            let (removed, batches) = prune_all(&store, &all).await;
            assert_eq!(removed, would, "[{}]", b.kind);
            assert_eq!(batches, 6, "[{}] five batches and the empty one", b.kind);
            assert_eq!(store.prunable(&all).await.unwrap(), Pruned::default());

            // Never pruned: the journal...
            assert_eq!(store.journal("m").await.unwrap(), journal_before);
            // ...the current step's memory (its for: span and peak), however old...
            let memory = store
                .latest_evaluations("m", 5_000, ALL_GATES)
                .await
                .unwrap();
            assert_eq!(memory.len(), 2, "[{}] {memory:?}", b.kind);
            assert!(
                memory
                    .iter()
                    .any(|r| r.gate == "lag" && r.held_since_ms == Some(4_600) && r.peak == Some(7.0))
            );
            // ...and the scrapes of a migration still evaluated.
            let (points, times) = store.load_points("m", "app").await.unwrap();
            assert_eq!((points.len(), times), (1, vec![3_000]), "[{}]", b.kind);
            let (_, times) = store.load_points("done", "app").await.unwrap();
            assert_eq!(times, vec![60_000], "[{}]", b.kind);
            // What is left: done's young evaluation and scrape.
            assert_eq!(
                left(&store, None).await,
                Pruned {
                    gate_evaluations: 1,
                    // done's memory of a step it left, evaluated at 60,000.
                    gate_memory: 1,
                    scrapes: 1,
                    outbox: 0,
                },
                "[{}]",
                b.kind
            );
        })
        .await;
    }
}

on_each_backend_test! {
    #[tokio::test]
    async fn a_prune_of_one_migration_leaves_the_others() {
        on_each_backend(|b| async move {
            let store = b.open().await;
            two_migrations(&store).await;
            let only_done = prune(100_000, Some("done"), 1_000);
            assert_eq!(
                store.prunable(&only_done).await.unwrap(),
                Pruned {
                    gate_evaluations: 1,
                    gate_memory: 1,
                    scrapes: 3,
                    outbox: 0,
                },
                "[{}]",
                b.kind
            );
            let (removed, _) = prune_all(&store, &only_done).await;
            assert_eq!(removed.total(), 5, "[{}]", b.kind);
            assert_eq!(
                left(&store, Some("m")).await,
                Pruned {
                    gate_evaluations: 5,
                    gate_memory: 1,
                    scrapes: 0,
                    outbox: 0,
                },
                "[{}]",
                b.kind
            );
        })
        .await;
    }
}

/// The history has no other index than its id and the time: a prune must seek to its oldest
/// rows by time, not walk a history of millions of rows at every batch.
#[tokio::test]
async fn a_prune_seeks_the_oldest_evaluations_by_time() {
    let details = sqlite_query_plan(sqlite::RETAIN_EVALUATIONS).await;
    assert!(
        details
            .iter()
            .any(|d| d.contains("USING") && d.contains("INDEX gate_evaluations_at (at<?)")),
        "{details:#?}"
    );
    assert!(
        details
            .iter()
            .all(|d| !d.starts_with("SCAN gate_evaluations")),
        "{details:#?}"
    );
}

/// The outbox's rows, oldest first, as `(migration, seq, committed at)`: what is still to announce.
async fn undelivered(store: &AnyStore) -> Vec<(String, i64, i64)> {
    store
        .outbox_pending(100)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.migration, r.entry.seq, r.entry.at_ms))
        .collect()
}

/// Mark the outbox row of `name`'s transition committed at `at_ms` delivered.
async fn deliver(store: &AnyStore, name: &str, at_ms: i64) {
    let (_, seq, _) = undelivered(store)
        .await
        .into_iter()
        .find(|(m, _, at)| m == name && *at == at_ms)
        .unwrap();
    store.outbox_delivered(name, seq).await.unwrap();
}

on_each_backend_test! {
    /// Issue 54's outbox kept one row per transition forever: the retention deletes the rows a
    /// leader delivered once they are older than it, and never a row still to announce, however
    /// old.
    #[tokio::test]
    async fn retention_prunes_delivered_outbox_rows_never_undelivered_ones() {
        on_each_backend(|b| async move {
            let store = b.open().await;
            store.create(&new_migration("m", 1_000)).await.unwrap();
            let steps = [
                (State::ConsumeDual, 2_000),
                (State::Synthetic, 3_000),
                (State::Slices(0), 50_000),
            ];
            for (version, (state, at)) in (1..).zip(steps) {
                let c = commit(version, "advance", snap(state, false), at, None);
                store.commit("m", &c).await.unwrap();
            }
            store.create(&new_migration("n", 1_000)).await.unwrap();
            let c = commit(1, "advance", snap(State::ConsumeDual, false), 2_500, None);
            store.commit("n", &c).await.unwrap();
            assert_eq!(undelivered(&store).await.len(), 4, "[{}]", b.kind);
            // Delivered: m's old and young transitions, n's old one. m's at 3,000 is not.
            deliver(&store, "m", 2_000).await;
            deliver(&store, "m", 50_000).await;
            deliver(&store, "n", 2_500).await;

            let old = prune(10_000, None, 1);
            let would = store.prunable(&old).await.unwrap();
            assert_eq!(
                would,
                Pruned {
                    outbox: 2,
                    ..Pruned::default()
                },
                "[{}] the two delivered rows before 10,000",
                b.kind
            );
            let only_m = prune(10_000, Some("m"), 1);
            assert_eq!(store.prunable(&only_m).await.unwrap().outbox, 1);
            let (removed, _) = prune_all(&store, &only_m).await;
            assert_eq!(removed.outbox, 1, "[{}]", b.kind);
            let (removed, batches) = prune_all(&store, &old).await;
            assert_eq!((removed.outbox, batches), (1, 2), "[{}] n's", b.kind);

            // Left: the undelivered row (older than the retention) and the young delivered one.
            let still = undelivered(&store).await;
            assert_eq!(
                still.iter().map(|(m, _, at)| (m.as_str(), *at)).collect::<Vec<_>>(),
                [("m", 3_000)],
                "[{}]",
                b.kind
            );
            assert_eq!(left(&store, None).await.outbox, 1, "[{}] m's at 50,000", b.kind);
            assert_eq!(store.prunable(&old).await.unwrap(), Pruned::default());
            // Once delivered, it goes too; the journal keeps every transition.
            deliver(&store, "m", 3_000).await;
            assert_eq!(store.prune(&old).await.unwrap().outbox, 1, "[{}]", b.kind);
            assert_eq!(store.journal("m").await.unwrap().len(), 4, "[{}]", b.kind);
            assert_eq!(store.journal("n").await.unwrap().len(), 2, "[{}]", b.kind);
        })
        .await;
    }
}
