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
//! - [`judge()`]: settings and waivers -> a [`Report`] of findings.

pub mod check;
mod judge;
pub mod settings;

pub use check::{Check, Kind, Side};
pub use judge::judge;
pub use settings::*;

use serde::Serialize;

/// A plan's waiver of one check on one side: the check still runs and is reported, marked
/// waived, with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Waiver {
    pub side: Side,
    pub check: Check,
    pub reason: String,
}

/// What one check found on one broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The setting keeps acknowledged writes.
    Pass,
    /// Allowed, with a window of loss stated in `why`.
    Warn,
    /// May lose acknowledged writes (or could not be read): the migration does not go on.
    Refuse,
    /// Would be refused (or warned about), waived by the plan.
    Waived,
}

impl Outcome {
    /// `pass`, `warn`, `REFUSED`, `waived`: as the text report prints it.
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Warn => "warn",
            Outcome::Refuse => "REFUSED",
            Outcome::Waived => "waived",
        }
    }
}

/// One finding: a check, on a broker, with the setting it read and what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub side: Side,
    /// The broker's display name (the plan's `brokers.old|new.name`).
    pub broker: String,
    pub check: Check,
    pub outcome: Outcome,
    /// The setting read, as the broker names it (`stream ORDERS storage`, `appendfsync`).
    pub setting: String,
    /// Its value (`memory`, `everysec`), or `unknown (why)`.
    pub value: String,
    /// What it means for acknowledged writes.
    pub why: String,
    /// How to make it pass (`None` when it passes).
    pub fix: Option<String>,
    /// The plan's reason, when waived.
    pub waiver: Option<String>,
}

/// Every finding of a preflight, and the waivers no finding needed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    /// Waivers of checks that passed, or that no broker of the plan had (kept: the plan says
    /// more than the brokers need, worth a look).
    pub unused_waivers: Vec<Waiver>,
}

impl Report {
    /// Whether anything is refused (not waived).
    pub fn refused(&self) -> bool {
        self.findings.iter().any(|f| f.outcome == Outcome::Refuse)
    }

    /// The refused findings.
    pub fn refusals(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.outcome == Outcome::Refuse)
    }

    /// The findings a waiver let through.
    pub fn waived(&self) -> impl Iterator<Item = &Finding> {
        self.findings
            .iter()
            .filter(|f| f.outcome == Outcome::Waived)
    }

    /// One line naming every refusal with its setting and fix, for a pause's reason and a
    /// log (`preflight refused: new nats: nats.storage: stream ORDERS storage is memory ...`);
    /// `None` when nothing is refused.
    pub fn refusal_line(&self) -> Option<String> {
        let parts: Vec<String> = self.refusals().map(Finding::line).collect();
        (!parts.is_empty()).then(|| format!("preflight refused: {}", parts.join("; ")))
    }
}

impl Finding {
    /// `new nats: nats.storage: stream ORDERS storage is memory (why) — fix: ...; or waive
    /// preflight.new.waive.nats.storage`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} {}: {}: {} is {} ({})",
            self.side, self.broker, self.check, self.setting, self.value, self.why
        );
        if let Some(fix) = &self.fix {
            s.push_str(&format!(" — fix: {fix}"));
            if self.outcome == Outcome::Refuse {
                s.push_str(&format!(
                    "; or waive it with a reason: preflight.{}.waive.{}",
                    self.side, self.check
                ));
            }
        }
        if let Some(w) = &self.waiver {
            s.push_str(&format!(" — waived: {w}"));
        }
        s
    }
}

/// A broker whose settings could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unread {
    pub side: Side,
    pub broker: String,
    /// Why, redacted.
    pub error: String,
}

/// A plan's preflight.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Preflighted {
    /// What was read, broker by broker (those read).
    pub settings: Vec<BrokerSettings>,
    /// The brokers that could not be read: only their `readable` check is judged.
    pub unread: Vec<Unread>,
    /// The findings, with the plan's waivers applied.
    pub report: Report,
}

impl Preflighted {
    /// Judges what a reader found: `settings` and the brokers it could not read.
    pub fn judge(settings: Vec<BrokerSettings>, unread: Vec<Unread>, waivers: &[Waiver]) -> Self {
        let report = judge(&settings, &unread, waivers);
        Preflighted {
            settings,
            unread,
            report,
        }
    }

    /// Whether the migration may write to its brokers: nothing refused.
    pub fn passed(&self) -> bool {
        !self.report.refused()
    }

    /// A broker could not be read and no waiver lets that through.
    pub fn unread_refused(&self) -> bool {
        self.report
            .refusals()
            .any(|f| f.check == Check::Readable)
    }
}

#[cfg(test)]
mod tests;
