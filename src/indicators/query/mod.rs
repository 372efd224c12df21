//! The query language of `scrape:` indicator sources: a tiny PromQL subset that the
//! controller evaluates itself over the samples it scraped from a `/metrics` endpoint.
//!
//! Grammar (whitespace is allowed between tokens):
//!
//! ```text
//! query    := operand [ "/" operand ]
//! operand  := "(" operand ")" | agg "(" inner ")" | range | selector
//! agg      := "sum" | "min" | "max"
//! inner    := range | selector
//! range    := ("rate" | "increase") "(" selector "[" duration "]" ")"
//! selector := metric_name [ "{" [ matcher { "," matcher } [","] ] "}" ]
//!           | "{" "\"metric.name\"" { "," matcher } [","] "}"
//! matcher  := (label | "\"label.name\"") ("=" | "!=") "\"value\""
//! ```
//!
//! As PromQL 3 writes them, a metric or label name outside `[a-zA-Z_:][a-zA-Z0-9_:]*` is
//! quoted: the metric name first inside the braces (`{"http.server.duration"}`,
//! `{"http.server.duration", "service.name"="x"}`), a label name before its operator
//! (`http_requests_total{"service.name"="x"}`).
//!
//! Guarantees:
//! - pure: no IO and no clock; evaluation time is always passed in as `now_ms`;
//! - [`parse_query`] never panics and reports every rejection as a [`QueryError`]
//!   that says what to write instead (with the 1-based character column where useful);
//! - [`Query::evaluate`] returns either a finite number or [`NoData`] with a reason —
//!   never NaN or ±Inf, so a gate never compares a non-number;
//! - instant selectors read only the latest scrape (series that vanished from it are not
//!   summed from stale points), and every query is "no data" when that scrape is older
//!   than [`STALENESS`];
//! - `rate`/`increase` handle counter resets like Prometheus (a drop means a reset and
//!   the new value is the increase since it) but do not extrapolate to the window edges.
//!   The window is `(now_ms - window, now_ms]`; every matching series with at least two
//!   points in it counts (also one that has since vanished, as in Prometheus), series
//!   with fewer are skipped, and no series with two points is "not enough samples";
//! - a bare selector or range function is summed over series; `sum`/`min`/`max` around
//!   either aggregate the per-series values (so `max(rate(x[5m]))` works too).

mod ast;
mod eval;
mod parse;

pub use ast::{NotACount, Query, STALENESS};
pub use eval::{NoData, Reading};
pub use parse::{QueryError, parse_query};

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::indicators::exposition::Sample;

    /// A sample of series `name{labels}` (shared with the history's tests).
    pub(crate) fn sample(name: &str, labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            name: name.to_owned(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            value,
            timestamp_ms: None,
        }
    }

    /// `text` parsed, or the test fails (shared with the history's tests).
    pub(crate) fn q(text: &str) -> Query {
        match parse_query(text) {
            Ok(q) => q,
            Err(e) => panic!("`{text}` should parse: {e}"),
        }
    }
}
