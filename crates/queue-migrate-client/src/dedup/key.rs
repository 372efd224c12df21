//! The business key: `type:aggregate:event`, built from the message's business identity — what
//! happened, to which aggregate, which occurrence — never from the broker's message id, which
//! differs on the two paths during a migration and on every producer retry
//! (`docs/design.md#idempotent-consumers-and-the-dedup-window`).
//!
//! # Wire form
//! The three parts joined by `:`, each part escaped so that the join is unambiguous: `\` becomes
//! `\\` and `:` becomes `\:`. `("order.paid", "tenant:7/4711", "evt-9")` is
//! `order.paid:tenant\:7/4711:evt-9`. Any language can produce the same string.
//!
//! # Guarantees
//! - Injective: two different identities never give the same key; [`BusinessKey::parse`] and
//!   [`BusinessKey::parts`] give the parts back.
//! - Parts are non-empty; the whole key is at most [`MAX_KEY_LEN`] bytes (it is a primary key and a
//!   Redis key).
//!
//! ```
//! use queue_migrate_client::dedup::BusinessKey;
//!
//! let key = BusinessKey::new("order.paid", "tenant:7/4711", "evt-9")?;
//! assert_eq!(key.as_str(), r"order.paid:tenant\:7/4711:evt-9");
//! assert_eq!(BusinessKey::parse(key.as_str())?, key);
//! assert_eq!(key.aggregate(), "tenant:7/4711");
//! // What to send to a service the effect calls, as its Idempotency-Key.
//! assert_eq!(key.idempotency_key(), key.as_str());
//! # Ok::<(), queue_migrate_client::dedup::key::KeyError>(())
//! ```

use std::fmt;

/// The longest key accepted, in bytes (escaped form).
pub const MAX_KEY_LEN: usize = 1024;

/// Errors of building or parsing a business key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A part of the identity is empty.
    #[error("business key: the {0} is empty")]
    Empty(&'static str),
    /// The escaped key is longer than [`MAX_KEY_LEN`].
    #[error("business key is {0} bytes, longer than {MAX_KEY_LEN}")]
    TooLong(usize),
    /// A string that is not a key in the wire form.
    #[error("not a business key {key:?}: {reason}")]
    Malformed {
        /// The string given (cut at 80 characters).
        key: String,
        /// What is wrong.
        reason: &'static str,
    },
}

/// A deduplication key built from a business identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BusinessKey(String);

impl BusinessKey {
    /// The key of event `event` of kind `kind` (e.g. `order.paid`) on aggregate `aggregate` (e.g.
    /// the order id).
    ///
    /// # Errors
    /// A part is empty or the key is too long.
    pub fn new(kind: &str, aggregate: &str, event: &str) -> Result<BusinessKey, KeyError> {
        for (name, part) in [
            ("type", kind),
            ("aggregate id", aggregate),
            ("event id", event),
        ] {
            if part.is_empty() {
                return Err(KeyError::Empty(name));
            }
        }
        let mut s = String::with_capacity(kind.len() + aggregate.len() + event.len() + 2);
        escape_into(&mut s, kind);
        s.push(':');
        escape_into(&mut s, aggregate);
        s.push(':');
        escape_into(&mut s, event);
        if s.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(s.len()));
        }
        Ok(BusinessKey(s))
    }

    /// Read a key in the wire form (e.g. received from another language's producer).
    ///
    /// # Errors
    /// Not three non-empty parts, a dangling or unknown escape, or too long.
    pub fn parse(s: &str) -> Result<BusinessKey, KeyError> {
        if s.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(s.len()));
        }
        split(s)?;
        Ok(BusinessKey(s.to_string()))
    }

    /// The key as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The three parts, unescaped: (type, aggregate id, event id).
    pub fn parts(&self) -> (String, String, String) {
        // Built or parsed by this module: always three valid parts.
        match split(&self.0) {
            Ok([a, b, c]) => (a, b, c),
            Err(_) => (self.0.clone(), String::new(), String::new()),
        }
    }

    /// The aggregate id, unescaped (the routing key of the message, and the natural argument of
    /// [`super::sql::accept_version`]).
    pub fn aggregate(&self) -> String {
        self.parts().1
    }

    /// A value for the `Idempotency-Key` header of a call to another service: the key itself when
    /// it is printable ASCII of at most 255 bytes, otherwise `qm-` and the key's SHA-256 in hex. The
    /// same key always gives the same value.
    pub fn idempotency_key(&self) -> String {
        let printable = self.0.bytes().all(|b| (0x21..=0x7e).contains(&b));
        if printable && self.0.len() <= 255 {
            self.0.clone()
        } else {
            format!(
                "qm-{}",
                super::hash::PayloadHash::of_bytes(self.0.as_bytes()).to_hex()
            )
        }
    }
}

impl fmt::Display for BusinessKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn escape_into(out: &mut String, part: &str) {
    for c in part.chars() {
        if c == '\\' || c == ':' {
            out.push('\\');
        }
        out.push(c);
    }
}

fn split(s: &str) -> Result<[String; 3], KeyError> {
    let malformed = |reason| KeyError::Malformed {
        key: s.chars().take(80).collect(),
        reason,
    };
    let mut parts: Vec<String> = vec![String::new()];
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e @ ('\\' | ':')) => {
                    if let Some(last) = parts.last_mut() {
                        last.push(e);
                    }
                }
                Some(_) => return Err(malformed("unknown escape (only \\\\ and \\: exist)")),
                None => return Err(malformed("ends with a lone backslash")),
            },
            ':' => parts.push(String::new()),
            c => {
                if let Some(last) = parts.last_mut() {
                    last.push(c);
                }
            }
        }
    }
    let parts: [String; 3] = parts
        .try_into()
        .map_err(|_| malformed("expected three parts type:aggregate:event"))?;
    if parts.iter().any(String::is_empty) {
        return Err(malformed("a part is empty"));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn escapes_colons_and_backslashes() {
        let k = BusinessKey::new("order.paid", "tenant:7/4711", "evt\\9").unwrap();
        assert_eq!(k.as_str(), "order.paid:tenant\\:7/4711:evt\\\\9");
        assert_eq!(
            k.parts(),
            ("order.paid".into(), "tenant:7/4711".into(), "evt\\9".into())
        );
        assert_eq!(k.aggregate(), "tenant:7/4711");
        assert_eq!(BusinessKey::parse(k.as_str()).unwrap(), k);
    }

    #[test]
    fn rejects_empty_parts_and_bad_wire_forms() {
        assert_eq!(
            BusinessKey::new("order.paid", "", "e"),
            Err(KeyError::Empty("aggregate id"))
        );
        for bad in ["a:b", "a:b:c:d", "a::c", "a:b:c\\", "a:b\\x:c", ""] {
            assert!(BusinessKey::parse(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(
            BusinessKey::new("t", &"x".repeat(MAX_KEY_LEN), "e"),
            Err(KeyError::TooLong(_))
        ));
    }

    #[test]
    fn idempotency_key_is_header_safe() {
        let k = BusinessKey::new("order.paid", "4711", "evt-9").unwrap();
        assert_eq!(k.idempotency_key(), "order.paid:4711:evt-9");
        let k = BusinessKey::new("pedido.pago", "ação 1", "e").unwrap();
        let v = k.idempotency_key();
        assert!(v.starts_with("qm-") && v.len() == 67, "{v}");
        assert_eq!(v, k.idempotency_key());
    }

    proptest! {
        #[test]
        fn injective_and_reversible(a in ".{1,12}", b in ".{1,12}", c in ".{1,12}",
                                    d in "[a:\\\\]{1,4}", e in "[a:\\\\]{1,4}") {
            let k1 = BusinessKey::new(&a, &b, &c).unwrap();
            prop_assert_eq!(k1.parts(), (a.clone(), b.clone(), c.clone()));
            prop_assert_eq!(BusinessKey::parse(k1.as_str()).unwrap(), k1.clone());
            // Colon- and backslash-heavy parts never collide.
            let k2 = BusinessKey::new(&d, &e, "x").unwrap();
            let k3 = BusinessKey::new(&format!("{d}:{e}"), "x", "x");
            if let Ok(k3) = k3 {
                prop_assert_ne!(k2.clone(), k3);
            }
            let k4 = BusinessKey::new(&d, &format!("{e}:x"), "x").unwrap();
            prop_assert_ne!(k2, k4);
        }
    }
}
