//! An error at the CLI's edge: a message for a person and the exit code it maps to, once.

use std::fmt;
use std::io;
use std::process::ExitCode;

use crate::controller::ControllerError;
use crate::store::StoreError;

/// An error at the edge: the message for a person and the exit code. Exit code 0 is the one
/// error with nothing to say: standard output's reader stopped reading ([`CliError::stdout`]).
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl CliError {
    pub fn new(code: u8, message: impl Into<String>) -> CliError {
        CliError {
            code,
            message: message.into(),
        }
    }
    /// Invalid input (exit 2).
    pub fn input(message: impl Into<String>) -> CliError {
        CliError::new(2, message)
    }
    /// Standard output could not be written. A closed pipe (`migrate history NAME | head -1`)
    /// is its reader's choice to stop: exit 0, nothing said, as `head` and `grep -q` users expect.
    /// Anything else (ENOSPC from a full disk, EIO) is a runtime error (exit 1).
    pub fn stdout(e: io::Error) -> CliError {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::new(0, "")
        } else {
            CliError::new(1, format!("cannot write to standard output: {e}"))
        }
    }
    /// Nothing to tell anyone: the command stops here, the exit code says the rest.
    pub fn is_quiet(&self) -> bool {
        self.code == 0
    }
    /// A plan's broker that cannot be connected to, while `doing` something: exit 2 when the
    /// plan or this machine's environment for it is at fault, 1 when the broker is.
    pub fn plan_broker(e: &crate::adapters::from_plan::PlanBrokerError, doing: &str) -> CliError {
        let code = if e.is_configuration() { 2 } else { 1 };
        CliError::new(code, format!("{doing}: {e}"))
    }
}

/// A command's own exit `code` once its report was `printed`: a reader that stopped reading
/// (`| head`) does not turn a gated advance (3) or an invalid plan (2) into a success; any other
/// failure to write is the error.
pub fn exit_after_printing(printed: Result<(), CliError>, code: ExitCode) -> CliResult {
    match printed {
        Err(e) if !e.is_quiet() => Err(e),
        _ => Ok(code),
    }
}

impl From<ControllerError> for CliError {
    fn from(e: ControllerError) -> CliError {
        let code = match &e {
            ControllerError::Store(
                StoreError::Conflict { .. }
                | StoreError::StaleMemory { .. }
                | StoreError::AlreadyDecided(_),
            ) => 4,
            ControllerError::NotInState { .. } => 5,
            ControllerError::Store(
                StoreError::NotFound(_)
                | StoreError::AlreadyExists(_)
                | StoreError::UnsupportedUrl(_)
                | StoreError::MalformedUrl { .. },
            ) => 2,
            ControllerError::Store(_) => 1,
            ControllerError::Plan(_)
            | ControllerError::Forbidden(_)
            | ControllerError::StoredPlan { .. }
            | ControllerError::Illegal(_)
            | ControllerError::ReasonRequired(_)
            | ControllerError::PlanFile { .. }
            | ControllerError::NotInitialized { .. }
            | ControllerError::UnknownState { .. } => 2,
        };
        CliError::new(code, e.to_string())
    }
}

impl From<StoreError> for CliError {
    fn from(e: StoreError) -> CliError {
        ControllerError::from(e).into()
    }
}

pub type CliResult = Result<ExitCode, CliError>;
