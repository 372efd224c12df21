//! Reading Redis replies (RESP2 and RESP3 alike) for the Redis Streams adapter: arrays, maps,
//! text, numbers, and stream entries as messages.

use std::collections::BTreeMap;

use redis::Value;

use super::Message;

/// The field holding the payload.
pub(super) const PAYLOAD_FIELD: &str = "payload";
/// The prefix of a header field.
pub(super) const HEADER_PREFIX: &str = "h:";

/// The elements of an array (or set) reply; nothing for any other reply.
pub(super) fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(v) | Value::Set(v) => v,
        Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        _ => Vec::new(),
    }
}

/// A flat `[name, value, name, value, …]` reply (or a map) as a map by name.
pub(super) fn pairs(v: Value) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut it = items(v).into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        if let Some(k) = text(&k) {
            out.insert(k, v);
        }
    }
    out
}

pub(super) fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

pub(super) fn int(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) => u64::try_from(*i).ok(),
        other => text(other).and_then(|s| s.parse().ok()),
    }
}

/// A stream entry `[id, [field, value, …]]`: its id, and its message (`None` when the entry was
/// deleted and only its id remains in a pending list).
pub(super) fn entry(v: Value) -> Option<(String, Option<Message>)> {
    let mut parts = items(v).into_iter();
    let id = text(&parts.next()?)?;
    let fields = parts.next().unwrap_or(Value::Nil);
    if matches!(fields, Value::Nil) {
        return Some((id, None));
    }
    let mut message = Message::default();
    let mut it = items(fields).into_iter();
    while let (Some(Value::BulkString(name)), Some(value)) = (it.next(), it.next()) {
        let Value::BulkString(value) = value else {
            continue;
        };
        if name == PAYLOAD_FIELD.as_bytes() {
            message.payload = value;
        } else if let Some(header) = name.strip_prefix(HEADER_PREFIX.as_bytes())
            && let (Ok(header), Ok(value)) =
                (String::from_utf8(header.to_vec()), String::from_utf8(value))
        {
            message.headers.insert(header, value);
        }
    }
    Some((id, Some(message)))
}

/// The entries of an `XREADGROUP` reply (one stream): `nil` on timeout, else `[[key, entries]]`
/// (RESP2) or `{key: entries}` (RESP3).
pub(super) fn read_entries(v: Value) -> Vec<Value> {
    match v {
        Value::Nil => Vec::new(),
        Value::Map(m) => m
            .into_iter()
            .flat_map(|(_, entries)| items(entries))
            .collect(),
        other => items(other)
            .into_iter()
            .flat_map(|stream| {
                items(stream)
                    .into_iter()
                    .nth(1)
                    .map(items)
                    .unwrap_or_default()
            })
            .collect(),
    }
}
