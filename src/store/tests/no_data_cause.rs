//! A NO DATA verdict's cause (issue 44) kept with the evaluation on every backend: written to
//! the history and the gate's memory, read back by what `status` and the standing read, and
//! absent (`None`) on rows written before migration 0012.

use super::*;

const GATES: &[GateKey<'static>] = &[
    ("lag", "exit"),
    ("errors", "exit"),
    ("depth", "exit"),
    ("ratio", "exit"),
];

on_each_backend_test! {
    #[tokio::test]
    async fn the_no_data_cause_round_trips_through_the_memory_and_the_history() {
        on_each_backend(|b| async move {
            let store = b.open().await;
            store.create(&new_migration("m", 1_000)).await.unwrap();
            let without_data = |gate_name: &str, cause: Option<&str>| {
                let mut r = gate(10_000, gate_name, "exit", None, 11_000);
                r.verdict = "no_data".into();
                r.no_data_cause = cause.map(str::to_string);
                r
            };
            let round = [
                without_data("lag", Some("too_few_samples")),
                without_data("errors", Some("source_down")),
                without_data("depth", Some("empty")),
                without_data("ratio", None),
            ];
            store.record_evaluations("m", &round).await.unwrap();
            let mut latest = store
                .latest_unrevised("m", 10_000, GATES)
                .await
                .unwrap();
            latest.sort_by(|a, b| a.gate.cmp(&b.gate));
            let causes: Vec<(&str, Option<&str>)> = latest
                .iter()
                .map(|r| (r.gate.as_str(), r.no_data_cause.as_deref()))
                .collect();
            assert_eq!(
                causes,
                [
                    ("depth", Some("empty")),
                    ("errors", Some("source_down")),
                    ("lag", Some("too_few_samples")),
                    ("ratio", None),
                ]
            );
            let history = store.evaluation_history("m", 10).await.unwrap();
            assert_eq!(history.len(), 4);
            assert!(history.iter().all(|h| round.iter().any(|r| r.gate == h.gate
                && r.no_data_cause == h.no_data_cause)));

            // The next evaluation replaces the memory's cause (a pass has none).
            let mut passed = gate(10_000, "lag", "exit", Some(1.0), 12_000);
            passed.verdict = "pass".into();
            let read = as_read(&store, "m", std::slice::from_ref(&passed)).await;
            store.record_evaluations("m", &read).await.unwrap();
            let lag = store
                .latest_unrevised("m", 10_000, &[("lag", "exit")])
                .await
                .unwrap();
            assert_eq!(lag.len(), 1);
            assert_eq!(lag[0].no_data_cause, None);
            assert_eq!(lag[0].verdict, "pass");
        })
        .await;
    }
}

on_each_backend_test! {
    /// Rows written before migration 0012 read back without a cause (the standing then reads
    /// them as it did: see `crate::standing`).
    #[tokio::test]
    async fn rows_written_before_the_cause_was_kept_read_without_one() {
        on_each_backend(|b| async move {
            let old = b.open_at_version(11, 10).await;
            old.create(&new_migration("m", 1_000)).await.unwrap();
            drop(old);
            let columns = "migration, gate, kind, step_entered, state, step, query, value, \
                           old_value, samples, verdict, reason, held_since, peak, at";
            let values = "('m', 'lag', 'exit', 10000, 'slices', 1, 'q', NULL, NULL, 0, \
                          'no_data', 'source world: connection refused', NULL, NULL, 11000)";
            b.raw_execute(format!(
                "INSERT INTO gate_memory ({columns}) VALUES {values}; \
                 INSERT INTO gate_evaluations ({columns}) VALUES {values}"
            ))
            .await
            .unwrap();
            let store = b.open().await;
            let latest = store
                .latest_unrevised("m", 10_000, ALL_GATES)
                .await
                .unwrap();
            assert_eq!(latest.len(), 1);
            assert_eq!(latest[0].verdict, "no_data");
            assert_eq!(latest[0].no_data_cause, None);
            let history = store.evaluation_history("m", 10).await.unwrap();
            assert_eq!(history.len(), 1);
            assert_eq!(history[0].no_data_cause, None);
        })
        .await;
    }
}
