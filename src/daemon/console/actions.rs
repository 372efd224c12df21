//! The console's actions as they apply now (pure): each one enabled or disabled with the reason
//! in the console's words, and what a person should know before clicking (a rollback that the
//! daemon would undo by advancing again; a resume while a guard fails; an abort).

use super::words;
use crate::controller::GateView;
use crate::daemon::auth::{Principal, Role};
use crate::gate::Verdict;
use crate::machine::{Command, Ladder, Snapshot, State, handle};
use crate::plan::{GateKind, Plan};
use crate::time::human;

/// One action's button.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// `advance`, `rollback`, `pause`, `resume`, `abort`: the API's path segment.
    pub action: &'static str,
    pub label: &'static str,
    /// Why it cannot apply now; `None`: enabled.
    pub why_not: Option<String>,
    /// What to know before clicking (shown under the button).
    pub note: Option<String>,
    /// A warning the page shows first, asking for a second click.
    pub warn: Option<String>,
    /// The role it needs now ([`role_needed`]): the page disables it for a reader below that.
    pub needs: Role,
}

/// The role `action` needs on a migration in `state`: an admin to advance into `complete`
/// (the point of no return), an operator for every other action. The one rule: the API
/// enforces it ([`super::caller::needs_admin`]) and the console disables a button by it, for
/// the reader the proxy names on the server and for a token's holder in the page
/// (`data-needs`, against `GET /v1/whoami`).
pub fn role_needed(ladder: &Ladder, state: State, action: &str) -> Role {
    if action == "advance" && ladder.next(state) == Some(State::Complete) {
        Role::Admin
    } else {
        Role::Operator
    }
}

/// Why a caller of `reader`'s role may not do what needs `needs` (`None`: they may).
pub fn role_why_not(needs: Role, reader: &Principal) -> Option<String> {
    (reader.role < needs)
        .then(|| format!("{} {} is not one.", role_words(needs), reader.describe()))
}

/// What the role `needs` is needed for, as the page says it (JS appends who the reader is).
pub fn role_words(needs: Role) -> &'static str {
    match needs {
        Role::Admin => "Entering complete, the point of no return, needs an admin:",
        Role::Operator | Role::Viewer => "Acting needs an operator:",
    }
}

/// Where the migration stands, as the actions need it.
pub struct Now<'a> {
    pub name: &'a str,
    pub plan: &'a Plan,
    pub ladder: &'a Ladder,
    pub state: State,
    pub paused: bool,
    pub gates: &'a [GateView],
    /// Why no action at all applies on this daemon (read-only, standing by).
    pub blocked: Option<String>,
    /// Who reads the page, when the server knows (named by the proxy): an action their role
    /// cannot do is disabled with the reason.
    pub reader: Option<&'a Principal>,
    /// A guard the round that paused the migration read failing, not evaluated in this step
    /// since (the standing's `last_round`).
    pub last_round: Option<&'a crate::standing::GuardReading>,
}

/// The five actions, in the order the page shows them.
pub fn actions(now: &Now<'_>) -> Vec<Action> {
    let snapshot = Snapshot {
        state: now.state,
        paused: now.paused,
    };
    let legal = |command: &Command| {
        now.blocked.clone().or_else(|| {
            handle(now.ladder, now.name, snapshot, command)
                .err()
                .map(|e| words::machine(&e))
        })
    };
    let needs = |action: &str| role_needed(now.ladder, now.state, action);
    let next = now.ladder.next(now.state);
    let prev = now.ladder.prev(now.state);
    let advance_note = (next == Some(State::Complete)).then(|| {
        "Enters complete, the point of no return (an admin confirms with the migration's name)."
            .to_string()
    });
    let rollback_note = prev.map(|p| rollback_note(now, p));
    let actions = vec![
        Action {
            action: "advance",
            label: "Advance",
            why_not: legal(&Command::Advance {
                confirm: Some(now.name.to_string()),
            }),
            note: advance_note,
            warn: None,
            needs: Role::Operator,
        },
        Action {
            action: "rollback",
            label: "Roll back",
            why_not: legal(&Command::Rollback { then_pause: true }),
            note: rollback_note,
            warn: None,
            needs: Role::Operator,
        },
        Action {
            action: "pause",
            label: "Pause",
            why_not: legal(&Command::Pause),
            note: None,
            warn: None,
            needs: Role::Operator,
        },
        Action {
            action: "resume",
            label: "Resume",
            why_not: legal(&Command::Resume),
            note: None,
            warn: failing_guards(now),
            needs: Role::Operator,
        },
        Action {
            action: "abort",
            label: "Abort",
            why_not: legal(&Command::Abort),
            note: Some(format!(
                "Every slice back to the old broker at once, then paused ({}): asks for the migration's name.",
                now.ladder.abort_target().min(now.state)
            )),
            warn: None,
            needs: Role::Operator,
        },
    ];
    actions
        .into_iter()
        .map(|mut a| {
            a.needs = needs(a.action);
            if a.why_not.is_none() {
                a.why_not = now.reader.and_then(|r| role_why_not(a.needs, r));
            }
            a
        })
        .collect()
}

/// What happens after a rollback to `prev`, paused or not.
fn rollback_note(now: &Now<'_>, prev: State) -> String {
    if now.paused {
        return format!("Back to {prev}, still paused: it stays there until someone resumes it.");
    }
    let min = prev
        .phase()
        .and_then(|k| now.plan.phase(k))
        .map(|p| p.min_duration);
    let unpaused = if !now.plan.auto_advance {
        format!(
            "the plan does not advance by itself, so it stays at {prev} until someone advances it"
        )
    } else {
        format!(
            "the daemon advances again to {} as soon as {prev}'s exit gates pass{}",
            now.state,
            min.filter(|m| !m.is_zero())
                .map(|m| format!(", at the earliest in {} (its minimum time)", human(m)))
                .unwrap_or_else(|| ", at its next round if they pass now".into())
        )
    };
    format!(
        "Back to {prev}. With \"and pause\" ticked it stays there until someone resumes it; unticked, {unpaused}."
    )
}

/// The warning before a resume while a guard fails now.
fn failing_guards(now: &Now<'_>) -> Option<String> {
    if !now.paused {
        return None;
    }
    let mut failing: Vec<String> = now
        .gates
        .iter()
        .filter(|g| g.kind == GateKind::Guard && g.verdict == Verdict::Fail)
        .map(|g| format!("{} ({})", g.name, g.reason))
        .collect();
    let failing_here = |name: &str| {
        now.gates
            .iter()
            .any(|g| g.kind == GateKind::Guard && g.verdict == Verdict::Fail && g.name == name)
    };
    if let Some(r) = now.last_round.filter(|r| !failing_here(&r.gate)) {
        failing.push(format!(
            "{} ({}; read by the round that paused it, not evaluated since)",
            r.gate, r.reason
        ));
    }
    if failing.is_empty() {
        return None;
    }
    let on_breach =
        now.state
            .phase()
            .and_then(|k| now.plan.phase(k))
            .map_or("rollback", |p| match p.on_breach {
                crate::plan::BreachAction::Rollback => "one step back, then paused",
                crate::plan::BreachAction::Pause => "paused again",
                crate::plan::BreachAction::Alert => "an alert only",
            });
    Some(format!(
        "A guard fails now: {}. Once resumed, the daemon acts on it at its next round ({on_breach}). Click Resume again to resume anyway.",
        failing.join("; ")
    ))
}

#[cfg(test)]
mod tests;
