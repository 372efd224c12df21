//! `plan apply`: replace a migration's stored plan by an edited one, when the edit keeps the
//! promises of the migration's current state ([`super::plan_change`]), journaled with the diff.

use std::path::Path;

use serde::Serialize;

use super::{Actor, Controller, ControllerError, Loaded, Result, plan_change, plan_hash};
use crate::machine::Ladder;
use crate::store::{PlanReplace, Store, StoreError};

/// What `plan apply` found and did.
#[derive(Debug, Clone, Serialize)]
pub struct PlanApplyOutcome {
    pub migration: String,
    pub state: String,
    pub old_hash: String,
    pub new_hash: String,
    pub old_path: String,
    pub new_path: String,
    /// The stored plan text against the new one, as a unified diff (empty when unchanged).
    pub diff: String,
    /// Why the new plan cannot replace the stored one in this state (empty: it can).
    pub refused: Vec<String>,
    pub dry_run: bool,
    /// The file's text is the stored one: nothing to apply.
    pub unchanged: bool,
    /// The migration's version once applied; `None` when nothing was written.
    pub version: Option<i64>,
    /// Whether the routing was published again (a change of what `planned` publishes).
    pub republished: bool,
    /// Set when that publication failed: the next command retries it.
    pub publish_error: Option<String>,
    /// The new plan's warnings.
    pub warnings: Vec<String>,
}

impl<S: Store> Controller<'_, S> {
    /// Replace the plan of the migration the file at `path` names, unless the change would break
    /// the migration's guarantees in its current state; `dry_run` only reports.
    ///
    /// # Errors
    /// The file cannot be read or does not compile, no migration has its name, the reason is
    /// blank, the stored plan no longer compiles here, or the store fails (a conflict when the
    /// migration changed since it was read). A refused change is not an error: see
    /// [`PlanApplyOutcome::refused`].
    pub async fn plan_apply(
        &self,
        path: &Path,
        actor: &Actor,
        now_ms: i64,
        dry_run: bool,
    ) -> Result<PlanApplyOutcome> {
        let reason = match actor.reason.as_deref().map(str::trim) {
            Some(r) if !r.is_empty() => r.to_string(),
            _ => return Err(ControllerError::ReasonRequired("plan apply")),
        };
        let (yaml, compiled) = self.compile_file(path)?;
        let name = compiled.plan.name.clone();
        let loaded = match self.load(&name).await {
            Err(ControllerError::Store(StoreError::NotFound(_))) => {
                return Err(ControllerError::NotInitialized {
                    name,
                    path: path.to_path_buf(),
                });
            }
            other => other?,
        };
        // The base the new plan was compiled against and is stored with: FILE's directory,
        // whatever the working directory (as `init`).
        let abs = super::plans::plan_location(path);
        let rec = &loaded.record;
        let mut outcome = PlanApplyOutcome {
            migration: name.clone(),
            state: rec.state.to_string(),
            old_hash: rec.plan_hash.clone(),
            new_hash: plan_hash(&yaml),
            old_path: rec.plan_path.clone(),
            new_path: abs.display().to_string(),
            // Printed and journaled: secrets masked.
            diff: plan_change::masked_diff(&rec.plan_yaml, &yaml, [&loaded.plan, &compiled.plan]),
            refused: plan_change::refusals(&loaded.plan, &compiled.plan, rec)
                .iter()
                .map(ToString::to_string)
                .collect(),
            dry_run,
            unchanged: yaml == rec.plan_yaml,
            version: None,
            republished: false,
            publish_error: None,
            warnings: compiled.warnings.iter().map(ToString::to_string).collect(),
        };
        if outcome.unchanged || !outcome.refused.is_empty() || dry_run {
            return Ok(outcome);
        }
        let republish = plan_change::republishes(&loaded.plan, &compiled.plan, rec);
        let reset_gates = plan_change::changed_gates(&loaded.plan, &compiled.plan, rec.state);
        let record = self
            .store
            .replace_plan(
                &name,
                &PlanReplace {
                    expected_version: rec.version,
                    plan_yaml: yaml,
                    plan_path: outcome.new_path.clone(),
                    plan_hash: outcome.new_hash.clone(),
                    at_ms: now_ms,
                    actor: actor.name.clone(),
                    reason,
                    evidence: serde_json::json!({
                        "diff": outcome.diff,
                        "old_hash": outcome.old_hash,
                        "new_hash": outcome.new_hash,
                        "old_path": outcome.old_path,
                        "new_path": outcome.new_path,
                    }),
                    republish,
                    reset_gates,
                },
            )
            .await?;
        outcome.version = Some(record.version);
        if republish {
            let after = Loaded {
                ladder: Ladder::of(&compiled.plan),
                plan: compiled.plan,
                record,
                memory: None,
            };
            let applied = self.publish(&after, "plan apply", &outcome.state).await?;
            outcome.republished = true;
            outcome.publish_error = applied.publish_error;
        }
        Ok(outcome)
    }
}
