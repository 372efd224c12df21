//! HTTP for indicator sources: PromQL instant queries and /metrics scrapes.
//!
//! Every failure comes back as a sentence that names the source and says what went wrong; the
//! controller turns it into a gate hold, never into a number. A URL in such a sentence is shown
//! through [`crate::redact`] (its userinfo and query string masked), and so is a client error:
//! the sentence goes into gate reasons, the store, the API, webhooks and logs.
//!
//! # One round, one reading per source
//! A fetcher made by [`Fetcher::for_round`] answers each distinct request once for as long as it
//! lives (the daemon makes one per round of ticks, evaluated at one instant): one scrape (and
//! parse) per `/metrics` URL, one answer per PromQL instant query (same Prometheus URL, same query
//! text, same evaluation time). Concurrent askers wait for the one request in flight. Within a
//! round this changes no reading: the same request at the same instant would get the same answer
//! (up to the source's own drift during the round), and a failure is shared too, so every
//! migration reading a failing source holds with that source's reason. A plain [`Fetcher::new`]
//! shares nothing.
//!
//! # A few queries per request
//! Answering a request costs Prometheus about as much as evaluating a simple query, so a round's
//! fetcher can ask a migration's queries ahead of its gates, up to [`QUERIES_PER_REQUEST`] per
//! request ([`Fetcher::prefetch_prometheus`]). Each query still gets the answer it would have got
//! alone: see that method's guarantees.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::OnceCell;

use super::cause::NoDataCause;
use super::exposition::{self, Exposition};
use super::promql::{PromError, batch_query, batchable, decode_batch, decode_instant};
use crate::redact;

mod etcd;
mod silent;
mod wire;

pub use wire::MAX_REDIRECTS;
use wire::{instant, query_url, same_origin_redirects, sample_lines};

/// Largest /metrics body read (a runaway exporter must not exhaust the controller). Parsing
/// takes up to ~30 times the body in memory (short lines such as `a 1`), ~9 times for realistic
/// ones: 16 MiB keeps a scrape under half a gigabyte in the worst case. A larger body, announced
/// or streamed, is a hold that says so, and no more than the cap is read.
pub const MAX_SCRAPE_BYTES: usize = 16 * 1024 * 1024;

/// Largest Prometheus instant-query answer read: one number needs a few hundred bytes, and even
/// a query matching thousands of series (a hold that lists three of them) stays far below this.
pub const MAX_QUERY_BYTES: usize = 4 * 1024 * 1024;

/// Most series one `/metrics` scrape may hold ([`Fetcher::with_max_series`] changes it): a
/// target with more (an exporter's label-cardinality bug) gives no reading, a hold that says
/// "too many series: N > cap", and none of its samples is parsed or stored.
pub const MAX_SERIES: usize = 10_000;

/// Most queries asked in one request by [`Fetcher::prefetch_prometheus`]. Ten per request
/// halve what Prometheus spends serving 5,000 distinct queries, fifty gain nothing more
/// (BENCHMARKS.md, "Controller scale").
pub const QUERIES_PER_REQUEST: usize = 10;

/// Why a source gave no reading (or the client could not be built). Each message is a sentence
/// that names the URL redacted and every credential of it masked (a gate's hold reason), without
/// the source's name.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FetchError {
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    /// The request got no complete answer: it could not connect, or broke off.
    #[error("{0}")]
    Request(String),
    /// The request got no complete answer in time: the source timeout, or the round's budget,
    /// ran out. A round asks such a source nothing more (see [`Fetcher::for_round_within`]).
    #[error("{0}")]
    TimedOut(String),
    /// The source answered with an HTTP error status.
    #[error("{0}")]
    Status(String),
    /// The answer was larger than the cap ([`MAX_SCRAPE_BYTES`], [`MAX_QUERY_BYTES`]).
    #[error("{0}")]
    TooLarge(String),
    /// The answer is not what was asked: metrics that are not UTF-8 or were cut off, or a
    /// Prometheus answer that is not exactly one finite number (or a query it refused).
    #[error("{0}")]
    Answer(String),
    /// Prometheus answered: the query matched no series.
    #[error("{0}")]
    Empty(String),
    /// The routing document could not be encoded for etcd.
    #[error("{0}")]
    Encode(String),
}

impl FetchError {
    /// What kind of no data a gate reading through this error has: the source answered with no
    /// series ([`FetchError::Empty`]), with no usable number ([`FetchError::Answer`]), or could
    /// not be read at all (the others).
    pub fn cause(&self) -> NoDataCause {
        match self {
            FetchError::Empty(_) => NoDataCause::Empty,
            FetchError::Answer(_) | FetchError::Encode(_) => NoDataCause::Unusable,
            FetchError::Status(_) => NoDataCause::SourceHttpError,
            FetchError::TooLarge(_) => NoDataCause::SourceUnparsable,
            FetchError::Client(_) | FetchError::Request(_) | FetchError::TimedOut(_) => {
                NoDataCause::SourceDown
            }
        }
    }

    /// The same error with every credential of `url` masked in its sentence.
    fn masked(self, url: &str) -> FetchError {
        let mask = |reason: String| masked(url, &reason);
        match self {
            FetchError::Client(s) => FetchError::Client(mask(s)),
            FetchError::Request(s) => FetchError::Request(mask(s)),
            FetchError::TimedOut(s) => FetchError::TimedOut(mask(s)),
            FetchError::Status(s) => FetchError::Status(mask(s)),
            FetchError::TooLarge(s) => FetchError::TooLarge(mask(s)),
            FetchError::Answer(s) => FetchError::Answer(mask(s)),
            FetchError::Empty(s) => FetchError::Empty(mask(s)),
            FetchError::Encode(s) => FetchError::Encode(mask(s)),
        }
    }
}

/// A scrape parsed, or why it could not be had.
pub type Scraped = Result<Exposition, FetchError>;

/// One answer per request, each filled once (by the first asker; the others wait for it).
type Cells<K, V> = Mutex<HashMap<K, Arc<OnceCell<V>>>>;

/// The answer to one PromQL instant query: one finite number, or why not.
type Answer = Result<f64, FetchError>;

/// What one request for several queries gave.
enum Batched {
    /// Prometheus answered: each query's number, or `None` for a query to ask alone.
    Parts(Vec<Option<f64>>),
    /// The source could not be reached, or did not answer in time, which each query alone
    /// would have met too (a source that does not answer one request is not asked again in the
    /// round): its reason.
    Unreachable(FetchError),
    /// Anything else (a scalar part, one bad query, an error page): each query is asked alone.
    Refused,
}

/// A request that failed: why (a sentence naming the URL), and whether the source was out of
/// reach (no connection could be made).
struct Failure {
    reason: FetchError,
    unreachable: bool,
}

impl Failure {
    /// Whether each query of a batch would have met this failure alone too: no connection, or
    /// no answer in time.
    fn applies_to_each(&self) -> bool {
        self.unreachable || matches!(self.reason, FetchError::TimedOut(_))
    }
}

impl From<Failure> for FetchError {
    fn from(f: Failure) -> FetchError {
        f.reason
    }
}

/// The readings of one round, by request.
#[derive(Default)]
struct RoundMemo {
    /// By URL.
    scrapes: Cells<String, Arc<Scraped>>,
    /// By (Prometheus base URL, query text, evaluation time in ms).
    queries: Cells<(String, String, i64), Answer>,
    /// The sources (Prometheus base URL, `/metrics` URL) that did not answer a request in
    /// time: not asked again this round.
    silent: silent::Silent,
}

/// How many requests a round answered, never their URLs (which may hold credentials).
impl std::fmt::Debug for RoundMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoundMemo")
            .field("scrapes", &lock(&self.scrapes).len())
            .field("queries", &lock(&self.queries).len())
            .finish()
    }
}

/// The map of cells, locked (a poisoned lock still holds a usable map: the cells are only ever
/// inserted).
fn lock<K, V>(map: &Cells<K, V>) -> MutexGuard<'_, HashMap<K, Arc<OnceCell<V>>>> {
    match map.lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// The cell of `key`, made on first use.
fn cell<K: std::hash::Hash + Eq, V>(map: &Cells<K, V>, key: K) -> Arc<OnceCell<V>> {
    lock(map).entry(key).or_default().clone()
}

/// A round's memo key of an instant query: (Prometheus base URL, query text, evaluation time).
fn query_key(base: &str, query: &str, at_ms: i64) -> (String, String, i64) {
    (
        base.trim_end_matches('/').to_string(),
        query.to_string(),
        at_ms,
    )
}

/// `reason`, a sentence about a request to `url`, with every credential of `url` masked wherever
/// it appears (a proxy's error page may echo the request), and every URL redacted.
fn masked(url: &str, reason: &str) -> String {
    redact::known(reason, crate::outgoing::forms(url))
}

/// The hold reason of an answer that is a redirect not followed (to another origin): its status,
/// never its body nor where it points.
fn not_followed(status: reqwest::StatusCode, shown: &str) -> FetchError {
    FetchError::Status(format!(
        "HTTP {status} from {shown}: a redirect to another origin, not followed"
    ))
}

/// Fetches readings over HTTP with a per-request timeout.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: reqwest::Client,
    timeout: Duration,
    /// Most Prometheus queries per request of [`Fetcher::prefetch_prometheus`] (1: each alone).
    per_request: usize,
    /// Most series of one scrape ([`MAX_SERIES`] unless set).
    max_series: usize,
    /// Set on a fetcher of one round (see the module docs).
    round: Option<Arc<RoundMemo>>,
    /// When a round's budget runs out (a fetcher of [`Fetcher::for_round_within`]): no request
    /// waits past it.
    deadline: Option<tokio::time::Instant>,
    /// Who follows the routing document, when this fetcher is a daemon's (the one that serves
    /// the long-poll): what `routing_applied` gates read. `None` elsewhere (a CLI command): such
    /// gates are no data.
    followers: Option<Arc<super::followers::Followers>>,
}

/// Install the one rustls crypto provider of the tree (ring). Safe to call more than once.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Fetcher {
    /// A client whose every request gives up after `timeout`.
    ///
    /// # Errors
    /// The TLS stack cannot be initialised.
    pub fn new(timeout: Duration) -> Result<Fetcher, FetchError> {
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            // A source gone without a FIN: noticed by the kernel's probes too (15 s idle).
            .tcp_keepalive(Duration::from_secs(15))
            .user_agent(concat!("queue-migrate/", env!("CARGO_PKG_VERSION")))
            .redirect(same_origin_redirects())
            .build()
            .map_err(|e| FetchError::Client(e.to_string()))?;
        Ok(Fetcher {
            client,
            timeout,
            per_request: QUERIES_PER_REQUEST,
            max_series: MAX_SERIES,
            round: None,
            deadline: None,
            followers: None,
        })
    }

    /// At most `n` Prometheus queries per request of [`Fetcher::prefetch_prometheus`]
    /// ([`QUERIES_PER_REQUEST`] unless set); 1 (or 0) asks each query alone.
    pub fn with_queries_per_request(self, n: usize) -> Fetcher {
        Fetcher {
            per_request: n.max(1),
            ..self
        }
    }

    /// At most `n` series per `/metrics` scrape ([`MAX_SERIES`] unless set; at least 1).
    pub fn with_max_series(self, n: usize) -> Fetcher {
        Fetcher {
            max_series: n.max(1),
            ..self
        }
    }

    /// The same fetcher, reading who follows the routing document from `followers` (the
    /// daemon's, filled by its routing endpoint).
    pub fn with_followers(self, followers: Arc<super::followers::Followers>) -> Fetcher {
        Fetcher {
            followers: Some(followers),
            ..self
        }
    }

    /// Who follows the routing document, when this fetcher is a daemon's
    /// ([`Fetcher::with_followers`]).
    pub fn followers(&self) -> Option<&super::followers::Followers> {
        self.followers.as_deref()
    }

    /// A fetcher over the same client that answers each distinct request once while it lives:
    /// one per round of ticks (see the module docs).
    pub fn for_round(&self) -> Fetcher {
        Fetcher {
            round: Some(Arc::default()),
            ..self.clone()
        }
    }

    /// [`Fetcher::for_round`], its requests given `budget` from now in all.
    ///
    /// # Guarantees
    /// - No request of the round waits past `budget` from now (nor past the source timeout):
    ///   one still unanswered then is [`FetchError::TimedOut`].
    /// - A source (a Prometheus base URL, a `/metrics` URL) that timed out once is not asked
    ///   again while the round lives: every later read of it is that [`FetchError::TimedOut`]
    ///   at once, saying so. A silent source costs a round one timeout, not one per query.
    pub fn for_round_within(&self, budget: Duration) -> Fetcher {
        Fetcher {
            deadline: Some(tokio::time::Instant::now() + budget),
            ..self.for_round()
        }
    }

    /// Whether this fetcher keeps what it reads for the round (see [`Fetcher::for_round`]).
    pub fn is_round(&self) -> bool {
        self.round.is_some()
    }

    /// `request` to `source` (a base or `/metrics` URL), unless a round already found the source
    /// silent; cut at the round's deadline; a timeout noted for the rest of the round.
    async fn within_round<T>(
        &self,
        source: &str,
        request: impl std::future::Future<Output = Result<T, FetchError>>,
    ) -> Result<T, FetchError> {
        let timed_out = |e: &FetchError| match e {
            FetchError::TimedOut(why) => Some(why.clone()),
            _ => None,
        };
        let memo = self.round.as_deref().map(|m| &m.silent);
        silent::within(
            memo,
            self.deadline,
            source,
            request,
            timed_out,
            FetchError::TimedOut,
        )
        .await
    }

    /// One PromQL instant query at `at_ms`: exactly one finite number, or why not (asked once
    /// per round on a fetcher of a round).
    ///
    /// # Errors
    /// Why there is no number, for the gate's hold reason.
    pub async fn prometheus(&self, base: &str, query: &str, at_ms: i64) -> Result<f64, FetchError> {
        match &self.round {
            None => self.prometheus_now(base, query, at_ms).await,
            Some(memo) => cell(&memo.queries, query_key(base, query, at_ms))
                .get_or_init(|| self.prometheus_now(base, query, at_ms))
                .await
                .clone(),
        }
    }

    /// Ask `queries` of the Prometheus at `base`, at `at_ms`, ahead of the gates that read them:
    /// up to [`QUERIES_PER_REQUEST`] per request (unless [`Fetcher::with_queries_per_request`]
    /// says otherwise), each request's queries joined with `or`
    /// ([`batch_query`]). A round's fetcher keeps each answer for [`Fetcher::prometheus`]; a plain
    /// one has nowhere to keep them and does nothing.
    ///
    /// # Guarantees
    /// Each query's answer is the one it would have got asked alone at `at_ms`:
    /// - a query already asked (or being asked) this round is not asked again, nor one listed
    ///   twice;
    /// - only self-contained expressions go in a batch ([`batchable`]); the others, and a
    ///   request's single query, are asked alone;
    /// - a query that was not exactly one finite number in the batch's answer (no series,
    ///   several, NaN) is asked alone, so that its reason is its own;
    /// - a request that fails as a whole (a part that is a scalar or a range vector, one bad
    ///   query, an error page) is followed by one request per query, one after the other as the
    ///   gates would have asked them;
    /// - a request that cannot connect, or times out, gives that reason to each of its queries
    ///   without asking them again (issue 54: a silent Prometheus asked each query alone for the
    ///   full timeout, one after the other); the source is then not asked again this round.
    pub async fn prefetch_prometheus(&self, base: &str, queries: &[&str], at_ms: i64) {
        let Some(memo) = &self.round else {
            return;
        };
        let claimed: Vec<(&str, Arc<OnceCell<Answer>>)> = {
            let mut map = lock(&memo.queries);
            let mut claimed = Vec::new();
            for &query in queries {
                if !batchable(query) {
                    continue;
                }
                if let Entry::Vacant(slot) = map.entry(query_key(base, query, at_ms)) {
                    claimed.push((query, slot.insert(Arc::default()).clone()));
                }
            }
            claimed
        };
        if claimed.len() < 2 || self.per_request < 2 {
            // A query that goes alone is asked when its gate reads it.
            return;
        }
        let requests = claimed.len().div_ceil(self.per_request);
        let per_request = claimed.len().div_ceil(requests);
        futures_util::future::join_all(
            claimed
                .chunks(per_request)
                .map(|chunk| self.fill_batch(base, chunk, at_ms)),
        )
        .await;
    }

    /// Fill the cells of `chunk` from one request for all its queries, each query alone (one
    /// at a time) where that request gave it no number (see [`Fetcher::prefetch_prometheus`]).
    async fn fill_batch(&self, base: &str, chunk: &[(&str, Arc<OnceCell<Answer>>)], at_ms: i64) {
        if let [(query, cell)] = chunk {
            cell.get_or_init(|| self.prometheus_now(base, query, at_ms))
                .await;
            return;
        }
        let texts: Vec<&str> = chunk.iter().map(|(query, _)| *query).collect();
        let batched = OnceCell::new();
        let one_at_a_time = tokio::sync::Mutex::new(());
        let (texts, batched, one_at_a_time) = (&texts, &batched, &one_at_a_time);
        let alone = move |query| async move {
            let _turn = one_at_a_time.lock().await;
            self.prometheus_now(base, query, at_ms).await
        };
        futures_util::future::join_all(chunk.iter().enumerate().map(|(i, (query, cell))| {
            cell.get_or_init(move || async move {
                let answer = batched
                    .get_or_init(|| self.prometheus_batch(base, texts, at_ms))
                    .await;
                match answer {
                    Batched::Parts(values) => match values.get(i).copied().flatten() {
                        Some(value) => Ok(value),
                        None => alone(query).await,
                    },
                    Batched::Unreachable(reason) => Err(reason.clone()),
                    Batched::Refused => alone(query).await,
                }
            })
        }))
        .await;
    }

    /// One request for several queries ([`batch_query`]), sent as a form (a few queries would
    /// make a long URL).
    async fn prometheus_batch(&self, base: &str, queries: &[&str], at_ms: i64) -> Batched {
        let asked = async {
            match self.prometheus_batch_now(base, queries, at_ms).await {
                Batched::Unreachable(reason) => Err(reason),
                answered => Ok(answered),
            }
        };
        self.within_round(base, asked)
            .await
            .unwrap_or_else(Batched::Unreachable)
    }

    /// [`Fetcher::prometheus_batch`]'s request, whatever the round knows of the source.
    async fn prometheus_batch_now(&self, base: &str, queries: &[&str], at_ms: i64) -> Batched {
        let url = query_url(base);
        let form = [("query", batch_query(queries)), ("time", instant(at_ms))];
        let failed = |f: Failure| match f.applies_to_each() {
            true => Batched::Unreachable(f.reason.masked(base)),
            false => Batched::Refused,
        };
        let response = match self.client.post(&url).form(&form).send().await {
            Ok(response) => response,
            Err(e) => return failed(self.failure(&url, &e)),
        };
        if !response.status().is_success() {
            return Batched::Refused;
        }
        match self
            .read_capped(response, &url, MAX_QUERY_BYTES, "an instant-query answer")
            .await
        {
            Ok(body) => match decode_batch(&String::from_utf8_lossy(&body), queries.len()) {
                Ok(values) => Batched::Parts(values),
                Err(_) => Batched::Refused,
            },
            Err(f) => failed(f),
        }
    }

    /// A `/metrics` endpoint scraped and parsed (once per round on a fetcher of a round): its
    /// samples and the lines that could not be read, or why there is no answer.
    ///
    /// # Guarantees
    /// A scrape of more series than the cap ([`Fetcher::with_max_series`]) is an
    /// [`FetchError::TooLarge`] saying "too many series: N > cap", its series counted without
    /// being parsed: nothing of it is kept.
    pub async fn scrape_parsed(&self, url: &str) -> Arc<Scraped> {
        let now = || async {
            let text = self.within_round(url, self.scrape(url)).await;
            let parsed = text.and_then(|text| {
                let series = sample_lines(&text);
                if series > self.max_series {
                    return Err(FetchError::TooLarge(format!(
                        "{}: too many series: {series} > {} (--max-series)",
                        redact::url(url),
                        self.max_series
                    )));
                }
                Ok(exposition::parse(&text))
            });
            Arc::new(parsed)
        };
        match &self.round {
            None => now().await,
            Some(memo) => cell(&memo.scrapes, url.to_string())
                .get_or_init(now)
                .await
                .clone(),
        }
    }

    async fn prometheus_now(&self, base: &str, query: &str, at_ms: i64) -> Result<f64, FetchError> {
        let asked = async {
            self.prometheus_unmasked(base, query, at_ms)
                .await
                .map_err(|reason| reason.masked(base))
        };
        self.within_round(base, asked).await
    }

    /// The raw samples of each series a range selector (`x{a="b"}[300s]`) gives at `at_ms`
    /// (what a judge reads its counters from), never kept for the round.
    ///
    /// # Errors
    /// Why there are no samples, as [`Fetcher::prometheus`] says it.
    pub async fn prometheus_series(
        &self,
        base: &str,
        selector: &str,
        at_ms: i64,
    ) -> Result<Vec<super::promql::SeriesSamples>, FetchError> {
        let asked = async {
            self.prometheus_decoded(base, selector, at_ms, super::promql::decode_matrix)
                .await
                .map_err(|reason| reason.masked(base))
        };
        self.within_round(base, asked).await
    }

    async fn prometheus_unmasked(
        &self,
        base: &str,
        query: &str,
        at_ms: i64,
    ) -> Result<f64, FetchError> {
        self.prometheus_decoded(base, query, at_ms, decode_instant)
            .await
    }

    async fn prometheus_decoded<T>(
        &self,
        base: &str,
        query: &str,
        at_ms: i64,
        decode: fn(&str) -> Result<T, PromError>,
    ) -> Result<T, FetchError> {
        let url = query_url(base);
        let time = instant(at_ms);
        let request = self
            .client
            .get(&url)
            .query(&[("query", query), ("time", time.as_str())])
            .build()
            .map_err(|e| self.request_error(&url, &e))?;
        let asked = request.url().clone();
        let response = self
            .client
            .execute(request)
            .await
            .map_err(|e| self.request_error(&url, &e))?;
        let status = response.status();
        if status.is_redirection() {
            return Err(not_followed(status, &redact::url(&url)));
        }
        // The body of an answer reached through a redirect is never quoted.
        let redirected = response.url() != &asked;
        let body = self
            .read_capped(response, &url, MAX_QUERY_BYTES, "an instant-query answer")
            .await?;
        let body = String::from_utf8_lossy(&body);
        // An answer that is no number is quoted: masked whole first, since a quote cut through
        // an echoed credential (`header Basic cHJv...`) would show what masking it cut cannot.
        let decoded = match decode(&body) {
            Ok(v) => Ok(v),
            Err(_) => decode(&masked(&url, &body)),
        };
        let url = redact::url(&url);
        // Prometheus answers 400/422/503 with a JSON error body worth showing.
        match decoded {
            Ok(v) => Ok(v),
            Err(PromError::InvalidJson { .. }) if redirected => Err(FetchError::Status(format!(
                "HTTP {status} from {url}: the answer reached through a redirect is not JSON (not \
                 quoted); check that the source URL points at Prometheus"
            ))),
            Err(PromError::EmptyResult) if status.is_success() => {
                Err(FetchError::Empty(PromError::EmptyResult.to_string()))
            }
            Err(e) if status.is_success() => Err(FetchError::Answer(e.to_string())),
            // A query Prometheus refused (bad_data, execution): it answered, the query is wrong.
            Err(e @ PromError::QueryFailed { .. }) if matches!(status.as_u16(), 400 | 422) => {
                Err(FetchError::Answer(format!("HTTP {status} from {url}: {e}")))
            }
            // An error page (a proxy's, a server that is down): the status says it all, the
            // "is this Prometheus?" hint of a 200 that is not JSON would mislead.
            Err(PromError::InvalidJson { start, .. }) if start.is_empty() => Err(
                FetchError::Status(format!("HTTP {status} from {url} (empty body)")),
            ),
            Err(PromError::InvalidJson { start, .. }) => Err(FetchError::Status(format!(
                "HTTP {status} from {url} (body starts with `{start}`)"
            ))),
            Err(e) => Err(FetchError::Status(format!("HTTP {status} from {url}: {e}"))),
        }
    }

    /// Scrape a /metrics endpoint: its text, or why not.
    ///
    /// # Errors
    /// Why there is no text, for the gate's hold reason.
    pub async fn scrape(&self, url: &str) -> Result<String, FetchError> {
        self.scrape_unmasked(url)
            .await
            .map_err(|reason| reason.masked(url))
    }

    async fn scrape_unmasked(&self, url: &str) -> Result<String, FetchError> {
        let response = self
            .client
            .get(url)
            .header(
                reqwest::header::ACCEPT,
                "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5",
            )
            .send()
            .await
            .map_err(|e| self.request_error(url, &e))?;
        let status = response.status();
        let shown = redact::url(url);
        if status.is_redirection() {
            return Err(not_followed(status, &shown));
        }
        // The body of an answer reached through a redirect is never quoted.
        let redirected = reqwest::Url::parse(url).is_ok_and(|asked| response.url() != &asked);
        if !status.is_success() {
            return Err(FetchError::Status(format!("HTTP {status} from {shown}")));
        }
        let body = self
            .read_capped(response, url, MAX_SCRAPE_BYTES, "metrics")
            .await?;
        let url = shown;
        let text = String::from_utf8(body).map_err(|e| {
            FetchError::Answer(format!("{url} sent metrics that are not UTF-8: {e}"))
        })?;
        // Every line of the text format ends with a line feed (OpenMetrics may end with `# EOF`
        // alone). A body without one was most likely cut: over a connection that closes instead
        // of announcing a length, `x 10` cut after `x 1` would read as a number nobody reported.
        let last_line = text.rsplit('\n').next().unwrap_or_default();
        if !last_line.is_empty() && last_line.trim_end() != "# EOF" {
            if redirected {
                return Err(FetchError::Answer(format!(
                    "{url} sent metrics (through a redirect) whose last line has no line feed: \
                     the answer was probably cut off"
                )));
            }
            let tail: String = {
                let chars: Vec<char> = last_line.chars().collect();
                chars[chars.len().saturating_sub(60)..].iter().collect()
            };
            return Err(FetchError::Answer(format!(
                "{url} sent metrics whose last line has no line feed (`{tail}`): the answer was \
                 probably cut off"
            )));
        }
        Ok(text)
    }
}

impl Fetcher {
    /// A response body, read chunk by chunk, at most `cap` bytes: a body announced (Content-Length)
    /// or found larger is refused with a sentence naming `url`, and nothing past the cap is read.
    async fn read_capped(
        &self,
        mut response: reqwest::Response,
        url: &str,
        cap: usize,
        what: &str,
    ) -> Result<Vec<u8>, Failure> {
        let mib = cap / (1024 * 1024);
        let shown = redact::url(url);
        let refused = |reason| Failure {
            reason: FetchError::TooLarge(reason),
            unreachable: false,
        };
        if let Some(announced) = response.content_length()
            && announced > cap as u64
        {
            return Err(refused(format!(
                "{shown} announced {announced} bytes of {what}, more than {mib} MiB: refusing to read it"
            )));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.failure(url, &e))? {
            if body.len() + chunk.len() > cap {
                return Err(refused(format!(
                    "{shown} sent more than {mib} MiB of {what}: refusing to parse it"
                )));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A failed request: [`Fetcher::describe`]'s sentence, and whether the source was out of
    /// reach.
    fn failure(&self, url: &str, e: &reqwest::Error) -> Failure {
        Failure {
            reason: self.request_error(url, e),
            unreachable: e.is_connect(),
        }
    }

    /// A failed request: [`FetchError::TimedOut`] when it timed out, else
    /// [`FetchError::Request`], with [`Fetcher::describe`]'s sentence.
    fn request_error(&self, url: &str, e: &reqwest::Error) -> FetchError {
        match e.is_timeout() {
            true => FetchError::TimedOut(self.describe(url, e)),
            false => FetchError::Request(self.describe(url, e)),
        }
    }

    /// A failed request in a sentence: timed out (after how long), cannot connect, cut off
    /// mid-body, or the error chain; the URL and the chain redacted ([`redact`]: reqwest quotes
    /// the whole URL, credentials included, in its errors).
    fn describe(&self, url: &str, e: &reqwest::Error) -> String {
        let url = redact::url(url);
        let chain = || redact::error(e);
        if e.is_timeout() {
            format!(
                "{url}: timed out after {} (the source timeout)",
                humantime::format_duration(self.timeout)
            )
        } else if e.is_connect() {
            format!("{url}: cannot connect (is the source up?)")
        } else if e.is_body() || e.is_decode() {
            format!("{url}: the answer broke off before its end ({})", chain())
        } else {
            format!("{url}: {}", chain())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sample_lines_count_series_not_comments_nor_blank_lines() {
        let text = "# HELP a x\n# TYPE a gauge\na 1\n\n  b{x=\"1\"} 2\r\n\t\r\nc 3\n# EOF\n";
        assert_eq!(sample_lines(text), 3);
    }

    /// A round's Debug shows how many requests it answered, never their URLs.
    #[tokio::test]
    async fn a_rounds_debug_shows_no_url() {
        let round = Fetcher::new(Duration::from_millis(200))
            .unwrap()
            .for_round();
        let _ = round
            .scrape_parsed("http://u:Secr3tPw@127.0.0.1:1/metrics?token=T0k3n")
            .await;
        let shown = format!("{round:?}");
        assert!(shown.contains("scrapes: 1"), "{shown}");
        assert!(
            !shown.contains("Secr3tPw") && !shown.contains("T0k3n"),
            "{shown}"
        );
    }

    /// A source out of reach is a request error whose sentence names the URL redacted.
    #[tokio::test]
    async fn a_source_out_of_reach_is_a_request_error_naming_the_url_redacted() {
        let fetcher = Fetcher::new(Duration::from_millis(200)).unwrap();
        let url = "http://u:Secr3tPw@127.0.0.1:1/metrics?token=T0k3n";
        match fetcher.scrape(url).await {
            Err(e @ FetchError::Request(_)) => {
                let shown = e.to_string();
                assert!(
                    shown.ends_with(": cannot connect (is the source up?)"),
                    "{shown}"
                );
                assert!(
                    !shown.contains("Secr3tPw") && !shown.contains("T0k3n"),
                    "{shown}"
                );
            }
            other => panic!("expected a request error, got {other:?}"),
        }
    }

    /// A source that accepts connections and never answers; counts the connections.
    async fn silent_source() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(conn);
            }
        });
        (url, accepted)
    }

    /// Regression (issue 54): a batch of a silent Prometheus that timed out was followed by
    /// one request per query, one after the other, each for the whole source timeout (five
    /// requests and five timeouts for four gates). Now the round asks it once: every query
    /// holds with the timeout's reason, and a later read asks nothing.
    #[tokio::test]
    async fn a_silent_prometheus_is_asked_once_per_round() {
        let (base, accepted) = silent_source().await;
        let round = Fetcher::new(Duration::from_millis(300))
            .unwrap()
            .for_round_within(Duration::from_secs(5));
        let queries = ["up_a", "up_b", "up_c", "up_d"];
        round.prefetch_prometheus(&base, &queries, 1_000).await;
        for query in queries.iter().chain(&["up_e"]) {
            match round.prometheus(&base, query, 1_000).await {
                Err(FetchError::TimedOut(why)) => assert!(why.contains("timed out"), "{why}"),
                other => panic!("expected a timeout, got {other:?}"),
            }
        }
        assert_eq!(accepted.load(std::sync::atomic::Ordering::SeqCst), 1);
        // A scrape of it too: once.
        let (metrics, scraped) = silent_source().await;
        let url = format!("{metrics}/metrics");
        for _ in 0..2 {
            assert!(round.scrape_parsed(&url).await.is_err());
        }
        let other = round.for_round_within(Duration::from_secs(5));
        assert!(other.scrape_parsed(&url).await.is_err());
        assert_eq!(scraped.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    /// A round's budget cuts a request that the source timeout would let wait longer.
    #[tokio::test]
    async fn a_rounds_budget_cuts_a_request_at_its_deadline() {
        let (base, _) = silent_source().await;
        let round = Fetcher::new(Duration::from_secs(60))
            .unwrap()
            .for_round_within(Duration::from_millis(200));
        let started = std::time::Instant::now();
        let answer = round.prometheus(&base, "up", 1_000).await;
        assert!(matches!(answer, Err(FetchError::TimedOut(_))), "{answer:?}");
        assert!(started.elapsed() < Duration::from_secs(30));
    }

    /// Regression (issue 31): the API path went after a base URL's query string
    /// (`http://h/?token=x/api/v1/query`), so a Prometheus behind a proxy that takes its token
    /// in the query was never asked.
    #[test]
    fn the_api_path_goes_before_the_base_urls_query_string() {
        assert_eq!(query_url("http://h:9090"), "http://h:9090/api/v1/query");
        assert_eq!(query_url("http://h:9090/"), "http://h:9090/api/v1/query");
        assert_eq!(
            query_url("http://u:p@h/prom/?token=x&a=b"),
            "http://u:p@h/prom/api/v1/query?token=x&a=b"
        );
        assert_eq!(
            query_url("http://h/prom#frag"),
            "http://h/prom/api/v1/query"
        );
    }
}
