//! A judge's counts read from the raw counters under `sum(increase(x[$step]))` (issue 55 item
//! 1), against a real Prometheus backfilled with known counter samples: the count is exactly
//! the counters' increments since the judge's counting start (a reset handled in its series
//! before summing, a series born in the count counted from 0), the same at two readings between
//! which no sample arrived; where Prometheus's own `increase()` extrapolates to the window's
//! edges and counts traffic no scrape saw.
//!
//! Needs `promtool` and `prometheus` on the PATH (Debian's `prometheus` package:
//! `scripts/services.sh install prometheus`); the test starts its own Prometheus on a free port
//! over a TSDB it backfills (as `backtest_prometheus` does), and stops it.

use std::fmt::Write as _;
use std::time::Duration;

use queue_migrate::indicators::fetch::Fetcher;
use queue_migrate::judge::counter::{increase_since, recognise, samples_query};

use super::backtest_prometheus::start_prometheus_over;

/// Monday 2026-11-02T00:00:00Z, in seconds.
const T: i64 = 1_793_577_600;

/// Scrape `k` (every 15 s, 3 s past the quarter minute), in seconds.
fn at(k: i64) -> i64 {
    T + 3 + 15 * k
}

/// Three series of one counter on the new route, scrapes 0 to 40:
/// - `a`: 1000 + 10 a scrape, restarted at scrape 20 (3, then + 10 a scrape);
/// - `b`: 500 + 7 a scrape;
/// - `c`: born at scrape 15 with 2, + 1 a scrape.
fn counters() -> String {
    let mut out = String::from("# TYPE qm_judge_handled_total gauge\n");
    let name = "qm_judge_handled_total";
    for k in 0..=40 {
        let a = if k < 20 {
            1000 + 10 * k
        } else {
            3 + 10 * (k - 20)
        };
        let _ = writeln!(out, "{name}{{route=\"new\",instance=\"a\"}} {a} {}", at(k));
    }
    for k in 0..=40 {
        let _ = writeln!(
            out,
            "{name}{{route=\"new\",instance=\"b\"}} {} {}",
            500 + 7 * k,
            at(k)
        );
    }
    for k in 15..=40 {
        let _ = writeln!(
            out,
            "{name}{{route=\"new\",instance=\"c\"}} {} {}",
            2 + (k - 15),
            at(k)
        );
    }
    out.push_str("# EOF\n");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs promtool and prometheus (scripts/services.sh install prometheus)"]
async fn the_judges_counts_are_the_counters_exact_increments_where_increase_extrapolates() {
    let dir = tempfile::tempdir().unwrap();
    let prom = tokio::task::block_in_place(|| start_prometheus_over(dir.path(), &counters()));
    let fetcher = Fetcher::new(Duration::from_secs(10)).unwrap();
    let query = r#"sum(increase(qm_judge_handled_total{route="new"}[$step]))"#;
    let counter = recognise(query).expect("the documented form is read from its counters");
    assert_eq!(counter.selector, r#"qm_judge_handled_total{route="new"}"#);

    // Counting from T+100 s (baseline: scrape 6, at T+93 s), read at T+400 s (last: scrape 26).
    let from_ms = (T + 100) * 1000;
    let count_at = async |now_ms: i64| {
        let asked = samples_query(&counter, from_ms, now_ms, 5 * 60 * 1000);
        let series = fetcher
            .prometheus_series(&prom.url, &asked, now_ms)
            .await
            .unwrap_or_else(|e| panic!("{asked}: {e}"));
        increase_since(&series, from_ms, now_ms).unwrap()
    };
    let now_ms = (T + 400) * 1000;
    let counted = count_at(now_ms).await;
    // By hand: a 1060 -> 1190 (130), the restart's 3, 3 -> 63 (60); b 7 x 20 scrapes (140);
    // c born in the count: 0 -> 13.
    let exact = 130.0 + 3.0 + 60.0 + 140.0 + 13.0;
    assert_eq!(counted.total, exact, "{counted:?}");
    assert_eq!((counted.series, counted.resets, counted.born), (3, 1, 1));

    // Read again 5 s later, before the next scrape (T+408 s): the same count, so the judge's
    // ledger merges the interval into the next instead of weighing an interval of no traffic.
    let later_ms = (T + 405) * 1000;
    assert_eq!(count_at(later_ms).await.total, exact);

    // A long counting span is read at a resolution (a subquery of the selector): Prometheus
    // answers it as raw points, and the count is within one scrape's traffic of the exact one
    // (here: the scrape just before the start counted, the last one not yet).
    let coarse = fetcher
        .prometheus_series(
            &prom.url,
            r#"qm_judge_handled_total{route="new"}[600s:15s]"#,
            now_ms,
        )
        .await
        .unwrap();
    let coarse = increase_since(&coarse, from_ms, now_ms).unwrap();
    assert!((coarse.total - exact).abs() <= 18.0, "{coarse:?}");
    assert_eq!(coarse.resets, 1);

    // Prometheus's increase() over the same span: extrapolated to the window's edges, neither
    // the exact count nor the same at the two readings.
    let increase = |secs: i64, at_ms: i64| {
        let fetcher = &fetcher;
        let url = &prom.url;
        async move {
            let q = format!(r#"sum(increase(qm_judge_handled_total{{route="new"}}[{secs}s]))"#);
            fetcher.prometheus(url, &q, at_ms).await.unwrap()
        }
    };
    let (first, second) = (increase(300, now_ms).await, increase(305, later_ms).await);
    println!("raw counters {exact} at both readings; increase() {first} then {second}");
    assert!(
        (first - exact).abs() > 0.5 && (second - first).abs() > 0.5,
        "increase() read {first} then {second}; the counters' increments are {exact}"
    );
}

/// `plan backtest` replays a judge from the same raw counters (a `query_range` of the selector,
/// each interval's increments summed per series), never from `increase()`: over the known
/// samples, its intervals add up to the counters' exact increments, and an interval with no new
/// scrape is 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs promtool and prometheus (scripts/services.sh install prometheus)"]
async fn the_backtest_replays_a_judge_from_the_same_raw_counters() {
    let dir = tempfile::tempdir().unwrap();
    let prom = tokio::task::block_in_place(|| start_prometheus_over(dir.path(), &counters()));
    let query = r#"sum(increase(qm_judge_handled_total{route="new"}[$step]))"#;
    let yaml = include_str!("../../../plans/local.yaml")
        .replace("${QM_PROM_URL}", &prom.url)
        .replacen(
            r#"- { name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: "< 0.01" }"#,
            &format!(
                "- name: new vs old failures\n        source: prom\n        judge:\n          \
                 new: {{ events: '{query}', failures: '{query}' }}\n          \
                 old: {{ events: '{query}', failures: '{query}' }}\n          \
                 tolerance: 0.2"
            ),
            1,
        );
    let plan = queue_migrate::plan::compile_with_secrets_mode(
        &yaml,
        None,
        &queue_migrate::plan::SystemResolve,
        queue_migrate::plan::SecretsMode::Deferred,
    )
    .expect("the plan")
    .plan;
    let fetcher = Fetcher::new(Duration::from_secs(10)).unwrap();
    // Every 5 s from T+100 s to T+400 s: three readings a scrape.
    let instants =
        queue_migrate::backtest::Instants::new((T + 100) * 1000, (T + 400) * 1000, 5_000).unwrap();
    let readings = queue_migrate::backtest::readings::read(
        &plan,
        None::<&queue_migrate::store::any::AnyStore>,
        &fetcher,
        instants,
    )
    .await;
    let column: Vec<f64> = (0..instants.count)
        .map(|i| readings.get("prom", query, i).unwrap())
        .collect();
    // The first interval ends at T+100 s: from T+95 s (scrape 6, at T+93 s) nothing new.
    assert_eq!(column[0], 0.0);
    let exact = 130.0 + 3.0 + 60.0 + 140.0 + 13.0;
    assert_eq!(column[1..].iter().sum::<f64>(), exact, "{column:?}");
    // Two of each three 5 s intervals see no new scrape: 0, never a guess.
    let empty = column.iter().filter(|v| **v == 0.0).count();
    assert!(empty >= 2 * (instants.count - 1) / 3, "{column:?}");
}
