//! The HTTP follower against a daemon stand-in and a forward proxy, both tiny servers of this
//! module on 127.0.0.1:0 that count what reaches them: the proxy given to the follower, the
//! proxy of the environment (in a process of its own: the variables are process-wide), and the
//! hosts `NO_PROXY` lists reached directly. Also the body's cap and the header check.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// The variable that tells [`env_child`] where the daemon stand-in is.
const CHILD_DAEMON: &str = "QM_ROUTER_TEST_DAEMON";

/// What a tiny server saw: requests, and the first line of each.
#[derive(Default)]
struct Seen {
    requests: AtomicUsize,
    /// Every request's first line, in order.
    lines: Mutex<Vec<String>>,
}

impl Seen {
    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
    /// The first line of request number `n` (from 0), once it arrived (10 s at most).
    async fn line(&self, n: usize) -> String {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while self.requests() <= n && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(n)
            .cloned()
            .unwrap_or_default()
    }
    fn saw(&self, head: &str) {
        self.lines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(head.lines().next().unwrap_or_default().to_string());
        self.requests.fetch_add(1, Ordering::SeqCst);
    }
}

/// A request's head (a `GET` has no body), or `None` if the peer closed first.
async fn read_head(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    String::from_utf8(head).ok()
}

/// A tiny server on 127.0.0.1:0 (its `http://` URL): each connection's request head is
/// counted, then `answer` is given the head and the connection.
async fn serve<F, A>(answer: F) -> (String, Arc<Seen>)
where
    F: Fn(String, TcpStream) -> A + Send + Sync + 'static,
    A: Future<Output = ()> + Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Seen::default());
    let counted = Arc::clone(&seen);
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let (seen, answer) = (Arc::clone(&counted), Arc::clone(&answer));
            tokio::spawn(async move {
                let Some(head) = read_head(&mut stream).await else {
                    return;
                };
                seen.saw(&head);
                answer(head, stream).await;
            });
        }
    });
    (url, seen)
}

/// A daemon stand-in answering `body` as a generation-1 document (with its `Content-Length`, or
/// up to the connection's end if `length` is false), then holding conditional requests for 30 s
/// before a 304; one request per connection.
async fn daemon_framed(body: Vec<u8>, length: bool) -> (String, Arc<Seen>) {
    serve(move |head, mut stream| {
        let body = body.clone();
        async move {
            if head.to_ascii_lowercase().contains("if-none-match: \"1\"") {
                tokio::time::sleep(Duration::from_secs(30)).await;
                let _ = stream
                    .write_all(b"HTTP/1.1 304 Not Modified\r\nConnection: close\r\n\r\n")
                    .await;
                return;
            }
            let length = match length {
                true => format!("Content-Length: {}\r\n", body.len()),
                false => String::new(),
            };
            let head =
                format!("HTTP/1.1 200 OK\r\nETag: \"1\"\r\n{length}Connection: close\r\n\r\n");
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(&body).await;
        }
    })
    .await
}

async fn daemon(body: Vec<u8>) -> (String, Arc<Seen>) {
    daemon_framed(body, true).await
}

/// A forward proxy for `http://` targets: it reads `GET http://host:port/path HTTP/1.1`, sends
/// `GET /path HTTP/1.1` with the same headers to `host:port`, and copies the answer back.
async fn proxy() -> (String, Arc<Seen>) {
    serve(|head, mut client| async move {
        let (line, headers) = head.split_once("\r\n").unwrap_or_default();
        let mut words = line.split(' ');
        let (method, target) = (words.next().unwrap_or_default(), words.next());
        let Some(rest) = target.and_then(|t| t.strip_prefix("http://")) else {
            let _ = client.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
            return;
        };
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let Ok(mut upstream) = TcpStream::connect(authority).await else {
            let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
            return;
        };
        let forwarded = format!("{method} {path} HTTP/1.1\r\n{headers}");
        if upstream.write_all(forwarded.as_bytes()).await.is_ok() {
            let _ = tokio::io::copy(&mut upstream, &mut client).await;
        }
    })
    .await
}

fn document() -> Vec<u8> {
    serde_json::to_vec(&crate::routing::sample_document(1, 9)).unwrap()
}

/// Follow `base` with `options` until generation 1 arrives (or 10 s pass).
async fn follow_once(base: &str, options: HttpFollow) -> (Router, FollowerHandle) {
    let router = Router::builder("orders").build();
    let handle = router
        .follow_http_tuned(base, "orders", None, options)
        .unwrap();
    let mut changed = router.subscribe();
    let arrived = tokio::time::timeout(Duration::from_secs(10), async {
        while router.generation() != 1 {
            changed.changed().await.unwrap();
        }
    })
    .await;
    assert!(arrived.is_ok(), "no document: {:?}", handle.status());
    (router, handle)
}

/// The follower's options with the proxy `url`, except to the hosts `no_proxy` lists.
fn through_proxy(url: String, no_proxy: Option<&str>) -> HttpFollow {
    HttpFollow {
        proxy: ProxyChoice::Through {
            url,
            no_proxy: no_proxy.map(str::to_string),
        },
        ..HttpFollow::default()
    }
}

/// Follow `base` with no proxy until the first failure (or 10 s).
async fn follow_until_failure(base: &str) -> (Router, FollowerHandle) {
    let router = Router::builder("orders").build();
    let direct = HttpFollow {
        proxy: ProxyChoice::Direct,
        ..HttpFollow::default()
    };
    let handle = router
        .follow_http_tuned(base, "orders", None, direct)
        .unwrap();
    let mut status = handle.watch_status();
    let failed = tokio::time::timeout(
        Duration::from_secs(10),
        status.wait_for(|s| s.consecutive_failures > 0),
    )
    .await
    .is_ok();
    assert!(failed, "{:?}", handle.status());
    (router, handle)
}

#[tokio::test]
async fn the_follower_reaches_the_daemon_through_the_proxy_it_is_given() {
    let (base, daemon) = daemon(document()).await;
    let (proxy, through) = proxy().await;
    let (router, _handle) = follow_once(&base, through_proxy(proxy, None)).await;
    assert_eq!(router.route("order-0").target, Side::New);
    assert!(through.requests() >= 1);
    assert_eq!(daemon.requests(), through.requests());
    // The absolute form a proxy is asked with: the daemon's whole URL (with the producer's id
    // and the generation it applied, issue 58).
    let line = through.line(0).await;
    assert_eq!(
        line,
        format!(
            "GET {base}/v1/migrations/orders/routing?wait=30s&producer={}&applied=0 HTTP/1.1",
            router.producer_id()
        )
    );
}

#[tokio::test]
async fn a_host_no_proxy_lists_is_reached_directly() {
    let (base, daemon) = daemon(document()).await;
    let (proxy, through) = proxy().await;
    let options = through_proxy(proxy, Some("example.org, 127.0.0.1"));
    let _follower = follow_once(&base, options).await;
    assert!(daemon.requests() >= 1);
    assert_eq!(through.requests(), 0);
}

/// Regression: the hand-written client connected to the daemon itself whatever `HTTP_PROXY`
/// said. The variables are read in a process of their own ([`env_child`]): setting them here
/// would reach every test of this binary.
async fn through_the_environment(no_proxy: Option<&str>) -> (Arc<Seen>, Arc<Seen>) {
    let (base, daemon) = daemon(document()).await;
    let (proxy, through) = proxy().await;
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args(["--exact", "router::tests_http::env_child", "--ignored"])
        .env(CHILD_DAEMON, &base)
        .env("HTTP_PROXY", &proxy);
    for name in [
        "http_proxy",
        "HTTPS_PROXY",
        "https_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "REQUEST_METHOD",
    ] {
        child.env_remove(name);
    }
    if let Some(list) = no_proxy {
        child.env("NO_PROXY", list);
    }
    let out = tokio::task::spawn_blocking(move || child.output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "the child failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (daemon, through)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_follower_takes_http_proxy_from_the_environment() {
    let (daemon, through) = through_the_environment(None).await;
    assert!(through.requests() >= 1);
    assert_eq!(daemon.requests(), through.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_proxy_from_the_environment_bypasses_the_proxy() {
    let (daemon, through) = through_the_environment(Some("127.0.0.1")).await;
    assert!(daemon.requests() >= 1);
    assert_eq!(through.requests(), 0);
}

/// Run by the two tests above in a process of its own, with `HTTP_PROXY` / `NO_PROXY` set: a
/// follower with the default options gets the daemon's document.
#[test]
#[ignore = "run by the_follower_takes_http_proxy_from_the_environment in a process of its own"]
fn env_child() {
    let Ok(base) = std::env::var(CHILD_DAEMON) else {
        eprintln!("{CHILD_DAEMON} is not set: run by the tests that set it");
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let _follower = follow_once(&base, HttpFollow::default()).await;
    });
}

#[tokio::test]
async fn a_body_over_the_cap_is_refused_with_or_without_its_length() {
    for length in [true, false] {
        let mut big = document();
        big.resize(MAX_DOCUMENT_BYTES + 1, b' ');
        let (base, _daemon) = daemon_framed(big, length).await;
        let (router, handle) = follow_until_failure(&base).await;
        let error = handle.status().last_error.unwrap_or_default();
        assert!(error.contains("larger than"), "length {length}: {error}");
        assert_eq!(router.generation(), 0);
    }
}

#[tokio::test]
async fn a_header_value_with_a_line_break_is_refused() {
    let client = http::Client::new(USER_AGENT, &ProxyChoice::Direct, false).unwrap();
    let url = Url::parse("http://127.0.0.1:9/v1/migrations/orders/routing").unwrap();
    let refused = client
        .get(
            &url,
            &[("Authorization", "Bearer t\r\nX-Evil: 1")],
            Duration::from_secs(1),
            1024,
        )
        .await;
    assert_eq!(
        refused.err(),
        Some(http::Failure::Unreachable(
            "the Authorization header holds a line break".into()
        ))
    );
}

#[test]
fn a_proxy_url_is_shown_without_its_credentials() {
    let choice = ProxyChoice::Through {
        url: "http://user:s3cret@proxy:3128".into(),
        no_proxy: None,
    };
    let shown = format!("{choice:?}");
    assert!(
        !shown.contains("s3cret") && shown.contains("proxy:3128"),
        "{shown}"
    );
}

/// An `https://` daemon is spoken to in TLS (rustls with the platform's roots), never in
/// plain HTTP: the first bytes a plain server gets are a TLS handshake record, and its plain
/// answer is a failure, not a document.
#[tokio::test]
async fn an_https_daemon_gets_tls_not_plain_http() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("https://{}", listener.local_addr().unwrap());
    let first = tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let mut bytes = [0u8; 3];
        stream.read_exact(&mut bytes).await.unwrap();
        let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        bytes
    });
    let (router, _handle) = follow_until_failure(&base).await;
    // A handshake record (0x16) of TLS 1.x (0x03 0x0N).
    assert_eq!(first.await.unwrap()[..2], [0x16, 0x03]);
    assert_eq!(router.generation(), 0);
}

#[tokio::test]
async fn a_proxy_url_that_is_not_one_is_refused_without_its_credentials() {
    let options = HttpFollow {
        proxy: ProxyChoice::Through {
            url: "http://user:s3cret@[not-a-host".into(),
            no_proxy: None,
        },
        ..HttpFollow::default()
    };
    let refused = Router::builder("orders").build().follow_http_tuned(
        "http://127.0.0.1:9",
        "orders",
        None,
        options,
    );
    match refused {
        Err(RouterError::Client(message)) => {
            assert!(!message.contains("s3cret"), "{message}");
            assert!(message.starts_with("proxy http://***@"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

/// Issue 58: every poll names the producer and the generation it applied (0 before the first
/// document, then the document's), and the metrics text says the same.
#[tokio::test]
async fn every_poll_says_the_producer_and_the_generation_it_applied() {
    let (base, daemon) = daemon(document()).await;
    let router = Router::builder("orders").producer("checkout \"7\"").build();
    assert!(
        router.metrics_text().contains(
            "queue_migrate_routing_applied_generation{migration=\"orders\",producer=\"checkout \\\"7\\\"\"} 0\n"
        ),
        "{}",
        router.metrics_text()
    );
    let direct = HttpFollow {
        proxy: ProxyChoice::Direct,
        ..HttpFollow::default()
    };
    let _handle = router
        .follow_http_tuned(&base, "orders", None, direct)
        .unwrap();
    let first = daemon.line(0).await;
    assert!(
        first.contains("wait=30s&producer=checkout+%227%22&applied=0 "),
        "{first}"
    );
    let second = daemon.line(1).await;
    assert!(second.contains("&applied=1 "), "{second}");
    assert_eq!(router.generation(), 1);
    assert!(router.metrics_text().contains("\"} 1\n"));
    assert_ne!(
        Router::builder("orders").build().producer_id(),
        Router::builder("orders").build().producer_id(),
        "two routers of one process are two followers"
    );
}
