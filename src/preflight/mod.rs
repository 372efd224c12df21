//! Preflight: whether each broker keeps what it acknowledges, from its durability settings
//! (issue 58). Pure: the settings come in as values (read at the edge by
//! `crate::brokers::durability`, for a plan by `crate::adapters::preflight`), the findings go
//! out; no IO, no clock.
//!
//! A broker's acknowledgement is what the adapters count as a confirmation
//! (`docs/brokers.md`): a setting under which an acknowledged write may still be lost (a NATS
//! stream in memory or synced to disk every two minutes, a Kafka topic with
//! `min.insync.replicas` 1, a RabbitMQ classic queue, a Redis without an fsynced append-only
//! file, a single node) is **refused**, naming the setting and the fix, unless the plan waives
//! that check with a reason (`preflight.old|new.waive`, `docs/plan.md`). A setting that narrows
//! the promise without breaking it (Redis `appendfsync everysec`: one second of writes) is a
//! **warning**. A setting that could not be read counts as refused: a preflight never passes
//! on what it did not see.
//!
//! - [`check`]: the checks by name, and which broker kinds they apply to.
//! - [`settings`]: what a reader found on a broker.
//! - [`judge()`]: settings and waivers -> a [`Report`] of findings ([`findings`]'s types);
//!   [`Preflighted`]: a reader's answer, judged.

pub mod check;
mod findings;
mod judge;
mod preflighted;
pub mod settings;

pub use check::{Check, Kind, Side};
pub use findings::{Finding, Outcome, Report, Unread, Waiver};
pub use judge::judge;
pub use preflighted::Preflighted;
pub use settings::*;

#[cfg(test)]
mod tests;
