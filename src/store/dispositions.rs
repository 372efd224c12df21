//! Dead-letter decisions, seen signatures and the replay ledger in the state store: the trait
//! and its types, nothing else.
//!
//! [`DispositionStore`] is its own trait beside [`super::Store`], implemented once for both
//! databases in `store/dispositions_sql.rs`. No method has a default: a backend that cannot keep decisions does not compile, rather
//! than answering "no decisions" (which would keep the drain gate closed for good) or forgetting
//! what a replay sent. Both traits have a `list`: where both are in scope, call
//! `DispositionStore::list(&store)`.

use std::collections::HashMap;
use std::future::Future;

use super::Result;
use super::dlq_rows::Disposition;

/// A signature seen in a queue (for the "never seen before" signal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenSignature {
    /// The queue.
    pub queue: String,
    /// The signature.
    pub signature: String,
    /// The class of the group it was seen in.
    pub error_class: String,
    /// The consumer version of that group.
    pub consumer_version: String,
}

/// What `purge_before` removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Purged {
    /// Decisions taken before the cut.
    pub dispositions: u64,
    /// Seen signatures not seen since the cut.
    pub signatures: u64,
    /// Replay ledger rows of entries dead-lettered before the cut (an export purged at the same
    /// cut no longer holds them).
    pub replays: u64,
}

/// One dead letter a replay is about to send to one destination: the ledger row it claims
/// before it publishes (see [`DispositionStore::claim_replay`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayClaim {
    /// The dead-letter queue the entry came from.
    pub queue: String,
    /// Where the replay sends it: `migration:NAME`, `file:/absolute/path` or `stdout`.
    pub destination: String,
    /// The entry's identity: a digest of the whole envelope (two identical envelopes are one
    /// dead letter exported twice, and are sent once).
    pub entry: String,
    /// The run that claims it (each run draws its own).
    pub run: String,
    /// The entry's `deadLetteredAt`, as written (for people reading the ledger).
    pub dead_lettered_at: String,
    /// The same in ms (`dlq purge --decisions` drops the rows of entries older than its cut).
    pub dead_lettered_ms: i64,
    /// When the claim is made (ms).
    pub at_ms: i64,
}

/// What [`DispositionStore::claim_replay`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Claimed for this run: publish it, then settle the claim.
    Taken,
    /// An earlier run sent it, and the broker (or the output) confirmed it: skip it.
    Sent,
    /// Another run claimed it and never settled it (it was killed, its store failed, or its
    /// broker did not confirm): it may or may not have gone out. Not sent again unless asked.
    InDoubt,
}

/// Decisions about dead-letter groups, and what replays sent.
pub trait DispositionStore: Send + Sync {
    /// Record a decision; returns its id.
    fn record(&self, disposition: &Disposition) -> impl Future<Output = Result<i64>> + Send;
    /// Every decision, oldest first (the order [`crate::dlq::disposition`] expects).
    fn list(&self) -> impl Future<Output = Result<Vec<Disposition>>> + Send;
    /// Remove decisions taken before `before_ms`, seen signatures not seen since, and the replay
    /// ledger rows of entries dead-lettered before it.
    fn purge_before(&self, before_ms: i64) -> impl Future<Output = Result<Purged>> + Send;
    /// Note that these signatures were seen at `now_ms`; returns, for each, when it was first
    /// seen (now for the ones never seen before).
    fn note_signatures(
        &self,
        seen: &[SeenSignature],
        now_ms: i64,
    ) -> impl Future<Output = Result<HashMap<String, i64>>> + Send;
    /// Claim `claim.entry` for `claim.destination` before publishing it: [`Claim::Taken`] when
    /// no run had claimed it (or, with `retake_in_doubt`, when a run claimed it and never
    /// settled it), otherwise what the earlier claim says. Atomic: two runs racing for one
    /// entry never both get [`Claim::Taken`].
    fn claim_replay(
        &self,
        claim: &ReplayClaim,
        retake_in_doubt: bool,
    ) -> impl Future<Output = Result<Claim>> + Send;
    /// Settle this run's claim (`claim.at_ms`: when): `sent` (confirmed) marks it sent, for
    /// good; otherwise (it was certainly not sent) the claim is dropped, so that a later run
    /// sends it. `false` when the claim is no longer this run's (another run took it over with
    /// `retake_in_doubt` meanwhile): nothing was changed.
    fn settle_replay(
        &self,
        claim: &ReplayClaim,
        sent: bool,
    ) -> impl Future<Output = Result<bool>> + Send;
}

/// The group's latest decision, as [`latest_of_group`] reads it: `(id, action, reason)`.
pub(crate) type Latest = Option<(i64, String, Option<String>)>;

/// Why `d` is not recorded: it closes a group whose latest decision is already that close (one
/// decision per group and queue, whoever closes it twice at once).
pub(crate) fn already_closed(d: &Disposition, latest: Latest) -> Option<super::StoreError> {
    let reason = d.action.reason()?.as_str();
    let (id, action, was) = latest?;
    (action == d.action.kind() && was.as_deref() == Some(reason)).then(|| {
        super::StoreError::AlreadyDecided(format!(
            "group ({}, {}, {:?}) of queue {:?} is already closed as {reason} (decision #{id})",
            d.error_class, d.consumer_version, d.signature, d.queue
        ))
    })
}
