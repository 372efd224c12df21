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

/// How long a writer waits for another process's write of the same routing file to end before
/// it gives up this write (noted as the publisher's error; the next command or daemon round
/// writes again). A write holds the file's lock for milliseconds; a writer stopped while holding
/// it (SIGSTOP) holds it until it resumes or dies.
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Write `doc` to `path` atomically (a temporary file in the same directory, created new under a
/// random name, then a rename: see [`crate::atomic_file`]), so that a reader never sees half a
/// document and a link planted in the directory is never followed.
///
/// # Guarantees
/// The file's generation never goes down: the write takes an advisory lock on `.NAME.lock` in
/// the file's directory (created beside it, never through a link) and, under it, leaves a file
/// that already holds a newer generation as it is. A writer paused after it built its document
/// (an ex-leader stopped between its commit and its publish) therefore cannot put an older
/// routing back once a newer one was written.
///
/// # Errors
/// A sentence naming the file and what failed, or that another process held its lock for
/// [`LOCK_WAIT`].
pub fn write_file(path: &Path, doc: &RoutingDocument) -> Result<(), String> {
    let mut body =
        serde_json::to_vec_pretty(doc).map_err(|e| format!("cannot encode routing: {e}"))?;
    body.push(b'\n');
    let fail = |e: std::io::Error| format!("cannot write the routing file {}: {e}", path.display());
    let dir = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => {
            std::fs::create_dir_all(dir).map_err(fail)?;
            dir
        }
        None => Path::new("."),
    };
    let name = path.file_name().map_or_else(
        || std::borrow::Cow::Borrowed("routing"),
        |n| n.to_string_lossy(),
    );
    let _lock = lock(&dir.join(format!(".{name}.lock"))).map_err(fail)?;
    if generation_in(path).is_some_and(|written| written > doc.generation) {
        return Ok(());
    }
    crate::atomic_file::write(path, &body).map_err(fail)
}

/// The lock file at `at`, locked (released when the returned file is dropped, or when the
/// process ends however it ends).
fn lock(at: &Path) -> std::io::Result<std::fs::File> {
    // Created with O_EXCL, so a link planted at its name is never followed; then opened to read
    // only (a lock needs no write access, and whatever a planted link names is left as it is).
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(at)
    {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let file = std::fs::File::open(at)?;
    let until = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::WouldBlock,
                    format!(
                        "another process held {} for {} ms (it is written again at the next \
                         command or round)",
                        at.display(),
                        LOCK_WAIT.as_millis()
                    ),
                ));
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// The generation of the routing document written at `path`, when there is one that can be read.
fn generation_in(path: &Path) -> Option<u64> {
    let text = std::fs::read(path).ok()?;
    let doc: serde_json::Value = serde_json::from_slice(&text).ok()?;
    doc.get("generation")?.as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(generation: u64, state: &str) -> RoutingDocument {
        RoutingDocument {
            migration: "orders".into(),
            generation,
            state: state.into(),
            step: None,
            paused: false,
            slices_total: 8,
            slices_migrated: 0,
            consume: vec![],
            brokers: BrokerNames {
                old: "rabbitmq".into(),
                new: "nats".into(),
            },
            updated_at: "2026-11-30T00:00:00Z".into(),
        }
    }

    fn read(path: &Path) -> RoutingDocument {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    }

    /// Regression: the temporary file had a fixed name (`.NAME.PID.tmp`) and was opened with
    /// `File::create`, which follows a link: anyone who could write to the routing file's
    /// directory could plant a link there and have the controller truncate and overwrite the
    /// file it points to.
    #[cfg(unix)]
    #[test]
    fn writing_the_routing_file_never_follows_a_planted_link() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let path = dir.path().join("orders.routing.json");
        let planted = dir
            .path()
            .join(format!(".orders.routing.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let doc = doc(1, "planned");
        write_file(&path, &doc).unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert_eq!(read(&path), doc);
        // The link is left alone; no other file appears but the lock.
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let link = format!(".orders.routing.json.{}.tmp", std::process::id());
        assert_eq!(
            names,
            [
                &link,
                ".orders.routing.json.lock",
                "orders.routing.json",
                "victim"
            ],
        );
    }

    /// Regression (issue 54, the Jepsen-style commit-publish fault): a leader stopped between
    /// its commit of generation 2 and its write of the routing file resumed after the next
    /// leader had written generation 4, and wrote generation 2 over it (`m1: routing generation
    /// 4 then 2`) until its re-read published 4 again.
    #[test]
    fn an_ex_leader_resumed_after_a_newer_publish_put_an_older_routing_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders.routing.json");
        write_file(&path, &doc(4, "step-2")).unwrap();
        write_file(&path, &doc(2, "step-1")).unwrap();
        assert_eq!(read(&path), doc(4, "step-2"));
        // The same generation is written again (a plan applied may route it otherwise), and a
        // newer one over it.
        write_file(&path, &doc(4, "step-2-replanned")).unwrap();
        assert_eq!(read(&path).state, "step-2-replanned");
        write_file(&path, &doc(5, "step-3")).unwrap();
        assert_eq!(read(&path), doc(5, "step-3"));
        // A file that holds no document is written over.
        std::fs::write(&path, b"not json").unwrap();
        write_file(&path, &doc(1, "planned")).unwrap();
        assert_eq!(read(&path), doc(1, "planned"));
    }

    /// A writer that holds the file's lock (another process mid-write, or stopped there) makes
    /// this write give up after [`LOCK_WAIT`] with a sentence naming the lock, the file as it
    /// was; the write goes through once the lock is released.
    #[test]
    fn a_write_waits_for_another_writers_lock_then_gives_up_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders.routing.json");
        write_file(&path, &doc(1, "planned")).unwrap();
        let held = std::fs::File::open(dir.path().join(".orders.routing.json.lock")).unwrap();
        held.lock().unwrap();
        let e = write_file(&path, &doc(2, "consume-dual")).unwrap_err();
        assert!(e.contains(".orders.routing.json.lock"), "{e}");
        assert!(e.contains("routing file"), "{e}");
        assert_eq!(read(&path), doc(1, "planned"));
        drop(held);
        write_file(&path, &doc(2, "consume-dual")).unwrap();
        assert_eq!(read(&path), doc(2, "consume-dual"));
    }

    /// A link planted at the lock's name to a file that does not exist is not followed to
    /// create it: the write fails, nothing is created.
    #[cfg(unix)]
    #[test]
    fn a_link_planted_at_the_locks_name_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("orders.routing.json");
        let absent = dir.path().join("absent");
        std::os::unix::fs::symlink(&absent, dir.path().join(".orders.routing.json.lock")).unwrap();
        assert!(write_file(&path, &doc(1, "planned")).is_err());
        assert!(!absent.exists());
        assert!(!path.exists());
    }
}
