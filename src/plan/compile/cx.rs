//! The shared context of the walk: [`Cx`] collects every [`Diagnostic`] with its path and line;
//! [`Obj`] opens a mapping and reports its unknown keys; the scalar readers (strings, numbers,
//! durations) every section uses.

use std::cell::OnceCell;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_yaml::{Mapping, Value};

use super::resolve::{Resolve, SecretsMode};
use super::suggest::{closest, misplaced_hint};
use crate::plan::duration_serde::format as human;
use crate::plan::lines::{LineMap, key_path};

/// Longest duration a plan may carry (10 years): every sum and product the controller makes of
/// them stays far inside what a `Duration`, an `Instant` or milliseconds in an `i64` hold.
pub const MAX_DURATION: Duration = Duration::from_secs(3650 * 86_400);

/// Largest `slices` accepted.
pub const MAX_SLICES: u32 = 65_536;

/// One error or warning about a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    /// Where, in the plan's own terms: `phases.slices.steps[2]`; empty for the whole plan.
    pub path: String,
    /// 1-based line of that node (of the key, for a mapping entry), when known.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    /// `line 12: phases.slices.steps[2]: steps must be strictly increasing (32 after 64)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// The walk's state: the text (for lines), what the walk found so far, and the IO it may do.
/// Each section's file adds its part of the walk as methods.
pub(super) struct Cx<'a> {
    yaml: &'a str,
    /// The line of each path, built when a first diagnostic needs one: a plan without any
    /// (a stored plan compiled again at each daemon start) is parsed once.
    lines: OnceCell<LineMap>,
    pub(super) errors: Vec<Diagnostic>,
    pub(super) warnings: Vec<Diagnostic>,
    pub(super) resolve: &'a dyn Resolve,
    pub(super) secrets: SecretsMode,
    plan_dir: Option<&'a Path>,
}

impl<'a> Cx<'a> {
    pub(super) fn new(
        yaml: &'a str,
        resolve: &'a dyn Resolve,
        secrets: SecretsMode,
        plan_dir: Option<&'a Path>,
    ) -> Self {
        Cx {
            yaml,
            lines: OnceCell::new(),
            errors: Vec::new(),
            warnings: Vec::new(),
            resolve,
            secrets,
            plan_dir,
        }
    }

    pub(super) fn line(&self, path: &str) -> Option<usize> {
        self.lines
            .get_or_init(|| LineMap::build(self.yaml))
            .line(path)
    }

    fn diag(&self, path: &str, message: String) -> Diagnostic {
        Diagnostic {
            path: path.to_string(),
            line: self.line(path),
            message,
        }
    }

    pub(super) fn error(&mut self, path: &str, message: impl Into<String>) {
        let d = self.diag(path, message.into());
        self.errors.push(d);
    }

    pub(super) fn warn(&mut self, path: &str, message: impl Into<String>) {
        let d = self.diag(path, message.into());
        self.warnings.push(d);
    }

    pub(super) fn string(&mut self, v: &Value, path: &str) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(_) | Value::Bool(_) => {
                self.error(
                    path,
                    format!(
                        "expected a string, found {}; put it in quotes if it is meant as text",
                        describe(v)
                    ),
                );
                None
            }
            other => {
                self.error(
                    path,
                    format!("expected a string, found {}", describe(other)),
                );
                None
            }
        }
    }

    pub(super) fn nonempty_string(&mut self, v: &Value, path: &str) -> Option<String> {
        let s = self.string(v, path)?;
        if s.trim().is_empty() {
            self.error(path, "must not be empty");
            return None;
        }
        Some(s)
    }

    pub(super) fn uint(&mut self, v: &Value, path: &str, min: u64, max: u64) -> Option<u64> {
        let n = match v {
            Value::Number(n) => n.as_u64().filter(|n| (min..=max).contains(n)),
            _ => None,
        };
        if n.is_none() {
            self.error(
                path,
                format!(
                    "expected a whole number from {min} to {max}, found {}",
                    describe(v)
                ),
            );
        }
        n
    }

    pub(super) fn number(&mut self, v: &Value, path: &str) -> Option<f64> {
        let n = match v {
            Value::Number(n) => n.as_f64().filter(|f| f.is_finite()),
            _ => None,
        };
        if n.is_none() {
            self.error(
                path,
                format!("expected a finite number, found {}", describe(v)),
            );
        }
        n
    }

    pub(super) fn boolean(&mut self, v: &Value, path: &str) -> Option<bool> {
        match v {
            Value::Bool(b) => Some(*b),
            other => {
                self.error(
                    path,
                    format!("expected true or false, found {}", describe(other)),
                );
                None
            }
        }
    }

    pub(super) fn duration(&mut self, v: &Value, path: &str) -> Option<Duration> {
        const UNITS: &str = "add a unit: `90s`, `15m`, `24h`, `7d` (or combined, `1h30m`)";
        match v {
            Value::Number(n) => {
                self.error(
                    path,
                    format!("a bare number ({n}) is not a duration: {UNITS}"),
                );
                None
            }
            Value::String(s) => {
                let t = s.trim();
                if t.parse::<f64>().is_ok() {
                    self.error(
                        path,
                        format!("a bare number ({}) is not a duration: {UNITS}", quote(t)),
                    );
                    return None;
                }
                match humantime::parse_duration(t) {
                    Ok(d) if d > MAX_DURATION => {
                        self.error(
                            path,
                            format!(
                                "{} is longer than the {} (10 years) a duration in a plan may be",
                                quote(t),
                                human(MAX_DURATION)
                            ),
                        );
                        None
                    }
                    Ok(d) => Some(d),
                    Err(e) => {
                        self.error(
                            path,
                            format!(
                                "{} is not a duration ({e}): write it like `90s`, `15m`, `24h`, \
                                 `7d` or `1h30m`",
                                quote(t)
                            ),
                        );
                        None
                    }
                }
            }
            other => {
                self.error(
                    path,
                    format!(
                        "expected a duration such as `15m` or `24h`, found {}",
                        describe(other)
                    ),
                );
                None
            }
        }
    }

    /// A mapping key as a field or source name.
    pub(super) fn key_name(&mut self, k: &Value, path: &str) -> Option<String> {
        match k {
            Value::String(s) => Some(s.clone()),
            other => {
                self.error(
                    path,
                    format!("field names must be strings, found {}", describe(other)),
                );
                None
            }
        }
    }

    /// A path as written, taken relative to the plan's directory when it is relative.
    pub(super) fn relative(&self, path: &str) -> PathBuf {
        let p = Path::new(path);
        match self.plan_dir {
            Some(dir) if p.is_relative() => dir.join(p),
            _ => p.to_path_buf(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// A mapping at a path: its unknown keys are reported when it is opened.

pub(super) struct Obj<'v> {
    path: String,
    map: &'v Mapping,
}

impl<'v> Obj<'v> {
    /// Opens a mapping, reporting a wrong type or every unknown key.
    pub(super) fn new(
        cx: &mut Cx<'_>,
        v: &'v Value,
        path: &str,
        what: &str,
        allowed: &[&str],
    ) -> Option<Obj<'v>> {
        let Value::Mapping(map) = v else {
            cx.error(
                path,
                format!(
                    "expected {what} (a mapping with {}), found {}",
                    allowed.join(", "),
                    describe(v)
                ),
            );
            return None;
        };
        for k in map.keys() {
            let Some(key) = cx.key_name(k, path) else {
                continue;
            };
            if allowed.contains(&key.as_str()) {
                continue;
            }
            let mut message = format!(
                "unknown field {} in {what}; allowed: {}",
                quote(&key),
                allowed.join(", ")
            );
            if let Some(hint) = misplaced_hint(&key, what) {
                message.push_str(&format!(" ({hint})"));
            } else if let Some(near) = closest(&key, allowed) {
                message.push_str(&format!(" (did you mean `{near}`?)"));
            }
            cx.error(&key_path(path, &key), message);
        }
        Some(Obj {
            path: path.to_string(),
            map,
        })
    }

    /// A field that is present, even with a null value.
    pub(super) fn get_raw(&self, key: &str) -> Option<(&'v Value, String)> {
        self.map.get(key).map(|v| (v, key_path(&self.path, key)))
    }

    /// An optional field: `None` when missing or null.
    pub(super) fn get(&self, key: &str) -> Option<(&'v Value, String)> {
        self.get_raw(key).filter(|(v, _)| !matches!(v, Value::Null))
    }

    /// A required field: reported when missing or null.
    pub(super) fn req(
        &self,
        cx: &mut Cx<'_>,
        key: &str,
        what: &str,
    ) -> Option<(&'v Value, String)> {
        match self.get_raw(key) {
            None => {
                cx.error(
                    &self.path,
                    format!("missing required field `{key}` ({what})"),
                );
                None
            }
            Some((Value::Null, p)) => {
                cx.error(&p, format!("`{key}` has no value ({what})"));
                None
            }
            Some(found) => Some(found),
        }
    }
}

/// An optional field's outcome: absent (`None`) is fine, present but invalid (`Some(None)`,
/// already reported) fails the whole.
pub(super) fn present<T>(field: Option<Option<T>>) -> Option<Option<T>> {
    match field {
        None => Some(None),
        Some(inner) => inner.map(Some),
    }
}

/// What a value is, for "expected X, found Y" (strings are cut short).
pub(super) fn describe(v: &Value) -> String {
    match v {
        Value::Null => "nothing (null)".to_string(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({})", quote(s)),
        Value::Sequence(_) => "a list".to_string(),
        Value::Mapping(_) => "a mapping".to_string(),
        Value::Tagged(t) => format!("a tagged value ({})", t.tag),
    }
}

/// A value in backquotes, cut at 60 characters.
pub(super) fn quote(s: &str) -> String {
    const MAX: usize = 60;
    if s.chars().count() > MAX {
        let cut: String = s.chars().take(MAX).collect();
        format!("`{cut}...`")
    } else {
        format!("`{s}`")
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::Diagnostic;
    use crate::plan::compile::test_support::{edit, errors, line_of, lines, ok};

    #[test]
    fn display_of_a_diagnostic() {
        let d = Diagnostic {
            path: "phases.slices.steps[2]".into(),
            line: Some(12),
            message: "steps must be strictly increasing (32 after 64)".into(),
        };
        assert_eq!(
            d.to_string(),
            "line 12: phases.slices.steps[2]: steps must be strictly increasing (32 after 64)"
        );
        let d = Diagnostic {
            path: String::new(),
            line: None,
            message: "missing required field `name`".into(),
        };
        assert_eq!(d.to_string(), "missing required field `name`");
    }

    /// Durations are bounded (10 years), so that no sum or product of them overflows later.
    #[test]
    fn a_duration_past_ten_years_is_an_error_with_its_line() {
        let bad = edit("min_duration: 24h", "min_duration: 500000000y");
        let errs = errors(&bad);
        let e = errs
            .iter()
            .find(|d| d.path.ends_with("min_duration"))
            .unwrap_or_else(|| panic!("{}", lines(&errs)));
        assert_eq!(e.line, line_of(&bad, "500000000y"));
        assert!(e.message.contains("10 years"), "{e}");
        ok(&edit("min_duration: 24h", "min_duration: 3650d"));
    }
}
