//! `migrate dlq purge`: retention — drop the dead letters older than a duration from an export,
//! and with `--decisions` the decisions taken before it.

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::export::LineCapArg;
use crate::cli::{CliError, CliResult, Ctx};
use crate::dlq::lines::{LineReader, too_long_message};
use crate::dlq::retention::keep_recent;
use crate::store::dispositions::DispositionStore;
use crate::time::format_timestamp;

#[derive(Debug, Args)]
pub struct PurgeArgs {
    /// Drop what is older than this (by deadLetteredAt; decisions by when they were taken).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub older_than: Duration,
    /// The export to filter.
    pub input: Option<PathBuf>,
    /// Where the kept lines go (- for standard output).
    #[arg(long, conflicts_with = "in_place")]
    pub output: Option<String>,
    /// Rewrite the input file (through a temporary file and a rename).
    #[arg(long)]
    pub in_place: bool,
    /// Also drop decisions taken before the cut (they carry the history that recurrence needs).
    #[arg(long)]
    pub decisions: bool,
    #[command(flatten)]
    pub line_cap: LineCapArg,
}

pub(super) async fn purge(ctx: &Ctx, a: PurgeArgs) -> CliResult {
    let now = ctx.now_ms()?;
    let cut = now - crate::time::millis(a.older_than);
    if a.input.is_none() && !a.decisions {
        return Err(CliError::input(
            "nothing to purge: give an export (with --output or --in-place) and/or --decisions",
        ));
    }
    if let Some(input) = &a.input {
        let source = File::open(input)
            .map_err(|e| CliError::input(format!("cannot open {}: {e}", input.display())))?;
        let source_meta = source
            .metadata()
            .map_err(|e| CliError::input(format!("cannot read {}: {e}", input.display())))?;
        let reader = LineReader::new(BufReader::new(source), a.line_cap.bytes());
        let io = |e: std::io::Error| CliError::new(1, format!("purge: {e}"));
        let tally = match (&a.output, a.in_place) {
            (Some(o), _) if o == "-" => {
                let mut out = BufWriter::new(std::io::stdout());
                let tally = keep_recent(reader, &mut out, cut).map_err(io)?;
                out.flush().map_err(io)?;
                tally
            }
            (Some(o), _) => {
                let file = open_purge_output(Path::new(o), input, &source_meta)?;
                let mut out = BufWriter::new(file);
                let tally = keep_recent(reader, &mut out, cut).map_err(io)?;
                out.flush().map_err(io)?;
                tally
            }
            (None, true) => {
                // Created 0600, then given the export's own permissions before the rename: dead
                // letters hold personal data, and the rewritten export is as closed as it was.
                // A link is resolved: the real export is rewritten (beside itself, renamed over
                // itself), the link left as it is.
                let real = std::fs::canonicalize(input).map_err(|e| {
                    CliError::input(format!("cannot resolve {}: {e}", input.display()))
                })?;
                let mut staged = crate::atomic_file::stage(&real, 0o600).map_err(|e| {
                    CliError::new(
                        1,
                        format!(
                            "cannot create a temporary file beside {}: {e}",
                            input.display()
                        ),
                    )
                })?;
                staged
                    .file()
                    .set_permissions(source_meta.permissions())
                    .map_err(io)?;
                let tally = {
                    let mut out = BufWriter::new(staged.file());
                    let tally = keep_recent(reader, &mut out, cut).map_err(io)?;
                    out.flush().map_err(io)?;
                    tally
                };
                staged.commit().map_err(io)?;
                tally
            }
            (None, false) => {
                return Err(CliError::input(
                    "where do the kept lines go? --output FILE|- or --in-place",
                ));
            }
        };
        for (line, bytes) in &tally.too_long {
            eprintln!(
                "{}:{line}: kept unread: {}",
                input.display(),
                too_long_message(*bytes, a.line_cap.bytes())
            );
        }
        let (dropped, kept, unreadable) = (tally.dropped, tally.kept, tally.unreadable);
        eprintln!(
            "purge: dropped {dropped} dead letters older than {} (dead-lettered before {}), kept {kept}{}",
            humantime::format_duration(a.older_than),
            format_timestamp(cut),
            if unreadable > 0 {
                format!(
                    ", kept {unreadable} lines that are not envelopes (look at them: they may hold personal data too)"
                )
            } else {
                String::new()
            }
        );
    }
    if a.decisions {
        let store = ctx.store().await?;
        let purged = store.purge_before(cut).await?;
        eprintln!(
            "purge: removed {} decisions taken before {}, {} signatures not seen since and the replay records of {} entries dead-lettered before it",
            purged.dispositions,
            format_timestamp(cut),
            purged.signatures,
            purged.replays
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `purge --output FILE`: the file, opened without truncating it first, refused when it is the
/// export itself (by device and inode: the same path, a link or another path to it), which would
/// be emptied before it is read, and refused when it is a symbolic link (dangling too: opened
/// with `O_NOFOLLOW`, the link is never followed, so a link planted at the name cannot make
/// purge write over its victim). A new file gets the export's permissions; an existing one
/// keeps only the permissions both have (0600 data never lands in a 0644 file).
fn open_purge_output(
    output: &Path,
    input: &Path,
    source: &std::fs::Metadata,
) -> Result<File, CliError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options
            .mode(source.permissions().mode() & 0o777)
            .custom_flags(libc::O_NOFOLLOW);
    }
    let is_link = std::fs::symlink_metadata(output).is_ok_and(|m| m.file_type().is_symlink());
    let file = match options.open(output) {
        Ok(file) if !is_link => file,
        Ok(_) => return Err(symlink_refused(output)),
        Err(_) if is_link => return Err(symlink_refused(output)),
        Err(e) => {
            return Err(CliError::input(format!(
                "cannot create {}: {e}",
                output.display()
            )));
        }
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let meta = file
            .metadata()
            .map_err(|e| CliError::input(format!("cannot read {}: {e}", output.display())))?;
        if meta.dev() == source.dev() && meta.ino() == source.ino() {
            return Err(CliError::input(format!(
                "--output {} is the export {} itself: it would be emptied before it is read; \
                 use --in-place to rewrite the export, or name another file",
                output.display(),
                input.display()
            )));
        }
        let mode = meta.permissions().mode() & source.permissions().mode() & 0o777;
        if mode != meta.permissions().mode() & 0o777 {
            file.set_permissions(std::fs::Permissions::from_mode(mode))
                .map_err(|e| {
                    CliError::input(format!(
                        "cannot restrict the permissions of {} to {mode:o}: {e}",
                        output.display()
                    ))
                })?;
        }
    }
    file.set_len(0)
        .map_err(|e| CliError::input(format!("cannot truncate {}: {e}", output.display())))?;
    Ok(file)
}

/// `--output` names a symbolic link: never written through.
fn symlink_refused(output: &Path) -> CliError {
    CliError::input(format!(
        "--output {} is a symbolic link: refusing to write through it (name the file itself, or \
         use --in-place to rewrite the export)",
        output.display()
    ))
}
