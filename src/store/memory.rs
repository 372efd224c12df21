//! Gate rows as both backends write them: every evaluation appended to `gate_evaluations` (the
//! history), and the newest of each gate in each step kept in `gate_memory`, which is all a tick
//! reads back (its "held since", samples and peak, and its `at`: when it was last evaluated, what
//! a `for:` gate's `for_max_gap` is measured from).
//!
//! # Guarantees
//! - A gate's memory is the evaluation written last, as the newest row of the history was: the
//!   clocks of the writers (a daemon, a person's CLI) do not decide, so one that runs ahead cannot
//!   freeze it.
//! - Two writers that evaluated the same gate on the same read (a daemon's round and a
//!   `migrate advance`) never lose each other's failure. Each row has a revision every write
//!   increments; a write carries the revision its writer read ([`GateRecord::revision`]). Over
//!   a row still at that revision it writes its memory as evaluated; over a row another writer
//!   changed since, it merges ([`merge`], in SQL in the same batched statement): a held-since
//!   mark survives only if both hold (a reset always wins) and then the later one stays (a mark
//!   never moves earlier), the larger peak and sample count stay, and the last evaluation's time
//!   is the incoming one's (never later than the later of the two: a gap measured from it is
//!   never shorter than the real one). Revisions, not timestamps, decide: no two writers' clocks
//!   are ever compared to choose a write.
//! - A transition decided on the memory commits only while every row it read still has the
//!   revision it expects ([`changed_reads`], in the transition's transaction): a decision made
//!   on a read another writer has changed since is not applied ([`stale`]), and the next round
//!   or advance decides again.
//! - Reading the memory costs the same whether the history holds ten rows or ten million.
//! - A round evaluated under a plan its migration no longer has writes no memory
//!   ([`current_plan_rows`]): a `plan apply` that forgot a changed gate's memory stays
//!   forgotten, whichever round commits after it. Its broken streaks still count
//!   ([`late_resets`], [`clear_marks`]): a gate it saw fail (or could not read) loses its
//!   held-since mark, as the round would have cleared it under any plan; it never sets a mark
//!   nor moves one.

use std::collections::{HashMap, HashSet};

use sqlx::{Database, Encode, QueryBuilder, Type};

use super::{GateKey, GateRecord, MemoryRead, Result, RoundRecord, StoreError, step_of};
use crate::gate::Memory;

/// The columns of a gate row, in the order [`write_rows`] binds them (a memory row's are
/// followed by its `revision`).
const COLUMNS: &str = "migration, step_entered, state, step, gate, kind, query, value, \
     old_value, samples, verdict, reason, held_since, peak, at, no_data_cause, judge_ledger, \
     largest_partition";

/// Where [`write_rows`] writes a round's gate rows.
#[derive(Debug, Clone, Copy)]
pub(super) enum Table {
    /// Appended to the history, `gate_evaluations`.
    History,
    /// Each gate's memory in `gate_memory`, replaced in place: one row per gate and step in one
    /// statement (see [`newest_per_gate`]).
    Memory,
}

/// A gate row with the migration it belongs to: a round writes the rows of the whole fleet in
/// the same statements.
pub(super) type Owned<'r> = (&'r str, &'r GateRecord);

/// The rows of every round, each with its migration, in the rounds' order.
pub(super) fn rows_of(rounds: &[RoundRecord]) -> Vec<Owned<'_>> {
    rounds
        .iter()
        .flat_map(|round| round.records.iter().map(|r| (round.name.as_str(), r)))
        .collect()
}

/// The migrations whose rounds were evaluated under a plan, by name, each once: the ones whose
/// current plan [`current_plan_rows`] needs (read in the writing transaction).
pub(super) fn planned_names(rounds: &[RoundRecord]) -> Vec<&str> {
    let mut names: Vec<&str> = rounds
        .iter()
        .filter(|round| round.plan_hash.is_some())
        .map(|round| round.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The rows of the rounds whose gates' memory may be written, each with its migration, in the
/// rounds' order: a round evaluated under the plan its migration has now (`plans`: the
/// migrations of [`planned_names`] by name, with their current plan hash, as the writing
/// transaction read them; one missing has no plan), or under none. A round evaluated under a
/// replaced plan gathered its marks under definitions that may have changed since: its memory
/// is left out (its history is not), as if that round had not run for the gates' memory, but
/// for the streaks it saw break ([`late_resets`]).
pub(super) fn current_plan_rows<'r>(
    rounds: &'r [RoundRecord],
    plans: &HashMap<String, String>,
) -> Vec<Owned<'r>> {
    rounds
        .iter()
        .filter(|round| {
            let current = is_current(round, plans);
            if !current {
                tracing::info!(
                    migration = %round.name,
                    evaluated_under = round.plan_hash.as_deref().unwrap_or_default(),
                    "a round evaluated under a plan replaced since: its gates' memory is not \
                     written, only the marks of the gates it saw break their streak are cleared \
                     (its evaluations are kept in the history)"
                );
            }
            current
        })
        .flat_map(|round| round.records.iter().map(|r| (round.name.as_str(), r)))
        .collect()
}

/// Whether `round` may write its gates' memory: evaluated under no plan, or under the one its
/// migration has now (`plans`, as in [`current_plan_rows`]).
fn is_current(round: &RoundRecord, plans: &HashMap<String, String>) -> bool {
    match &round.plan_hash {
        None => true,
        Some(hash) => plans.get(&round.name) == Some(hash),
    }
}

/// The rows of the rounds [`current_plan_rows`] leaves out (evaluated under a replaced plan)
/// whose evaluation broke the gate's streak (no held-since mark: it failed, or could not be
/// read): their marks are cleared all the same ([`clear_marks`]). The failure was seen whatever
/// the plan: a mark surviving it would count time the gate did not hold. The rows of gates the
/// `plan apply` changed were forgotten with it: clearing them is a no-op.
pub(super) fn late_resets<'r>(
    rounds: &'r [RoundRecord],
    plans: &HashMap<String, String>,
) -> Vec<Owned<'r>> {
    rounds
        .iter()
        .filter(|round| !is_current(round, plans))
        .flat_map(|round| {
            round
                .records
                .iter()
                .filter(|r| r.held_since_ms.is_none())
                .map(|r| (round.name.as_str(), r))
        })
        .collect()
}

/// The statement clearing the held-since mark of the gates of `rows` (of any migrations), each
/// in its step ([`late_resets`]); nothing else of their memory changes. Run after the memory
/// rows are written in the same transaction: a reset wins over a mark written in the same
/// commit.
pub(super) fn clear_marks<'r, DB>(rows: impl IntoIterator<Item = Owned<'r>>) -> QueryBuilder<DB>
where
    DB: Database,
    DB::Arguments: Default,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
{
    let mut q = QueryBuilder::new(
        "UPDATE gate_memory SET held_since = NULL, revision = revision + 1 \
         WHERE held_since IS NOT NULL \
         AND (migration, step_entered, gate, kind) IN (",
    );
    q.push_values(rows, |mut row, (name, r)| {
        row.push_bind(name)
            .push_bind(r.step_entered_ms)
            .push_bind(r.gate.as_str())
            .push_bind(r.kind.as_str());
    });
    q.push(")");
    q
}

/// The statement naming (`gate`, `kind`) the gates of `reads` whose memory in the step
/// `step_entered_ms` of migration `name` no longer has the revision read: one statement for all
/// of them (a row missing counts as revision 0, which no stored row has).
pub(super) fn changed_reads<'r, DB>(
    name: &'r str,
    step_entered_ms: i64,
    reads: &'r [MemoryRead],
) -> QueryBuilder<DB>
where
    DB: Database,
    DB::Arguments: Default,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
{
    let mut q = QueryBuilder::new("WITH e (gate, kind, revision) AS (");
    q.push_values(reads, |mut row, read| {
        row.push_bind(read.gate.as_str())
            .push_bind(read.kind.as_str())
            .push_bind(read.revision.unwrap_or(0));
    });
    q.push(") SELECT e.gate, e.kind FROM e LEFT JOIN gate_memory g ON g.migration = ");
    q.push_bind(name);
    q.push(" AND g.step_entered = ");
    q.push_bind(step_entered_ms);
    q.push(
        " AND g.gate = e.gate AND g.kind = e.kind WHERE COALESCE(g.revision, 0) <> e.revision \
         ORDER BY e.gate, e.kind",
    );
    q
}

/// The error of a transition of `name` whose gates `changed` ([`changed_reads`]) moved since
/// the decision read them, with a log line saying why it is not applied; `None` when none did.
pub(super) fn stale(name: &str, changed: &[(String, String)]) -> Option<StoreError> {
    if changed.is_empty() {
        return None;
    }
    let gates = changed
        .iter()
        .map(|(gate, kind)| format!("{gate} ({kind})"))
        .collect::<Vec<_>>()
        .join(", ");
    tracing::info!(
        migration = name,
        gates = %gates,
        "a transition decided on gate memory another writer changed since it was read is not \
         applied: the next round or advance decides again on the memory as it is"
    );
    Some(StoreError::StaleMemory {
        name: name.to_string(),
        gates,
    })
}

/// The statement writing `rows` (of any migrations) to `table`.
pub(super) fn write_rows<'r, DB>(
    table: Table,
    rows: impl IntoIterator<Item = Owned<'r>>,
) -> QueryBuilder<DB>
where
    DB: Database,
    DB::Arguments: Default,
    for<'t> &'t str: Encode<'t, DB> + Type<DB>,
    for<'t> i64: Encode<'t, DB> + Type<DB>,
    for<'t> Option<i64>: Encode<'t, DB> + Type<DB>,
    for<'t> Option<f64>: Encode<'t, DB> + Type<DB>,
    for<'t> Option<&'t str>: Encode<'t, DB> + Type<DB>,
{
    let (into, revision) = match table {
        Table::History => ("gate_evaluations", ""),
        Table::Memory => ("gate_memory", ", revision"),
    };
    let mut q = QueryBuilder::new(format!("INSERT INTO {into} ({COLUMNS}{revision}) "));
    q.push_values(rows, |mut row, (name, r)| {
        row.push_bind(name)
            .push_bind(r.step_entered_ms)
            .push_bind(r.state.name())
            .push_bind(step_of(r.state))
            .push_bind(r.gate.as_str())
            .push_bind(r.kind.as_str())
            .push_bind(r.query.as_str())
            .push_bind(r.value)
            .push_bind(r.old_value)
            .push_bind(i64::from(r.samples))
            .push_bind(r.verdict.as_str())
            .push_bind(r.reason.as_str())
            .push_bind(r.held_since_ms)
            .push_bind(r.peak)
            .push_bind(r.at_ms)
            .push_bind(r.no_data_cause.as_deref())
            .push_bind(r.judge_ledger.as_deref())
            .push_bind(r.largest_partition.as_deref());
        if let Table::Memory = table {
            // The revision the row has if nobody wrote it since the read (see [`merge`]).
            row.push_bind(r.revision.unwrap_or(0).saturating_add(1));
        }
    });
    if let Table::Memory = table {
        q.push(MERGE_MEMORY);
    }
    q
}

/// Whether the row a memory write lands on is still at the revision its writer read (the
/// incoming row carries that revision + 1, 1 for a gate it read no row of; a stored row's is at
/// least 1): [`merge`]'s `stored revision == read`.
macro_rules! fresh {
    () => {
        "gate_memory.revision + 1 = excluded.revision"
    };
}

/// A memory row written over the stored one: [`merge`] in SQL (the `SET` expressions all read
/// the stored row as it was before the statement). The evaluation's own columns (value, verdict,
/// reason, at...) are the incoming ones either way: they describe the evaluation written last
/// (`at` is also the memory's last evaluation, [`Memory::evaluated_at_ms`]: see [`merged`]).
const MERGE_MEMORY: &str = concat!(
    " ON CONFLICT (migration, step_entered, gate, kind) \
     DO UPDATE SET state = excluded.state, step = excluded.step, \
     query = excluded.query, value = excluded.value, old_value = excluded.old_value, \
     verdict = excluded.verdict, reason = excluded.reason, at = excluded.at, \
     no_data_cause = excluded.no_data_cause, judge_ledger = excluded.judge_ledger, \
     largest_partition = excluded.largest_partition, \
     held_since = CASE WHEN ",
    fresh!(),
    " THEN excluded.held_since \
       WHEN excluded.held_since IS NULL OR gate_memory.held_since IS NULL THEN NULL \
       WHEN gate_memory.held_since > excluded.held_since THEN gate_memory.held_since \
       ELSE excluded.held_since END, \
     samples = CASE WHEN ",
    fresh!(),
    " OR excluded.samples >= gate_memory.samples \
       THEN excluded.samples ELSE gate_memory.samples END, \
     peak = CASE WHEN ",
    fresh!(),
    " OR gate_memory.peak IS NULL THEN excluded.peak \
       WHEN excluded.peak IS NULL OR gate_memory.peak > excluded.peak THEN gate_memory.peak \
       ELSE excluded.peak END, \
     revision = gate_memory.revision + 1"
);

/// What a write of `incoming` (evaluated on the memory at revision `read`, `None`: no row) leaves
/// of a gate's memory stored at `stored` (its revision and memory; `None`: no row): the revision
/// and the memory. The rule [`write_rows`] applies in SQL.
///
/// # Guarantees
/// - No other writer since the read (the stored revision is the one read, or there is still no
///   row): the incoming memory, as written.
/// - Another writer committed since the read: the two are merged, each field toward the side
///   that lets the gate pass later, never sooner ([`merged`]). No timestamp decides which
///   write wins: a write's place is its revision, whatever its writer's clock.
/// - The revision moves by one with every write.
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "the rule the SQL applies, checked against it by the tests"
    )
)]
pub(super) fn merge(
    stored: Option<(i64, Memory)>,
    read: Option<i64>,
    incoming: Memory,
) -> (i64, Memory) {
    match stored {
        None => (read.unwrap_or(0) + 1, incoming),
        Some((revision, _)) if Some(revision) == read => (revision + 1, incoming),
        Some((revision, stored)) => (revision + 1, merged(stored, incoming)),
    }
}

/// Two writers' memories of a gate, each evaluated on a read that predates the other's write:
/// - the held-since mark: none when either has none (a failure, or no reading, seen by either
///   breaks the streak: a reset always wins); of two marks, the later one (a mark never moves
///   earlier: counting from the later only delays the gate);
/// - the samples: the larger count. Each writer counted on from the count it read, so a sum
///   would count the evaluations before the older read twice; the larger never counts one twice
///   and never goes back (it may count fewer than were made, which only delays `min_samples`);
/// - the peak: the larger (each is the highest its writer saw; the step saw both);
/// - the last evaluation's time (what a `for:` gate's `for_max_gap` is measured from): the
///   incoming one's, as the rest of the evaluation written last. Both writers evaluated after
///   the read, and the one kept is never later than the later of the two: a gap measured from
///   it is never shorter than the real one, so a streak that must restart does (at worst one
///   restarts a little sooner), and no two clocks are compared;
/// - a judge's ledger: the incoming one's. Both writers weighed an interval from the baseline
///   they read; keeping one of them counts nothing twice (the other's reading is as if it had
///   not been made: the next interval covers it).
pub(super) fn merged(stored: Memory, incoming: Memory) -> Memory {
    Memory {
        held_since_ms: match (stored.held_since_ms, incoming.held_since_ms) {
            (Some(a), Some(b)) => Some(a.max(b)),
            _ => None,
        },
        samples: stored.samples.max(incoming.samples),
        peak: match (stored.peak, incoming.peak) {
            (Some(a), Some(b)) => Some(if a > b { a } else { b }),
            (a, b) => a.or(b),
        },
        evaluated_at_ms: incoming.evaluated_at_ms,
        judge: incoming.judge,
    }
}

/// The rows of `rows` that belong to one of `gates`, in their order (a step's memory may hold
/// gates the phase no longer has).
///
/// # Errors
/// The first row that could not be read.
pub(super) fn named(
    rows: impl IntoIterator<Item = Result<GateRecord>>,
    gates: &[GateKey<'_>],
) -> Result<Vec<GateRecord>> {
    let gates: HashSet<GateKey<'_>> = gates.iter().copied().collect();
    let mut kept = Vec::new();
    for row in rows {
        let r = row?;
        if gates.contains(&(r.gate.as_str(), r.kind.as_str())) {
            kept.push(r);
        }
    }
    Ok(kept)
}

/// The last row of each `(migration, step, gate, kind)` of `records`, in their order: one
/// statement may not update a row twice.
pub(super) fn newest_per_gate<'r>(records: &[Owned<'r>]) -> Vec<Owned<'r>> {
    let mut newest: HashMap<(&str, i64, &str, &str), usize> = HashMap::with_capacity(records.len());
    for (i, (name, r)) in records.iter().enumerate() {
        newest.insert((name, r.step_entered_ms, &r.gate, &r.kind), i);
    }
    let mut keep: Vec<usize> = newest.into_values().collect();
    keep.sort_unstable();
    keep.into_iter().map(|i| records[i]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::State;

    fn row(gate: &str, kind: &str, at_ms: i64) -> GateRecord {
        GateRecord {
            step_entered_ms: 1,
            state: State::Slices(0),
            gate: gate.into(),
            kind: kind.into(),
            query: String::new(),
            value: None,
            old_value: None,
            samples: 0,
            verdict: "hold".into(),
            reason: String::new(),
            no_data_cause: None,
            held_since_ms: None,
            peak: None,
            judge_ledger: None,
            largest_partition: None,
            at_ms,
            revision: None,
        }
    }

    #[test]
    fn newest_per_gate_keeps_the_last_row_of_each_gate_and_kind() {
        let rows = [
            row("lag", "exit", 5),
            row("lag", "guard", 5),
            row("lag", "exit", 7),
            row("depth", "exit", 6),
            row("lag", "exit", 6),
            row("depth", "exit", 6),
        ];
        let of_m: Vec<Owned<'_>> = rows.iter().map(|r| ("m", r)).collect();
        let kept: Vec<_> = newest_per_gate(&of_m)
            .into_iter()
            .map(|(_, r)| (r.gate.as_str(), r.kind.as_str(), r.at_ms))
            .collect();
        assert_eq!(
            kept,
            vec![
                ("lag", "guard", 5),
                ("lag", "exit", 6),
                ("depth", "exit", 6)
            ]
        );
        // Another step's row of the same gate is another gate's memory.
        let mut other_step = row("lag", "exit", 4);
        other_step.step_entered_ms = 2;
        assert_eq!(
            newest_per_gate(&[("m", &rows[0]), ("m", &other_step)]).len(),
            2
        );
        // So is another migration's row of the same gate in a step entered at the same instant.
        let fleet = [("m", &rows[0]), ("n", &rows[2]), ("m", &rows[4])];
        let kept: Vec<_> = newest_per_gate(&fleet)
            .into_iter()
            .map(|(name, r)| (name, r.at_ms))
            .collect();
        assert_eq!(kept, vec![("n", 7), ("m", 6)]);
        // Of two rows at the same time, the later one.
        let same = newest_per_gate(&of_m[3..]);
        assert!(std::ptr::eq(same[1].1, &rows[5]), "{same:?}");
        assert!(newest_per_gate(&[]).is_empty());
    }

    fn mem(held_since_ms: Option<i64>, samples: u32, peak: Option<f64>) -> Memory {
        Memory {
            held_since_ms,
            samples,
            peak,
            evaluated_at_ms: None,
            judge: None,
        }
    }

    #[test]
    fn a_write_over_the_revision_it_read_is_the_memory_as_written() {
        let incoming = mem(Some(1_000), 2, Some(3.0));
        // No row, none read: the first revision.
        assert_eq!(merge(None, None, incoming), (1, incoming));
        // The row read, unchanged since: the incoming memory wins whole, even a mark earlier
        // than the stored one, a lower peak or fewer samples (the writer started from it).
        let stored = mem(Some(5_000), 9, Some(7.0));
        assert_eq!(merge(Some((4, stored)), Some(4), incoming), (5, incoming));
        let reset = mem(None, 10, Some(7.0));
        assert_eq!(merge(Some((4, stored)), Some(4), reset), (5, reset));
    }

    #[test]
    fn a_stale_mark_does_not_overwrite_a_failure_written_meanwhile() {
        // A read revision 3 and saw the gate hold since 1_000; B read 3 too, saw it fail and
        // wrote revision 4 without a mark. A's write must not bring the mark back.
        let failure = mem(None, 5, Some(2.0));
        let stale = mem(Some(1_000), 4, Some(1.0));
        assert_eq!(
            merge(Some((4, failure)), Some(3), stale),
            (5, mem(None, 5, Some(2.0)))
        );
        // Nor the other way round: a failure written over a mark written meanwhile resets it.
        assert_eq!(
            merge(Some((4, stale)), Some(3), failure),
            (5, mem(None, 5, Some(2.0)))
        );
        // A row created meanwhile by another writer (read none) is merged the same way.
        assert_eq!(merge(Some((1, failure)), None, stale).1.held_since_ms, None);
    }

    #[test]
    fn merged_marks_move_only_later_and_peaks_and_samples_only_up() {
        let a = mem(Some(1_000), 3, Some(5.0));
        let b = mem(Some(2_000), 7, Some(4.0));
        assert_eq!(merged(a, b), mem(Some(2_000), 7, Some(5.0)));
        assert_eq!(merged(b, a), mem(Some(2_000), 7, Some(5.0)));
        // A peak only one side has is kept.
        assert_eq!(merged(mem(None, 0, None), b).peak, Some(4.0));
        assert_eq!(merged(b, mem(None, 0, None)).peak, Some(4.0));
        assert_eq!(merged(mem(None, 0, None), mem(None, 0, None)).peak, None);
    }

    #[test]
    fn merged_last_evaluation_is_the_incoming_one_never_a_later_clock() {
        let at = |evaluated_at_ms| Memory {
            evaluated_at_ms,
            ..mem(Some(1_000), 3, None)
        };
        // The incoming write evaluated later or earlier than the stored one: its time stays
        // either way (no clocks compared), never later than the later of the two.
        assert_eq!(
            merged(at(Some(5_000)), at(Some(7_000))).evaluated_at_ms,
            Some(7_000)
        );
        assert_eq!(
            merged(at(Some(7_000)), at(Some(5_000))).evaluated_at_ms,
            Some(5_000)
        );
        assert_eq!(merged(at(Some(7_000)), at(None)).evaluated_at_ms, None);
        // Over the revision read, the incoming memory whole, its time with it.
        assert_eq!(
            merge(Some((2, at(Some(9_000)))), Some(2), at(Some(4_000))).1,
            at(Some(4_000))
        );
    }
}
