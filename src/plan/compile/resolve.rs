//! The IO the compiler needs ([`Resolve`]: environment variables, `file:` secrets), injected so
//! that compilation stays pure, and what it does when a secret cannot be resolved
//! ([`SecretsMode`]).

use std::path::Path;

/// IO the compiler needs, injected so that compilation stays pure.
pub trait Resolve {
    /// The value of an environment variable, `None` when it is not set.
    fn env(&self, name: &str) -> Option<String>;
    /// The contents of a file (`file:` secrets); the error says why it could not be read.
    ///
    /// # Errors
    /// When the file cannot be read.
    fn read_file(&self, path: &Path) -> Result<String, String>;
    /// What identifies the file's current contents without reading it (size, times, inode):
    /// equal stamps mean unchanged contents, so a compiled plan is kept without opening the file
    /// again (a daemon out of file descriptors still evaluates its guards). `None`: unknown, the
    /// file is read to compare.
    fn file_stamp(&self, _path: &Path) -> Option<FileStamp> {
        None
    }
}

/// A file's metadata that changes whenever its contents do (see [`Resolve::file_stamp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    len: u64,
    modified: Option<std::time::SystemTime>,
    /// Device, inode and status-change time (nanoseconds) on Unix: a file replaced by a rename
    /// (a Kubernetes Secret's update) or rewritten within a timestamp tick is another stamp.
    identity: (u64, u64, i64, i64),
}

impl FileStamp {
    /// The stamp of `path` (following links), read with `stat` (no file descriptor).
    #[must_use]
    pub fn of(path: &Path) -> Option<FileStamp> {
        let m = std::fs::metadata(path).ok()?;
        #[cfg(unix)]
        let identity = {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino(), m.ctime(), m.ctime_nsec())
        };
        #[cfg(not(unix))]
        let identity = (0, 0, 0, 0);
        Some(FileStamp {
            len: m.len(),
            modified: m.modified().ok(),
            identity,
        })
    }
}

/// The process environment and the file system: what the CLI passes.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolve;

impl Resolve for SystemResolve {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }

    fn read_file(&self, path: &Path) -> Result<String, String> {
        crate::plan::bounds::read_secret_file(path)
    }

    fn file_stamp(&self, path: &Path) -> Option<FileStamp> {
        FileStamp::of(path)
    }
}

/// For tests outside the compiler: every variable is a closed port on loopback (no source
/// answers), files come from the disk.
#[cfg(test)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LoopbackResolve;

#[cfg(test)]
impl Resolve for LoopbackResolve {
    fn env(&self, _: &str) -> Option<String> {
        Some("http://127.0.0.1:1".into())
    }

    fn read_file(&self, path: &Path) -> Result<String, String> {
        std::fs::read_to_string(path).map_err(|e| e.to_string())
    }
}

/// What compilation does with a `${VAR}` that is not set or a `file:` secret that cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretsMode {
    /// An error: every secret must resolve (`plan check`, `init`, the daemon).
    #[default]
    Required,
    /// A warning: the secret is kept unresolved ([`Secret::value`](crate::plan::Secret::value) says why) and whatever uses
    /// it fails there, naming the variable or the file. For a stored plan read by a command that
    /// talks to no broker (`status`, `pause`, `abort`...) on a machine without the secrets.
    Deferred,
}
