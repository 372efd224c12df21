//! Issue 54, item 7: the store bounded by bytes. A source's history holding a scrape row larger
//! than the cap (written before it) made every later read of the source fail the tick (SQLite:
//! "string or blob too big" once the history passed 1e9 bytes): the read is refused, naming the
//! cap, before the database is asked to join it, and a row over the cap is never written.

use super::{Backend, on_postgres, on_sqlite};
use crate::store::traits::*;
use crate::store::{MAX_SCRAPE_ROW_BYTES, StoreError, StoredPoint};

on_each_backend_test! {
    #[tokio::test]
    async fn a_legacy_oversized_scrape_is_refused_naming_the_cap_not_failed() {
        on_each_backend(|b: Backend| async move {
            let s = b.open().await;
            let labels = "x".repeat(MAX_SCRAPE_ROW_BYTES + 10);
            b.raw_execute(format!(
                "INSERT INTO scrapes (migration, source, at, samples) \
                 VALUES ('m', 'app', 1000, '[[0,\"s\",\"m\",\"{labels}\"]]')"
            ))
            .await
            .unwrap();
            match s.load_series_after("m", "app", i64::MIN, i64::MIN).await {
                Err(StoreError::TooLarge(why)) => {
                    assert!(why.contains("4 MiB per scrape"), "[{}] {why}", b.kind);
                    assert!(why.contains("source app"), "[{}] {why}", b.kind);
                }
                other => panic!("[{}] expected TooLarge, got {other:?}", b.kind),
            }
            // Past it, the history reads.
            let (series, times) = s.load_series_after("m", "app", 1000, i64::MIN).await.unwrap();
            assert!(series.is_empty() && times.is_empty(), "[{}]", b.kind);
        })
        .await;
    }
}

on_each_backend_test! {
    #[tokio::test]
    async fn a_scrape_over_the_cap_is_never_written() {
        on_each_backend(|b: Backend| async move {
            let s = b.open().await;
            let big = StoredPoint {
                series: "s".into(),
                metric: "m".into(),
                labels: "y".repeat(MAX_SCRAPE_ROW_BYTES),
                at_ms: 1000,
                value: 1.0,
            };
            s.save_points("m", "app", std::slice::from_ref(&big), &[1000], i64::MIN)
                .await
                .unwrap();
            let (series, times) = s.load_series_after("m", "app", i64::MIN, i64::MIN).await.unwrap();
            assert!(series.is_empty(), "[{}] the samples were kept", b.kind);
            assert_eq!(times, vec![1000], "[{}]", b.kind);
        })
        .await;
    }
}
