//! Indicator sources that misbehave: a Prometheus slower than the source timeout, HTTP 500/503,
//! an error JSON, NaN, an empty vector, several series, garbage and invalid UTF-8 on /metrics,
//! 50 MB of metrics, an endless answer, connection refused, a redirect loop, a body cut mid-way.
//!
//! Each is served by a tiny HTTP server of its own (std threads on 127.0.0.1:0, raw sockets so
//! that it can lie about lengths and hang up mid-body). For each, `migrate advance` must be a
//! hold (exit 3) whose reason names the source and what was wrong: never an advance, never a
//! crash, and the migration, its journal and its routing file unchanged. The daemon gets the same
//! treatment in one test: every misbehaviour in turn, tick after tick, and it keeps running.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::{Bench, DaemonChild, fast_local_plan, poll_until};
use queue_migrate::indicators::fetch::{MAX_QUERY_BYTES, MAX_SCRAPE_BYTES};

// ---------------------------------------------------------------------------------------------
// The misbehaving servers.

/// One accepted connection whose request head has been read; counts the bytes it manages to send.
struct Conn {
    stream: TcpStream,
    path: String,
    sent: Arc<AtomicU64>,
}

impl Conn {
    /// Write all of `bytes`; an error means the client hung up.
    fn send(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.sent.fetch_add(bytes.len() as u64, Ordering::SeqCst);
        Ok(())
    }

    /// A whole response with a correct Content-Length.
    fn answer(&mut self, status: &str, content_type: &str, body: &[u8]) {
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = self.send(head.as_bytes());
        let _ = self.send(body);
    }

    fn json(&mut self, body: &str) {
        self.answer("200 OK", "application/json", body.as_bytes());
    }

    /// Headers of a chunked answer.
    fn chunked_head(&mut self, content_type: &str) -> std::io::Result<()> {
        self.send(
            format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )
            .as_bytes(),
        )
    }

    fn chunk(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.send(format!("{:x}\r\n", data.len()).as_bytes())?;
        self.send(data)?;
        self.send(b"\r\n")
    }

    /// Read until the client hangs up (or a minute passes): a server that never answers.
    fn wait_for_hang_up(&mut self) {
        let _ = self.stream.set_read_timeout(Some(Duration::from_secs(60)));
        let mut buf = [0u8; 1024];
        while matches!(self.stream.read(&mut buf), Ok(n) if n > 0) {}
    }
}

type Behaviour = dyn Fn(&mut Conn) + Send + Sync;

/// A server on 127.0.0.1:0 that answers every request with `behaviour` (each connection on a
/// thread of its own; the server lives until the test process ends).
struct Server {
    addr: SocketAddr,
    requests: Arc<AtomicUsize>,
    sent: Arc<AtomicU64>,
}

impl Server {
    fn start(behaviour: impl Fn(&mut Conn) + Send + Sync + 'static) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(AtomicUsize::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let behaviour: Arc<Behaviour> = Arc::new(behaviour);
        let (r, s) = (requests.clone(), sent.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (behaviour, r, s) = (behaviour.clone(), r.clone(), s.clone());
                std::thread::spawn(move || {
                    let Some(path) = read_head(&stream) else {
                        return;
                    };
                    r.fetch_add(1, Ordering::SeqCst);
                    let mut conn = Conn {
                        stream,
                        path,
                        sent: s,
                    };
                    behaviour(&mut conn);
                    let _ = conn.stream.flush();
                    let _ = conn.stream.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Server {
            addr,
            requests,
            sent,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn metrics_url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }
}

/// Read a request head; its path.
fn read_head(mut stream: &TcpStream) -> Option<String> {
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).ok()?;
        if n == 0 || head.len() > 64 * 1024 {
            return None;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    text.split_whitespace().nth(1).map(str::to_string)
}

/// A port on 127.0.0.1 where nothing listens (bound, then closed).
fn refused_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

/// A Prometheus instant-query answer with these samples.
fn vector(samples: &[(&str, &str)]) -> String {
    let result: Vec<String> = samples
        .iter()
        .map(|(labels, v)| format!(r#"{{"metric":{{{labels}}},"value":[1795996800,"{v}"]}}"#))
        .collect();
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
        result.join(",")
    )
}

// ---------------------------------------------------------------------------------------------
// The bench: a migration parked where its one exit gate reads the source under test.

/// `synthetic`: its exit gate `probe ok` reads the Prometheus source `prom`.
fn at_synthetic() -> Bench {
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.ok(&["advance", "local"], 0);
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "synthetic");
    b
}

/// `consume_dual`: its exit gate `new consumer connected` reads the scrape source `app`.
fn at_consume_dual() -> Bench {
    let b = Bench::new();
    b.indicators.all_green();
    b.init();
    b.ok(&["advance", "local"], 0);
    assert_eq!(b.state().0, "consume_dual");
    b
}

/// What must not change under a hold.
#[derive(Debug, PartialEq)]
struct Unchanged {
    state: serde_json::Value,
    version: serde_json::Value,
    journal: usize,
    routing_generation: serde_json::Value,
}

fn snapshot(b: &Bench) -> Unchanged {
    let s = b.status();
    let journal = b.ok(&["history", "local", "--json"], 0).json();
    Unchanged {
        state: s["state"].clone(),
        version: s["version"].clone(),
        journal: journal.as_array().unwrap().len(),
        routing_generation: b.routing_file()["generation"].clone(),
    }
}

/// `migrate advance` with the source `source` pointed (through `env`) at a misbehaving server:
/// exit 3, the exit gate holds with a reason that names the source and contains every one of
/// `needles` (case-insensitive), no panic, nothing changed. Returns the reason.
fn assert_hold(
    b: &Bench,
    extra: &[&str],
    env: &[(&str, &str)],
    source: &str,
    needles: &[&str],
) -> String {
    let before = snapshot(b);
    let mut args = vec!["advance", "local", "--json"];
    args.extend_from_slice(extra);
    let started = Instant::now();
    let r = b.run_env(&args, env);
    let took = started.elapsed();
    assert_eq!(
        r.code, 3,
        "advance must hold (exit 3), exited {}\nstdout:\n{}\nstderr:\n{}",
        r.code, r.stdout, r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    let out = r.json();
    assert_eq!(out["applied"], serde_json::Value::Null, "{out}");
    let gate = &out["gates"][0];
    assert_eq!(gate["verdict"], "no_data", "{out}");
    let reason = gate["reason"].as_str().unwrap().to_string();
    assert!(
        reason.contains(&format!("source {source}")),
        "the reason must name the source {source}: {reason}"
    );
    for n in needles {
        assert!(
            reason.to_lowercase().contains(&n.to_lowercase()),
            "the reason must say {n:?}: {reason}"
        );
    }
    let blockers = out["blockers"].to_string();
    assert!(
        blockers.contains(gate["name"].as_str().unwrap()),
        "{blockers}"
    );
    assert_eq!(snapshot(b), before, "a hold changed the migration");
    // What `status` shows is the same reason, recorded.
    let s = b.status();
    assert_eq!(s["gates"][0]["verdict"], "no_data");
    assert_eq!(s["gates"][0]["reason"].as_str().unwrap(), reason);
    eprintln!("hold after {took:?}: {reason}");
    reason
}

fn prom_hold(server_url: &str, extra: &[&str], needles: &[&str]) -> String {
    let b = at_synthetic();
    assert_hold(&b, extra, &[("QM_PROM_URL", server_url)], "prom", needles)
}

fn scrape_hold(server_url: &str, extra: &[&str], needles: &[&str]) -> String {
    let b = at_consume_dual();
    assert_hold(&b, extra, &[("QM_SCRAPE_URL", server_url)], "app", needles)
}

// ---------------------------------------------------------------------------------------------
// Prometheus.

#[test]
fn a_prometheus_slower_than_the_source_timeout_holds_timed_out() {
    let s = Server::start(Conn::wait_for_hang_up);
    let started = Instant::now();
    prom_hold(
        &s.url(),
        &["--source-timeout", "300ms"],
        &["timed out after 300ms"],
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the timeout was not honoured"
    );
    assert!(s.requests.load(Ordering::SeqCst) >= 1);
}

#[test]
fn a_prometheus_that_trickles_its_body_past_the_timeout_holds_timed_out() {
    let s = Server::start(|c| {
        let body = vector(&[("", "1")]);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        if c.send(head.as_bytes()).is_err() {
            return;
        }
        // One byte every 100 ms: the whole answer would take seconds. Stops when the client
        // hangs up (or after the body).
        for b in body.bytes() {
            std::thread::sleep(Duration::from_millis(100));
            if c.send(&[b]).is_err() {
                return;
            }
        }
    });
    prom_hold(
        &s.url(),
        &["--source-timeout", "400ms"],
        &["timed out after 400ms"],
    );
}

#[test]
fn http_500_from_prometheus_holds_with_the_status() {
    let s = Server::start(|c| {
        c.answer(
            "500 Internal Server Error",
            "text/html",
            b"<html><body>upstream exploded</body></html>",
        );
    });
    let reason = prom_hold(&s.url(), &[], &["HTTP 500", "upstream exploded"]);
    // Not the "is this Prometheus?" hint of a 200 that is not JSON: the status says it all.
    assert!(!reason.contains("check that the source URL"), "{reason}");
}

#[test]
fn http_503_from_prometheus_holds_with_the_status() {
    let s = Server::start(|c| c.answer("503 Service Unavailable", "text/plain", b"down"));
    prom_hold(&s.url(), &[], &["HTTP 503", "`down`"]);
}

#[test]
fn an_error_json_from_prometheus_holds_with_its_error_text() {
    let body = r#"{"status":"error","errorType":"execution","error":"query timed out in expression evaluation"}"#;
    // As Prometheus sends it (422/503), and as a proxy that rewrites the status might (200).
    for status in ["422 Unprocessable Entity", "200 OK"] {
        let s = Server::start(move |c| c.answer(status, "application/json", body.as_bytes()));
        let reason = prom_hold(&s.url(), &[], &["execution", "query timed out"]);
        if status.starts_with("422") {
            assert!(reason.contains("HTTP 422"), "{reason}");
        }
    }
}

#[test]
fn a_nan_from_prometheus_holds_not_a_finite_number() {
    let s = Server::start(|c| c.json(&vector(&[("", "NaN")])));
    prom_hold(&s.url(), &[], &["not a finite number", "NaN"]);
}

#[test]
fn an_empty_vector_from_prometheus_holds_matched_no_series() {
    let s = Server::start(|c| c.json(&vector(&[])));
    prom_hold(&s.url(), &[], &["empty result", "matched no series"]);
}

#[test]
fn several_series_for_one_query_hold_and_are_listed() {
    let s = Server::start(|c| {
        c.json(&vector(&[
            (r#""instance":"a""#, "1"),
            (r#""instance":"b""#, "1"),
        ]))
    });
    prom_hold(&s.url(), &[], &["2 series", "sum()", r#"instance="a""#]);
}

#[test]
fn an_html_page_with_200_from_a_proxy_holds_not_json() {
    let s = Server::start(|c| c.answer("200 OK", "text/html", b"<html>Sign in</html>"));
    prom_hold(&s.url(), &[], &["not JSON", "<html>Sign in"]);
}

#[test]
fn a_prometheus_answer_cut_midway_holds() {
    let s = Server::start(|c| {
        let body = vector(&[("", "1")]);
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        let _ = c.send(head.as_bytes());
        let _ = c.send(&body.as_bytes()[..body.len() / 2]);
        // ...and hang up.
    });
    prom_hold(&s.url(), &[], &["api/v1/query", "broke off"]);
}

#[test]
fn a_chunked_prometheus_answer_cut_midway_holds() {
    let s = Server::start(|c| {
        let body = vector(&[("", "1")]);
        let _ = c.chunked_head("application/json");
        let _ = c.chunk(&body.as_bytes()[..10]);
        // No more chunks, no terminating chunk: hang up.
    });
    prom_hold(&s.url(), &[], &["api/v1/query", "broke off"]);
}

#[test]
fn connection_refused_by_prometheus_holds_cannot_connect() {
    prom_hold(&refused_url(), &[], &["cannot connect"]);
}

#[test]
fn a_redirect_loop_on_prometheus_holds() {
    let s = Server::start(|c| {
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            c.path
        );
        let _ = c.send(head.as_bytes());
    });
    prom_hold(&s.url(), &[], &["redirect"]);
    assert!(
        s.requests.load(Ordering::SeqCst) <= 20,
        "followed {} redirects",
        s.requests.load(Ordering::SeqCst)
    );
}

/// An "internal" server a hostile source points at (another origin: another port), and a
/// source that redirects every request there with a body of its own.
fn redirect_to_another_origin() -> (Server, Server) {
    let internal = Server::start(|c| {
        c.answer(
            "500 Internal Server Error",
            "text/plain",
            b"INTERNAL_SECRET_db_password=hunter2",
        )
    });
    let target = format!("http://localhost:{}/internal", internal.addr.port());
    let source = Server::start(move |c| {
        let body = "REDIRECT_BODY_SECRET_token=abc";
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = c.send(head.as_bytes());
    });
    (source, internal)
}

/// Regression (issue 43, item 3): a Prometheus source that redirected to
/// `http://localhost:.../internal` got the controller to fetch it and quote its first bytes in
/// the gate reason. A redirect to another origin is not followed, and no body is quoted.
#[test]
fn a_redirect_to_another_origin_is_not_followed_nor_quoted_prometheus() {
    let (source, internal) = redirect_to_another_origin();
    let reason = prom_hold(&source.url(), &[], &["redirect", "not followed"]);
    assert_eq!(
        internal.requests.load(Ordering::SeqCst),
        0,
        "followed: {reason}"
    );
    assert!(!reason.contains("INTERNAL_SECRET"), "{reason}");
    assert!(!reason.contains("REDIRECT_BODY_SECRET"), "{reason}");
}

/// Regression (issue 43, item 3): the same on a `/metrics` source.
#[test]
fn a_redirect_to_another_origin_is_not_followed_nor_quoted_metrics() {
    let (source, internal) = redirect_to_another_origin();
    let reason = scrape_hold(&source.metrics_url(), &[], &["redirect", "not followed"]);
    assert_eq!(
        internal.requests.load(Ordering::SeqCst),
        0,
        "followed: {reason}"
    );
    assert!(!reason.contains("INTERNAL_SECRET"), "{reason}");
    assert!(!reason.contains("REDIRECT_BODY_SECRET"), "{reason}");
}

/// Regression (issue 43, item 3): a redirect within the source's origin is followed, but the
/// body of the answer it leads to is never quoted in the reason.
#[test]
fn the_body_of_an_answer_reached_through_a_redirect_is_not_quoted() {
    let s = Server::start(|c| {
        if c.path.starts_with("/moved") {
            c.answer(
                "200 OK",
                "text/html",
                b"<html>SAME_ORIGIN_PAGE_SECRET</html>",
            );
        } else {
            let _ = c.send(
                b"HTTP/1.1 302 Found\r\nLocation: /moved\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let reason = prom_hold(&s.url(), &[], &["redirect"]);
    assert!(!reason.contains("SAME_ORIGIN_PAGE_SECRET"), "{reason}");
    assert_eq!(s.requests.load(Ordering::SeqCst), 2, "{reason}");
}

/// Was a bug: the Prometheus answer was read whole (`Response::text`), however long, so a source
/// that never stops sending (a misconfigured proxy, an exporter on the wrong port) grew the
/// controller's memory until the source timeout. Now the answer is capped like a scrape.
#[test]
fn an_endless_prometheus_answer_is_a_hold_not_an_oom() {
    let s = Server::start(|c| {
        if c.chunked_head("application/json").is_err() {
            return;
        }
        let _ = c.chunk(br#"{"status":"success","data":{"resultType":"vector","result":["#);
        let filler = [b' '; 64 * 1024];
        // At most 1 GiB, stopping when the client hangs up.
        for _ in 0..16 * 1024 {
            if c.chunk(&filler).is_err() {
                return;
            }
        }
    });
    prom_hold(
        &s.url(),
        &["--source-timeout", "30s"],
        &["more than", "MiB"],
    );
    let sent = s.sent.load(Ordering::SeqCst);
    assert!(
        sent < (MAX_QUERY_BYTES + 16 * 1024 * 1024) as u64,
        "the client read {sent} bytes of an answer capped at {MAX_QUERY_BYTES}"
    );
}

// ---------------------------------------------------------------------------------------------
// /metrics.

#[test]
fn garbage_bytes_on_metrics_hold_not_utf8() {
    let s = Server::start(|c| {
        let mut body = b"app_new_consumer_connected 1\n".to_vec();
        body.extend_from_slice(&[0xff, 0xfe, 0x00, 0x80, 0xc3, 0x28, b'\n']);
        c.answer("200 OK", "text/plain; version=0.0.4", &body);
    });
    scrape_hold(&s.metrics_url(), &[], &["not UTF-8"]);
}

#[test]
fn binary_noise_on_metrics_holds() {
    // SplitMix64 bytes: a binary protocol on the port, or a compressed body nobody asked for.
    let s = Server::start(|c| {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let body: Vec<u8> = (0..4096)
            .map(|_| {
                x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let mut z = x;
                z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                (z ^ (z >> 31)) as u8
            })
            .collect();
        c.answer("200 OK", "application/octet-stream", &body);
    });
    scrape_hold(&s.metrics_url(), &[], &["metrics"]);
}

#[test]
fn text_garbage_on_metrics_holds_with_the_line_number() {
    let s = Server::start(|c| {
        c.answer(
            "200 OK",
            "text/plain",
            b"app_new_consumer_connected 1\n}}} this is { not an exposition\n",
        )
    });
    scrape_hold(&s.metrics_url(), &[], &["unreadable metrics", "line 2"]);
}

/// Was a bug (issue 56): a `/metrics` answering HTTP 200 with one malformed line read "blind:
/// source app unreachable" in the standing, as a source that refused every connection did, and
/// so did one answering HTTP 503. Each now says what it was: its answer could not be parsed
/// (naming the line), it answered HTTP 503, or it is unreachable.
#[test]
fn a_malformed_metrics_line_with_http_200_is_not_called_unreachable() {
    let malformed = Server::start(|c| {
        c.answer(
            "200 OK",
            "text/plain",
            b"app_new_consumer_connected 1\n}}} this is { not an exposition\n",
        )
    });
    let failing = Server::start(|c| c.answer("503 Service Unavailable", "text/plain", b"nope"));
    let cases = [
        (
            malformed.metrics_url(),
            "source_unparsable",
            "blind: source app's answer could not be parsed (source app: unreadable metrics, line 2",
        ),
        (
            failing.metrics_url(),
            "source_http_error",
            "blind: source app answered HTTP 503 (",
        ),
        (
            refused_url(),
            "source_down",
            "blind: source app unreachable (",
        ),
    ];
    for (url, cause, said) in cases {
        let b = at_consume_dual();
        let r = b.run_env(&["advance", "local"], &[("QM_SCRAPE_URL", &url)]);
        assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
        let status = b.status();
        assert_eq!(status["gates"][0]["cause"], cause, "{status}");
        assert_eq!(status["standing"]["readings"]["kind"], "blind", "{status}");
        assert_eq!(status["standing"]["readings"]["cause"], cause, "{status}");
        let sentence = status["standing"]["sentence"].as_str().unwrap_or_default();
        assert!(sentence.contains(said), "{cause}: {sentence}");
        if cause != "source_down" {
            assert!(!sentence.contains("unreachable"), "{cause}: {sentence}");
        }
        // The human `status` says the same sentence.
        let human = b.run_env(&["status", "local"], &[("COLUMNS", "400")]);
        assert!(human.stdout.contains(said), "{cause}: {}", human.stdout);
    }
}

/// 50 MB of well-formed metrics, streamed without a length. The whole body used to be read (the
/// cap was 64 MiB) and parsed: ~450 MB of memory and seconds of CPU for 50 MB of realistic lines,
/// about 28 times the body for short ones (`a 1`). The cap is now 16 MiB and the answer is a hold
/// that says so, read no further than the cap.
#[test]
fn fifty_megabytes_of_metrics_is_a_hold_not_an_oom() {
    const TOTAL: usize = 50_000_000;
    let s = Server::start(|c| {
        if c.chunked_head("text/plain; version=0.0.4").is_err() {
            return;
        }
        if c.chunk(b"# TYPE app_new_consumer_connected gauge\napp_new_consumer_connected 1\n")
            .is_err()
        {
            return;
        }
        let mut block = String::new();
        let mut i = 0u64;
        let mut sent = 0;
        while sent < TOTAL {
            block.clear();
            while block.len() < 64 * 1024 {
                block.push_str(&format!(
                    "filler_metric{{instance=\"host-{i}\",job=\"filler\"}} {i}\n"
                ));
                i += 1;
            }
            if c.chunk(block.as_bytes()).is_err() {
                return;
            }
            sent += block.len();
        }
        let _ = c.send(b"0\r\n\r\n");
    });
    scrape_hold(
        &s.metrics_url(),
        &["--source-timeout", "60s"],
        &[&format!(
            "more than {} MiB",
            MAX_SCRAPE_BYTES / (1024 * 1024)
        )],
    );
    let sent = s.sent.load(Ordering::SeqCst);
    assert!(
        sent < (MAX_SCRAPE_BYTES + 16 * 1024 * 1024) as u64,
        "the client read {sent} bytes of metrics capped at {MAX_SCRAPE_BYTES}"
    );
}

/// The same, announced with a Content-Length: refused before the body is read.
#[test]
fn a_metrics_answer_announcing_fifty_megabytes_is_refused_unread() {
    const TOTAL: usize = 50_000_000;
    let s = Server::start(|c| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {TOTAL}\r\n\r\n"
        );
        if c.send(head.as_bytes()).is_err() {
            return;
        }
        let line = [b'#'; 1023];
        let mut block = Vec::with_capacity(64 * 1024);
        while block.len() < 64 * 1024 {
            block.extend_from_slice(&line);
            block.push(b'\n');
        }
        let mut sent = 0;
        while sent < TOTAL {
            let n = block.len().min(TOTAL - sent);
            if c.send(&block[..n]).is_err() {
                return;
            }
            sent += n;
        }
    });
    scrape_hold(&s.metrics_url(), &[], &["50000000 bytes", "more than"]);
    let sent = s.sent.load(Ordering::SeqCst);
    assert!(
        sent < (MAX_SCRAPE_BYTES + 16 * 1024 * 1024) as u64,
        "the client read {sent} bytes"
    );
}

#[test]
fn http_500_and_503_from_metrics_hold_with_the_status() {
    for (status, code) in [
        ("500 Internal Server Error", "HTTP 500"),
        ("503 Service Unavailable", "HTTP 503"),
    ] {
        let s = Server::start(move |c| c.answer(status, "text/plain", b"nope"));
        scrape_hold(&s.metrics_url(), &[], &[code]);
    }
}

/// Was a bug: a NaN sample on /metrics (legal in the exposition format) reached the SQLite store,
/// which keeps NaN as NULL and refused the scrape history: `migrate advance` exited 1 with
/// "NOT NULL constraint failed: scrape_points.value", and the daemon failed every tick, instead of
/// a hold that says the reading is not a number.
#[test]
fn a_nan_sample_on_metrics_is_a_hold_not_a_store_error() {
    let s = Server::start(|c| {
        c.answer(
            "200 OK",
            "text/plain",
            b"# TYPE app_new_consumer_connected gauge\napp_new_consumer_connected NaN\n",
        )
    });
    let b = at_consume_dual();
    let env = [("QM_SCRAPE_URL", s.metrics_url())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_hold(&b, &[], &env, "app", &["not a finite number", "NaN"]);
    // Again: the round after one with a NaN reads its stored history without trouble.
    assert_hold(&b, &[], &env, "app", &["not a finite number", "NaN"]);
}

#[test]
fn an_infinite_sample_on_metrics_holds() {
    for value in ["+Inf", "-Inf"] {
        let s = Server::start(move |c| {
            let body = format!("app_new_consumer_connected {value}\n");
            c.answer("200 OK", "text/plain", body.as_bytes())
        });
        scrape_hold(&s.metrics_url(), &[], &["finite"]);
    }
}

/// Unlike a Prometheus source, a bare selector on a scrape source is summed over its series
/// (documented in src/indicators/query/mod.rs): two pods reporting 1 read 2, shown in the reason.
#[test]
fn several_series_on_metrics_are_summed_as_documented() {
    let s = Server::start(|c| {
        c.answer(
            "200 OK",
            "text/plain",
            b"app_new_consumer_connected{pod=\"a\"} 1\napp_new_consumer_connected{pod=\"b\"} 1\n",
        )
    });
    let b = at_consume_dual();
    let r = b.run_env(
        &["advance", "local", "--dry-run", "--json"],
        &[("QM_SCRAPE_URL", &s.metrics_url())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let gate = &r.json()["gates"][0];
    assert_eq!(gate["value"], 2.0, "{gate}");
    assert_eq!(gate["reason"], "2 >= 1", "{gate}");
}

/// A `/metrics` target with `n` series, the gate's own metric among them.
fn many_series(n: usize) -> Server {
    let mut body = String::from("app_new_consumer_connected 1\n");
    for i in 1..n {
        body.push_str(&format!("junk_series{{i=\"{i}\"}} 1\n"));
    }
    Server::start(move |c| c.answer("200 OK", "text/plain", body.as_bytes()))
}

/// Regression (issue 43, item 4): a target with a million series (an exporter's
/// label-cardinality bug) was parsed and stored whole: the store grew by a gigabyte, the daemon
/// to 1.3 GB. A scrape over the cap (default 10,000) holds "too many series: N > cap", and the
/// cap is a flag.
#[test]
fn a_scrape_over_the_series_cap_holds_too_many_series() {
    let s = many_series(20_000);
    let b = at_consume_dual();
    let reason = assert_hold(
        &b,
        &[],
        &[("QM_SCRAPE_URL", &s.metrics_url())],
        "app",
        &["too many series: 20000 > 10000"],
    );
    assert!(!reason.contains("junk_series"), "{reason}");
    let r = b.run_env(
        &[
            "advance",
            "local",
            "--dry-run",
            "--json",
            "--max-series",
            "30000",
        ],
        &[("QM_SCRAPE_URL", &s.metrics_url())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["gates"][0]["verdict"], "pass");
}

/// Regression (issue 54, item 7): a target under the series cap with long labels (9,999
/// series of 1.5 KB) had every series its gate selects stored each round: 31 MB per round, 1.2
/// GB in 40 s, until SQLite could not read the history back and every tick failed. What a
/// round keeps of a scrape is capped in bytes too: past the cap the gate holds naming it, and
/// the next round does the same instead of failing.
#[test]
fn a_scrape_whose_selected_series_pass_the_byte_cap_holds_naming_it() {
    let pad = "p".repeat(1500);
    let mut body = String::new();
    for i in 0..3000 {
        body.push_str(&format!(
            "app_new_consumer_connected{{pod=\"{i}\",note=\"{pad}\"}} 1\n"
        ));
    }
    let s = Server::start(move |c| c.answer("200 OK", "text/plain", body.as_bytes()));
    let b = at_consume_dual();
    for _ in 0..2 {
        let reason = assert_hold(
            &b,
            &[],
            &[("QM_SCRAPE_URL", &s.metrics_url())],
            "app",
            &["cap of 4 MiB per scrape", "nothing of it is kept"],
        );
        assert!(!reason.contains(&pad), "{reason}");
    }
}

#[test]
fn metrics_without_the_metric_hold() {
    let s = Server::start(|c| c.answer("200 OK", "text/plain", b"something_else 1\n"));
    scrape_hold(&s.metrics_url(), &[], &["app_new_consumer_connected"]);
}

#[test]
fn an_empty_metrics_page_holds() {
    let s = Server::start(|c| c.answer("200 OK", "text/plain", b""));
    scrape_hold(&s.metrics_url(), &[], &["app_new_consumer_connected"]);
}

#[test]
fn a_metrics_body_cut_midway_holds() {
    let s = Server::start(|c| {
        let body = b"# TYPE app_new_consumer_connected gauge\napp_new_consumer_connected 1\n";
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
            body.len() * 10
        );
        let _ = c.send(head.as_bytes());
        let _ = c.send(body);
    });
    scrape_hold(&s.metrics_url(), &[], &["/metrics", "broke off"]);
}

/// Was a bug: a /metrics answer delimited by the connection's close (no Content-Length, not
/// chunked) carries no sign of being cut, and a line cut mid-number read as a number nobody
/// reported: `app_new_consumer_connected 10` cut after `1` passed the gate with 1. The text format
/// ends every line with a line feed, so a body whose last line has none is now a hold.
#[test]
fn a_metrics_body_cut_mid_line_without_a_length_is_a_hold_not_a_wrong_number() {
    let s = Server::start(|c| {
        let _ = c.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n\
              # TYPE app_new_consumer_connected gauge\napp_new_consumer_connected 1",
        );
    });
    scrape_hold(
        &s.metrics_url(),
        &[],
        &["cut off", "app_new_consumer_connected 1"],
    );
}

/// OpenMetrics may end with `# EOF` and no line feed: that is whole, not cut.
#[test]
fn openmetrics_ending_with_eof_and_no_line_feed_is_read() {
    let s = Server::start(|c| {
        c.answer(
            "200 OK",
            "application/openmetrics-text; version=1.0.0",
            b"# TYPE app_new_consumer_connected gauge\napp_new_consumer_connected 1\n# EOF",
        )
    });
    let b = at_consume_dual();
    let r = b.run_env(
        &["advance", "local", "--dry-run", "--json"],
        &[("QM_SCRAPE_URL", &s.metrics_url())],
    );
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.json()["gates"][0]["verdict"], "pass");
}

#[test]
fn a_chunked_metrics_body_cut_midway_holds() {
    let s = Server::start(|c| {
        let _ = c.chunked_head("text/plain");
        let _ = c.chunk(b"app_new_consumer_connected 1\n");
    });
    scrape_hold(&s.metrics_url(), &[], &["/metrics", "broke off"]);
}

#[test]
fn a_slow_metrics_endpoint_holds_timed_out() {
    let s = Server::start(Conn::wait_for_hang_up);
    scrape_hold(
        &s.metrics_url(),
        &["--source-timeout", "300ms"],
        &["timed out after 300ms"],
    );
}

#[test]
fn connection_refused_by_metrics_holds_cannot_connect() {
    scrape_hold(
        &format!("{}/metrics", refused_url()),
        &[],
        &["cannot connect"],
    );
}

#[test]
fn a_redirect_loop_on_metrics_holds() {
    let s = Server::start(|c| {
        let head = format!(
            "HTTP/1.1 301 Moved Permanently\r\nLocation: {}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            c.path
        );
        let _ = c.send(head.as_bytes());
    });
    scrape_hold(&s.metrics_url(), &[], &["redirect"]);
}

// ---------------------------------------------------------------------------------------------
// The daemon: every misbehaviour in turn, tick after tick.

/// A daemon over a migration parked at `phase` (whose exit gate reads `source`, pointed through
/// `var` at a server that misbehaves in one of `kinds` ways per request, in turn): two rounds of
/// every misbehaviour, and the daemon is still running, never failed a tick, and moved nothing.
fn daemon_rotation(
    phase: &str,
    var: &str,
    source: &str,
    kinds: usize,
    misbehave: impl Fn(usize, &mut Conn) + Send + Sync + 'static,
) {
    let b = Bench::with_plan(&fast_local_plan());
    b.indicators.all_green();
    b.init();
    while b.state().0 != phase {
        b.ok(&["advance", "local"], 0);
    }
    let before = snapshot(&b);

    let turn = Arc::new(AtomicUsize::new(0));
    let t = turn.clone();
    let s = Server::start(move |c| {
        if c.path.starts_with("/loop") {
            // Round and round, without taking a turn: one tick, one turn.
            let head = format!(
                "HTTP/1.1 302 Found\r\nLocation: {}\r\nContent-Length: 0\r\n\r\n",
                c.path
            );
            let _ = c.send(head.as_bytes());
            return;
        }
        misbehave(t.fetch_add(1, Ordering::SeqCst) % kinds, c)
    });
    let url = if var == "QM_SCRAPE_URL" {
        s.metrics_url()
    } else {
        s.url()
    };
    let mut cmd = b.daemon_command("misbehaving", &["--source-timeout", "300ms"]);
    cmd.env(var, url);
    let mut d = DaemonChild::spawn(cmd, Duration::from_secs(20)).expect("the daemon started");
    poll_until(
        "two rounds of misbehaviours",
        Duration::from_secs(90),
        || turn.load(Ordering::SeqCst) > 2 * kinds,
    );
    let ticks = d.ticks();
    assert!(ticks >= 2 * kinds as u64, "ticks {ticks}");
    assert!(
        d.child.try_wait().unwrap().is_none(),
        "the daemon died on a misbehaving source"
    );
    let reason = b.status()["gates"][0]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains(&format!("source {source}")), "{reason}");
    let (_, metrics) = common::http_get(&format!("http://{}/metrics", d.addr)).unwrap();
    assert!(
        metrics.contains("queue_migrate_evaluation_errors_total{"),
        "{metrics}"
    );
    d.child.kill().unwrap();
    d.child.wait().unwrap();
    let log = d.log.lock().unwrap().join("\n");
    assert!(!log.contains("tick failed"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
    assert_eq!(snapshot(&b), before, "the daemon moved on bad readings");
}

#[test]
fn the_daemon_holds_on_every_prometheus_misbehaviour_and_keeps_ticking() {
    daemon_rotation(
        "synthetic",
        "QM_PROM_URL",
        "prom",
        9,
        |kind, c| match kind {
            0 => c.wait_for_hang_up(),
            1 => c.answer(
                "500 Internal Server Error",
                "text/html",
                b"<html>boom</html>",
            ),
            2 => c.answer("503 Service Unavailable", "text/plain", b"down"),
            3 => c.json(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#),
            4 => c.json(&vector(&[("", "NaN")])),
            5 => c.json(&vector(&[])),
            6 => c.json(&vector(&[(r#""a":"1""#, "1"), (r#""a":"2""#, "1")])),
            7 => {
                let _ = c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"status\":");
            }
            _ => c.answer("200 OK", "application/json", &[0xff, 0xfe, 0x00]),
        },
    );
}

#[test]
fn the_daemon_holds_on_every_metrics_misbehaviour_and_keeps_ticking() {
    daemon_rotation(
        "consume_dual",
        "QM_SCRAPE_URL",
        "app",
        9,
        |kind, c| match kind {
            0 => c.wait_for_hang_up(),
            1 => c.answer("500 Internal Server Error", "text/plain", b"boom"),
            2 => c.answer(
                "200 OK",
                "text/plain",
                b"app_new_consumer_connected 1\n\xff\xfe\n",
            ),
            3 => c.answer("200 OK", "text/plain", b"}}} not an exposition\n"),
            4 => c.answer("200 OK", "text/plain", b"app_new_consumer_connected NaN\n"),
            5 => c.answer("200 OK", "text/plain", b""),
            6 => {
                let _ = c.send(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\napp_new_");
            }
            7 => {
                // 17 MiB streamed without a length: over the cap.
                if c.chunked_head("text/plain").is_err() {
                    return;
                }
                let block = "x 1\n".repeat(16 * 1024);
                for _ in 0..17 * 16 {
                    if c.chunk(block.as_bytes()).is_err() {
                        return;
                    }
                }
                let _ = c.send(b"0\r\n\r\n");
            }
            _ => {
                let _ =
                    c.send(b"HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\n\r\n");
            }
        },
    );
}

/// Issue 44: `status` says why a gate has no data (`cause`), and its standing is `blind` only
/// when the source could not be read: an empty answer blocks the gate, naming it, while an
/// error page makes the source's gates blind.
#[test]
fn status_names_the_no_data_cause_and_only_a_source_down_is_blind() {
    let cases: [(PromAnswer, &str, &str); 2] = [
        (PromAnswer::Empty, "empty", "blocked"),
        (PromAnswer::Down, "source_http_error", "blind"),
    ];
    for (answer, cause, kind) in cases {
        let s = match answer {
            PromAnswer::Empty => Server::start(|c| c.json(&vector(&[]))),
            PromAnswer::Down => {
                Server::start(|c| c.answer("503 Service Unavailable", "text/plain", b"down"))
            }
        };
        let b = at_synthetic();
        let r = b.run_env(&["advance", "local"], &[("QM_PROM_URL", &s.url())]);
        assert_eq!(r.code, 3, "{}\n{}", r.stdout, r.stderr);
        let status = b.status();
        assert_eq!(status["gates"][0]["verdict"], "no_data", "{status}");
        assert_eq!(status["gates"][0]["cause"], cause, "{status}");
        // No daemon runs (issue 56): it is not driven, and its last readings say the rest.
        assert_eq!(status["standing"]["kind"], "not_driven", "{status}");
        assert_eq!(status["standing"]["readings"]["kind"], kind, "{status}");
    }
}

/// What the Prometheus of [`status_names_the_no_data_cause_and_only_a_source_down_is_blind`]
/// answers.
#[derive(Clone, Copy)]
enum PromAnswer {
    Empty,
    Down,
}
