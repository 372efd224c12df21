//! Where a message's key is: a header, or a field of its JSON payload (pure): read by the bridge
//! and by dead-letter replay.

use crate::brokers::Message;
use crate::plan::BridgeKey;

/// Why a message has no usable key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The header is absent.
    #[error("no header {0:?}")]
    NoHeader(String),
    /// The payload is not JSON.
    #[error("the payload is not JSON ({0}), and the key is read from its JSON field {1:?}")]
    NotJson(String, String),
    /// The field is absent or null.
    #[error("no JSON field {0:?} in the payload")]
    NoField(String),
    /// The field is an object or an array.
    #[error("JSON field {0:?} is not a string or a number")]
    NotScalar(String),
    /// The key is empty.
    #[error("the key is empty")]
    Empty,
}

/// The key of `message` as the plan says where to find it. Numbers are read as their JSON text
/// (`42` → `"42"`), the way a producer that stringifies an id would write it.
///
/// # Errors
/// [`KeyError`] says what is missing; the bridge counts such messages and routes them by the
/// empty key (they keep their order among themselves).
pub fn key_of(message: &Message, spec: &BridgeKey) -> Result<String, KeyError> {
    let key = match spec {
        BridgeKey::Header(name) => message
            .header(name)
            .map(str::to_string)
            .ok_or_else(|| KeyError::NoHeader(name.clone()))?,
        BridgeKey::Json(field) => {
            let value: serde_json::Value = serde_json::from_slice(&message.payload)
                .map_err(|e| KeyError::NotJson(e.to_string(), field.clone()))?;
            json_field(&value, field)?
        }
    };
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    Ok(key)
}

/// The scalar at `field` of `value`: a top-level field by name, or a JSON pointer when it
/// starts with `/`. Strings as they are, numbers and booleans as their JSON text.
///
/// # Errors
/// [`KeyError::NoField`] (absent or null), [`KeyError::NotScalar`] (an object or an array).
pub fn json_field(value: &serde_json::Value, field: &str) -> Result<String, KeyError> {
    let found = if field.starts_with('/') {
        value.pointer(field)
    } else {
        value.get(field)
    };
    match found {
        None | Some(serde_json::Value::Null) => Err(KeyError::NoField(field.to_string())),
        Some(serde_json::Value::String(s)) => Ok(s.clone()),
        Some(v @ (serde_json::Value::Number(_) | serde_json::Value::Bool(_))) => Ok(v.to_string()),
        Some(_) => Err(KeyError::NotScalar(field.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(payload: &str) -> Message {
        Message::new(payload.as_bytes().to_vec())
    }

    #[test]
    fn header_keys_match_case_insensitively() {
        let m = json("{}").with_header("X-Order-Id", "order-7");
        let spec = BridgeKey::Header("x-order-id".into());
        assert_eq!(key_of(&m, &spec).as_deref(), Ok("order-7"));
        let spec = BridgeKey::Header("x-customer".into());
        assert_eq!(
            key_of(&m, &spec),
            Err(KeyError::NoHeader("x-customer".into()))
        );
    }

    #[test]
    fn json_fields_by_name_or_pointer() {
        let m = json(r#"{"orderId":"o-1","n":42,"order":{"id":"o-2"},"o":{},"z":""}"#);
        let by = |f: &str| key_of(&m, &BridgeKey::Json(f.into()));
        assert_eq!(by("orderId").as_deref(), Ok("o-1"));
        assert_eq!(by("n").as_deref(), Ok("42"));
        assert_eq!(by("/order/id").as_deref(), Ok("o-2"));
        assert_eq!(by("missing"), Err(KeyError::NoField("missing".into())));
        assert_eq!(by("o"), Err(KeyError::NotScalar("o".into())));
        assert_eq!(by("z"), Err(KeyError::Empty));
    }

    #[test]
    fn a_binary_payload_is_not_json() {
        let m = Message::new(vec![0xff, 0x00]);
        assert!(matches!(
            key_of(&m, &BridgeKey::Json("id".into())),
            Err(KeyError::NotJson(..))
        ));
    }
}
