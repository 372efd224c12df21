//! The /metrics text reader: `queue_migrate::indicators::exposition::parse`.
//!
//! Besides "never panics", checks the guarantees its module documentation states:
//! - every sample line (neither blank nor a comment) yields exactly one sample or one error, so
//!   the two counts add up to the number of sample lines, and errors come one per line, in line
//!   order, each on a sample line, each message starting with `column N: `;
//! - a sample holds exactly what its line says: names are non-empty (bare ones
//!   `[a-zA-Z_:][a-zA-Z0-9_:]*`, any other text quoted, Prometheus 3), label names too (never
//!   `__name__`, never twice), and writing every sample back as a
//!   line (label values escaped with `escape_label_value`, the timestamp in the document's
//!   format) and parsing that gives the same samples (values compared bit for bit, any NaN
//!   matching any NaN), the same format and no error.
#![no_main]

use std::fmt::Write as _;

use libfuzzer_sys::fuzz_target;
use queue_migrate::indicators::exposition::{
    Format, Sample, escape_label_value, is_legacy_label_name, is_legacy_metric_name, parse,
    write_name,
};

/// The 1-based numbers of the sample lines, by the module's definition: a final `\r` is
/// ignored, leading spaces and tabs are skipped, then empty is blank and `#` is a comment.
fn sample_lines(text: &str) -> Vec<usize> {
    text.split('\n')
        .enumerate()
        .filter_map(|(i, raw)| {
            let line = raw.strip_suffix('\r').unwrap_or(raw);
            let content = line.trim_start_matches([' ', '\t']);
            (!content.is_empty() && !content.starts_with('#')).then_some(i + 1)
        })
        .collect()
}

fn same_value(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

/// The sample as one line of a document of `format`: a name every format reads bare is written
/// before the braces, any other quoted as their first item (Prometheus 3); label names likewise.
fn render(sample: &Sample, format: Format, out: &mut String) {
    let bare = is_legacy_metric_name(&sample.name);
    if bare {
        out.push_str(&sample.name);
        out.push('{');
    } else {
        out.push('{');
        write_name(out, &sample.name, is_legacy_metric_name);
    }
    for (i, (name, value)) in sample.labels.iter().enumerate() {
        if !bare || i > 0 {
            out.push(',');
        }
        write_name(out, name, is_legacy_label_name);
        let _ = write!(out, "=\"{}\"", escape_label_value(value));
    }
    // `{:?}` writes the shortest text that parses back to the same f64 (`inf`, `NaN`, `1e300`).
    let _ = write!(out, "}} {:?}", sample.value);
    match (sample.timestamp_ms, format) {
        (None, _) => {}
        (Some(ms), Format::Text) => {
            let _ = write!(out, " {ms}");
        }
        (Some(ms), Format::OpenMetrics) => {
            let sign = if ms < 0 { "-" } else { "" };
            let abs = ms.unsigned_abs();
            let _ = write!(out, " {sign}{}.{:03}", abs / 1000, abs % 1000);
        }
    }
    out.push('\n');
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let exp = parse(text);

    // One sample or one error per sample line.
    let lines = sample_lines(text);
    assert_eq!(
        exp.samples.len() + exp.errors.len(),
        lines.len(),
        "samples + errors != sample lines: {exp:?}"
    );
    assert!(
        exp.errors.windows(2).all(|w| w[0].line < w[1].line),
        "errors not one per line in line order: {:?}",
        exp.errors
    );
    for e in &exp.errors {
        assert!(
            lines.binary_search(&e.line).is_ok(),
            "error on a line that is not a sample line: {e:?}"
        );
        assert!(e.message.starts_with("column "), "message: {e:?}");
        let _ = e.to_string();
    }
    let format = exp.format;

    // Every sample is well formed.
    for s in &exp.samples {
        assert!(!s.name.is_empty(), "empty metric name in {s:?}");
        for (i, (name, _)) in s.labels.iter().enumerate() {
            assert!(
                !name.is_empty() && name != "__name__",
                "bad label name in {s:?}"
            );
            assert!(
                s.labels[..i].iter().all(|(other, _)| other != name),
                "duplicate label in {s:?}"
            );
        }
    }

    // Written back and read again, the samples are the same.
    let mut doc = String::new();
    for s in &exp.samples {
        render(s, format, &mut doc);
    }
    if format == Format::OpenMetrics {
        doc.push_str("# EOF\n");
    }
    let again = parse(&doc);
    assert!(
        again.errors.is_empty(),
        "re-reading {doc:?}: {:?}",
        again.errors
    );
    assert_eq!(again.format, format, "format changed re-reading {doc:?}");
    assert_eq!(again.samples.len(), exp.samples.len(), "re-reading {doc:?}");
    for (a, b) in exp.samples.iter().zip(&again.samples) {
        assert!(
            a.name == b.name
                && a.labels == b.labels
                && a.timestamp_ms == b.timestamp_ms
                && same_value(a.value, b.value),
            "sample changed re-reading {doc:?}: {a:?} became {b:?}"
        );
    }
});
