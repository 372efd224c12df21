//! `migrate plan backtest --windows 1h` against a real Prometheus backfilled with known judge
//! counters: three hours, each a window rehearsed on its own from `slices[0]`. Hour 1: new fails
//! ten times as often as old (the judge FAILs); hour 2: both routes identical (it PASSes, though
//! hour 1 FAILed: each window starts with a fresh memory); hour 3: no sample at all (undecided).
//! Each window's decision is the one a plain `plan backtest` over that hour makes, at the same
//! instant: the windows go through the same rehearsal.
//!
//! Needs `promtool` and `prometheus` on the PATH (Debian's `prometheus` package:
//! `scripts/services.sh install prometheus`); the test starts its own Prometheus on a free port
//! over a TSDB it backfills (as `backtest_prometheus` does), and stops it.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use super::backtest_prometheus::start_prometheus_over;

/// Monday 2026-11-02T00:00:00Z, in seconds.
const T: i64 = 1_793_577_600;
const HOUR: i64 = 3_600;

/// Scrapes every 15 s (3 s past the grid) from T to T + 2 h 59 m 45 s; one pod a route, whose
/// counter on new restarts at T + 1 h 30 m (a reset inside a window). Hour 0 is the lead-in.
fn counters() -> String {
    let mut out = String::new();
    let scrapes = (0..(3 * HOUR / 15)).map(|k| (k, T + 3 + 15 * k));
    for (name, route) in [
        ("qm_bt_handled_total", "old"),
        ("qm_bt_failed_total", "old"),
        ("qm_bt_handled_total", "new"),
        ("qm_bt_failed_total", "new"),
    ] {
        let _ = writeln!(out, "# TYPE {name} gauge");
        let mut total = 0;
        for (k, at) in scrapes.clone() {
            let (events, failures) = (1000, if route == "new" && k < 480 { 100 } else { 10 });
            if route == "new" && at == T + 3 + 90 * 60 {
                total = 0;
            }
            total += if name == "qm_bt_handled_total" {
                events
            } else {
                failures
            };
            let _ = writeln!(out, "{name}{{route=\"{route}\"}} {total} {at}");
        }
    }
    out.push_str("# EOF\n");
    out
}

fn plan(url: &str) -> String {
    let query =
        |name: &str, route: &str| format!("'sum(increase({name}{{route=\"{route}\"}}[$step]))'");
    format!(
        r#"version: 1
name: windows
slices: 16
brokers:
  old: {{ name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: windows }}
  new: {{ name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: WINDOWS }}
retry: {{ max_backoff: 2m, visibility_timeout: 1m }}
dedup: {{ window: 1d, max_redelivery_delay: 2m, max_consumer_delay: 1m, reprocess_margin: 12h }}
sources:
  prom: {{ prometheus: "{url}" }}
phases:
  slices:
    steps: [1, 2, 4, 8, 16]
    exit:
      - name: failures new vs old
        source: prom
        judge:
          new: {{ events: {}, failures: {} }}
          old: {{ events: {}, failures: {} }}
          tolerance: 0.2
"#,
        query("qm_bt_handled_total", "new"),
        query("qm_bt_failed_total", "new"),
        query("qm_bt_handled_total", "old"),
        query("qm_bt_failed_total", "old"),
    )
}

fn rfc3339(secs: i64) -> String {
    queue_migrate::time::rfc3339(secs * 1000)
}

/// `plan backtest` from `from` to `to` (seconds) every 15 s from slices[0], with `extra`, as JSON.
fn backtest(dir: &Path, url: &str, from: i64, to: i64, extra: &[&str]) -> serde_json::Value {
    let path = dir.join("plan.yaml");
    std::fs::write(&path, plan(url)).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(["plan", "backtest"])
        .arg(&path)
        .args(["--from", &rfc3339(from), "--to", &rfc3339(to)])
        .args(["--step", "15s", "--start-at", "slices[0]", "--json"])
        .args(extra)
        .arg("--state")
        .arg(dir.join("none.db"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "backtest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
#[ignore = "needs promtool and prometheus (scripts/services.sh install prometheus)"]
fn each_window_is_rehearsed_on_its_own_as_a_plain_backtest_of_that_hour() {
    let dir = tempfile::tempdir().unwrap();
    let prom = start_prometheus_over(dir.path(), &counters());
    let all = backtest(
        dir.path(),
        &prom.url,
        T + HOUR,
        T + 4 * HOUR,
        &["--windows", "1h"],
    );
    let windows = all["windows"].as_array().unwrap();
    assert_eq!(windows.len(), 3, "{all}");
    let decision = |w: usize| {
        let d = &windows[w]["judges"][0];
        (
            d["decision"].as_str().map(String::from),
            d["after_ms"].as_i64(),
        )
    };
    for (w, window) in windows.iter().enumerate() {
        let start = T + HOUR * (1 + w as i64);
        assert_eq!(window["from_ms"], start * 1000);
        assert_eq!(window["to_ms"], (start + HOUR) * 1000);
    }

    // Hour 1: new fails 10% of its messages, old 1%: FAIL, as a plain backtest of that hour
    // fails at the same instant.
    let (verdict, fail_after) = decision(0);
    assert_eq!(verdict.as_deref(), Some("fail"), "{all}");
    let fail_after = fail_after.unwrap();
    assert!(
        fail_after > 0 && fail_after < 10 * 60 * 1000,
        "{fail_after}"
    );
    let plain = backtest(dir.path(), &prom.url, T + HOUR, T + 2 * HOUR, &[]);
    let first_fail = &plain["timeline"][0]["gates"][0]["first_fail"];
    assert_eq!(first_fail[0], (T + HOUR) * 1000 + fail_after, "{plain}");
    assert!(
        windows[0]["judges"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("FAIL"),
        "{all}"
    );

    // Hour 2: the same failure rate on both routes (and new's counter restarts at 1 h 30 m):
    // PASS, though the hour before FAILed; a plain backtest of the hour advances at that instant.
    let (verdict, pass_after) = decision(1);
    assert_eq!(verdict.as_deref(), Some("pass"), "{all}");
    let plain = backtest(dir.path(), &prom.url, T + 2 * HOUR, T + 3 * HOUR, &[]);
    assert_eq!(
        plain["moves"][0]["at_ms"],
        (T + 2 * HOUR) * 1000 + pass_after.unwrap(),
        "{plain}"
    );
    assert_eq!(plain["moves"][0]["to"], "slices[1]");

    // Hour 3: no sample: undecided.
    assert_eq!(decision(2), (None, None), "{all}");

    let summary = &all["judges"][0];
    assert_eq!(summary["windows"], 3);
    assert_eq!(
        (
            &summary["passed"],
            &summary["failed"],
            &summary["undecided"]
        ),
        (
            &serde_json::json!(1),
            &serde_json::json!(1),
            &serde_json::json!(1)
        )
    );
    // Of the three, the middle decision time; the p90 falls on the undecided window.
    assert_eq!(summary["median_ms"], fail_after.max(pass_after.unwrap()));
    assert!(summary["p90_ms"].is_null(), "{summary}");

    // A window that is not a whole number of steps, and --what-if with it, are refused.
    let path = dir.path().join("plan.yaml");
    for extra in [
        &["--windows", "50s"][..],
        &["--windows", "1h", "--what-if", "failures new vs old=0.5"],
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
            .args(["plan", "backtest"])
            .arg(&path)
            .args(["--from", &rfc3339(T + HOUR), "--to", &rfc3339(T + 4 * HOUR)])
            .args(["--step", "15s"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {out:?}");
    }
}
