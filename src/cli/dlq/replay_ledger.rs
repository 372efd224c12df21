//! What `migrate dlq replay` records in the state store before and after each publish: the
//! store's replay ledger ([`DispositionStore::claim_replay`]) as the replay's [`Ledger`].
//!
//! Each entry is claimed for (queue, destination) before it is published and settled once the
//! outcome is known, so a re-run after any failure skips what went out and never sends an entry
//! twice: one whose outcome was never learnt (a run killed between the two, a publish the broker
//! did not confirm, a store that failed to settle) stays in doubt and is not sent again unless
//! `--resend-in-doubt`.
//!
//! Before it claims the first entry of a group, the run holds the group for its replay
//! ([`DispositionStore::take_replay`]): one decision per group, so a group a close decided is
//! refused before anything of it is sent, and a close while the replay runs is refused.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::time::Instant;

use sha2::{Digest, Sha256};

use crate::dlq::disposition::{Action, Disposition};
use crate::dlq::envelope::DeadLetter;
use crate::dlq::replay::{GroupTally, Ledger, Recorded};
use crate::dlq::selection::{GroupKey, Selected};
use crate::dlq::signature::SignatureVersion;
use crate::store::StoreError;
use crate::store::any::AnyStore;
use crate::store::dispositions::{Claim, DispositionStore, ReplayClaim, Take};

/// The ledger of one run, and what it found that earlier runs did.
pub(super) struct StoreLedger {
    store: AnyStore,
    queue: String,
    destination: String,
    run: String,
    /// Who replays (the decider of the groups it holds).
    by: String,
    resend_in_doubt: bool,
    /// Per group met so far, what [`DispositionStore::take_replay`] answered.
    pub(super) holds: HashMap<GroupKey, Take>,
    /// Why the run stopped before a group: a decision already covers it (nothing of that group
    /// was sent).
    pub(super) refused: Option<String>,
    base_ms: i64,
    started: Instant,
    /// The claim of the entry being published (settled next).
    current: Option<ReplayClaim>,
    /// Per group, the entries earlier runs sent (as published) and those in doubt.
    pub(super) earlier: GroupTally<GroupKey>,
    /// How long this run may yet wait for entries another run is sending right now to settle
    /// (two replays at once), before it calls them in doubt.
    settle_budget: std::time::Duration,
}

/// How long, in all, a run waits for another run's claims to settle ([`StoreLedger::claim`]):
/// a live run settles an entry within its broker's confirm; a run killed earlier never does,
/// and costs the re-run this once.
const SETTLE_BUDGET: std::time::Duration = std::time::Duration::from_secs(5);
/// Between two looks at a claim another run holds.
const SETTLE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl StoreLedger {
    /// The ledger of a run starting at `now_ms` that sends the entries of `queue` to
    /// `destination` (`migration:NAME`, `file:/absolute/path` or `stdout`).
    pub(super) fn new(
        store: AnyStore,
        queue: &str,
        destination: String,
        (by, now_ms): (&str, i64),
        resend_in_doubt: bool,
    ) -> StoreLedger {
        // Unique per run, wherever it runs (two hosts can share a PostgreSQL store).
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        StoreLedger {
            store,
            queue: queue.to_string(),
            destination,
            run: format!("{now_ms}-{}-{random:016x}", std::process::id()),
            by: by.trim().to_string(),
            resend_in_doubt,
            holds: HashMap::new(),
            refused: None,
            base_ms: now_ms,
            started: Instant::now(),
            current: None,
            earlier: GroupTally::default(),
            settle_budget: SETTLE_BUDGET,
        }
    }

    /// Hold `s`'s group for this run before its first entry is claimed (again at each entry
    /// while an earlier replay covers them): an `Err` stops the run before anything of the
    /// group is sent.
    async fn hold_group(&mut self, s: &Selected) -> Result<(), String> {
        if matches!(
            self.holds.get(&s.key),
            Some(Take::Held(_) | Take::Joined(_))
        ) {
            return Ok(());
        }
        let (class, version, signature) = s.key.clone();
        let hold = Disposition {
            id: 0,
            queue: self.queue.clone(),
            signature,
            signature_version: SignatureVersion::V1.as_str().to_string(),
            error_class: class,
            consumer_version: version,
            affected_count: None,
            first_seen: None,
            last_seen: None,
            action: Action::Replay,
            decided_by: self.by.clone(),
            decided_at_ms: self.now_ms(),
            note: None,
        };
        // An age that cannot be read counts as covered by any decision (refused, not sent).
        let first = s.entry.first_attempt_ms().unwrap_or(i64::MIN);
        match self.store.take_replay(&hold, &self.run, first).await {
            Ok(take) => {
                self.holds.insert(s.key.clone(), take);
                Ok(())
            }
            Err(StoreError::AlreadyDecided(why)) => {
                let why = crate::redact::text(&why);
                self.refused = Some(why.clone());
                Err(why)
            }
            Err(e) => Err(crate::redact::text(&e.to_string())),
        }
    }

    /// Record the decisions of a completed run: each turns its group's hold into the decision
    /// (or is recorded anew where the run held none); then drop the holds this run still has
    /// (groups not replayed whole). How many were recorded.
    ///
    /// # Errors
    /// The store's.
    pub(super) async fn decide(&mut self, decisions: &[Disposition]) -> Result<usize, StoreError> {
        let mut recorded = 0;
        for d in decisions {
            let key = (
                d.error_class.clone(),
                d.consumer_version.clone(),
                d.signature.clone(),
            );
            let held = match self.holds.remove(&key) {
                Some(Take::Held(id) | Take::Joined(id)) => Some(id),
                _ => None,
            };
            if let Some(id) = held
                && self.store.finish_replay(id, d).await?
            {
                recorded += 1;
                continue;
            }
            match self.store.record(d).await {
                Ok(_) => recorded += 1,
                // A hold shared with another run that decided the group first.
                Err(StoreError::AlreadyDecided(_)) if held.is_some() => {}
                Err(e) => return Err(e),
            }
        }
        self.release().await?;
        Ok(recorded)
    }

    /// Drop every hold this run took (it stopped short, or those groups were not replayed
    /// whole): their groups are open again.
    ///
    /// # Errors
    /// The store's.
    pub(super) async fn release(&mut self) -> Result<(), StoreError> {
        for (_, take) in self.holds.drain() {
            if let Take::Held(id) = take {
                self.store.release_replay(id, &self.run).await?;
            }
        }
        Ok(())
    }

    fn now_ms(&self) -> i64 {
        self.base_ms
            .saturating_add(i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX))
    }
}

/// The identity of a dead letter: a digest of its whole envelope (the same dead letter exported
/// twice is one entry).
pub(super) fn entry_digest(entry: &DeadLetter) -> String {
    // A struct of strings and numbers always serializes.
    let bytes = serde_json::to_vec(entry).unwrap_or_default();
    let digest = Sha256::digest(&bytes);
    digest.iter().fold(String::with_capacity(64), |mut hex, b| {
        use std::fmt::Write as _;
        let _ = write!(hex, "{b:02x}");
        hex
    })
}

impl Ledger<Selected> for StoreLedger {
    async fn claim(&mut self, s: &Selected) -> Result<Recorded, String> {
        self.hold_group(s).await?;
        let claim = ReplayClaim {
            queue: self.queue.clone(),
            destination: self.destination.clone(),
            entry: entry_digest(&s.entry),
            run: self.run.clone(),
            dead_lettered_at: s.entry.dead_lettered_at.clone(),
            dead_lettered_ms: s.entry.dead_lettered_ms().unwrap_or(0),
            at_ms: self.now_ms(),
        };
        let mut found = self
            .store
            .claim_replay(&claim, self.resend_in_doubt)
            .await
            .map_err(|e| crate::redact::text(&e.to_string()))?;
        // Claimed and not settled: another run may be sending it right now (two replays at
        // once, issue 42). Wait for it to settle (sent: skipped; given back: ours) before
        // calling it in doubt.
        while found == Claim::InDoubt && !self.settle_budget.is_zero() {
            tokio::time::sleep(SETTLE_POLL).await;
            self.settle_budget = self.settle_budget.saturating_sub(SETTLE_POLL);
            found = self
                .store
                .claim_replay(&claim, self.resend_in_doubt)
                .await
                .map_err(|e| crate::redact::text(&e.to_string()))?;
        }
        Ok(match found {
            Claim::Taken => {
                self.current = Some(claim);
                Recorded::Claimed
            }
            Claim::Sent => {
                self.earlier.observe(&s.key, &s.entry, true);
                Recorded::SentEarlier
            }
            Claim::InDoubt => {
                self.earlier.observe_in_doubt(&s.key);
                Recorded::InDoubt
            }
        })
    }

    async fn settle(&mut self, s: &Selected, sent: bool) -> Result<(), String> {
        let Some(mut claim) = self.current.take() else {
            return Err(format!(
                "no claim for the entry dead-lettered at {} (line {})",
                s.entry.dead_lettered_at, s.line
            ));
        };
        claim.at_ms = self.now_ms();
        match self.store.settle_replay(&claim, sent).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!(
                "the entry dead-lettered at {} (line {}) was taken over by another run (--resend-in-doubt) while this one sent it",
                s.entry.dead_lettered_at, s.line
            )),
            Err(e) => Err(crate::redact::text(&e.to_string())),
        }
    }
}
