//! The hash of a message's business content, by which a key seen again is told apart from a
//! conflict.

use std::fmt;
use std::io::Write as _;

use sha2::{Digest, Sha256};

/// The SHA-256 of a message's business content: the same key with a different hash is a conflict.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PayloadHash(pub [u8; 32]);

impl PayloadHash {
    /// The hash of raw payload bytes (use it when the payload carries no route stamp, or hash the
    /// bytes of the business content only).
    pub fn of_bytes(bytes: &[u8]) -> PayloadHash {
        PayloadHash(Sha256::digest(bytes).into())
    }

    /// The hash of a JSON payload in canonical form (object keys sorted, no whitespace), without
    /// its top-level `route` field: the route stamp differs between the two paths of one message,
    /// its business content does not.
    pub fn of_json(payload: &serde_json::Value) -> PayloadHash {
        let mut hasher = HashWriter(Sha256::new());
        canonical(&mut hasher, payload, true);
        PayloadHash(hasher.0.finalize().into())
    }

    /// Lowercase hex, 64 characters (the stored form).
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(64);
        for b in self.0 {
            use fmt::Write as _;
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// Parse the stored form (64 hex digits, either case).
    pub fn from_hex(s: &str) -> Option<PayloadHash> {
        if s.len() != 64 || !s.is_ascii() {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(PayloadHash(out))
    }
}

impl fmt::Debug for PayloadHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PayloadHash({})", self.to_hex())
    }
}

impl fmt::Display for PayloadHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

struct HashWriter(Sha256);

impl std::io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Write `v` canonically: objects with keys in byte order, strings and numbers as serde_json
/// writes them. `top` drops the top-level route stamp.
fn canonical(out: &mut HashWriter, v: &serde_json::Value, top: bool) {
    use serde_json::Value;
    // Writing into a hasher cannot fail; serialising a string or number cannot either.
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map
                .keys()
                .filter(|k| !(top && k.as_str() == crate::stamp::PAYLOAD_FIELD))
                .collect();
            keys.sort();
            let _ = out.write_all(b"{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                let _ = serde_json::to_writer(&mut *out, k);
                let _ = out.write_all(b":");
                if let Some(value) = map.get(k) {
                    canonical(out, value, false);
                }
            }
            let _ = out.write_all(b"}");
        }
        Value::Array(items) => {
            let _ = out.write_all(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    let _ = out.write_all(b",");
                }
                canonical(out, item, false);
            }
            let _ = out.write_all(b"]");
        }
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}
