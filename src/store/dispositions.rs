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

use super::dlq_rows::Disposition;
use super::{Result, StoreError};

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
    ///
    /// # Guarantees
    /// One decision per group and queue, whatever the reasons: taken in one transaction under
    /// the group's lock, each row naming the one it supersedes under a unique index, so two
    /// decisions racing on one group are never both recorded.
    ///
    /// # Errors
    /// [`StoreError::AlreadyDecided`] when the group is already decided (and `disposition` shows
    /// no entries past what that decision covered), or a replay holds it.
    fn record(&self, disposition: &Disposition) -> impl Future<Output = Result<i64>> + Send;
    /// Before a replay run `run` sends an entry of `hold`'s group (first attempted at
    /// `first_attempt_ms`): hold the group for the replay (a row in state `replaying`,
    /// superseding its latest decision), join the hold of another run, or find the entry
    /// covered by an earlier replay.
    ///
    /// # Errors
    /// [`StoreError::AlreadyDecided`] when a close covers the entry: nothing of the group may be
    /// sent.
    fn take_replay(
        &self,
        hold: &Disposition,
        run: &str,
        first_attempt_ms: i64,
    ) -> impl Future<Output = Result<Take>> + Send;
    /// Turn the hold `id` into the `replay` decision `decision` (its count, first/last seen,
    /// decider and time); `false` when `id` no longer holds the group (released meanwhile).
    fn finish_replay(
        &self,
        id: i64,
        decision: &Disposition,
    ) -> impl Future<Output = Result<bool>> + Send;
    /// Drop run `run`'s hold `id` (the run stopped short, or a message of the group failed):
    /// the group is open again. `false` when it was not this run's hold.
    fn release_replay(&self, id: i64, run: &str) -> impl Future<Output = Result<bool>> + Send;
    /// Every decision, oldest first (the order [`crate::dlq::disposition`] expects); holds of
    /// replays under way are not decisions and are left out.
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

/// What [`DispositionStore::take_replay`] found on the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// This run now holds the group (decision row `.0`, state `replaying`): send, then
    /// [`DispositionStore::finish_replay`] or [`DispositionStore::release_replay`] it.
    Held(i64),
    /// Another replay run holds the group (row `.0`): send along with it (two replays of one
    /// queue at once share a group; the ledger keeps each entry to one of them).
    Joined(i64),
    /// The group's latest decision is a replay that covers this entry: nothing to hold (the
    /// ledger finds the entry sent).
    Covered,
}

/// The group's latest row (decided or held by a replay), as the store reads it under the
/// group's lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Latest {
    pub id: i64,
    pub action: String,
    pub reason: Option<String>,
    /// `decided`, or `replaying` while a replay run holds the group.
    pub state: String,
    pub run: Option<String>,
    pub decided_by: String,
    pub decided_at: i64,
    pub last_seen: Option<String>,
}

/// Up to when (ms, by `firstAttemptAt`) a decision covers entries: its `lastSeen`, or the time
/// it was taken (the same rule as `Disposition::covers_until_ms`).
pub(crate) fn covers_until(last_seen: Option<&str>, decided_at: i64) -> i64 {
    last_seen
        .and_then(|t| crate::time::parse_timestamp(t).ok())
        .unwrap_or(decided_at)
}

fn group_of(d: &Disposition) -> String {
    format!(
        "group ({}, {}, {:?}) of queue {:?}",
        d.error_class, d.consumer_version, d.signature, d.queue
    )
}

/// What `latest` decided, in words.
fn decided(latest: &Latest) -> String {
    let when = crate::time::format_timestamp(latest.decided_at);
    match (latest.state.as_str(), latest.reason.as_deref()) {
        ("replaying", _) => format!(
            "is being replayed (run {}, by {}, since {when}): no other decision while a replay \
             holds it; if that replay stopped without a word (killed), run it again to finish it",
            latest.run.as_deref().unwrap_or("?"),
            latest.decided_by
        ),
        (_, Some(reason)) => format!(
            "is already closed as {reason} (decision #{} by {}, {when})",
            latest.id, latest.decided_by
        ),
        _ => format!(
            "is already replayed (decision #{} by {}, {when})",
            latest.id, latest.decided_by
        ),
    }
}

/// Why `d` is not recorded over the group's `latest` row: one decision per group and queue,
/// whatever the reasons. A new decision is taken only on a group never decided, or one whose
/// entries came back after what its decision covered (`d` names a `lastSeen` past it: an export
/// shows them); never while a replay holds the group.
pub(crate) fn refuse_record(d: &Disposition, latest: Option<&Latest>) -> Option<StoreError> {
    let latest = latest?;
    let newer = d.last_seen.is_some()
        && covers_until(d.last_seen.as_deref(), d.decided_at_ms)
            > covers_until(latest.last_seen.as_deref(), latest.decided_at);
    if latest.state == "decided" && newer {
        return None;
    }
    let again = if latest.state == "decided" {
        "; one decision per group: a new one needs entries first attempted after what it \
         covered (close with --from an export that has them)"
    } else {
        ""
    };
    Some(StoreError::AlreadyDecided(format!(
        "{} {}{again}",
        group_of(d),
        decided(latest)
    )))
}

/// What a replay about to send an entry of `hold`'s group first attempted at `first_attempt_ms`
/// finds on the group's `latest` row: `Ok(None)` to take the group (insert the hold), else the
/// answer, or the refusal (a close covers the entry).
pub(crate) fn replay_over(
    hold: &Disposition,
    latest: Option<&Latest>,
    first_attempt_ms: i64,
) -> Result<Option<Take>> {
    let Some(latest) = latest else {
        return Ok(None);
    };
    if latest.state == "replaying" {
        return Ok(Some(Take::Joined(latest.id)));
    }
    let until = covers_until(latest.last_seen.as_deref(), latest.decided_at);
    if first_attempt_ms > until {
        return Ok(None);
    }
    if latest.reason.is_none() {
        return Ok(Some(Take::Covered));
    }
    Err(StoreError::AlreadyDecided(format!(
        "{} {}, which covers its entries first attempted up to {}; the replay sent nothing of it",
        group_of(hold),
        decided(latest),
        crate::time::format_timestamp(until)
    )))
}
