//! Values that may hold a secret: `${VAR}` (whole or embedded), `file:/path`, or a literal,
//! resolved through [`Resolve`](super::resolve::Resolve) and never shown in a message.

use serde_yaml::Value;

use super::cx::{Cx, quote};
use super::resolve::{Resolve, SecretsMode};
use crate::plan::model::{Secret, Unresolved};

impl Cx<'_> {
    /// A `kafka://` URL's settings checked at compile time (security, partitioner, the allowlisted
    /// client properties: [`crate::brokers::KafkaUrl`]), so that `plan check` refuses what a
    /// connect would; the error names the setting, never a secret value. A secret left
    /// unresolved is checked where it is used. Without the `kafka` feature nothing reads it.
    pub(super) fn kafka_url(&mut self, url: &Secret, path: &str) {
        #[cfg(feature = "kafka")]
        if let Ok(value) = url.value()
            && value
                .get(..8)
                .is_some_and(|s| s.eq_ignore_ascii_case("kafka://"))
            && let Err(e) = crate::brokers::KafkaUrl::parse(value)
        {
            self.error(path, format!("a Kafka URL: {e}"));
        }
        #[cfg(not(feature = "kafka"))]
        let _ = (url, path);
    }

    /// A `url` value: `${VAR}` (whole or embedded), `file:/path`, or a literal.
    pub(super) fn secret(&mut self, v: &Value, path: &str) -> Option<Secret> {
        let reference = self.string(v, path)?;
        let value = if let Some(file) = reference.strip_prefix("file:") {
            let file = file.trim();
            if file.is_empty() {
                self.error(
                    path,
                    "`file:` needs a path, e.g. `file:/run/secrets/broker-url`",
                );
                return None;
            }
            let full = self.relative(file);
            match self.resolve.read_file(&full) {
                Ok(text) => text.trim().to_string(),
                Err(e) if self.secrets == SecretsMode::Deferred => {
                    let why = Unresolved::File {
                        path: full,
                        message: e,
                    };
                    return Some(self.deferred(path, reference, why));
                }
                Err(e) => {
                    self.error(
                        path,
                        format!("cannot read the secret file {}: {e}", full.display()),
                    );
                    return None;
                }
            }
        } else {
            match expand_env(&reference, self.resolve) {
                Ok(v) => v,
                Err(Unexpanded { malformed, unset })
                    if malformed.is_empty() && self.secrets == SecretsMode::Deferred =>
                {
                    return Some(self.deferred(path, reference, Unresolved::Env(unset)));
                }
                Err(Unexpanded { malformed, unset }) => {
                    for p in malformed {
                        self.error(path, p);
                    }
                    for name in unset {
                        self.error(path, format!("environment variable `{name}` is not set"));
                    }
                    return None;
                }
            }
        };
        if value.trim().is_empty() {
            self.error(
                path,
                format!(
                    "{} resolves to an empty value",
                    quote(&crate::redact::url(&reference))
                ),
            );
            return None;
        }
        if reference == value && has_inline_password(&value) {
            self.warn(
                path,
                "a password is written in the plan: use `${VAR}` or `file:/path` so that it \
                 stays out of the plan file and its history (it is masked in output)",
            );
        }
        Some(Secret::new(reference, value))
    }

    /// A secret left unresolved ([`SecretsMode::Deferred`]), with a warning saying so.
    fn deferred(&mut self, path: &str, reference: String, why: Unresolved) -> Secret {
        self.warn(
            path,
            format!("{why}: whatever needs this value fails until it is"),
        );
        Secret::unresolved(reference, why)
    }

    pub(super) fn http_url(&mut self, url: Secret, path: &str, what: &str) -> Option<Secret> {
        // An unresolved secret (deferred) cannot be checked: whatever uses it fails anyway.
        let Ok(value) = url.value() else {
            return Some(url);
        };
        let lower = value.to_ascii_lowercase();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            return Some(url);
        }
        let shown = if url.reference == value {
            quote(&url.redacted())
        } else {
            format!("the value of {}", quote(&url.redacted()))
        };
        self.error(
            path,
            format!("a {what} source URL must start with http:// or https://: {shown} does not"),
        );
        None
    }
}

/// Why `${...}` references could not be expanded: malformed ones (sentences), unset variables.
struct Unexpanded {
    malformed: Vec<String>,
    unset: Vec<String>,
}

/// Replaces every `${NAME}` with the variable's value; all problems are returned at once.
fn expand_env(s: &str, resolve: &dyn Resolve) -> Result<String, Unexpanded> {
    let mut out = String::with_capacity(s.len());
    let mut problems = Vec::new();
    let mut unset = Vec::new();
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            problems.push("unterminated `${`: write `${NAME}`".to_string());
            rest = "";
            break;
        };
        let name = &after[..end];
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            problems.push(format!(
                "{} is not a variable name (letters, digits and `_`, not starting with a digit)",
                quote(&format!("${{{name}}}"))
            ));
        } else {
            match resolve.env(name) {
                Some(value) => out.push_str(&value),
                None => unset.push(name.to_string()),
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    if problems.is_empty() && unset.is_empty() {
        Ok(out)
    } else {
        Err(Unexpanded {
            malformed: problems,
            unset,
        })
    }
}

/// `scheme://user:password@host`: a password written in the URL itself.
fn has_inline_password(url: &str) -> bool {
    let Some(scheme_end) = url.find("://") else {
        return false;
    };
    let rest = &url[scheme_end + 3..];
    let authority = rest.split(['/', '?', '#']).next().unwrap_or(rest);
    match authority.rfind('@') {
        Some(at) => authority[..at].contains(':'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::compile::compile;
    use crate::plan::compile::test_support::{edit, lines, resolve};
    use crate::plan::model::Source;
    use std::path::{Path, PathBuf};

    #[test]
    fn secrets_resolve_and_never_show() {
        let mut r = resolve();
        r.files.insert(
            PathBuf::from("/etc/qm/secrets/nats-url"),
            "  nats://orders:s3cr3t-file@nats.internal:4222\n".into(),
        );
        let yaml = edit("\"${NEW_BROKER_URL}\"", "\"file:secrets/nats-url\"").replacen(
            "\"http://127.0.0.1:9090\"",
            "\"http://prom:${PASS}@127.0.0.1:9090\"",
            1,
        );
        let c = compile(&yaml, Some(Path::new("/etc/qm")), &r)
            .unwrap_or_else(|e| panic!("{}", lines(&e)));
        let p = &c.plan;
        assert_eq!(p.brokers.new.url.reference, "file:secrets/nats-url");
        assert_eq!(
            p.brokers.new.url.value().unwrap(),
            "nats://orders:s3cr3t-file@nats.internal:4222"
        );
        let Some(Source::Prometheus { url, .. }) = p.sources.get("prom") else {
            panic!("prom source")
        };
        assert_eq!(url.reference, "http://prom:${PASS}@127.0.0.1:9090");
        assert_eq!(
            url.value().unwrap(),
            "http://prom:s3cr3t-pass@127.0.0.1:9090"
        );

        let debug = format!("{c:?}");
        let json = serde_json::to_string(p).unwrap_or_default();
        assert!(json.contains("${OLD_BROKER_URL}") && json.contains("file:secrets/nats-url"));
        for shown in [&debug, &json] {
            assert!(!shown.contains("s3cr3t"), "secret shown: {shown}");
        }
    }
}
