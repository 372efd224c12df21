//! Gate rows as both backends write them: every evaluation appended to `gate_evaluations` (the
//! history), and the newest of each gate in each step kept in `gate_memory`, which is all a tick
//! reads back (its "held since", samples and peak).
//!
//! # Guarantees
//! - A gate's memory is the evaluation written last, as the newest row of the history was: the
//!   clocks of the writers (a daemon, a person's CLI) do not decide, so one that runs ahead cannot
//!   freeze it.
//! - Reading the memory costs the same whether the history holds ten rows or ten million.
//! - A round evaluated under a plan its migration no longer has writes no memory
//!   ([`current_plan_rows`]): a `plan apply` that forgot a changed gate's memory stays
//!   forgotten, whichever round commits after it. Its broken streaks still count
//!   ([`late_resets`], [`clear_marks`]): a gate it saw fail (or could not read) loses its
//!   held-since mark, as the round would have cleared it under any plan; it never sets a mark
//!   nor moves one.

use std::collections::{HashMap, HashSet};

use sqlx::{Database, Encode, QueryBuilder, Type};

use super::{GateKey, GateRecord, Result, RoundRecord, step_of};

/// The columns of a gate row, in the order [`write_rows`] binds them.
const COLUMNS: &str = "(migration, step_entered, state, step, gate, kind, query, value, \
     old_value, samples, verdict, reason, held_since, peak, at) ";

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
        "UPDATE gate_memory SET held_since = NULL WHERE held_since IS NOT NULL \
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
{
    let into = match table {
        Table::History => "gate_evaluations",
        Table::Memory => "gate_memory",
    };
    let mut q = QueryBuilder::new(format!("INSERT INTO {into} {COLUMNS}"));
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
            .push_bind(r.at_ms);
    });
    if let Table::Memory = table {
        q.push(
            " ON CONFLICT (migration, step_entered, gate, kind) \
             DO UPDATE SET state = excluded.state, step = excluded.step, \
             query = excluded.query, value = excluded.value, old_value = excluded.old_value, \
             samples = excluded.samples, verdict = excluded.verdict, reason = excluded.reason, \
             held_since = excluded.held_since, peak = excluded.peak, at = excluded.at",
        );
    }
    q
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
            held_since_ms: None,
            peak: None,
            at_ms,
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
}
