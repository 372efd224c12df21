//! YAML plan (format v1) → [`Plan`], or every problem found, each with its path and line.
//!
//! The YAML is read into a `serde_yaml::Value` and walked by hand, so that one pass collects every
//! error (unknown fields, wrong types, bad durations, unknown sources, ...) instead of stopping at
//! the first, and so that each one carries the path a person can search for
//! (`phases.slices.exit[2].pass_if`) and its line (from the plan's line map). Warnings (allowed
//! but probably not meant) are kept apart from errors.
//!
//! Compilation is pure: the only IO (environment variables, `file:` secrets) goes through the
//! [`Resolve`] passed in, [`SystemResolve`] in the CLI, a map in tests.
//!
//! One file per section of the plan, each adding its part of the walk to the shared context
//! (`cx`: diagnostics, mappings, scalars): `top` (the top level, brokers, retry, dedup, routing,
//! notify), `sources`, `phases`, `gates` (and `judge`), `secrets`, `bridge`, `preflight`; `suggest` offers the "did you
//! mean" of unknown fields.
//!
//! The format is described for users in `docs/plan.md`; keep the two in step.

mod bridge;
pub mod budget;
mod cx;
mod gates;
mod judge;
mod phases;
mod preflight;
mod resolve;
mod secrets;
mod sources;
pub mod stale;
mod suggest;
mod top;

use std::path::Path;

use serde_yaml::Value;

use super::model::Plan;
use cx::Cx;
pub use cx::{Diagnostic, MAX_DURATION, MAX_SLICES};
#[cfg(test)]
pub(crate) use resolve::LoopbackResolve;
pub use resolve::{FileStamp, Resolve, SecretsMode, SystemResolve};
pub use top::{KNOWN_BROKER_KINDS, SUPPORTED_VERSIONS};

/// A plan that compiled, with what deserves a second look.
#[derive(Debug, Clone, PartialEq)]
pub struct Compiled {
    pub plan: Plan,
    /// Allowed but probably not meant (no `consume_dual`, a phase without exit gates, ...).
    pub warnings: Vec<Diagnostic>,
}

/// Compiles a plan.
///
/// `plan_dir` is the directory of the plan file: relative `routing.file` and `file:` secret paths
/// are taken relative to it (as written when `None`). `resolve` provides environment variables
/// and secret files.
///
/// # Errors
/// Every problem found, all at once, each with its path and line, ordered by line (the `Vec` is
/// never empty). Secret values never appear in them.
pub fn compile(
    yaml: &str,
    plan_dir: Option<&Path>,
    resolve: &dyn Resolve,
) -> Result<Compiled, Vec<Diagnostic>> {
    compile_with_secrets_mode(yaml, plan_dir, resolve, SecretsMode::Required)
}

/// [`compile()`], with what an unresolvable secret is: an error ([`SecretsMode::Required`], what
/// [`compile()`] does) or a warning and an unresolved [`Secret`](crate::plan::Secret)
/// ([`SecretsMode::Deferred`]).
///
/// # Errors
/// As [`compile()`]; in [`SecretsMode::Deferred`], an unset variable or an unreadable secret file
/// is not one (a malformed reference such as `${1X}` still is).
pub fn compile_with_secrets_mode(
    yaml: &str,
    plan_dir: Option<&Path>,
    resolve: &dyn Resolve,
    secrets: SecretsMode,
) -> Result<Compiled, Vec<Diagnostic>> {
    // Before anything is built: an alias bomb or a deep nesting costs nothing past its bound.
    if let Err(e) = super::bounds::check(yaml) {
        return Err(vec![Diagnostic {
            path: String::new(),
            line: e.line(),
            message: e.to_string(),
        }]);
    }
    let mut root: Value = match serde_yaml::from_str(yaml) {
        Ok(v) => v,
        Err(e) => {
            return Err(vec![Diagnostic {
                path: String::new(),
                line: e.location().map(|l| l.line()),
                message: format!("not valid YAML: {e}"),
            }]);
        }
    };
    let mut cx = Cx::new(yaml, resolve, secrets, plan_dir);
    if let Err(e) = root.apply_merge() {
        cx.error("", format!("cannot apply a merge key (<<): {e}"));
        return Err(cx.errors);
    }
    let plan = cx.plan(&root);
    let by_line = |d: &Diagnostic| d.line.unwrap_or(usize::MAX);
    cx.errors.sort_by_key(by_line);
    cx.warnings.sort_by_key(by_line);
    match plan {
        Some(plan) if cx.errors.is_empty() => Ok(Compiled {
            plan,
            warnings: cx.warnings,
        }),
        _ => {
            if cx.errors.is_empty() {
                // Every path that yields no plan reports why; this is a safety net.
                cx.error("", "the plan could not be compiled");
            }
            Err(cx.errors)
        }
    }
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
