//! Dead letters (docs/design.md, "Dead letters"; the dead-letter article): the envelope a
//! consumer writes when it gives up on a message, and what the controller does with a queue of
//! them.
//!
//! Pure (values in, values out; time is an argument):
//! - [`envelope`] — `DeadLetter` in the dead-letter article's JSON names (payload byte-intact: a
//!   string when UTF-8, else `{"base64": ...}`), the builder a consumer calls, its extensible
//!   `ErrorClassifier`, the instant format.
//! - [`signature`] — the error signature, v1 = the dead-letter article's `signatureOf` exactly
//!   (UTF-16 cut).
//! - [`lines`] — an export's lines, each under a cap (16 MiB by default), in flat memory.
//! - [`scan`] — triage's fast read of a line: the fields it groups by, the payload stepped over.
//! - [`triage`] — one streaming pass over any `BufRead` of NDJSON, groups by (class, consumer
//!   version, signature), the dead-letter article's numbers and order; table and JSON renderings.
//! - [`disposition`] — the closed list of close reasons, the decision record, the split of
//!   groups into recurring / covered / fresh against recorded decisions.
//! - [`gate`] — the drain phase's gate: the old queue is empty or every group in it is decided.
//! - [`replay`] — the replay decision logic (rate, canary, origin headers, automatic stop,
//!   validity guard), a runner over `Publisher` and `Pacer` traits, the NDJSON publisher.
//! - [`selection`] — the entries of an export a replay sends: one group (or all), with their
//!   line numbers, read lazily.
//! - [`refused`] — the pre-scan of a replay's file: what the validity guard refuses, up front,
//!   and the message that says what to do.
//! - [`replayed`] — the decisions a completed replay records.
//! - `replay_route` — where a replayed message goes on a migration's brokers: its key (from
//!   `--key-field` or the plan's `bridge.key`), the side its slice routes to, its headers.
//! - [`alerts`] — inflow per minute, new signatures, oldest unclosed age; Prometheus text.
//! - [`report`] — the weekly review in Markdown.
//! - [`retention`] — an export without the dead letters older than a cut (`purge`).
//! - [`generate`] — realistic exports from a PRNG seed, for tests, benchmarks and rehearsals.
//!
//! Shell: [`triage_file`] (an export file on several threads, the same report as one),
//! [`pacer`] (a replay paced on the wall clock), `broker_publisher` (replay onto a migration's
//! brokers), `store::dispositions` (decisions, seen signatures and the replay ledger in the state
//! store, SQLite or PostgreSQL) and `cli::dlq` (`migrate dlq ...`, one file per subcommand). See
//! `docs/dlq.md`.

pub mod alerts;
#[cfg(all(feature = "brokers", feature = "router"))]
pub mod broker_publisher;
pub mod disposition;
pub mod envelope;
pub mod gate;
pub mod generate;
pub mod lines;
pub mod pacer;
pub mod refused;
pub mod replay;
#[cfg(all(feature = "brokers", feature = "router"))]
pub mod replay_route;
pub mod replayed;
pub mod report;
pub mod retention;
pub mod scan;
pub mod selection;
pub mod signature;
#[cfg(test)]
mod test_support;
pub mod triage;
pub mod triage_file;
