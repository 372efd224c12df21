//! The migration plan: the YAML a team writes (format v1, see `docs/plan.md`) and its compiled,
//! validated form.
//!
//! - [`compile()`] turns the YAML into a [`Plan`] or into every error found, each with its path and
//!   line; warnings come apart from errors. It is pure: the only IO (environment variables and
//!   `file:` secrets) goes through the [`Resolve`] it is given ([`SystemResolve`] in the CLI).
//! - [`model`] is what the rest of the controller reads.
//! - [`bounds`] caps a plan's size, depth and expansion before it is parsed.
//! - [`duration_serde`] writes durations the way people do (`"20m"`, `"30d 1h 10m"`).

pub mod bounds;
pub mod compile;
pub mod duration_serde;
mod lines;
pub mod model;
mod stale_model;
mod threshold;

#[cfg(test)]
pub(crate) use compile::LoopbackResolve;
pub use compile::budget::{judge_steps, steps_watched};
pub use compile::{
    Compiled, Diagnostic, FileStamp, Resolve, SecretsMode, SystemResolve, compile,
    compile_with_secrets_mode,
};
pub use model::*;
pub use threshold::{Threshold, round_value};
