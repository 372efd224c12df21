//! The daemon's judge on a real Prometheus (issue 55 item 1): at a tick, the counts its ledger
//! weighs are the counters' exact increments since the step began (a restart of new's events
//! counter mid-interval handled in its series), read from the raw samples under the plan's
//! `sum(increase(x[$step]))`, never Prometheus's extrapolated `increase()`.
//!
//! Needs `promtool` and `prometheus` on the PATH (Debian's `prometheus` package:
//! `scripts/services.sh install prometheus`); the test starts its own Prometheus on a free port
//! over a TSDB it backfills with known counters, and stops it.

use std::fmt::Write as _;

use crate::cli::backtest_prometheus::start_prometheus_over;
use crate::common::daemon_world::DaemonWorld;
use crate::common::{self, T0};
use queue_migrate::daemon::tick::tick;
use queue_migrate::store::traits::*;

/// Scrape `k`: every 15 s from 5 s past T0.
fn at(k: i64) -> i64 {
    T0 + 5 + 15 * k
}

/// Both routes' counters, scrapes 0 to 40: new's events restart at scrape 5.
fn counters() -> String {
    let mut out = String::new();
    let mut family = |name: &str, route: &str, value: &dyn Fn(i64) -> i64| {
        for k in 0..=40 {
            let _ = writeln!(out, "{name}{{route=\"{route}\"}} {} {}", value(k), at(k));
        }
    };
    family("qm_e2e_handled_total", "new", &|k| {
        if k < 5 {
            1000 + 100 * k
        } else {
            50 + 100 * (k - 5)
        }
    });
    family("qm_e2e_failed_total", "new", &|k| 10 + 2 * k);
    family("qm_e2e_handled_total", "old", &|k| 5000 + 100 * k);
    family("qm_e2e_failed_total", "old", &|k| 20 + k);
    let mut text = String::from("# TYPE qm_e2e_handled_total gauge\n");
    // OpenMetrics: a family's samples together, after its TYPE line.
    let (handled, failed): (Vec<&str>, Vec<&str>) = out
        .lines()
        .partition(|l| l.starts_with("qm_e2e_handled_total"));
    for l in handled {
        text.push_str(l);
        text.push('\n');
    }
    text.push_str("# TYPE qm_e2e_failed_total gauge\n");
    for l in failed {
        text.push_str(l);
        text.push('\n');
    }
    text.push_str("# EOF\n");
    text
}

/// plans/local.yaml whose slices exit gate is a judge on the test's own Prometheus at `url`.
fn plan(url: &str) -> String {
    let side = |route: &str| {
        format!(
            "{{ events: 'sum(increase(qm_e2e_handled_total{{route=\"{route}\"}}[$step]))', \
             failures: 'sum(increase(qm_e2e_failed_total{{route=\"{route}\"}}[$step]))' }}"
        )
    };
    let plan = include_str!("../../../plans/local.yaml");
    let judged = plan
        .replacen(
            "  prom: { prometheus: \"${QM_PROM_URL}\" }",
            &format!(
                "  prom: {{ prometheus: \"${{QM_PROM_URL}}\" }}\n  counters: {{ prometheus: \"{url}\" }}"
            ),
            1,
        )
        .replacen(
            r#"- { name: error ratio low, source: prom, query: app_error_ratio_new, pass_if: "< 0.01" }"#,
            &format!(
                "- name: new vs old failures\n        source: counters\n        judge:\n          \
                 new: {}\n          old: {}\n          tolerance: 0.2",
                side("new"),
                side("old")
            ),
            1,
        );
    assert!(
        judged.contains("source: counters"),
        "the plan's exit line changed"
    );
    judged
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs promtool and prometheus (scripts/services.sh install prometheus)"]
async fn the_daemons_judge_weighs_the_counters_exact_increments_since_the_step_began() {
    let dir = tempfile::tempdir().unwrap();
    let prom = tokio::task::block_in_place(|| start_prometheus_over(dir.path(), &counters()));
    let w = DaemonWorld::new(&plan(&prom.url)).await;
    // The step begins at T0+60 s (the last scrape before: 3, at T0+50 s).
    let entered = (T0 + 60) * 1000;
    common::enter_first_slice(&w.store, "local", entered).await;
    let shared = w.leader_at(entered);
    // A tick at T0+130 s (the last scrape: 8, at T0+125 s).
    tick(&shared, "local", (T0 + 130) * 1000).await.unwrap();
    let rows = w
        .store
        .latest_evaluations("local", entered, &[("new vs old failures", "exit")])
        .await
        .unwrap();
    let row = &rows[0];
    let ledger: queue_migrate::judge::Ledger =
        serde_json::from_str(row.judge_ledger.as_deref().expect("a ledger")).unwrap();
    // By hand, scrapes 3 to 8: new's events 1300 -> 1400 (100), the restart's 50, then 3 x 100;
    // new's failures 16 -> 26; old's events 5300 -> 5800; old's failures 23 -> 28.
    assert_eq!(
        (
            ledger.seen_new.events,
            ledger.seen_new.failures,
            ledger.seen_old.events,
            ledger.seen_old.failures
        ),
        (450.0, 10.0, 500.0, 5.0),
        "{}",
        row.reason
    );
    assert_eq!(ledger.intervals, 1, "{}", row.reason);
    // A tick 3 s later, before the next scrape (T0+140 s): nothing new, nothing weighed.
    tick(&shared, "local", (T0 + 133) * 1000).await.unwrap();
    let rows = w
        .store
        .latest_evaluations("local", entered, &[("new vs old failures", "exit")])
        .await
        .unwrap();
    let again: queue_migrate::judge::Ledger =
        serde_json::from_str(rows[0].judge_ledger.as_deref().expect("a ledger")).unwrap();
    assert_eq!((again.seen_new, again.intervals), (ledger.seen_new, 1));
}
