//! A plan's preflight: what its reader found, judged.

use serde::Serialize;

use super::findings::{Report, Unread, Waiver};
use super::settings::BrokerSettings;

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
        let report = super::judge::judge(&settings, &unread, waivers);
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
            .any(|f| f.check == super::check::Check::Readable)
    }
}
