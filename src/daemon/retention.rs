//! `migrate run --retain`: the leader deletes what is older than the retention, in small batches
//! spread over its rounds (what goes and what never does: [`crate::store::retention`]).
//!
//! # Guarantees
//! - Only the daemon that holds the lease prunes, after its round has committed.
//! - A prune runs about every ten seconds ([`rounds_between`]): at most [`BATCHES_PER_ROUND`]
//!   statements per table, each deleting at most [`BATCH`] rows, so a round is never held up long
//!   nor a table locked long. When the last batch was full (more is left: the retention was just
//!   shortened, or the daemon was stopped a while), it prunes again after the next round, until
//!   it has caught up.
//! - A failed prune is logged and retried at the next due round: it never stops a round.

use std::sync::atomic::{AtomicBool, AtomicU32};
use std::time::Duration;

/// Rows one statement deletes at most, per table.
pub const BATCH: i64 = 2_000;
/// Statements per table in one due round at most: 50,000 rows, more than a round of 1,000
/// migrations with ten gates each writes, so that a prune every round keeps up with any fleet.
pub const BATCHES_PER_ROUND: u32 = 25;
/// About how often a prune is due when nothing is left behind: the tables then hold at most
/// this much more than the retention.
pub const EVERY: Duration = Duration::from_secs(10);

/// Rounds between two prunes at `interval`: about [`EVERY`], at least one.
pub fn rounds_between(interval: Duration) -> u32 {
    let every = EVERY.as_millis() / interval.as_millis().max(1);
    u32::try_from(every).unwrap_or(u32::MAX).max(1)
}

/// Whether a prune is due after a round: `rounds` rounds since the last one, of the `every` due,
/// or the last one left rows behind.
pub fn due(rounds: u32, every: u32, behind: bool) -> bool {
    behind || rounds >= every
}

/// Where the leader's pruning stands between rounds (the prune itself:
/// [`super::Shared::prune_if_due`]).
#[derive(Debug, Default)]
pub struct Retention {
    /// Rounds since the last prune.
    pub(super) rounds: AtomicU32,
    /// The last prune's last batch was full: more is left.
    pub(super) behind: AtomicBool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::Shared;
    use crate::store::retention::Prune;
    use crate::store::traits::*;
    use std::sync::Arc;
    use std::sync::atomic::Ordering;

    use crate::machine::{Snapshot, State};
    use crate::store::any::{self, AnyStore};
    use crate::store::{Commit, GateRecord, NewMigration};

    fn evaluation(at_ms: i64) -> GateRecord {
        GateRecord {
            step_entered_ms: 1_000,
            state: State::Planned,
            gate: "lag".into(),
            kind: "exit".into(),
            query: "lag".into(),
            value: Some(1.0),
            old_value: None,
            samples: 1,
            verdict: "pass".into(),
            reason: "1 < 2".into(),
            no_data_cause: None,
            held_since_ms: Some(at_ms),
            peak: None,
            judge_ledger: None,
            largest_partition: None,
            at_ms,
            revision: None,
        }
    }

    /// A daemon at 1 s rounds whose clock reads 600,000 (ten minutes after the rows), with a
    /// one-minute retention.
    fn config() -> crate::daemon::Config {
        crate::daemon::Config {
            interval: Duration::from_secs(1),
            source_timeout: Duration::from_secs(1),
            queries_per_request: 1,
            max_series: crate::indicators::fetch::MAX_SERIES,
            lease_ttl: Duration::from_secs(15),
            watch_interval: Duration::from_secs(1),
            holder: "t".into(),
            instance: String::new(),
            access: Default::default(),
            read_only_api: false,
            allowed_hosts: Vec::new(),
            confirm_complete: vec![],
            http: crate::daemon::http::Limits::default(),
            clock: crate::daemon::DaemonClock::simulated(Arc::new(|| 600_000)),
            retain: Some(Duration::from_secs(60)),
            max_clock_skew: std::time::Duration::from_secs(2),
        }
    }

    /// `store` with one migration, `m`, created at 1 s.
    async fn with_migration_m<S: Store>(store: S) -> S {
        store
            .create(&NewMigration {
                name: "m".into(),
                plan_yaml: "name: m\n".into(),
                plan_path: "m.yaml".into(),
                plan_hash: "h".into(),
                now_ms: 1_000,
                actor: "t".into(),
            })
            .await
            .unwrap();
        store
    }

    /// The leader prunes about every ten seconds of rounds, a few batches at a time, and again at
    /// the next round while it is behind; a standby never does.
    #[tokio::test]
    async fn the_leader_prunes_in_batches_spread_over_its_rounds() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("state.db").display());
        let store = with_migration_m(any::open(&url).await.unwrap()).await;
        // More old rows than one due round deletes; then one young row.
        let old = BATCH * i64::from(BATCHES_PER_ROUND) + 500;
        let rows: Vec<GateRecord> = (0..old).map(|i| evaluation(1_000 + i)).collect();
        for chunk in rows.chunks(500) {
            store.record_evaluations("m", chunk).await.unwrap();
        }
        store
            .record_evaluations("m", &[evaluation(590_000)])
            .await
            .unwrap();
        let config = config();
        let shared: Arc<Shared<AnyStore>> =
            Shared::new(store.clone(), config, Arc::new(crate::plan::SystemResolve)).unwrap();
        // A standby does nothing, however many rounds.
        for _ in 0..100 {
            assert_eq!(shared.prune_if_due().await, None);
        }
        shared.leader.store(true, Ordering::SeqCst);
        for round in 1..10 {
            assert_eq!(shared.prune_if_due().await, None, "round {round}");
        }
        let first = shared.prune_if_due().await.unwrap();
        assert_eq!(
            first.gate_evaluations,
            u64::try_from(BATCH).unwrap() * u64::from(BATCHES_PER_ROUND)
        );
        // Behind: the next round goes on, and stops at what is young.
        let second = shared.prune_if_due().await.unwrap();
        assert_eq!(second.gate_evaluations, 500);
        assert_eq!(shared.prune_if_due().await, None);
        let left = store
            .prunable(&Prune {
                before_ms: i64::MAX,
                migration: None,
                batch: 1,
            })
            .await
            .unwrap();
        assert_eq!(left.gate_evaluations, 1);
        assert!(shared.metrics.render().contains(&format!(
            "queue_migrate_pruned_rows_total{{table=\"gate_evaluations\"}} {}",
            old
        )));
    }

    /// Issue 54's outbox grew by one row per transition forever: the leader's retention deletes
    /// the delivered rows older than it, never an undelivered one, and counts them.
    #[tokio::test]
    async fn the_leader_prunes_delivered_outbox_rows_never_undelivered_ones() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("state.db").display());
        // Transitions at the daemon's simulated instants.
        let store = with_migration_m(any::open(&url).await.unwrap().with_writer_clock()).await;
        // Old and delivered, old and undelivered, young and delivered.
        let steps = [
            (State::ConsumeDual, 2_000, true),
            (State::Synthetic, 3_000, false),
            (State::Slices(0), 590_000, true),
        ];
        for (version, (state, at_ms, delivered)) in (1..).zip(steps) {
            let commit = Commit {
                expected_version: version,
                command: "advance".into(),
                to: Snapshot {
                    state,
                    paused: false,
                },
                at_ms,
                actor: "t".into(),
                reason: None,
                forced: false,
                evidence: serde_json::json!({}),
                memory: Vec::new(),
            };
            store.commit("m", &commit).await.unwrap();
            if delivered {
                store.outbox_delivered("m", version + 1).await.unwrap();
            }
        }
        let shared: Arc<Shared<AnyStore>> = Shared::new(
            store.clone(),
            config(),
            Arc::new(crate::plan::SystemResolve),
        )
        .unwrap();
        shared.leader.store(true, Ordering::SeqCst);
        for round in 1..10 {
            assert_eq!(shared.prune_if_due().await, None, "round {round}");
        }
        let pruned = shared.prune_if_due().await.unwrap();
        assert_eq!(pruned.outbox, 1, "{pruned:?}");
        let pending = store.outbox_pending(10).await.unwrap();
        assert_eq!(
            pending
                .iter()
                .map(|r| (r.migration.as_str(), r.entry.at_ms))
                .collect::<Vec<_>>(),
            [("m", 3_000)]
        );
        let left = store
            .prunable(&Prune {
                before_ms: i64::MAX,
                migration: None,
                batch: 1,
            })
            .await
            .unwrap();
        assert_eq!(left.outbox, 1, "the young delivered row");
        assert!(
            shared
                .metrics
                .render()
                .contains("queue_migrate_pruned_rows_total{table=\"outbox\"} 1")
        );
    }

    #[test]
    fn a_prune_is_due_about_every_ten_seconds_or_at_once_when_behind() {
        assert_eq!(rounds_between(Duration::from_secs(1)), 10);
        assert_eq!(rounds_between(Duration::from_secs(15)), 1);
        assert_eq!(rounds_between(Duration::from_secs(300)), 1);
        assert_eq!(rounds_between(Duration::from_millis(0)), 10_000);
        assert!(!due(59, 60, false));
        assert!(due(60, 60, false));
        assert!(due(1, 60, true));
    }
}
