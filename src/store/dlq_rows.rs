//! The dead-letter decisions as the store keeps them: a decision ([`Disposition`]), what it
//! decided ([`Action`]) and why a group was closed ([`CloseReason`]). The store owns these rows
//! (it reads and writes them without depending on `crate::dlq`); `crate::dlq::disposition`
//! re-exports them and adds what is built on them (closing a group, matching a triage against
//! the history, the JSON view).

use std::fmt;

use serde::Serialize;

/// Errors of a decision (a reason outside the list, no decider).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DispositionError {
    /// A reason outside the closed list.
    #[error(
        "invalid close reason {given:?}: use one of entity_deleted, window_expired, producer_retired, already_processed, fixed_in_code"
    )]
    InvalidReason {
        /// What was given.
        given: String,
    },
    /// A decision without a person.
    #[error("a decision needs who took it (--by)")]
    NoDecider,
}

/// Why a group is closed without replay. The list is closed on purpose: a free-text reason
/// becomes "other" within three months and the record stops being comparable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// The referenced entity no longer exists.
    EntityDeleted,
    /// The event lost its temporal validity.
    WindowExpired,
    /// The format of a producer version that no longer exists.
    ProducerRetired,
    /// Another path already produced the same effect.
    AlreadyProcessed,
    /// The defect is fixed; the old messages are irrelevant.
    FixedInCode,
}

impl CloseReason {
    /// Every reason, in the article's order.
    pub const ALL: [CloseReason; 5] = [
        CloseReason::EntityDeleted,
        CloseReason::WindowExpired,
        CloseReason::ProducerRetired,
        CloseReason::AlreadyProcessed,
        CloseReason::FixedInCode,
    ];

    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::EntityDeleted => "entity_deleted",
            CloseReason::WindowExpired => "window_expired",
            CloseReason::ProducerRetired => "producer_retired",
            CloseReason::AlreadyProcessed => "already_processed",
            CloseReason::FixedInCode => "fixed_in_code",
        }
    }

    /// One line per reason, for `--help` and the refusal message.
    pub fn describe(self) -> &'static str {
        match self {
            CloseReason::EntityDeleted => "the referenced entity no longer exists",
            CloseReason::WindowExpired => "the event lost its temporal validity",
            CloseReason::ProducerRetired => "a producer version's format that no longer exists",
            CloseReason::AlreadyProcessed => "another path already produced the same effect",
            CloseReason::FixedInCode => "defect fixed; the old messages are irrelevant",
        }
    }

    /// Parse a stored or typed name.
    ///
    /// # Errors
    /// [`DispositionError::InvalidReason`], whose message lists the valid ones.
    pub fn parse(text: &str) -> Result<CloseReason, DispositionError> {
        CloseReason::ALL
            .into_iter()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| DispositionError::InvalidReason {
                given: text.to_string(),
            })
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Closed without replay, for a reason.
    Close(CloseReason),
    /// Replayed to the end (not paused, not aborted), every message of the group published.
    Replay,
}

impl Action {
    /// `close` or `replay`.
    pub fn kind(self) -> &'static str {
        match self {
            Action::Close(_) => "close",
            Action::Replay => "replay",
        }
    }
    /// The close reason, if any.
    pub fn reason(self) -> Option<CloseReason> {
        match self {
            Action::Close(r) => Some(r),
            Action::Replay => None,
        }
    }
}

/// One recorded decision (the article's `recordDisposition` argument, plus the queue, the action,
/// the signature version and a note).
#[derive(Debug, Clone, PartialEq)]
pub struct Disposition {
    /// Store id (0 before it is recorded).
    pub id: i64,
    /// The dead-letter queue it is about.
    pub queue: String,
    /// The group's signature.
    pub signature: String,
    /// The rules that produced it (`v1`).
    pub signature_version: String,
    /// The group's class when decided.
    pub error_class: String,
    /// The group's consumer version when decided.
    pub consumer_version: String,
    /// Entries in the group when decided (unknown when closed without the export at hand).
    pub affected_count: Option<u64>,
    /// The group's `firstSeen` when decided.
    pub first_seen: Option<String>,
    /// The group's `lastSeen` when decided: the decision covers entries first attempted up to it.
    pub last_seen: Option<String>,
    /// What was decided.
    pub action: Action,
    /// Who decided.
    pub decided_by: String,
    /// When (ms).
    pub decided_at_ms: i64,
    /// Free text beside the reason.
    pub note: Option<String>,
}
