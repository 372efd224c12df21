//! Why a rehearsal cannot run.

/// Why a rehearsal cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BacktestError {
    /// The window (`--from`, `--to`, `--step`) is empty, reversed or too long.
    #[error("window: {0}")]
    Window(String),
    /// A `--what-if GATE=THRESHOLD` that names no gate or gives no number.
    #[error("--what-if: {0}")]
    WhatIf(String),
    /// `--start-at` names no state of the plan a migration could be rehearsed from.
    #[error("--start-at: {0}")]
    StartAt(String),
}
