//! Metric and label names: which are read bare by every format, and how a name is written.

/// Whether `name` is a metric name every format reads bare:
/// `[a-zA-Z_:][a-zA-Z0-9_:]*` (otherwise it is written quoted, Prometheus 3).
pub fn is_legacy_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| is_name_start(b) || b == b':')
        && bytes.all(|b| is_name_char(b) || b == b':')
}

/// Whether `name` is a label name every format reads bare: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_legacy_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(is_name_start) && bytes.all(is_name_char)
}

/// `name` as a selector or a series key writes it: bare when `legacy` says it
/// may be, else double-quoted with the escapes of a label value.
pub fn write_name(out: &mut String, name: &str, legacy: fn(&str) -> bool) {
    if legacy(name) {
        out.push_str(name);
    } else {
        out.push('"');
        crate::metrics_text::escape_label(out, name);
        out.push('"');
    }
}

/// `[a-zA-Z_]`.
pub(super) fn is_name_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

/// `[a-zA-Z0-9_]`.
pub(super) fn is_name_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}
