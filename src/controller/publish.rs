//! Publishing the routing document: building it from the stored state, writing it atomically.
//!
//! The document is written after the transition committed; a command that finds the published
//! generation behind the stored one writes it again, so a crash between the two heals itself.

use std::path::Path;

use crate::machine::Ladder;
use crate::plan::Plan;
use crate::routing::{BrokerNames, RoutingDocument};
use crate::store::MigrationRecord;
use crate::time::rfc3339;

/// The routing document of a stored migration.
pub fn document(plan: &Plan, rec: &MigrationRecord) -> RoutingDocument {
    let routing = Ladder::of(plan).routing(rec.state);
    RoutingDocument {
        migration: rec.name.clone(),
        generation: u64::try_from(rec.generation).unwrap_or(0),
        state: rec.state.name().to_string(),
        step: rec.state.step(),
        paused: rec.paused,
        slices_total: routing.slices_total,
        slices_migrated: routing.slices_migrated,
        consume: routing.consume,
        brokers: BrokerNames {
            old: plan.brokers.old.name.clone(),
            new: plan.brokers.new.name.clone(),
        },
        updated_at: rfc3339(rec.updated_at_ms),
    }
}

/// The routing file of a plan: relative paths were resolved against the plan's directory.
pub fn routing_file(plan: &Plan) -> Option<&Path> {
    plan.routing.file.as_deref()
}

/// Write `doc` to `path` atomically (a temporary file in the same directory, created new under a
/// random name, then a rename: see [`crate::atomic_file`]), so that a reader never sees half a
/// document and a link planted in the directory is never followed.
///
/// # Errors
/// A sentence naming the file and what failed.
pub fn write_file(path: &Path, doc: &RoutingDocument) -> Result<(), String> {
    let mut body =
        serde_json::to_vec_pretty(doc).map_err(|e| format!("cannot encode routing: {e}"))?;
    body.push(b'\n');
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        crate::atomic_file::write(path, &body)
    };
    write().map_err(|e| format!("cannot write the routing file {}: {e}", path.display()))
}
