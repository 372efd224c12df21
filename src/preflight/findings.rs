//! What a preflight says: a finding per check and broker, the report of them, the waivers.

use serde::Serialize;

use super::check::{Check, Side};

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
