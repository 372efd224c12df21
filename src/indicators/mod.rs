//! Indicator sources: where gate readings come from.
//!
//! - [`cause`] (pure): why a source gave a gate no usable number (down, empty, too few samples,
//!   unusable), which the adapters say and the gate keeps with its NO DATA verdict.
//! - [`exposition`] (pure): a strict parser of the Prometheus text format (and OpenMetrics);
//!   every sample line is returned exactly or reported with its line number.
//! - [`query`] (pure): the small query language of `scrape:` sources.
//! - [`selector`] (pure): a series selector of that language and its matching.
//! - [`history`] (pure): the samples of a `scrape:` source kept between scrapes, which its
//!   queries read (`rate()` / `increase()` over a window).
//! - [`promql`] (pure): decoding a Prometheus HTTP API instant-query answer into one number.
//! - [`fetch`] (IO): the HTTP client for both kinds of source.
//! - [`kafka_lag`]: a consumer group's lag read from Kafka itself (pure query over one reading;
//!   the reading is IO, feature `kafka`).

pub mod cause;
pub mod exposition;
pub mod fetch;
pub mod followers;
pub mod history;
pub mod kafka_lag;
pub mod promql;
pub mod query;
pub mod selector;
