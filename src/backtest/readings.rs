//! The IO edge of a rehearsal: every (source, query) of a plan read over the window.
//!
//! - Prometheus sources: `GET /api/v1/query_range` per query, the window cut into requests of at
//!   most [`MAX_POINTS_PER_REQUEST`] instants (Prometheus refuses more than 11,000 points per
//!   series), at most [`IN_FLIGHT`] requests at a time, each answer read up to
//!   [`range_cap`] bytes (sized by the points asked), parsed into typed rows. A judge's
//!   `sum(increase(x[$step]))` is read from the raw counters `x` instead (a `query_range` of the
//!   selector, each interval's increments per series summed: no `increase()` extrapolation).
//! - Scrape sources: the scrape history the store kept for the plan's migration (`--state`),
//!   when it has one; before its first kept scrape the source cannot answer.
//! - Dead-letter sources, and any source that cannot answer for the past: named, and their
//!   gates hold throughout, as they would live.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::controller::evaluate::phase_items;
use crate::indicators::fetch::Fetcher;
use crate::indicators::history::History;
use crate::indicators::query::parse_query;
use crate::plan::{Plan, Source};
use crate::store::traits::*;

use super::table::{Instants, Reading, Readings, decode_range, scrape_readings};

/// Most instants asked in one `query_range` request: Prometheus' own limit per series.
pub const MAX_POINTS_PER_REQUEST: usize = 11_000;

/// Most `query_range` requests in flight at once.
pub const IN_FLIGHT: usize = 8;

/// Largest `query_range` answer read, whatever the points asked (see [`range_cap`]).
pub const MAX_RANGE_BYTES: usize = 64 * 1024 * 1024;

/// Bytes allowed per point asked: a point of one series is about 30 bytes
/// (`[1795996800.123,"12345.678"],`); this leaves room for a few series (a query that matches
/// several is a hold that lists three of them) and long values.
pub const RANGE_BYTES_PER_POINT: usize = 256;

/// Bytes allowed beside the points: the envelope, the series' labels, warnings.
pub const RANGE_BYTES_BESIDE: usize = 64 * 1024;

/// The largest answer read for a request of `points` instants: sized by the points asked
/// (11,000 points: about 2.8 MB), never above [`MAX_RANGE_BYTES`]. A 63 MB answer to a request
/// of 11,000 points is refused unread beyond the cap.
pub fn range_cap(points: usize) -> usize {
    points
        .saturating_mul(RANGE_BYTES_PER_POINT)
        .saturating_add(RANGE_BYTES_BESIDE)
        .min(MAX_RANGE_BYTES)
}

/// Every query of the plan, by source, each once.
fn queries_by_source(plan: &Plan) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut out: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for phase in &plan.phases {
        for item in phase_items(phase) {
            // Borrowed from the plan, not from the item.
            let (source, queries) = match &item {
                crate::controller::evaluate::Item::Gate(g, _) => (
                    g.source.as_str(),
                    match &g.check {
                        crate::plan::Check::Threshold { query, .. } => vec![query.as_str()],
                        crate::plan::Check::Compare { new, old, .. } => {
                            vec![new.as_str(), old.as_str()]
                        }
                        crate::plan::Check::Judge(j) => j.queries().to_vec(),
                        // The daemon's knowledge of who polls, not a source's: nothing to replay.
                        crate::plan::Check::RoutingApplied { .. } => continue,
                    },
                ),
                crate::controller::evaluate::Item::Peak(r)
                | crate::controller::evaluate::Item::Deploy(r) => {
                    (r.source.as_str(), vec![r.query.as_str()])
                }
            };
            out.entry(source).or_default().extend(queries);
        }
    }
    out
}

/// The window cut into requests: (index of the first instant, how many).
pub fn chunks(instants: &Instants, per_request: usize) -> Vec<(usize, usize)> {
    let per_request = per_request.max(1);
    (0..instants.count)
        .step_by(per_request)
        .map(|first| (first, per_request.min(instants.count - first)))
        .collect()
}

/// Seconds with milliseconds, as the Prometheus API takes times and steps.
fn seconds(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Read every source of `plan` over `instants`; scrape histories from `store` (the plan's
/// migration's), when there is one.
pub async fn read<S: Store>(
    plan: &Plan,
    store: Option<&S>,
    fetcher: &Fetcher,
    instants: Instants,
) -> Readings {
    let mut readings = Readings::new(instants);
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut asks = Vec::new();
    for (source, queries) in queries_by_source(plan) {
        match plan.sources.get(source) {
            None => readings.source_unavailable(source, format!("unknown source {source}")),
            Some(Source::KafkaLag { .. }) => readings.source_unavailable(
                source,
                format!(
                    "source {source}: a Kafka consumer group's lag is read as it is now: it cannot answer for the past (backtest with kafka-exporter's series in Prometheus)"
                ),
            ),
            Some(Source::DeadLetters { .. }) => readings.source_unavailable(
                source,
                format!(
                    "source {source}: a dead-letter export is read as it is now, not as it was: it cannot answer for the past"
                ),
            ),
            Some(Source::Prometheus { url, .. }) => match url.value() {
                Err(why) => readings.source_unavailable(
                    source,
                    format!("source {source} ({}): {why}", url.reference),
                ),
                Ok(base) => {
                    for query in queries {
                        // A judge's `$step` reads each interval's increase: the replay adds
                        // them up from the step's start ([`Readings::observe`]); from its raw
                        // counters, as the daemon reads them, never `increase()`.
                        let asked = match raw_counter(query) {
                            Some(selector) => Asked::Counters(selector),
                            None => Asked::Value(crate::judge::at_step(query, instants.step_ms)),
                        };
                        for (first, count) in chunks(&instants, MAX_POINTS_PER_REQUEST) {
                            let gate = gate.clone();
                            let asked = asked.clone();
                            asks.push(async move {
                                let _turn = gate.acquire().await;
                                let got =
                                    range(fetcher, base, source, &asked, &instants, first, count)
                                        .await;
                                (source, query, first, count, got)
                            });
                        }
                    }
                }
            },
            Some(Source::Scrape { .. }) => match store {
                None => readings.source_unavailable(
                    source,
                    format!(
                        "source {source}: a scrape source answers for the past only from the scrapes a store kept; no state store to read (--state)"
                    ),
                ),
                Some(store) => scrape(store, plan, source, &queries, &mut readings).await,
            },
        }
    }
    let answers = futures_util::future::join_all(asks).await;
    let mut filled: BTreeMap<(&str, &str), Vec<Reading>> = BTreeMap::new();
    for (source, query, first, count, got) in answers {
        let column = filled
            .entry((source, query))
            .or_insert_with(|| vec![Err(Arc::from("not read")); instants.count]);
        match got {
            Ok(values) => {
                for (k, v) in values.into_iter().enumerate().take(count) {
                    if let Some(slot) = column.get_mut(first + k) {
                        *slot = v;
                    }
                }
            }
            Err(failed) => {
                // A source's text through the one text rule (one line, bounded).
                let why: Arc<str> =
                    crate::outgoing::reason(&failed.why, &crate::outgoing::Secrets::none()).into();
                for slot in column.iter_mut().skip(first).take(count) {
                    *slot = Err(why.clone());
                }
                if failed.unreachable {
                    readings.unreachable_at(source, first, count, &why);
                }
            }
        }
    }
    for ((source, query), column) in filled {
        readings.insert(source, query, column);
    }
    readings
}

/// What a column asks of a Prometheus source.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Asked {
    /// A query's value at each instant.
    Value(String),
    /// A judge's counters (the selector under its `sum(increase(x[$step]))`): each series'
    /// latest sample at each instant and at the one before the first, each interval's
    /// increments summed ([`crate::judge::counter::interval_increments`]).
    Counters(String),
}

/// The counters under a judge's query (`$step` in it, of the raw counter form), if it is one.
fn raw_counter(query: &str) -> Option<String> {
    if !query.contains("$step") {
        return None;
    }
    crate::judge::counter::recognise(query)
        .ok()
        .map(|c| c.selector)
}

/// One `query_range` request for `count` instants from index `first`.
async fn range(
    fetcher: &Fetcher,
    base: &str,
    source: &str,
    asked: &Asked,
    instants: &Instants,
    first: usize,
    count: usize,
) -> Result<Vec<Reading>, Failed> {
    let url = format!("{}/api/v1/query_range", base.trim_end_matches('/'));
    let shown = crate::redact::url(&url);
    let (query, start, cap) = match asked {
        Asked::Value(q) => (q.clone(), instants.at(first), range_cap(count)),
        // The instant before the first too: the first interval's increments start there.
        Asked::Counters(selector) => (
            selector.clone(),
            instants.at(first) - instants.step_ms,
            MAX_RANGE_BYTES,
        ),
    };
    let form = [
        ("query", query),
        ("start", seconds(start)),
        ("end", seconds(instants.at(first + count - 1))),
        ("step", seconds(instants.step_ms)),
    ];
    let response = fetcher
        .client()
        .post(&url)
        .form(&form)
        .send()
        .await
        .map_err(|e| {
            let what = if e.is_timeout() {
                "timed out (the source timeout, --source-timeout)".to_string()
            } else if e.is_connect() {
                "cannot connect (is the source up?)".to_string()
            } else {
                crate::redact::text(&e.to_string())
            };
            Failed::unreachable(format!("source {source}: {shown}: {what}"))
        })?;
    let status = response.status();
    let body = capped(response, cap).await.map_err(|e| match e {
        Body::TooLarge(e) => Failed::answered(format!("source {source}: {shown}: {e}")),
        // The answer did not arrive whole: the source was not reached, as with a timeout
        // before its headers (an outage of the window, not an answer of the source's).
        Body::Cut(e) => Failed::unreachable(format!("source {source}: {shown}: {e}")),
    })?;
    let body = String::from_utf8_lossy(&body);
    let decoded = match asked {
        Asked::Value(_) => decode_range(&body, source, instants, first, count),
        Asked::Counters(selector) => counters(&body, source, selector, instants, first, count),
    };
    match decoded {
        Ok(values) => Ok(values),
        Err(e) if status.is_success() || body.trim_start().starts_with('{') => {
            Err(Failed::answered(e))
        }
        // Not the source's own answer (a proxy's error page): it was not reached.
        Err(_) => Err(Failed::unreachable(format!(
            "source {source}: HTTP {status} from {shown}"
        ))),
    }
}

/// Each of `count` intervals' increments of the counters `selector` picks, from a
/// `query_range` answer of the raw selector starting an instant before `first`.
fn counters(
    body: &str,
    source: &str,
    selector: &str,
    instants: &Instants,
    first: usize,
    count: usize,
) -> Result<Vec<Reading>, String> {
    let why =
        |e: &dyn std::fmt::Display| format!("source {source}: the counters of {selector}: {e}");
    let series = crate::indicators::promql::decode_matrix(body).map_err(|e| why(&e))?;
    let times: Vec<i64> = std::iter::once(instants.at(first) - instants.step_ms)
        .chain((first..first + count).map(|i| instants.at(i)))
        .collect();
    let counts =
        crate::judge::counter::interval_increments(&series, &times).map_err(|e| why(&e))?;
    Ok(counts.into_iter().map(Ok).collect())
}

/// Why a range request gave no readings: the source answered with an error, or it could not be
/// reached at all (no connection, a timeout, a proxy's error page).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failed {
    pub why: String,
    pub unreachable: bool,
}

impl Failed {
    fn unreachable(why: String) -> Failed {
        Failed {
            why,
            unreachable: true,
        }
    }

    fn answered(why: String) -> Failed {
        Failed {
            why,
            unreachable: false,
        }
    }
}

/// Why a response body was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Body {
    /// Over the cap: the source's own answer, too large.
    TooLarge(String),
    /// Cut before its end (the source timeout ran out while it was read, the connection broke).
    Cut(String),
}

/// A response body, at most `cap` bytes.
async fn capped(mut response: reqwest::Response, cap: usize) -> Result<Vec<u8>, Body> {
    let kib = cap / 1024;
    let too_large = || {
        Body::TooLarge(format!(
            "the range answer is larger than {kib} KiB (sized by the points asked): narrow the query (it must give one series)"
        ))
    };
    if response.content_length().is_some_and(|n| n > cap as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|e| {
        Body::Cut(if e.is_timeout() {
            "timed out while its answer was read (the source timeout, --source-timeout)".to_string()
        } else {
            format!(
                "the answer broke off: {}",
                crate::redact::text(&e.to_string())
            )
        })
    })? {
        if body.len() + chunk.len() > cap {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A scrape source's readings from the history the store kept for the plan's migration.
async fn scrape<S: Store>(
    store: &S,
    plan: &Plan,
    source: &str,
    queries: &BTreeSet<&str>,
    readings: &mut Readings,
) {
    let instants = readings.instants;
    let (series, times) = match store
        .load_series_after(&plan.name, source, i64::MIN, i64::MIN)
        .await
    {
        Ok(read) => read,
        Err(e) => {
            readings.source_unavailable(
                source,
                format!("source {source}: cannot read its recorded scrapes from the store: {e}"),
            );
            return;
        }
    };
    let Some(first) = times.iter().copied().min() else {
        readings.source_unavailable(
            source,
            format!(
                "source {source}: the store keeps no scrape of it for migration {} (the daemon keeps about twice its queries' longest window): it cannot answer for the past",
                plan.name
            ),
        );
        return;
    };
    if first > instants.from_ms {
        readings.notes.push(format!(
            "source {source}: scrapes recorded from {} only: before that its gates hold",
            crate::time::rfc3339(first)
        ));
    }
    let mut history = History::new().with_scrape_times(times);
    for s in series {
        if let Ok(labels) = serde_json::from_str::<Vec<(String, String)>>(&s.labels) {
            history.add_series_points(s.metric, &labels, &s.points);
        }
    }
    for text in queries {
        let column = match parse_query(&crate::judge::at_step(text, instants.step_ms)) {
            Ok(query) => scrape_readings(&history, &query, text, source, &instants, first),
            Err(e) => {
                let why =
                    crate::outgoing::reason(&e.to_string(), &crate::outgoing::Secrets::none());
                vec![Err(Arc::from(why)); instants.count]
            }
        };
        readings.insert(source, text, column);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A source that sends its headers and part of its answer, then nothing.
    async fn stalling_source() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = [0u8; 4096];
            let _ = socket.read(&mut request).await;
            let head = "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{\"status\":\"success\",";
            let _ = socket.write_all(head.as_bytes()).await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        });
        format!("http://{addr}/")
    }

    #[tokio::test]
    async fn a_range_answer_whose_body_timed_out_was_reported_as_broken_off_and_not_as_an_outage() {
        let url = stalling_source().await;
        crate::indicators::fetch::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(300))
            .build()
            .expect("client");
        let response = client.get(&url).send().await.expect("headers arrive");
        match capped(response, MAX_RANGE_BYTES).await {
            Err(Body::Cut(why)) => assert!(why.contains("timed out"), "{why}"),
            other => panic!("a body cut by the source timeout is an outage: {other:?}"),
        }
    }

    #[test]
    fn the_answer_cap_is_sized_by_the_points_asked() {
        assert_eq!(range_cap(1), 256 + 64 * 1024);
        assert!(range_cap(MAX_POINTS_PER_REQUEST) < 3 * 1024 * 1024);
        assert!(range_cap(MAX_POINTS_PER_REQUEST) > MAX_POINTS_PER_REQUEST * 60);
        assert_eq!(range_cap(usize::MAX), MAX_RANGE_BYTES);
    }

    #[test]
    fn a_window_is_cut_under_the_point_limit() {
        // A week at a 1-minute step: 10,081 instants, one request.
        let week = Instants::new(0, 7 * 86_400_000, 60_000).expect("window");
        assert_eq!(chunks(&week, MAX_POINTS_PER_REQUEST), vec![(0, 10_081)]);
        // A week at 30 s: 20,161 instants, two requests, none over the limit.
        let fine = Instants::new(0, 7 * 86_400_000, 30_000).expect("window");
        let cut = chunks(&fine, MAX_POINTS_PER_REQUEST);
        assert_eq!(cut, vec![(0, 11_000), (11_000, 9_161)]);
        assert_eq!(cut.iter().map(|c| c.1).sum::<usize>(), fine.count);
    }
}
