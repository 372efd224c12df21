//! `migrate plan backtest` against a real Prometheus backfilled with a known week: a daily peak,
//! a deploy on Tuesday at 09:00, an error spike on Tuesday from 03:00 to 03:29. The plan's
//! timeline, the breach at the spike and the effect of `--what-if` are computed by hand below.
//! Also: a plan of 10 gates over the week at a 1-minute step answers in under 10 s.
//!
//! Needs `promtool` and `prometheus` on the PATH (Debian's `prometheus` package:
//! `scripts/services.sh install prometheus`); the test starts its own Prometheus on a free port
//! over a TSDB it backfills, and stops it.

use crate::common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Monday 2026-11-02T00:00:00Z, in seconds.
const MONDAY: i64 = 1_793_577_600;
const MINUTE: i64 = 60;
const HOUR: i64 = 3_600;
const DAY: i64 = 86_400;

/// Tuesday 09:00: a consumer restarts.
const DEPLOY: i64 = MONDAY + DAY + 9 * HOUR;
/// Tuesday 03:00 to 03:29: errors at 8%.
const SPIKE: (i64, i64) = (
    MONDAY + DAY + 3 * HOUR,
    MONDAY + DAY + 3 * HOUR + 30 * MINUTE,
);

/// The week as OpenMetrics, one sample a minute for each series.
fn week() -> String {
    let mut out = String::new();
    let times = || (0..=7 * DAY / MINUTE).map(|i| MONDAY + i * MINUTE);
    let mut family = |name: &str, value: &dyn Fn(i64) -> f64| {
        let _ = writeln!(out, "# TYPE {name} gauge");
        for t in times() {
            let _ = writeln!(out, "{name} {} {t}", value(t));
        }
    };
    family("app_new_connected", &|_| 1.0);
    // The daily peak: 500 requests/s from 12:00 to 13:59, 100 otherwise.
    family("app_requests_rate", &|t| {
        if (12 * HOUR..14 * HOUR).contains(&(t.rem_euclid(DAY))) {
            500.0
        } else {
            100.0
        }
    });
    family("app_error_ratio", &|t| {
        if (SPIKE.0..SPIKE.1).contains(&t) {
            0.08
        } else {
            0.001
        }
    });
    family("app_consumer_start_time_seconds", &|t| {
        if t < DEPLOY {
            (MONDAY - DAY) as f64
        } else {
            DEPLOY as f64
        }
    });
    family("app_old_publishers", &|_| 0.0);
    out.push_str("# EOF\n");
    out
}

const HEADER: &str = r#"version: 1
name: week
slices: 8
brokers:
  old: { name: old, kind: amqp, url: "amqp://127.0.0.1:5672/%2f", queue: week }
  new: { name: new, kind: nats, url: "nats://127.0.0.1:4222", stream: WEEK }
retry: { max_backoff: 2m, visibility_timeout: 1m }
dedup: { window: 1d, max_redelivery_delay: 2m, max_consumer_delay: 1m, reprocess_margin: 12h }
sources:
  prom: { prometheus: "${QM_BT_PROM_URL}" }
"#;

/// The plan rehearsed: consume_dual (1 h), one slices step (observe 1 d, errors quiet for 6 h,
/// the daily peak, a deploy, an alerting guard), disconnect (retain 2 h).
fn plan() -> String {
    format!(
        r#"{HEADER}
phases:
  consume_dual:
    min_duration: 1h
    exit:
      - {{ name: new consumer connected, source: prom, query: app_new_connected, pass_if: ">= 1" }}
  slices:
    steps: [8]
    observe: 1d
    exit:
      - {{ name: errors quiet, source: prom, query: app_error_ratio, pass_if: "< 0.01", for: 6h }}
    require_peak: {{ source: prom, query: app_requests_rate, at_least: 400 }}
    require_deploy: {{ source: prom, query: app_consumer_start_time_seconds }}
    guard:
      - {{ name: errors breach, source: prom, query: app_error_ratio, pass_if: "< 0.05" }}
    on_breach: alert
  disconnect:
    retain: 2h
    exit:
      - {{ name: no publishers on old, source: prom, query: app_old_publishers, pass_if: "== 0" }}
"#
    )
}

/// Ten gates on one step, each its own query.
fn plan_of_ten_gates() -> String {
    let mut gates = String::new();
    for k in 1..=8 {
        let _ = writeln!(
            gates,
            "      - {{ name: errors x{k}, source: prom, query: \"app_error_ratio * {k}\", pass_if: \"< {}\" }}",
            0.01 * k as f64
        );
    }
    format!(
        r#"{HEADER}
phases:
  slices:
    steps: [8]
    observe: 1d
    exit:
{gates}    require_peak: {{ source: prom, query: app_requests_rate, at_least: 400 }}
    guard:
      - {{ name: errors breach, source: prom, query: "avg_over_time(app_error_ratio[5m])", pass_if: "< 0.05" }}
    on_breach: alert
"#
    )
}

/// A Prometheus of this test, stopped when dropped.
pub(crate) struct Prometheus {
    child: Child,
    pub(crate) url: String,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Backfill `dir/tsdb` with the week and serve it.
fn start_prometheus(dir: &Path) -> Prometheus {
    start_prometheus_over(dir, &week())
}

/// Backfill `dir/tsdb` with `openmetrics` (samples with their timestamps, `# EOF` last) and
/// serve it on a free port (also the judge's raw-counter test's).
pub(crate) fn start_prometheus_over(dir: &Path, openmetrics: &str) -> Prometheus {
    let data = dir.join("week.om");
    std::fs::write(&data, openmetrics).unwrap();
    let tsdb = dir.join("tsdb");
    let backfill = Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&data)
        .arg(&tsdb)
        .output()
        .expect("promtool on the PATH (scripts/services.sh install prometheus)");
    assert!(
        backfill.status.success(),
        "promtool: {}",
        String::from_utf8_lossy(&backfill.stderr)
    );
    let config = dir.join("prometheus.yml");
    std::fs::write(&config, "global:\n  scrape_interval: 1m\n").unwrap();
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(format!("--storage.tsdb.path={}", tsdb.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!("--config.file={}", config.display()))
        .arg("--storage.tsdb.retention.time=100y")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus on the PATH (scripts/services.sh install prometheus)");
    let p = Prometheus {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let ready = format!("{}/-/ready", p.url);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let up = common::http_get(&ready).is_some_and(|(status, _)| status == 200);
        if up {
            break;
        }
        assert!(Instant::now() < deadline, "prometheus never became ready");
        std::thread::sleep(Duration::from_millis(200));
    }
    p
}

fn backtest(dir: &Path, prom: &Prometheus, plan: &str, extra: &[&str]) -> (String, Duration) {
    let path = dir.join("plan.yaml");
    std::fs::write(&path, plan).unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(["plan", "backtest"])
        .arg(&path)
        .args([
            "--from",
            "2026-11-02T00:00:00Z",
            "--to",
            "2026-11-09T00:00:00Z",
        ])
        .args(extra)
        .arg("--state")
        .arg(dir.join("none.db"))
        .env("QM_BT_PROM_URL", &prom.url)
        .output()
        .unwrap();
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "backtest failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (String::from_utf8(out.stdout).unwrap(), took)
}

fn ms(seconds: i64) -> i64 {
    seconds * 1000
}

#[test]
#[ignore = "needs promtool and prometheus (scripts/services.sh install prometheus)"]
fn a_known_week_gives_the_timeline_the_breach_and_the_what_if_computed_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let prom = start_prometheus(dir.path());

    let (json, _) = backtest(
        dir.path(),
        &prom,
        &plan(),
        &["--json", "--what-if", "errors quiet=0.1"],
    );
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    let moves = |r: &serde_json::Value| -> Vec<(i64, String, String, String)> {
        r["moves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["at_ms"].as_i64().unwrap(),
                    m["command"].as_str().unwrap().to_string(),
                    m["from"].as_str().unwrap().to_string(),
                    m["to"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let mv =
        |at: i64, from: &str, to: &str| (ms(at), "advance".to_string(), from.into(), to.into());
    let tuesday = MONDAY + DAY;
    // Planned to consume_dual at once; consume_dual's hour; slices[0] waits for the 6 hours of
    // quiet after the spike (03:30 + 6 h = 09:30: the deploy at 09:00, the peak on Monday at
    // 12:00 and the day of observation, Tuesday 01:00, came before); disconnect's 2 hours.
    assert_eq!(
        moves(&report),
        vec![
            mv(MONDAY, "planned", "consume_dual"),
            mv(MONDAY + HOUR, "consume_dual", "slices[0]"),
            mv(tuesday + 9 * HOUR + 30 * MINUTE, "slices[0]", "disconnect"),
            mv(tuesday + 11 * HOUR + 30 * MINUTE, "disconnect", "complete"),
        ]
    );
    let timeline = report["timeline"].as_array().unwrap();
    assert_eq!(timeline[2]["state"], "slices[0]");
    assert_eq!(timeline[2]["last_to_pass"], "errors quiet");
    assert_eq!(timeline[1]["last_to_pass"], "minimum time");
    // The breach at the spike, alert only: announced once, at its first minute.
    let breaches = report["breaches"].as_array().unwrap();
    assert_eq!(breaches.len(), 1, "{breaches:?}");
    assert_eq!(breaches[0]["at_ms"], ms(SPIKE.0));
    assert_eq!(breaches[0]["action"], "alert");
    assert_eq!(breaches[0]["ended"], false);
    assert!(
        breaches[0]["guards"][0]
            .as_str()
            .unwrap()
            .starts_with("errors breach (0.08 is not < 0.05)")
    );
    assert_eq!(
        report["completed_after_ms"],
        ms(DAY + 11 * HOUR + 30 * MINUTE)
    );
    assert_eq!(
        report["verdict"],
        "would have completed in 1d 11h 30m (at 2026-11-03T11:30:00Z)"
    );
    // Shares over the week: the spike is 30 of 10,081 minutes.
    let gate = |name: &str| {
        report["gates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["name"] == name)
            .unwrap()
            .clone()
    };
    let breach = gate("errors breach");
    assert!((breach["failed"].as_f64().unwrap() - 30.0 / 10_081.0).abs() < 1e-9);
    // Nearest the threshold: the spike, 0.03 on the failing side (the quiet 0.001 is 0.049 off).
    assert!((breach["closest"]["margin"].as_f64().unwrap() + 0.03).abs() < 1e-9);
    assert_eq!(breach["closest"]["at_ms"], ms(SPIKE.0));

    // With `errors quiet` at 0.1 the spike no longer breaks its 6 hours: slices[0] waits only for
    // the deploy (09:00; the failing guard blocked 03:00–03:29 only): 30 minutes sooner.
    let what_if = &report["what_if"];
    assert_eq!(
        moves(what_if),
        vec![
            mv(MONDAY, "planned", "consume_dual"),
            mv(MONDAY + HOUR, "consume_dual", "slices[0]"),
            mv(tuesday + 9 * HOUR, "slices[0]", "disconnect"),
            mv(tuesday + 11 * HOUR, "disconnect", "complete"),
        ]
    );
    assert_eq!(what_if["timeline"][2]["last_to_pass"], "require_deploy");
    assert_eq!(what_if["sooner_ms"], ms(30 * MINUTE));

    // The text says the same.
    let (text, _) = backtest(
        dir.path(),
        &prom,
        &plan(),
        &["--what-if", "errors quiet=0.1"],
    );
    assert!(
        text.contains("verdict: would have completed in 1d 11h 30m"),
        "{text}"
    );
    assert!(
        text.contains(
            "verdict with the change: would have completed in 1d 11h (at 2026-11-03T11:00:00Z) (30m sooner)"
        ),
        "{text}"
    );

    // At a 30-second step the week is 20,161 instants: two `query_range` requests per query
    // (at most 11,000 points each). Between two minutes' samples an instant reads the earlier
    // one, as an instant query would: the same moves.
    let (json, _) = backtest(dir.path(), &prom, &plan(), &["--json", "--step", "30s"]);
    let fine: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(moves(&fine), moves(&report));
    assert_eq!(fine["breaches"][0]["at_ms"], ms(SPIKE.0));

    // Ten gates over the week at a 1-minute step answer (their time is measured by
    // bench/backtest.sh, not asserted here: BENCHMARKS.md).
    let (json, took) = backtest(dir.path(), &prom, &plan_of_ten_gates(), &["--json"]);
    let report: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["gates"].as_array().unwrap().len(), 10);
    eprintln!("10 gates, a week at 1m: {took:?}");
}
