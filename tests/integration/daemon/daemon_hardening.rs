//! The daemon's HTTP surface under attack and its health under faults (issue 31, §2 and §5):
//! half-sent requests and idle connections are closed, a flood of connections or long-polls is
//! capped with `503` + `Retry-After`, a flood under a low descriptor limit does not stop the
//! guards, a web page cannot drive a daemon without a token, the token is checked before the body,
//! `/readyz` and `queue_migrate_leader` follow a store that goes away, and a plan that does not
//! compile in the daemon's environment is reported as such.

#![cfg(feature = "cli")]

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use common::daemon_world::{DaemonWorld, TOKEN, local_by_hand, single_token};
use common::hooked::Hooked;
use common::{Bench, DaemonChild, poll_until};
use queue_migrate::store::sqlite::SqliteStore;
use queue_migrate::store::traits::*;

/// Every line this test binary's daemons logged (one global subscriber for the binary).
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log: Arc<Mutex<Vec<u8>>> = Arc::default();
        let sink = log.clone();
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new("info"))
            .with_ansi(false)
            .with_writer(move || Sink(sink.clone()))
            .try_init();
        log
    })
}

struct Sink(Arc<Mutex<Vec<u8>>>);

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&log().lock().unwrap()).into_owned()
}

/// plans/local.yaml (`auto_advance: false`) registered in a fresh SQLite store; the daemon's
/// environment lacks the variables named in `unset`.
async fn world(unset: &[&str]) -> DaemonWorld {
    world_with_plan(&local_by_hand(), unset).await
}

/// [`world`] with another plan.
async fn world_with_plan(yaml: &str, unset: &[&str]) -> DaemonWorld {
    log();
    let mut w = DaemonWorld::new(yaml).await;
    w.unset(unset);
    w
}

async fn paused(w: &DaemonWorld) -> bool {
    w.store.get("local").await.unwrap().paused
}

/// Read from `s` until it closes or `within` passes: what came, and whether it closed.
fn read_until_closed(s: &mut TcpStream, within: Duration) -> (String, bool) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < within {
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&got).into_owned(), true),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return (String::from_utf8_lossy(&got).into_owned(), true),
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), false)
}

/// Regression: `axum::serve` ran bare: a half-sent request, or a connection that sent nothing,
/// was held forever, and there was no cap on connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_sent_requests_and_idle_connections_are_closed_and_a_flood_is_capped() {
    let w = world(&[]).await;
    let d = w
        .start(|c| {
            c.http.header_timeout = Duration::from_millis(500);
            c.http.idle_timeout = Duration::from_secs(1);
            c.http.max_connections = 4;
            c.http.request_timeout = Duration::from_secs(1);
        })
        .await;
    let addr = d.addr;
    tokio::task::spawn_blocking(move || {
        // Headers never finished: closed within the header timeout.
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            .unwrap();
        let started = Instant::now();
        let (_, closed) = read_until_closed(&mut half, Duration::from_secs(5));
        assert!(closed, "a half-sent request is still open after 5 s");
        assert!(started.elapsed() < Duration::from_secs(3));

        // A kept-alive connection left idle after its answer: closed too.
        let mut kept = TcpStream::connect(addr).unwrap();
        kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let (answer, closed) = read_until_closed(&mut kept, Duration::from_secs(5));
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            closed,
            "an idle kept-alive connection is still open after 5 s"
        );

        // A body sent too slowly: answered 503 within the request timeout, not held.
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(
            b"POST /v1/migrations/local/pause HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"reason\":",
        )
        .unwrap();
        let started = Instant::now();
        let (answer, _) = read_until_closed(&mut slow, Duration::from_secs(5));
        assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
        assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
        assert!(started.elapsed() < Duration::from_secs(4));
        drop(slow);

        // Eight long-polls on a cap of four connections: at most four are parked, the others
        // are told to retry at once (an earlier connection may still hold a place: more then).
        let (_, doc) = common::http_get(&format!("http://{addr}/v1/migrations/local/routing"))
            .expect("the routing document");
        let doc: serde_json::Value = serde_json::from_str(&doc).unwrap();
        let poll = format!(
            "GET /v1/migrations/local/routing?wait=6s HTTP/1.1\r\nHost: 127.0.0.1\r\nIf-None-Match: \"{}\"\r\n\r\n",
            doc["generation"]
        );
        let mut idle: Vec<TcpStream> = (0..8)
            .map(|_| {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(poll.as_bytes()).unwrap();
                s
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let mut refused = 0;
        let mut parked = 0;
        for s in &mut idle {
            let (answer, closed) = read_until_closed(s, Duration::from_millis(200));
            if answer.is_empty() && !closed {
                parked += 1;
            } else {
                assert!(closed, "{answer}");
                assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
                assert!(
                    answer.to_ascii_lowercase().contains("retry-after: 1"),
                    "{answer}"
                );
                assert!(answer.contains("--http-max-connections"), "{answer}");
                refused += 1;
            }
        }
        assert!(parked <= 4, "{parked} parked on a cap of 4");
        assert!(refused >= 4, "{refused} refused");
        // Once they are answered, the daemon serves again.
        drop(idle);
        poll_until("the daemon serves again", Duration::from_secs(10), || {
            common::http_get(&format!("http://{addr}/healthz")).is_some_and(|(s, _)| s == 200)
        });
    })
    .await
    .unwrap();
    d.stop_quietly().await;
}

/// Regression: long-polls parked without bound (each holding a connection and a task).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_polls_beyond_the_cap_are_told_to_retry() {
    let w = world(&[]).await;
    let d = w.start(|c| c.http.max_long_polls = 2).await;
    let http = reqwest::Client::new();
    let first = http
        .get(d.url("/v1/migrations/local/routing"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let etag = first.headers()["etag"].to_str().unwrap().to_string();
    let poll = || {
        http.get(d.url("/v1/migrations/local/routing?wait=5s"))
            .header("If-None-Match", &etag)
            .send()
    };
    let parked = d.parked_readers(&etag, 2, "5s").await;
    let third = poll().await.unwrap();
    assert_eq!(third.status(), 503);
    assert_eq!(third.headers()["retry-after"], "1");
    assert!(
        third
            .text()
            .await
            .unwrap()
            .contains("--http-max-long-polls")
    );
    for p in parked {
        assert_eq!(p.await.unwrap().0, 304);
    }
    // Their places are free again.
    assert_eq!(
        http.get(d.url("/v1/migrations/local/routing?wait=100ms"))
            .header("If-None-Match", &etag)
            .send()
            .await
            .unwrap()
            .status(),
        304
    );
    d.stop_quietly().await;
}

/// Regression: without a token, `POST .../pause` with `Origin: http://evil.example` (a web page
/// the operator had open) paused the migration; so did a form post and a DNS-rebound name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_web_page_cannot_drive_a_daemon_without_a_token() {
    let w = world(&[]).await;
    let d = w.start(|_| {}).await;
    d.leading().await;
    let http = reqwest::Client::new();
    let pause = d.url("/v1/migrations/local/pause");
    let json = ("content-type", "application/json");
    let refused = [
        // A page's fetch with a JSON body still carries its Origin.
        vec![json, ("origin", "http://evil.example")],
        vec![json, ("origin", "null")],
        // A form or text/plain post needs no preflight: refused for its type.
        vec![("content-type", "text/plain")],
        vec![("content-type", "application/x-www-form-urlencoded")],
        vec![],
        // DNS rebinding: evil.example resolved to 127.0.0.1, the Host says so.
        vec![json, ("host", "evil.example:8480")],
        vec![json, ("sec-fetch-site", "cross-site")],
    ];
    for headers in refused {
        let mut req = http.post(&pause).body("{\"reason\": \"x\"}");
        for (k, v) in &headers {
            req = req.header(*k, *v);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        assert!(
            status == 403 || status == 415,
            "{headers:?}: {status} {}",
            r.text().await.unwrap()
        );
        assert!(!paused(&w).await, "{headers:?} paused the migration");
    }
    // The CLI's way (or curl's with the JSON type), on loopback, from no page: accepted, with
    // or without a body, with a same-origin Origin too.
    let ok = http
        .post(&pause)
        .header("content-type", "application/json")
        .header("origin", format!("http://{}", d.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "{}", ok.text().await.unwrap());
    assert!(paused(&w).await);
    let ok = http
        .post(d.url("/v1/migrations/local/resume"))
        .json(&serde_json::json!({ "reason": "go on" }))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200, "{}", ok.text().await.unwrap());
    assert!(!paused(&w).await);
    d.stop_quietly().await;
}

/// Regression: the body was parsed before the token was checked, so an unauthenticated caller
/// got a 422 listing the body's fields.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_checked_before_the_body() {
    let w = world(&[]).await;
    let d = w.start_guarded(single_token(), |_| {}).await;
    let http = reqwest::Client::new();
    let pause = d.url("/v1/migrations/local/pause");
    for body in ["{\"reasn\": 1}", "not json"] {
        let r = http
            .post(&pause)
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "{body}");
        let text = r.text().await.unwrap();
        assert!(
            !text.contains("reason") && !text.contains("expected"),
            "{text}"
        );
    }
    // With the token, the body's problems are said.
    let r = http
        .post(&pause)
        .bearer_auth(TOKEN)
        .header("content-type", "application/json")
        .body("{\"reasn\": 1}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 422);
    assert!(r.text().await.unwrap().contains("reasn"));
    d.stop_quietly().await;
}

/// Regression (issue 43, item 10): reads ignored the `Host` header, so a DNS-rebinding page
/// (evil.example resolved to 127.0.0.1) read the API, the console and `/metrics`. Every route
/// now refuses a `Host` that is not allowed; `--allowed-host` adds names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_with_a_foreign_host_header_is_refused() {
    let w = world(&[]).await;
    let d = w
        .start(|c| c.allowed_hosts = vec!["migrate.example.org".into()])
        .await;
    d.leading().await;
    let http = reqwest::Client::new();
    for path in [
        "/v1/migrations",
        "/v1/migrations/local",
        "/v1/migrations/local/history",
        "/v1/migrations/local/routing",
        "/metrics",
        "/healthz",
        "/",
        "/migrations/local",
    ] {
        let r = http
            .get(d.url(path))
            .header("host", "evil.example:8480")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{path}");
        let text = r.text().await.unwrap();
        assert!(text.contains("--allowed-host"), "{path}: {text}");
        assert!(!text.contains("local\""), "{path}: {text}");
        for ok in ["migrate.example.org", "localhost:1", &d.addr.to_string()] {
            let r = http
                .get(d.url(path))
                .header("host", ok)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{path} with Host {ok}");
        }
    }
    d.stop_quietly().await;
}

/// Regression (issue 43, item 12): JSON and `/metrics` answers had no
/// `X-Content-Type-Options: nosniff`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_and_metrics_answers_say_nosniff() {
    let w = world(&[]).await;
    let d = w.start(|_| {}).await;
    d.leading().await;
    let http = reqwest::Client::new();
    for path in [
        "/metrics",
        "/v1/migrations",
        "/v1/migrations/local/history",
        "/healthz",
        "/nowhere",
    ] {
        let r = http.get(d.url(path)).send().await.unwrap();
        assert_eq!(
            r.headers()
                .get("x-content-type-options")
                .map(|v| v.to_str().unwrap()),
            Some("nosniff"),
            "{path}"
        );
    }
    d.stop_quietly().await;
}

/// Regression (issue 43, item 12): the mutation's body (up to 64 KiB) was read before the token
/// was checked, contrary to docs/api.md: a caller without the token held the request open as
/// long as it sent its body. Now it is answered 401 from its headers alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_checked_before_the_body_is_read() {
    let w = world(&[]).await;
    let d = w.start_guarded(single_token(), |_| {}).await;
    let mut s = TcpStream::connect(d.addr).unwrap();
    s.write_all(
        b"POST /v1/migrations/local/pause HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{\"reason\":",
    )
    .unwrap();
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    while start.elapsed() < Duration::from_secs(5) && !got.windows(4).any(|w| w == b"\r\n\r\n") {
        if let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
    }
    let got = String::from_utf8_lossy(&got);
    assert!(
        got.starts_with("HTTP/1.1 401"),
        "answered before the body? {got:?}"
    );
    assert!(!paused(&w).await);
    d.stop_quietly().await;
}

/// The token comparison: equal tokens only, whatever their lengths (digests are compared).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_exact_token_is_accepted() {
    let w = world(&[]).await;
    let d = w.start_guarded(single_token(), |_| {}).await;
    let http = reqwest::Client::new();
    for wrong in ["s3cre", "s3cret!", "S3CRET", "x"] {
        let r = http
            .post(d.url("/v1/migrations/local/pause"))
            .bearer_auth(wrong)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{wrong}");
    }
    assert!(!paused(&w).await);
    let r = http
        .post(d.url("/v1/migrations/local/pause"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(paused(&w).await);
    d.stop_quietly().await;
}

/// Regression (issue 43, item 9): `/history` and the migration's page loaded the whole journal
/// (2,000 entries with 60 KB reasons made a 120 MB page). Both now load one bounded page, the
/// newest entries, with a cursor to page back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_journal_is_paged_on_the_api_and_the_console() {
    let w = world(&[]).await;
    let d = w.start(|_| {}).await;
    d.leading().await;
    let http = reqwest::Client::new();
    let long = "r".repeat(60_000);
    for i in 0..75 {
        for action in ["pause", "resume"] {
            let r = http
                .post(d.url(&format!("/v1/migrations/local/{action}")))
                .json(&serde_json::json!({ "reason": format!("{i} {long}") }))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
        }
    }
    let r = http
        .get(d.url("/v1/migrations/local/history"))
        .send()
        .await
        .unwrap();
    let link = r
        .headers()
        .get("link")
        .map(|v| v.to_str().unwrap().to_string());
    let page: Vec<serde_json::Value> = r.json().await.unwrap();
    assert_eq!(page.len(), 100);
    let (first, last) = (
        page[0]["seq"].as_i64().unwrap(),
        page[99]["seq"].as_i64().unwrap(),
    );
    assert!(last > first, "oldest first");
    let link = link.expect("a Link to the older page");
    assert!(link.contains(&format!("before={first}")), "{link}");
    let older: Vec<serde_json::Value> = http
        .get(d.url(&format!("/v1/migrations/local/history?before={first}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(older.len() + page.len(), 151, "init and 150 commands");
    assert!(older.iter().all(|e| e["seq"].as_i64().unwrap() < first));
    let console = http.get(d.url("/migrations/local")).send().await.unwrap();
    let html = console.text().await.unwrap();
    assert!(html.len() <= 1024 * 1024, "{} bytes", html.len());
    assert!(
        html.contains(&format!("?before={first}")),
        "an older-entries link"
    );
    assert_eq!(html.matches("<tr data-seq=").count(), 100);
    d.stop_quietly().await;
}

fn leader_gauge(metrics: &str) -> Option<f64> {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix("queue_migrate_leader "))
        .and_then(|v| v.trim().parse().ok())
}

/// Regression: when the store went away the tick waited on it, `queue_migrate_leader` stayed 1
/// for ~30 s, `/healthz` was the only probe (always 200) and no "lost the lease" was ever logged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_gone_away_drops_readiness_and_the_leader_gauge_within_a_lease_period() {
    let w = world(&[]).await;
    let hooked = Hooked::new(w.store.clone());
    let down = hooked.down.clone();
    let d = w
        .start_over(hooked, |c| c.holder = "gone-store".into())
        .await;
    d.leading().await;
    let http = reqwest::Client::new();
    let ready = |q: &'static str| {
        let url = d.url(&format!("/readyz{q}"));
        let http = http.clone();
        async move { http.get(url).send().await.unwrap().status().as_u16() }
    };
    assert_eq!(ready("").await, 200);
    assert_eq!(ready("?standby=true").await, 200);
    let metrics = http
        .get(d.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(leader_gauge(&metrics), Some(1.0), "{metrics}");

    down.store(true, Ordering::SeqCst);
    let gone = Instant::now();
    // daemon_config's lease lasts 3 s.
    let lease = Duration::from_secs(3);
    loop {
        let metrics = http
            .get(d.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        if leader_gauge(&metrics) == Some(0.0) {
            break;
        }
        assert!(
            gone.elapsed() < lease + Duration::from_millis(500),
            "queue_migrate_leader still 1 after {:?}",
            gone.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ready("").await, 503);
    // The lease ran out by now; the store's last answer is older than a lease period soon.
    let deadline = Instant::now() + lease;
    while ready("?standby=true").await != 503 {
        assert!(
            Instant::now() < deadline,
            "a standby without a store is ready"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let healthz = http.get(d.url("/healthz")).send().await.unwrap();
    assert_eq!(healthz.status(), 200, "liveness: the process serves");
    let lines = logged();
    assert!(
        lines
            .lines()
            .any(|l| l.contains("WARN") && l.contains("lost the lease")),
        "{lines}"
    );
    d.stop_quietly().await;
}

/// Regression: a daemon whose environment lacks a variable the plan needs answered that
/// migration's routing endpoint `404 no migration named ...`, and `status` said nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_that_does_not_compile_here_is_reported_on_its_routing_and_in_status() {
    let w = world(&["QM_PROM_URL"]).await;
    let d = w.start(|_| {}).await;
    d.leading().await;
    let r = reqwest::get(d.url("/v1/migrations/local/routing"))
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let text = r.text().await.unwrap();
    assert!(text.contains("QM_PROM_URL"), "{text}");
    assert!(!text.contains("no migration named"), "{text}");
    // An unknown one is still 404.
    let r = reqwest::get(d.url("/v1/migrations/nope/routing"))
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    d.stop_quietly().await;

    // `migrate status` in the same environment says so.
    let state = w.dir.path().join("state.db");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(["status", "local"])
        .env("MIGRATE_STATE", &state)
        .env_remove("QM_PROM_URL")
        .env("QM_SCRAPE_URL", "http://127.0.0.1:9/metrics")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("NOT loadable") && stdout.contains("QM_PROM_URL"),
        "{stdout}"
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_migrate"))
        .args(["status", "local", "--json"])
        .env("MIGRATE_STATE", &state)
        .env_remove("QM_PROM_URL")
        .env("QM_SCRAPE_URL", "http://127.0.0.1:9/metrics")
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        v["plan_error"]
            .as_str()
            .is_some_and(|e| e.contains("QM_PROM_URL")),
        "{v}"
    );
}

/// Regression: `migrate run --interval 200ms` said "every 0s" in its banner (the interval
/// rounded down to whole seconds).
#[test]
fn the_banner_says_the_interval_given() {
    let bench = Bench::with_plan(include_str!("../../../plans/local.yaml"));
    bench.indicators.all_green();
    bench.init();
    let cmd = bench.command(&[
        "run",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "200ms",
        "--lease-ttl",
        "3s",
    ]);
    let daemon = DaemonChild::spawn(cmd, Duration::from_secs(20)).expect("the daemon starts");
    let banner = || {
        daemon
            .log
            .lock()
            .unwrap()
            .iter()
            .find(|l| l.contains(" on http://"))
            .cloned()
    };
    poll_until("the banner logged", Duration::from_secs(5), || {
        banner().is_some()
    });
    let banner = banner().unwrap_or_default();
    daemon.kill9();
    assert!(banner.contains(", every 200ms, "), "{banner}");
}

/// Regression: with a low open-files limit a few hundred idle connections used up the daemon's
/// descriptors: every tick failed ("Too many open files" reading a `file:` secret, connecting to
/// its sources) and a guard breach was never acted on. The daemon runs as a child under
/// `ulimit -n 160`, its scrape URL a `file:` secret.
#[test]
fn a_flood_of_idle_connections_under_a_low_descriptor_limit_does_not_stop_the_guards() {
    let bench = Bench::with_plan(
        &include_str!("../../../plans/local.yaml")
            .replace("\"${QM_SCRAPE_URL}\"", "\"file:scrape-url\""),
    );
    bench.indicators.all_green();
    std::fs::write(bench.path("scrape-url"), bench.indicators.scrape_url()).unwrap();
    let init = bench.run(&["init", "local.yaml"]);
    assert_eq!(init.code, 0, "{}", init.stderr);
    let state = bench.path("state.db");
    let rt = tokio::runtime::Runtime::new().unwrap();
    let store = rt.block_on(async {
        let store = SqliteStore::open(state.to_str().unwrap()).await.unwrap();
        common::enter_first_slice(&store, "local", queue_migrate::time::now_ms()).await;
        store
    });
    let mut cmd = std::process::Command::new("sh");
    cmd.args([
        "-c",
        "ulimit -n 160 && exec \"$0\" \"$@\"",
        env!("CARGO_BIN_EXE_migrate"),
        "run",
        "--listen",
        "127.0.0.1:0",
        "--interval",
        "200ms",
        "--lease-ttl",
        "3s",
    ])
    .current_dir(bench.dir.path())
    .env("MIGRATE_STATE", &state)
    .env("QM_PROM_URL", &bench.prom_url)
    .env_remove("QM_SCRAPE_URL")
    .env_remove("MIGRATE_NOW")
    .env_remove("MIGRATE_API_TOKEN");
    let daemon = DaemonChild::spawn(cmd, Duration::from_secs(20)).expect("the daemon starts");
    poll_until("the daemon leads", Duration::from_secs(10), || {
        daemon.healthz().is_some_and(|h| h["leader"] == true)
    });
    let addr = daemon.addr.clone();
    // More idle connections than the process has descriptors; kept open.
    let flood: Vec<TcpStream> = (0..400)
        .filter_map(|_| TcpStream::connect(&addr).ok())
        .collect();
    assert!(flood.len() >= 300, "{} connections", flood.len());
    std::thread::sleep(Duration::from_millis(500));
    bench.indicators.set("app_error_ratio_new", 0.2);
    let breach = Instant::now();
    let state_now = || {
        rt.block_on(store.get("local"))
            .map(|r| (r.state.name().to_string(), r.paused))
    };
    let acted = (|| {
        while breach.elapsed() < Duration::from_secs(5) {
            if state_now().is_ok_and(|s| s == ("synthetic".to_string(), true)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    })();
    let log = daemon.log.lock().unwrap().join("\n");
    drop(flood);
    daemon.kill9();
    assert!(
        acted,
        "no rollback within 5 s of the breach (ticks every 200 ms); state {:?}\n{log}",
        state_now()
    );
}

/// Regression: a `reason` with a newline was written as is into the daemon's log and the webhook
/// `text`: a caller could forge a log line or a chat message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reason_with_a_newline_is_one_line_in_the_log_and_the_webhook_text() {
    let got: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let g2 = got.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(v): axum::Json<serde_json::Value>| {
            let g = g2.clone();
            async move {
                g.lock().unwrap().push(v);
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let yaml = include_str!("../../../plans/local.yaml")
        .replace("auto_advance: true", "auto_advance: false")
        .replace(
            "routing: { file: local.routing.json }",
            &format!(
                "routing: {{ file: local.routing.json }}\nnotify: {{ webhooks: [ {{ url: \"{hook}\" }} ] }}"
            ),
        );
    let w = world_with_plan(&yaml, &[]).await;
    let d = w.start(|_| {}).await;
    d.leading().await;
    let forged = "ERROR queue_migrate::daemon: forged";
    let reason = format!("window closes\n{forged}\r\u{1b}[2K");
    let r = reqwest::Client::new()
        .post(d.url("/v1/migrations/local/pause"))
        .json(&serde_json::json!({ "reason": reason }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
    // Stored through the one text rule (issue 43): its lines kept, every other control
    // character written as an escape.
    let journal = w.store.journal("local").await.unwrap();
    let stored = format!("window closes\n{forged}\\r\\u{{1b}}[2K");
    assert_eq!(
        journal.last().unwrap().reason.as_deref(),
        Some(stored.as_str())
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    let event = loop {
        let found = got
            .lock()
            .unwrap()
            .iter()
            .find(|e| e["event"] == "transition")
            .cloned();
        if let Some(e) = found {
            break e;
        }
        assert!(Instant::now() < deadline, "no transition event");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let text = event["text"].as_str().unwrap();
    assert!(
        !text.contains('\n') && !text.contains('\r') && !text.contains('\u{1b}'),
        "{text:?}"
    );
    assert!(text.contains("window closes\\nERROR"), "{text:?}");
    assert_eq!(
        event["details"]["reason"],
        stored.as_str(),
        "details: the journal entry as stored"
    );
    let lines = logged();
    assert!(
        lines.lines().any(|l| l.contains("window closes\\nERROR")),
        "{lines}"
    );
    assert!(
        !lines.lines().any(|l| l.starts_with(forged)),
        "a forged line in the log: {lines}"
    );
    d.stop_quietly().await;
}
