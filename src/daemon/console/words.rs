//! Refusals in the console's words: what a person at the page can do about them (its buttons
//! and fields), never the CLI's flags. The API sends them beside its own `error` (`"console"`),
//! and the page shows them under a disabled action.

use crate::controller::ControllerError;
use crate::machine::MachineError;
use crate::store::StoreError;

/// Why the machine refuses a command, as the console says it.
pub fn machine(e: &MachineError) -> String {
    match e {
        MachineError::Complete => {
            "The migration is complete: nothing more can be done (the old broker may be decommissioned)."
                .into()
        }
        MachineError::Paused => "Paused: resume it first.".into(),
        MachineError::ConfirmationRequired { name } => format!(
            "Advancing enters complete, the point of no return: type the migration's name ({name}) in the confirmation field."
        ),
        MachineError::NothingToRollBack => {
            "Nothing to roll back: the migration has not started.".into()
        }
        MachineError::AlreadyPaused => "Already paused.".into(),
        MachineError::NotPaused => "Not paused: nothing to resume.".into(),
        MachineError::NothingToAbort { .. } => {
            "Nothing to abort: no traffic has moved yet.".into()
        }
        MachineError::UnknownState { state } => {
            format!("The stored state {state} is not in the plan any more: only the CLI can repair it.")
        }
    }
}

/// A command's refusal as the console says it, when it has words of its own.
pub fn words(e: &ControllerError) -> Option<String> {
    Some(match e {
        ControllerError::Illegal(m) => machine(m),
        ControllerError::ReasonRequired(command) => format!(
            "{} needs a reason: write it in the Reason field (it goes into the journal).",
            capitalized(command)
        ),
        ControllerError::NotInState { name, actual, .. } => format!(
            "{name} moved to {actual} meanwhile: nothing done. Look at the page again before acting."
        ),
        ControllerError::Store(StoreError::Conflict { .. } | StoreError::StaleMemory { .. }) => {
            "Someone (or the daemon) acted at the same moment: nothing done. Look at the page again and retry.".into()
        }
        _ => return None,
    })
}

fn capitalized(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_refusal_the_console_shows_names_a_cli_flag() {
        let all = [
            MachineError::Complete,
            MachineError::Paused,
            MachineError::ConfirmationRequired {
                name: "orders".into(),
            },
            MachineError::NothingToRollBack,
            MachineError::AlreadyPaused,
            MachineError::NotPaused,
            MachineError::NothingToAbort {
                state: crate::machine::State::Planned,
            },
        ];
        let mut texts: Vec<String> = all.iter().map(machine).collect();
        texts.push(words(&ControllerError::ReasonRequired("rollback")).unwrap_or_default());
        texts.push(
            words(&ControllerError::NotInState {
                name: "orders".into(),
                expected: "slices[1]".into(),
                actual: "slices[2]".into(),
            })
            .unwrap_or_default(),
        );
        for t in &texts {
            assert!(!t.contains("--") && !t.contains("migrate "), "{t}");
            assert!(t.ends_with('.'), "{t}");
        }
        assert!(
            texts[7].starts_with("Rollback needs a reason"),
            "{}",
            texts[7]
        );
    }
}
