//! Triage of an export file on several threads (`migrate dlq triage FILE --jobs N`).
//!
//! The file is cut into byte ranges that start right after a `\n`; each range is triaged by its
//! own [`Triage`] on its own thread, and the ranges are appended in file order
//! ([`Triage::append`]), which gives the report one thread gives, byte for byte: the same groups
//! in the same order (first appearance in the file breaks count ties), the first envelope of each
//! group as its sample, the string min / max of `firstAttemptAt`, bad lines under their number in
//! the file. The file's size is taken once, at the start: lines appended while it is read are not
//! read (one thread reads to the end it finds).

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::triage::{Triage, TriageError, TriageOptions, TriageReport};

/// The smallest range worth a thread of its own.
pub const MIN_RANGE_BYTES: u64 = 256 << 10;

/// Triage the export at `path` on up to `jobs` threads (fewer when the file is small: at least
/// [`MIN_RANGE_BYTES`] a thread).
///
/// # Errors
/// [`TriageError::Io`] when opening or reading fails (with the number of the line in the file).
pub fn triage_file(
    path: &Path,
    options: TriageOptions,
    jobs: usize,
) -> Result<TriageReport, TriageError> {
    let size = std::fs::metadata(path)
        .map_err(|source| TriageError::Io { line: 1, source })?
        .len();
    let ranges = usize::try_from(size / MIN_RANGE_BYTES)
        .unwrap_or(usize::MAX)
        .clamp(1, jobs.max(1));
    triage_file_split(path, options, ranges)
}

/// Triage the export at `path` cut into (at most) `ranges` ranges of about the same size, one
/// thread each.
///
/// # Errors
/// [`TriageError::Io`] when opening or reading fails (with the number of the line in the file).
pub fn triage_file_split(
    path: &Path,
    options: TriageOptions,
    ranges: usize,
) -> Result<TriageReport, TriageError> {
    let io = |source| TriageError::Io { line: 1, source };
    let mut file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    // A pipe or a device has no ranges: one thread reads it to its end.
    let (regular, size) = (meta.is_file(), meta.len());
    let bounds = if regular && ranges > 1 {
        line_bounds(&mut file, size, ranges).map_err(io)?
    } else {
        Vec::new()
    };
    if bounds.len() <= 2 {
        let mut triage = Triage::new(options);
        triage.read(BufReader::with_capacity(1 << 16, file))?;
        return Ok(triage.finish());
    }
    let results: Vec<Result<Triage, TriageError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = bounds
            .windows(2)
            .map(|w| {
                let (start, end) = (w[0], w[1]);
                let options = options.clone();
                scope.spawn(move || {
                    let mut triage = Triage::new(options);
                    let mut file = File::open(path).map_err(io)?;
                    file.seek(SeekFrom::Start(start)).map_err(io)?;
                    triage.read(BufReader::with_capacity(1 << 16, file.take(end - start)))?;
                    Ok(triage)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(io(io::Error::other("a triage thread panicked"))))
            })
            .collect()
    });
    let mut whole: Option<Triage> = None;
    for result in results {
        let before = whole.as_ref().map_or(0, Triage::lines);
        let part = result.map_err(|e| match e {
            TriageError::Io { line, source } => TriageError::Io {
                line: before + line,
                source,
            },
        })?;
        match whole.as_mut() {
            None => whole = Some(part),
            Some(w) => w.append(part),
        }
    }
    Ok(whole.unwrap_or_else(|| Triage::new(options)).finish())
}

/// `0`, the starts of up to `ranges - 1` lines near the even cuts of `size` bytes, and `size`:
/// strictly increasing.
fn line_bounds(file: &mut File, size: u64, ranges: usize) -> io::Result<Vec<u64>> {
    let mut bounds = vec![0];
    let mut chunk = vec![0u8; 1 << 16];
    for k in 1..ranges as u64 {
        let cut = (size / ranges as u64) * k;
        let last = *bounds.last().unwrap_or(&0);
        if cut <= last {
            continue;
        }
        // The line that holds byte `cut - 1` ends at the first `\n` from there.
        let mut pos = cut - 1;
        file.seek(SeekFrom::Start(pos))?;
        let start = loop {
            let n = file.read(&mut chunk)?;
            if n == 0 {
                break size;
            }
            if let Some(i) = memchr::memchr(b'\n', &chunk[..n]) {
                break pos + i as u64 + 1;
            }
            pos += n as u64;
        };
        if start >= size {
            break;
        }
        if start > last {
            bounds.push(start);
        }
    }
    bounds.push(size);
    Ok(bounds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlq::triage::{TableOptions, render_json, render_table, triage_reader};

    fn line(class: &str, msg: &str, first: &str) -> String {
        serde_json::json!({
            "payload": "p\"é", "errorClass": class, "errorMessage": msg, "consumerVersion": "1",
            "traceId": null, "attempts": 3, "firstAttemptAt": first,
            "deadLetteredAt": "2026-03-01T00:00:00.000Z"
        })
        .to_string()
    }

    #[test]
    fn every_split_gives_the_report_of_one_thread() {
        let mut text = String::new();
        for i in 0..200_u32 {
            let class = ["t", "v", "x"][(i % 3) as usize];
            let word =
                ["timeout", "refused", "reset", "gone", "busy", "late", "odd"][(i % 7) as usize];
            let msg = format!("{word} after {i}ms");
            let first = format!("2026-03-{:02}T10:00:00.000Z", 1 + (i * 7919) % 28);
            text.push_str(&line(class, &msg, &first));
            text.push('\n');
            match i % 37 {
                5 => text.push_str("not json\n"),
                9 => text.push_str("\n  \n"),
                11 => text.push_str(&format!("{}\n", "y".repeat(300))),
                _ => {}
            }
        }
        text.push_str(&line("last", "no newline", "2026-03-01T10:00:00.000Z"));
        let options = TriageOptions {
            max_line_errors: 7,
            max_line_bytes: 256,
            ..TriageOptions::default()
        };
        let one = triage_reader(text.as_bytes(), options.clone()).expect("reads");
        assert!(one.skipped > 7 && one.groups.len() > 20);
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("export.ndjson");
        std::fs::write(&path, &text).expect("writes");
        for ranges in [1, 2, 3, 7, 50, 400, text.len()] {
            let r = triage_file_split(&path, options.clone(), ranges).expect("reads");
            assert_eq!(r, one, "{ranges} ranges");
            assert_eq!(render_json(&r.groups), render_json(&one.groups));
            let table = TableOptions::default();
            assert_eq!(render_table(&r, &table), render_table(&one, &table));
        }
        assert_eq!(triage_file(&path, options, 7).expect("reads"), one);
    }

    #[test]
    fn bounds_start_lines_and_increase() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("x");
        std::fs::write(
            &path,
            "a\nbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\nc\n",
        )
        .expect("writes");
        let mut f = File::open(&path).expect("opens");
        let b = line_bounds(&mut f, 50, 10).expect("bounds");
        assert_eq!(b, [0, 48, 50]);
    }
}
