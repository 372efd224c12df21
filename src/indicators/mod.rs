//! Indicator sources: where gate readings come from.
//!
//! - [`exposition`] (pure): a strict parser of the Prometheus text format (and OpenMetrics);
//!   every sample line is returned exactly or reported with its line number.
//! - [`query`] (pure): the small query language of `scrape:` sources and the sample history it
//!   needs for `rate()` / `increase()`.
//! - [`promql`] (pure): decoding a Prometheus HTTP API instant-query answer into one number.
//! - [`fetch`] (IO): the HTTP client for both kinds of source.

pub mod exposition;
pub mod fetch;
pub mod promql;
pub mod query;
