//! The router's followers against a small daemon stand-in (axum on 127.0.0.1:0) that implements the
//! routing endpoint's contract, and against a routing file. Tokio time is paused: long-polls of
//! 30 s and back-offs of 30 s take no wall time, and their spacing is asserted exactly.
#![cfg(feature = "router")]

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use queue_migrate::router::{HttpFollow, Router};
use queue_migrate::routing::{RoutingDocument, Side};
use tokio::sync::watch;
use tokio::time::Instant;

/// The crate's shared fixture: migration `orders` in `slices[0]`, 128 slices.
fn doc(generation: u64, migrated: u32) -> RoutingDocument {
    queue_migrate::routing::sample_document(generation, migrated)
}

/// One request as the stand-in saw it.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    if_none_match: Option<String>,
    authorization: Option<String>,
    wait: Option<String>,
    /// The status forced by `fail_with` (0: answered normally).
    forced: u16,
}

/// The daemon stand-in: the routing endpoint's contract and nothing else.
struct Daemon {
    doc: watch::Sender<RoutingDocument>,
    seen: Mutex<Vec<Seen>>,
    /// 0: answer normally; otherwise answer every request with this status.
    fail_with: AtomicU16,
}

impl Daemon {
    fn publish(&self, d: RoutingDocument) {
        self.doc.send_replace(d);
    }
    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

fn doc_response(d: &RoutingDocument) -> Response {
    let body = serde_json::to_vec(d).unwrap();
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::ETAG,
        HeaderValue::from_str(&format!("\"{}\"", d.generation)).unwrap(),
    );
    r
}

async fn routing(
    State(d): State<Arc<Daemon>>,
    UrlPath(name): UrlPath<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let text = |h: header::HeaderName| {
        headers
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    d.seen.lock().unwrap().push(Seen {
        at: Instant::now(),
        if_none_match: text(header::IF_NONE_MATCH),
        authorization: text(header::AUTHORIZATION),
        wait: q.get("wait").cloned(),
        forced: d.fail_with.load(Ordering::SeqCst),
    });
    let status = d.fail_with.load(Ordering::SeqCst);
    if status != 0 {
        return StatusCode::from_u16(status).unwrap().into_response();
    }
    if name != "orders" {
        return StatusCode::NOT_FOUND.into_response();
    }
    let mut rx = d.doc.subscribe();
    let current = rx.borrow_and_update().clone();
    let known = text(header::IF_NONE_MATCH).map(|v| v.trim_matches('"').to_string());
    if known != Some(current.generation.to_string()) {
        return doc_response(&current);
    }
    let wait = q
        .get("wait")
        .and_then(|w| w.strip_suffix('s'))
        .and_then(|w| w.parse::<u64>().ok());
    if let Some(secs) = wait
        && let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(secs), rx.changed()).await
    {
        return doc_response(&rx.borrow().clone());
    }
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    r.headers_mut().insert(
        header::ETAG,
        HeaderValue::from_str(&format!("\"{}\"", current.generation)).unwrap(),
    );
    r
}

async fn start_daemon(first: RoutingDocument) -> (Arc<Daemon>, String) {
    let daemon = Arc::new(Daemon {
        doc: watch::Sender::new(first),
        seen: Mutex::new(Vec::new()),
        fail_with: AtomicU16::new(0),
    });
    let app = axum::Router::new()
        .route("/v1/migrations/{name}/routing", axum::routing::get(routing))
        .with_state(daemon.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (daemon, base)
}

/// Wait (in paused time) until the router's generation is `g`.
async fn until_generation(router: &Router, g: u64) {
    let mut rx = router.subscribe();
    tokio::time::timeout(Duration::from_secs(300), async {
        while router.generation() != g {
            rx.changed().await.unwrap();
        }
    })
    .await
    .unwrap_or_else(|_| panic!("generation {g} never arrived (at {})", router.generation()));
}

#[tokio::test(start_paused = true)]
async fn follows_the_daemon_by_long_poll_with_etag() {
    let (daemon, base) = start_daemon(doc(1, 0)).await;
    let router = Router::builder("orders").build();
    assert_eq!(router.route("order-0").target, Side::Old);
    let handle = router
        .follow_http(&base, "orders", Some("s3cret".into()))
        .unwrap();
    until_generation(&router, 1).await;
    assert_eq!(router.route("order-0").generation, 1);

    // A change reaches the held request at once: no 30 s wait.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = Instant::now();
    daemon.publish(doc(2, 9));
    until_generation(&router, 2).await;
    assert!(before.elapsed() < Duration::from_secs(1));
    // order-0 is slice 8: migrated once 9 slices are.
    assert_eq!(router.route("order-0").target, Side::New);

    // Idle: one request per 30 s hold, each a conditional GET of the current generation.
    tokio::time::sleep(Duration::from_secs(100)).await;
    let seen = daemon.seen();
    assert_eq!(
        seen[0].if_none_match, None,
        "first request is unconditional"
    );
    assert_eq!(seen[1].if_none_match.as_deref(), Some("\"1\""));
    for s in &seen {
        assert_eq!(s.wait.as_deref(), Some("30s"));
        assert_eq!(s.authorization.as_deref(), Some("Bearer s3cret"));
    }
    let idle: Vec<&Seen> = seen.iter().skip(2).collect();
    assert!(idle.len() >= 3, "{seen:?}");
    for pair in idle.windows(2) {
        assert_eq!(pair[0].if_none_match.as_deref(), Some("\"2\""));
        assert_eq!(pair[1].at - pair[0].at, Duration::from_secs(30));
    }
    assert_eq!(handle.status().accepted, 2);
    assert_eq!(handle.status().consecutive_failures, 0);
}

#[tokio::test(start_paused = true)]
async fn keeps_the_last_good_document_and_backs_off_while_the_daemon_fails() {
    let (daemon, base) = start_daemon(doc(1, 128)).await;
    let router = Router::builder("orders").build();
    let handle = router.follow_http(&base, "orders", None).unwrap();
    until_generation(&router, 1).await;
    daemon.fail_with.store(503, Ordering::SeqCst);
    // The held request ends with a 304 at 30 s; from then on every answer is 503.
    tokio::time::sleep(Duration::from_secs(200)).await;
    assert_eq!(router.generation(), 1);
    assert_eq!(router.route("order-0").target, Side::New);
    let status = handle.status();
    assert!(status.consecutive_failures >= 7, "{status:?}");
    assert!(
        status.last_error.as_deref().unwrap().contains("503"),
        "{status:?}"
    );

    let failed: Vec<Seen> = daemon
        .seen()
        .into_iter()
        .filter(|s| s.forced == 503)
        .collect();
    let gaps: Vec<u64> = failed
        .windows(2)
        .map(|p| (p[1].at - p[0].at).as_secs())
        .collect();
    assert_eq!(gaps[..7], [1, 2, 4, 8, 16, 30, 30], "{gaps:?}");

    // Back: the next attempt succeeds and the back-off is reset.
    daemon.fail_with.store(0, Ordering::SeqCst);
    daemon.publish(doc(2, 0));
    until_generation(&router, 2).await;
    assert_eq!(handle.status().consecutive_failures, 0);
    assert_eq!(handle.status().last_error, None);
}

#[tokio::test(start_paused = true)]
async fn an_unreachable_daemon_leaves_the_safe_default() {
    let port = crate::common::refused_port();
    let router = Router::builder("orders").slices(128).build();
    let handle = router
        .follow_http_tuned(
            &format!("http://127.0.0.1:{port}"),
            "orders",
            None,
            HttpFollow {
                wait: Duration::from_secs(30),
                ..HttpFollow::default()
            },
        )
        .unwrap();
    tokio::time::sleep(Duration::from_secs(120)).await;
    let route = router.route("order-0");
    assert_eq!(
        (route.target, route.slice, route.generation),
        (Side::Old, 8, 0)
    );
    let status = handle.status();
    // 0, 1, 3, 7, 15, 31, 61, 91: eight attempts in 120 s, not a spin.
    assert!((6..=9).contains(&status.consecutive_failures), "{status:?}");
    assert!(status.last_error.unwrap().contains("127.0.0.1"));
}

#[tokio::test(start_paused = true)]
async fn an_older_generation_from_the_daemon_is_not_taken() {
    let (daemon, base) = start_daemon(doc(5, 64)).await;
    let router = Router::builder("orders").build();
    let _handle = router.follow_http(&base, "orders", None).unwrap();
    until_generation(&router, 5).await;
    // The daemon goes back (a stale replica): it answers 200 at once, never 304.
    daemon.publish(doc(3, 0));
    let from = daemon.seen().len();
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert_eq!(router.generation(), 5);
    assert_eq!(router.route("order-0").target, Side::New);
    // Spaced by min_interval (1 s), not a busy loop.
    let n = daemon.seen().len() - from;
    assert!((15..=22).contains(&n), "{n} requests in 20 s");
}

#[tokio::test(start_paused = true)]
async fn a_document_for_another_migration_is_refused() {
    let mut other = doc(9, 128);
    other.migration = "payments".into();
    let (_daemon, base) = start_daemon(other).await;
    let router = Router::builder("orders").build();
    let handle = router.follow_http(&base, "orders", None).unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(router.generation(), 0);
    let status = handle.status();
    assert!(
        status.last_error.as_deref().unwrap().contains("payments"),
        "{status:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn dropping_the_handle_stops_the_follower() {
    let (daemon, base) = start_daemon(doc(1, 0)).await;
    let router = Router::builder("orders").build();
    let handle = router.follow_http(&base, "orders", None).unwrap();
    until_generation(&router, 1).await;
    tokio::time::sleep(Duration::from_secs(61)).await;
    drop(handle);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let n = daemon.seen().len();
    tokio::time::sleep(Duration::from_secs(300)).await;
    assert_eq!(daemon.seen().len(), n);
    daemon.publish(doc(2, 0));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(router.generation(), 1);
}

/// Write like the controller does: a temporary file, then a rename.
fn write_atomically(path: &Path, body: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, body).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

#[tokio::test(start_paused = true)]
async fn follows_a_file_and_keeps_the_last_good_document() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("orders.routing.json");
    let router = Router::builder("orders").build();
    // Missing at start: safe default, one failure reported.
    let handle = router
        .follow_file(&path, Duration::from_millis(500))
        .unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(router.generation(), 0);
    assert!(handle.status().last_error.is_some());

    write_atomically(&path, &serde_json::to_vec(&doc(1, 0)).unwrap());
    until_generation(&router, 1).await;
    assert_eq!(handle.status().last_error, None);

    write_atomically(&path, &serde_json::to_vec_pretty(&doc(2, 9)).unwrap());
    until_generation(&router, 2).await;
    assert_eq!(router.route("order-0").target, Side::New);

    // Malformed: ignored with a warning, the last good document stays.
    write_atomically(&path, b"{\"migration\": \"orders\", \"generation\": 3");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(router.generation(), 2);
    let status = handle.status();
    assert!(
        status
            .last_error
            .as_deref()
            .unwrap()
            .contains("not a routing document"),
        "{status:?}"
    );

    // Older: ignored. Newer: taken.
    write_atomically(&path, &serde_json::to_vec(&doc(1, 128)).unwrap());
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(router.generation(), 2);
    write_atomically(&path, &serde_json::to_vec(&doc(3, 0)).unwrap());
    until_generation(&router, 3).await;

    // Deleted: kept.
    std::fs::remove_file(&path).unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(router.generation(), 3);
    assert!(handle.status().last_error.is_some());
    assert_eq!(handle.status().accepted, 3);
}

#[test]
fn followers_need_a_runtime() {
    let router = Router::builder("orders").build();
    assert!(matches!(
        router.follow_file("x.json", Duration::from_secs(1)),
        Err(queue_migrate::router::RouterError::NoRuntime)
    ));
}
