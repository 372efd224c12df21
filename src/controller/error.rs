//! Why a command did not do what was asked ([`ControllerError`]), and the checks that produce
//! its state errors.

use std::path::PathBuf;

use super::loaded::Loaded;
use crate::machine::{self, MachineError};
use crate::plan::Diagnostic;
use crate::store::{MigrationRecord, StoreError};

/// Why a command did not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The store failed, or the migration is unknown, or somebody else acted first.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The plan file does not compile (`init`).
    #[error("the plan has {} error(s):\n{}", .0.len(), list(.0))]
    Plan(Vec<Diagnostic>),
    /// A migration's stored plan (the text stored at `init`) does not compile here: a variable
    /// not set or a secret file not readable on this machine, with
    /// [`SecretsMode::Required`](crate::plan::SecretsMode::Required).
    #[error(
        "the stored plan of {name} (from {path}) has {} error(s) here (lines of the text stored \
         at init):\n{}",
        .diagnostics.len(),
        list(.diagnostics)
    )]
    StoredPlan {
        name: String,
        path: String,
        diagnostics: Vec<Diagnostic>,
    },
    /// The command is illegal in the migration's state.
    #[error(transparent)]
    Illegal(#[from] MachineError),
    /// A command that needs a reason got none.
    #[error(
        "{0} needs a reason (--reason \"...\", or \"reason\" in an API call): it goes into the journal"
    )]
    ReasonRequired(&'static str),
    /// The plan file cannot be read.
    #[error("cannot read the plan {path}: {message}")]
    PlanFile { path: PathBuf, message: String },
    /// `plan apply` of a plan whose migration is not in the store.
    #[error(
        "no migration named {name:?} in this store: `migrate plan apply` changes the plan of a registered migration; register this one with `migrate init {}`",
        path.display()
    )]
    NotInitialized { name: String, path: PathBuf },
    /// `--from STATE` (or `"from"` in an API call) names no state of the migration's plan.
    #[error(
        "the expected state {given:?} (--from) is not a state of {name}'s plan; its states are: {states} (as `migrate status {name}` and `history` print them)"
    )]
    UnknownState {
        name: String,
        given: String,
        states: String,
    },
    /// `--from STATE`: the migration is in another state, so the command did nothing (exit 5,
    /// HTTP 412: unlike a conflict, deciding again would not help).
    #[error(
        "{name} is in {actual}, not {expected}: nothing done. Another command moved it, or this \
         one already ran (see `migrate history {name}`)"
    )]
    NotInState {
        name: String,
        expected: String,
        actual: String,
    },
    /// The caller's role may not make this transition (entering `complete` needs an admin),
    /// checked on the state the transition commits from.
    #[error("{0}: nothing done")]
    Forbidden(String),
}

/// `from`, when given, is the state `loaded` is in; the state is compared as the journal and
/// `status` name it, and the store's compare-and-set on `loaded` makes the check hold at commit.
pub(super) fn expect_state(loaded: &Loaded, from: Option<&str>) -> Result<()> {
    let Some(given) = from else {
        return Ok(());
    };
    let name = &loaded.record.name;
    let expected = machine::State::parse(given)
        .filter(|s| loaded.ladder.knows(*s))
        .ok_or_else(|| ControllerError::UnknownState {
            name: name.clone(),
            given: given.to_string(),
            states: loaded
                .ladder
                .rungs()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    if loaded.record.state != expected {
        return Err(ControllerError::NotInState {
            name: name.clone(),
            expected: expected.to_string(),
            actual: loaded.record.state.to_string(),
        });
    }
    Ok(())
}

pub(super) fn stored_plan_error(
    record: &MigrationRecord,
    diagnostics: Vec<Diagnostic>,
) -> ControllerError {
    ControllerError::StoredPlan {
        name: record.name.clone(),
        path: record.plan_path.clone(),
        diagnostics,
    }
}

fn list(diags: &[Diagnostic]) -> String {
    diags
        .iter()
        .map(|d| format!("  {d}"))
        .collect::<Vec<_>>()
        .join("\n")
}

pub type Result<T, E = ControllerError> = std::result::Result<T, E>;
