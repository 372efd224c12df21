//! One tick for one migration: load, evaluate, decide, act. Returns a small [`Action`] saying
//! what it did, like a reconcile step.

use std::collections::HashMap;

use crate::controller::decide::{Decision, decide};
use crate::controller::round::RoundBatch;
use crate::controller::{AdvanceOptions, Controller, ControllerError, Loaded};
use crate::gate::Verdict;
use crate::indicators::fetch::Fetcher;
use crate::machine::{self, Command, MachineError, State};
use crate::plan::{BreachAction, GateKind};
use crate::store::{GateRecord, MigrationRecord, Store, StoreError};

use super::Shared;
use super::notify::EventKind;

/// What a tick did.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Complete: nothing to watch.
    Done,
    /// Moved one step up.
    Advanced { to: State },
    /// A guard failed and the plan's `on_breach` was applied.
    Breach { action: BreachAction },
    /// Could move, a person must say so.
    ReadyForHuman,
    /// A judge could not decide in its time: paused for a person.
    PausedUndecided,
    /// Waiting on gates or time.
    Waiting,
    /// The preflight refused the brokers' durability settings: paused ([`super::preflight`]).
    PreflightRefused,
    /// Somebody else changed the migration, or the memory of the gates a decision rested on,
    /// meanwhile: nothing was applied, the next tick starts from fresh state.
    Conflict,
}

/// Where a tick reads its migration from.
#[derive(Debug, Clone)]
pub enum Read<'a> {
    /// The store, now.
    Store(&'a str),
    /// A round's read of the fleet ([`crate::store::JournalStore::fleet`]): the record and its step's gate memory.
    /// A decision made on it commits only if the migration did not change since (a conflict
    /// otherwise, as for any command), and a routing left behind is re-published from the
    /// store, not from this read.
    Fleet(MigrationRecord, Vec<GateRecord>),
}

impl Read<'_> {
    /// The migration's name.
    pub fn name(&self) -> &str {
        match self {
            Read::Store(name) => name,
            Read::Fleet(record, _) => &record.name,
        }
    }
}

/// Run one tick for `name` at `now_ms`, reading its sources by itself.
///
/// # Errors
/// Store failures and plans that no longer compile; a conflict is not an error.
pub async fn tick<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    name: &str,
    now_ms: i64,
) -> Result<Action, ControllerError> {
    tick_in_round(shared, &shared.fetcher, None, Read::Store(name), now_ms).await
}

/// Run one tick as a round runs it: of the migration `read` names (from the store, or from the
/// round's read of the fleet) at `now_ms`, reading its sources through `fetcher` (the round's,
/// shared with the other migrations of the round: see [`super::tick_all`]); with `round`, its
/// gate evaluations and samples are left there for the round's one commit instead of committed
/// here.
///
/// # Errors
/// Store failures and plans that no longer compile; a conflict is not an error.
pub async fn tick_in_round<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    fetcher: &Fetcher,
    round: Option<&RoundBatch>,
    read: Read<'_>,
    now_ms: i64,
) -> Result<Action, ControllerError> {
    if !shared.is_leader() {
        return Ok(Action::Waiting);
    }
    let c = shared
        .controller_with_fetcher(fetcher, false)
        .with_round(round);
    let name = &*read.name().to_string();
    let loaded = match read {
        Read::Store(name) => c.load_cached(name, &shared.rounds.plans).await?,
        // The watcher saw the migration move since the round read it: read it again, so that
        // nothing is announced or decided from the older read.
        Read::Fleet(record, _)
            if shared.hub.generation(name).is_some_and(|seen| {
                i64::try_from(seen).unwrap_or(i64::MAX) > record.generation
            }) =>
        {
            c.load_cached(name, &shared.rounds.plans).await?
        }
        Read::Fleet(record, memory) => c.load_read(record, memory, &shared.rounds.plans).await?,
    };
    shared.observe(&c, &loaded).await;
    if loaded.record.state == State::Complete {
        super::standing_note::announce(shared, &loaded, &crate::standing::Standing::Complete);
        shared.rounds.histories.forget(name);
        return Ok(Action::Done);
    }
    if step_begun_after(shared, name, loaded.record.entered_at_ms, now_ms) {
        return Ok(Action::Waiting);
    }
    let gates = c.evaluate(&loaded, now_ms, false).await?;
    shared.metrics.gates(name, &loaded.plan, &gates);
    let blockers = crate::controller::blockers(&loaded, &gates, now_ms);
    let state = loaded.record.state;
    let next = loaded.ladder.next(state);
    let confirmed = shared.config.confirm_complete.iter().any(|n| n == name);
    let decision = decide(
        &loaded.plan,
        state,
        loaded.record.paused,
        next,
        &gates,
        blockers,
        confirmed,
    );
    note_holds(shared, &loaded, &gates, now_ms);
    note_verdicts(&shared.rounds, &loaded, &gates);
    super::standing_note::note(shared, &c, &loaded, &gates, now_ms).await;
    let outcome = match decision {
        Decision::Done => Ok(Action::Done),
        Decision::Breach { action, guards } => {
            breach(shared, &c, &loaded, &gates, action, guards, now_ms).await
        }
        Decision::Undecided { gates: undecided } => {
            pause_undecided(shared, &c, &loaded, &gates, undecided, now_ms).await
        }
        Decision::Advance => {
            match super::preflight::before_advance(shared, &c, &loaded, next, now_ms).await {
                Ok(Ok(preflight)) => {
                    let step = Step {
                        gates,
                        next,
                        preflight,
                    };
                    advance(shared, &c, &loaded, step, name, now_ms).await
                }
                Ok(Err(super::preflight::Stopped::Paused)) => Ok(Action::PreflightRefused),
                Ok(Err(super::preflight::Stopped::Held)) => Ok(Action::Waiting),
                Err(e) => Err(e),
            }
        }
        Decision::ReadyForHuman { why } => Ok(ready_for_human(shared, &loaded, name, why)),
        Decision::Wait { .. } => Ok(Action::Waiting),
    };
    match outcome {
        Err(ControllerError::Store(
            StoreError::Conflict { .. } | StoreError::StaleMemory { .. },
        )) => Ok(Action::Conflict),
        other => other,
    }
}

/// Whether the step began after `now_ms` on another clock, so that the tick must wait: the step
/// began while this round ran (a command entered it after the round read its instant): readings
/// at that instant are of the step before, and deciding on them could act on the wrong step,
/// journaled before the step's own start; the next round evaluates it. When only this clock is
/// behind the one that committed the step, waiting for it would leave the step's guards
/// unwatched for as long as the skew: the tick evaluates now, and says so once.
fn step_begun_after<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    name: &str,
    entered: i64,
    now_ms: i64,
) -> bool {
    if now_ms >= entered {
        return false;
    }
    if shared.now_ms() >= entered {
        return true;
    }
    let first = shared.rounds.with_memo(name, |m| {
        m.clock_behind_warned.replace(entered) != Some(entered)
    });
    if first {
        tracing::warn!(
            "{name}: this daemon's clock is {} behind the one that entered the step: keep the hosts' clocks synchronised (NTP)",
            crate::time::human_ms(entered - now_ms)
        );
    }
    false
}

/// What an advance rests on: the gates, where it goes, the preflight's findings.
struct Step {
    gates: Vec<crate::controller::GateReport>,
    next: Option<State>,
    preflight: Option<serde_json::Value>,
}

/// Advance on the gates' passing: the outcome (an error, a conflict above all, is the caller's
/// to read).
async fn advance<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    c: &Controller<'_, S>,
    loaded: &Loaded,
    step: Step,
    name: &str,
    now_ms: i64,
) -> Result<Action, ControllerError> {
    let Step {
        gates,
        next,
        preflight,
    } = step;
    let confirm = (next == Some(State::Complete)).then(|| name.to_string());
    let t = machine::handle(
        &loaded.ladder,
        name,
        loaded.record.snapshot(),
        &Command::Advance { confirm },
    )?;
    let actor = shared.actor("every exit gate passes and the minimum time is met");
    // An error (a conflict above all) is the outcome's, not returned from here.
    match c
        .advance_on_gates(
            loaded,
            &t,
            gates,
            &AdvanceOptions {
                preflight,
                ..AdvanceOptions::default()
            },
            &actor,
            now_ms,
        )
        .await
    {
        Ok(out) if out.applied.is_some() => {
            shared.metrics.transition(name, "advance");
            shared.refresh(c, name).await;
            Ok(Action::Advanced { to: t.to.state })
        }
        Ok(_) => Ok(Action::Waiting),
        Err(e) => Err(e),
    }
}

/// Announces once per step that the migration waits for a person.
fn ready_for_human<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    loaded: &Loaded,
    name: &str,
    why: String,
) -> Action {
    let announce = shared.rounds.with_memo(name, |m| {
        let first = m.ready_announced != Some(loaded.record.generation);
        m.ready_announced = Some(loaded.record.generation);
        first
    });
    if announce {
        shared.event(
            loaded,
            EventKind::ReadyToAdvance,
            why,
            serde_json::json!({}),
        );
    }
    Action::ReadyForHuman
}

/// Pause the migration because a judge could not decide within its `max_duration`: a person
/// advances it (`--force`) or rolls it back; a resume gives the judge a new test.
async fn pause_undecided<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    c: &Controller<'_, S>,
    loaded: &Loaded,
    gates: &[crate::controller::GateReport],
    undecided: Vec<String>,
    now_ms: i64,
) -> Result<Action, ControllerError> {
    let name = &loaded.record.name;
    let text = format!(
        "a judge could not decide: {}; a person decides (`migrate advance {name} --force` or `migrate rollback {name}`)",
        undecided.join("; ")
    );
    let evidence = serde_json::json!({ "undecided": undecided, "gates": gates });
    super::person_pause::pause_for_a_person(shared, c, loaded, &text, evidence, now_ms).await?;
    Ok(Action::PausedUndecided)
}

async fn breach<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    c: &Controller<'_, S>,
    loaded: &Loaded,
    gates: &[crate::controller::GateReport],
    action: BreachAction,
    guards: Vec<String>,
    now_ms: i64,
) -> Result<Action, ControllerError> {
    let name = &loaded.record.name;
    let failing: Vec<String> = gates
        .iter()
        .filter(|g| g.kind == GateKind::Guard && g.eval.verdict == Verdict::Fail)
        .map(|g| g.name.clone())
        .collect();
    for g in &failing {
        shared.metrics.breach(name, g);
    }
    let text = format!("guard breach: {}", guards.join("; "));
    let evidence = serde_json::json!({ "breach": guards, "gates": gates });
    let actor = shared.actor(&text);
    let command = match action {
        BreachAction::Rollback => Some(Command::Rollback { then_pause: true }),
        BreachAction::Pause => Some(Command::Pause),
        BreachAction::Alert => None,
    };
    match command {
        Some(cmd) => {
            let applied = match c
                .command_on(loaded, &cmd, &actor, evidence.clone(), now_ms)
                .await
            {
                // Nowhere to roll back to (consume_dual's only way down is planned... or the
                // state has no rung below): hold the line and pause instead.
                Err(ControllerError::Illegal(MachineError::NothingToRollBack)) => {
                    c.command_on(loaded, &Command::Pause, &actor, evidence.clone(), now_ms)
                        .await?
                }
                other => other?,
            };
            shared.metrics.transition(name, &applied.command);
            shared.event(
                loaded,
                EventKind::Breach,
                format!(
                    "{name}: {text} — {} {} -> {}, paused until a person resumes it",
                    applied.command, applied.from, applied.to
                ),
                evidence,
            );
            shared.refresh(c, name).await;
        }
        // An alert follows no write: sent only while the lease is still held under the epoch
        // the round decided under (issue 54), and then remembered as announced.
        None if !shared.may_announce(&format!("the alert of {name}")) => {}
        None => {
            // Announced once per episode: until the guard stops failing.
            let fresh: Vec<String> = shared.rounds.with_memo(name, |m| {
                failing
                    .iter()
                    .filter(|g| m.breach_announced.insert((*g).clone()))
                    .cloned()
                    .collect()
            });
            if !fresh.is_empty() {
                shared.event(
                    loaded,
                    EventKind::Breach,
                    format!("{name}: {text} (on_breach: alert, nothing changed)"),
                    evidence,
                );
            }
        }
    }
    Ok(Action::Breach { action })
}

/// What a gate's verdict did since the last tick, worth a log line: it started failing or
/// holding (or was first seen so: a daemon starting, a step entered), or it passes again.
/// `None`: nothing changed, or a gate first seen passing.
pub fn verdict_change(previous: Option<Verdict>, now: Verdict) -> Option<&'static str> {
    match (previous, now) {
        (Some(p), n) if p == n => None,
        (None, Verdict::Pass) => None,
        (Some(_), Verdict::Pass) => Some("gate passes again"),
        (_, Verdict::Fail) => Some("gate failing"),
        (_, Verdict::Soaking) => Some("gate soaking"),
        (_, Verdict::NoData) => Some("gate has no data"),
    }
}

/// Log at INFO each gate whose verdict changed since this daemon's last tick of the step
/// ([`verdict_change`]), with the migration, phase, gate and kind as fields: transitions only,
/// never a line per tick.
fn note_verdicts(
    rounds: &super::round_state::RoundState,
    loaded: &crate::controller::Loaded,
    gates: &[crate::controller::GateReport],
) {
    let name = &loaded.record.name;
    let step = loaded.record.entered_at_ms;
    let changes: Vec<(
        &crate::controller::GateReport,
        Option<Verdict>,
        &'static str,
    )> = rounds.with_memo(name, |m| {
        let seen = match &mut m.verdicts {
            Some((at, seen)) if *at == step => seen,
            other => &mut other.insert((step, HashMap::new())).1,
        };
        gates
            .iter()
            .filter_map(|g| {
                let previous = seen.insert(format!("{}/{}", g.kind, g.name), g.eval.verdict);
                verdict_change(previous, g.eval.verdict).map(|what| (g, previous, what))
            })
            .collect()
    });
    for (g, previous, what) in changes {
        tracing::info!(
            migration = %name,
            phase = %g.phase,
            gate = %g.name,
            kind = g.kind.as_str(),
            source = %g.source,
            verdict = g.eval.verdict.as_str(),
            previous = previous.map_or("none", Verdict::as_str),
            value = g.eval.value,
            reason = %g.eval.reason,
            "{what}"
        );
    }
}

/// Track holds and announce those that last longer than the plan's `notify.hold_after`.
fn note_holds<S: Store + Clone + 'static>(
    shared: &Shared<S>,
    loaded: &Loaded,
    gates: &[crate::controller::GateReport],
    now_ms: i64,
) {
    let name = &loaded.record.name;
    let hold_after = loaded
        .plan
        .notify
        .hold_after
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let long: Vec<String> = shared.rounds.with_memo(name, |m| {
        let mut long = Vec::new();
        for g in gates {
            let key = format!("{}/{}", g.kind, g.name);
            if g.eval.verdict == Verdict::NoData && g.eval.value.is_none() {
                let since = *m.holding_since.entry(key.clone()).or_insert(now_ms);
                if let Some(after) = hold_after
                    && now_ms - since >= after
                    && m.hold_announced.insert(key.clone())
                {
                    long.push(format!(
                        "{} held for {}: {}",
                        g.name,
                        crate::time::human_ms(now_ms - since),
                        g.eval.reason
                    ));
                }
            } else {
                m.holding_since.remove(&key);
                m.hold_announced.remove(&key);
            }
            if g.kind == GateKind::Guard && g.eval.verdict != Verdict::Fail {
                m.breach_announced.remove(&g.name);
            }
        }
        long
    });
    for text in long {
        shared.event(
            loaded,
            EventKind::Hold,
            format!("{name}: {text}"),
            serde_json::json!({}),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_logged_when_it_changes_only() {
        use Verdict::{Fail, NoData, Pass, Soaking};
        assert_eq!(verdict_change(None, Pass), None);
        assert_eq!(verdict_change(None, Fail), Some("gate failing"));
        assert_eq!(verdict_change(None, NoData), Some("gate has no data"));
        assert_eq!(verdict_change(Some(Pass), Fail), Some("gate failing"));
        assert_eq!(verdict_change(Some(Fail), NoData), Some("gate has no data"));
        assert_eq!(verdict_change(Some(Fail), Soaking), Some("gate soaking"));
        assert_eq!(
            verdict_change(Some(Soaking), NoData),
            Some("gate has no data")
        );
        assert_eq!(
            verdict_change(Some(NoData), Pass),
            Some("gate passes again")
        );
        assert_eq!(verdict_change(Some(Fail), Pass), Some("gate passes again"));
        for v in Verdict::ALL {
            assert_eq!(verdict_change(Some(v), v), None);
        }
    }
}
