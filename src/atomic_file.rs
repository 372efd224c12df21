//! Writing a file whole or not at all: a temporary file beside it, then a rename.
//!
//! The temporary file is created with `create_new` (`O_CREAT | O_EXCL`: an existing path, a
//! symbolic link included, is never opened or followed) under a random name in the target's
//! directory, so that another user who can write to that directory cannot make the tool write
//! through a link planted at a name it would guess. It is removed when the write does not
//! complete.

use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions};
use std::hash::BuildHasher;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// A temporary file that becomes `target` on [`Staged::commit`], and is removed otherwise.
#[derive(Debug)]
pub struct Staged {
    file: File,
    tmp: PathBuf,
    target: PathBuf,
    committed: bool,
}

/// Random enough that a name cannot be guessed ahead: std's per-process random hash keys, over
/// the process id and the time.
fn random_suffix() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    RandomState::new().hash_one((std::process::id(), nanos))
}

/// Creates the temporary file for `target` (in its directory, named `.NAME.RANDOM.tmp`), with
/// `mode` (before the umask) on Unix.
///
/// # Errors
/// The directory cannot be written, or `target` has no file name.
pub fn stage(target: &Path, mode: u32) -> io::Result<Staged> {
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(name) = target.file_name() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", target.display()),
        ));
    };
    let name = name.to_string_lossy();
    let mut last = None;
    for _ in 0..16 {
        let tmp = dir.join(format!(".{name}.{:016x}.tmp", random_suffix()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(mode);
        }
        #[cfg(not(unix))]
        let _ = mode;
        match options.open(&tmp) {
            Ok(file) => {
                return Ok(Staged {
                    file,
                    tmp,
                    target: target.to_path_buf(),
                    committed: false,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no free temporary name")))
}

impl Staged {
    /// The temporary file, to write to.
    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// Where the temporary file is.
    pub fn path(&self) -> &Path {
        &self.tmp
    }

    /// Flushes the temporary file to disk and renames it over the target.
    ///
    /// # Errors
    /// Syncing or renaming failed (the temporary file is then removed).
    pub fn commit(mut self) -> io::Result<()> {
        self.file.flush()?;
        self.file.sync_all()?;
        std::fs::rename(&self.tmp, &self.target)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Writes `bytes` to `target` atomically, the new file readable as a new file would be (`0666`
/// before the umask).
///
/// # Errors
/// Creating, writing or renaming the temporary file failed (it is then removed).
pub fn write(target: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut staged = stage(target, 0o666)?;
    staged.file().write_all(bytes)?;
    staged.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("routing.json");
        write(&target, b"one").unwrap();
        write(&target, b"two").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"two");
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("routing.json")]);
    }

    #[test]
    fn temporary_names_differ_and_a_dropped_stage_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("x");
        let a = stage(&target, 0o600).unwrap();
        let b = stage(&target, 0o600).unwrap();
        assert_ne!(a.path(), b.path());
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        drop(b);
        assert!(!pa.exists() && !pb.exists());
        assert!(!target.exists());
    }

    /// A link planted in the directory is never written through: the temporary name is random
    /// and created with `create_new`, which refuses an existing path, a link included.
    #[cfg(unix)]
    #[test]
    fn a_planted_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let target = dir.path().join("routing.json");
        // The old fixed name (`.routing.json.PID.tmp`) is taken by a link to the victim.
        let old_name = dir
            .path()
            .join(format!(".routing.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &old_name).unwrap();
        write(&target, b"doc").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        assert_eq!(std::fs::read(&target).unwrap(), b"doc");
    }
}
