//! A `judge` on a `prometheus` source reads its counts from the raw counters underneath its
//! queries ([`crate::judge::counter`]): for `sum(increase(x[$step]))` the raw samples of `x`
//! since the judge's counting start (a range selector, one request per query), counter resets
//! handled per series, then summed. No `increase()` extrapolation reaches the judge.

use crate::gate::{NoDataCause, Unread};
use crate::indicators::fetch::Fetcher;
use crate::judge::counter::{increase_since, recognise, samples_query};

/// How far before the counting start each series' baseline sample is looked for: Prometheus's
/// default lookback (a series scraped at least this often has one).
pub(super) const BASELINE_LOOKBACK_MS: i64 = 5 * 60 * 1000;

/// Each of a judge's `queries` (as written, `$step` in them; `$le` already replaced) read as
/// the increase of its counters from `from_ms` through `now_ms`, at the Prometheus `url`
/// (`shown`: the source as a reason names it).
///
/// # Guarantees
/// One answer per query, in order: the count, or why there is none (a query not of the raw
/// counter form, which `plan check` refuses, the source's error, samples that are not a
/// counter's).
pub(super) async fn read(
    fetcher: &Fetcher,
    url: &str,
    shown: &str,
    queries: &[&str],
    from_ms: i64,
    now_ms: i64,
) -> Vec<Result<f64, Unread>> {
    let one = |query: &str| {
        let query = query.to_string();
        async move {
            let counter = recognise(&query).map_err(|why| {
                Unread::new(
                    NoDataCause::Unusable,
                    format!("source {shown}: `{query}`: {why}"),
                )
            })?;
            let asked = samples_query(&counter, from_ms, now_ms, BASELINE_LOOKBACK_MS);
            let series = fetcher
                .prometheus_series(url, &asked, now_ms)
                .await
                .map_err(|e| {
                    Unread::new(
                        e.cause(),
                        format!("source {shown}: the counters of {}: {e}", counter.selector),
                    )
                })?;
            increase_since(&series, from_ms, now_ms)
                .map(|c| c.total)
                .map_err(|e| {
                    Unread::new(
                        NoDataCause::Unusable,
                        format!("source {shown}: the counters of {}: {e}", counter.selector),
                    )
                })
        }
    };
    futures_util::future::join_all(queries.iter().map(|q| one(q))).await
}
