//! A round's PromQL queries asked a few per request (`Fetcher::prefetch_prometheus`): against a
//! real Prometheus (`QM_TEST_PROMETHEUS_URL`, started by `scripts/services.sh start prometheus`),
//! every query gets exactly the answer, or the reason, it gets when asked alone, and Prometheus
//! counts fewer requests than queries. Against a server that never answers, each query still
//! gets the reason it gets alone.

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use queue_migrate::indicators::fetch::{FetchError, Fetcher};

/// The server's URL. The tests that need it are `#[ignore]`d without it; run with
/// `--include-ignored` and no URL, they fail instead of passing without having run.
fn url() -> String {
    match std::env::var("QM_TEST_PROMETHEUS_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!("QM_TEST_PROMETHEUS_URL is not set (scripts/services.sh start prometheus)"),
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The body of an answer.
async fn text(request: reqwest::RequestBuilder) -> String {
    request.send().await.unwrap().text().await.unwrap()
}

/// The instant queries Prometheus has answered so far (every status code), from its own
/// `prometheus_http_requests_total`.
async fn queries_served(client: &reqwest::Client, base: &str) -> f64 {
    text(client.get(format!("{base}/metrics")))
        .await
        .lines()
        .filter(|l| {
            l.starts_with("prometheus_http_requests_total{")
                && l.contains(r#"handler="/api/v1/query""#)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Each query asked alone (a plain fetcher) and through a round's prefetch: the same answers,
/// and how many requests the round made.
async fn alone_and_batched(
    base: &str,
    queries: &[&str],
    at_ms: i64,
) -> (
    Vec<Result<f64, FetchError>>,
    Vec<Result<f64, FetchError>>,
    f64,
) {
    let plain = Fetcher::new(Duration::from_secs(5)).unwrap();
    let mut alone = Vec::new();
    for q in queries {
        alone.push(plain.prometheus(base, q, at_ms).await);
    }
    let round = plain.for_round();
    let before = queries_served(plain.client(), base).await;
    round.prefetch_prometheus(base, queries, at_ms).await;
    let mut batched = Vec::new();
    for q in queries {
        batched.push(round.prometheus(base, q, at_ms).await);
    }
    let requests = queries_served(plain.client(), base).await - before;
    (alone, batched, requests)
}

#[tokio::test]
#[ignore = "needs QM_TEST_PROMETHEUS_URL (scripts/services.sh start prometheus)"]
async fn each_query_of_a_batch_gets_the_answer_and_the_reason_it_gets_alone() {
    let base = url();
    let client = Fetcher::new(Duration::from_secs(5))
        .unwrap()
        .client()
        .clone();
    // Prometheus scrapes itself every second: wait for its first scrape.
    let mut tries = 0;
    loop {
        let body = text(
            client
                .get(format!("{base}/api/v1/query"))
                .query(&[("query", r#"up{job="prometheus"}"#)]),
        )
        .await;
        if body.contains(r#""value""#) {
            break;
        }
        tries += 1;
        assert!(
            tries < 300,
            "Prometheus at {base} never scraped itself: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at_ms = now_ms() - 1_000;

    // Instant vectors: one request for all, then one for each part that was not exactly one
    // finite number (its reason is its own).
    let vectors = [
        r#"sum(up{job="prometheus"}) # the self-scrape"#,
        "vector(3)",
        "sum(queue_migrate_batch_test_no_such_metric)",
        "vector(0) / 0",
        r#"label_replace(vector(1), "a", "x", "", "") or label_replace(vector(2), "a", "y", "", "")"#,
        "vector(7) * 2",
        "vector(3)",
        // Not self-contained: asked alone, a syntax error (in a batch it would read 1).
        "vector(5)) or (vector(1)",
    ];
    let (alone, batched, requests) = alone_and_batched(&base, &vectors, at_ms).await;
    assert_eq!(batched, alone);
    assert_eq!(alone[0], Ok(1.0));
    assert_eq!(alone[1], Ok(3.0));
    assert!(
        alone[2]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("empty result"),
        "{alone:?}"
    );
    assert!(
        alone[3]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("not a finite number"),
        "{alone:?}"
    );
    assert!(
        alone[4]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("2 series"),
        "{alone:?}"
    );
    assert_eq!(alone[5], Ok(14.0));
    assert!(
        alone[7]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("bad_data"),
        "{alone:?}"
    );
    // Seven distinct queries: one request for the six self-contained ones, three of them again
    // alone (empty, NaN, two series), and the seventh alone.
    assert_eq!(requests, 5.0, "requests for {vectors:?}");

    // A query that is plainly a scalar, or not self-contained, is not put in a batch; a scalar
    // that is not plain fails the whole `or`, and every query of that batch is asked alone.
    let refused = [
        "vector(1)",
        "1 + scalar(vector(4))",
        "sum(",
        "vector(5)",
        "scalar(vector(6))",
    ];
    let (alone, batched, requests) = alone_and_batched(&base, &refused, at_ms).await;
    assert_eq!(batched, alone);
    assert_eq!(alone[1], Ok(5.0));
    assert!(
        alone[2]
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("bad_data"),
        "{alone:?}"
    );
    assert_eq!(alone[4], Ok(6.0));
    // One refused batch of three, its three again alone, and the two left out alone.
    assert_eq!(requests, 6.0, "requests for {refused:?}");

    // More than ten queries go in several requests of at most ten.
    let many: Vec<String> = (0..23).map(|i| format!("vector({i})")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let (alone, batched, requests) = alone_and_batched(&base, &many, at_ms).await;
    assert_eq!(batched, alone);
    assert_eq!(alone[22], Ok(22.0));
    assert_eq!(requests, 3.0);

    // One query per request: each is asked alone, when its gate reads it.
    let alone_only = Fetcher::new(Duration::from_secs(5))
        .unwrap()
        .with_queries_per_request(1)
        .for_round();
    let before = queries_served(&client, &base).await;
    alone_only.prefetch_prometheus(&base, &refused, at_ms).await;
    assert_eq!(queries_served(&client, &base).await - before, 0.0);
    assert_eq!(
        alone_only.prometheus(&base, refused[1], at_ms).await,
        Ok(5.0)
    );

    // Queries already asked this round are not asked again.
    let round = Fetcher::new(Duration::from_secs(5)).unwrap().for_round();
    round.prefetch_prometheus(&base, &vectors, at_ms).await;
    for q in vectors {
        round.prometheus(&base, q, at_ms).await.ok();
    }
    let before = queries_served(&client, &base).await;
    round.prefetch_prometheus(&base, &vectors, at_ms).await;
    for q in vectors {
        round.prometheus(&base, q, at_ms).await.ok();
    }
    assert_eq!(queries_served(&client, &base).await - before, 0.0);
}

#[tokio::test]
async fn a_batch_that_times_out_is_not_asked_again_query_by_query_and_each_gets_the_reason_it_gets_alone()
 {
    // A server that accepts connections and never answers (issue 54: asking each query of a
    // timed-out batch alone, in turn, made one silent source hold a round for the sum of their
    // timeouts). A source that timed out once in a round is not asked again in that round: each
    // of the batch's queries gets the timeout's reason.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for stream in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            open.push(stream);
        }
    });
    let queries = ["vector(1)", "vector(2)", "vector(3)"];
    let plain = Fetcher::new(Duration::from_millis(300)).unwrap();
    each_gets_the_reason_it_gets_alone(&plain, &base, &queries, "timed out").await;
    // The accept thread counts a connection as soon as it is made; give it a moment.
    let mut tries = 0;
    while connections.load(Ordering::SeqCst) < 2 && tries < 50 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        tries += 1;
    }
    // One for the query alone, one for the batch; none for its queries one by one.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(connections.load(Ordering::SeqCst), 2);

    // Nothing listening: each query of the batch gets the reason it gets alone.
    let closed = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    each_gets_the_reason_it_gets_alone(&plain, &closed, &queries, "cannot connect").await;
}

/// The first of `queries` asked alone fails with a reason saying `expected`; each of them read
/// through a round's prefetch then fails with that same reason.
async fn each_gets_the_reason_it_gets_alone(
    plain: &Fetcher,
    base: &str,
    queries: &[&str],
    expected: &str,
) {
    let alone = plain.prometheus(base, queries[0], 0).await;
    assert!(
        alone.as_ref().unwrap_err().to_string().contains(expected),
        "{alone:?}"
    );
    let round = plain.for_round();
    round.prefetch_prometheus(base, queries, 0).await;
    for q in queries {
        assert_eq!(round.prometheus(base, q, 0).await, alone);
    }
}
