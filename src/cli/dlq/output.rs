//! Where a `dlq` command's text goes: standard output, or a file replaced atomically.

use std::io::Write;
use std::path::Path;

use crate::cli::{CliError, to_stdout};

/// Text on stdout, through [`to_stdout`].
pub(super) fn emit(text: &str) -> Result<(), CliError> {
    to_stdout(|out| out.write_all(text.as_bytes()))
}

pub(super) fn write_atomically(path: &Path, text: &str) -> Result<(), CliError> {
    crate::atomic_file::write(path, text.as_bytes())
        .map_err(|e| CliError::new(1, format!("cannot write {}: {e}", path.display())))
}
