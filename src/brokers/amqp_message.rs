//! The AMQP form of a [`Message`] (pure): what a RabbitMQ delivery's properties and header table
//! become, and the properties and header table a RabbitMQ publish writes.
//!
//! # Guarantees
//! - A message read by [`read`] and written by [`write`] unchanged carries every property and
//!   every header with its AMQP type and value, except `delivery_mode` (always persistent) and a
//!   `user_id` other than the publishing connection's user (dropped: RabbitMQ refuses it).
//! - [`Message::headers`] decides which headers are written and what they say: a typed value is
//!   written while the text header of the same name reads as its text ([`text_of`]), a value
//!   without a text form while no header of that name (any case) replaced it; every other text
//!   header is written as a long string.
//! - No publish carries a `CC` or `BCC` header: RabbitMQ reads those as extra routing keys
//!   (sender-selected distribution), so a forwarded message would also land in the queues they
//!   name. Their values are written, unchanged, as [`ROUTING_HEADERS`] name them
//!   (`x-original-cc`, `x-original-bcc`), replacing a header of that name.
//! - A Kafka record's headers without a text form, its key, tombstone and create time
//!   ([`Message::record`]) are written as the `x-kafka-*` long-string headers of
//!   [`super::record`]; the create time also as the `timestamp` property (seconds, rounded down)
//!   when the message has none of its own.

use std::collections::BTreeMap;

use lapin::BasicProperties;
use lapin::types::{AMQPValue, DecimalValue, FieldTable, LongString, ShortString};

use super::Message;
use super::properties::{Properties, TypedHeaders};

/// AMQP `delivery_mode` of a persistent message.
pub(super) const PERSISTENT: u8 = 2;

/// The headers RabbitMQ routes by (`CC`, `BCC`, matched exactly as RabbitMQ does) and the names
/// a publish writes their values under instead.
pub const ROUTING_HEADERS: [(&str, &str); 2] = [("CC", "x-original-cc"), ("BCC", "x-original-bcc")];

/// The text headers and the properties of a delivery. A header whose value has no text form
/// ([`text_of`]) is absent from the text headers and kept in the typed table.
pub(super) fn read(properties: &BasicProperties) -> (BTreeMap<String, String>, Properties) {
    let mut headers = BTreeMap::new();
    if let Some(table) = properties.headers() {
        for (name, value) in table.inner() {
            if let Some(text) = text_of(value) {
                headers.insert(name.as_str().to_string(), text);
            }
        }
    }
    let text = |s: &Option<ShortString>| s.as_ref().map(|s| s.as_str().to_string());
    let read = Properties {
        content_type: text(properties.content_type()),
        content_encoding: text(properties.content_encoding()),
        delivery_mode: *properties.delivery_mode(),
        priority: *properties.priority(),
        correlation_id: text(properties.correlation_id()),
        reply_to: text(properties.reply_to()),
        expiration: text(properties.expiration()),
        message_id: text(properties.message_id()),
        timestamp: *properties.timestamp(),
        kind: text(properties.kind()),
        user_id: text(properties.user_id()),
        app_id: text(properties.app_id()),
        cluster_id: text(properties.cluster_id()),
        typed_headers: TypedHeaders(properties.headers().clone()),
    };
    (headers, read)
}

/// The properties to publish `message` with, on a connection logged in as `user`: its own
/// properties, persistent, `user_id` only when it is `user`, and its headers
/// ([`header_table`]).
///
/// # Errors
/// A header name or a property value longer than 255 bytes (AMQP cannot carry it): the text says
/// which.
pub(super) fn write(message: &Message, user: &str) -> Result<BasicProperties, String> {
    let p = &message.properties;
    let mut out = BasicProperties::default()
        .with_delivery_mode(PERSISTENT)
        .with_headers(header_table(message)?);
    let short = |value: &str, what: &str| {
        ShortString::try_new(value).map_err(|e| format!("property {what} {value:?}: {e}"))
    };
    if let Some(v) = &p.content_type {
        out = out.with_content_type(short(v, "content_type")?);
    }
    if let Some(v) = &p.content_encoding {
        out = out.with_content_encoding(short(v, "content_encoding")?);
    }
    if let Some(v) = p.priority {
        out = out.with_priority(v);
    }
    if let Some(v) = &p.correlation_id {
        out = out.with_correlation_id(short(v, "correlation_id")?);
    }
    if let Some(v) = &p.reply_to {
        out = out.with_reply_to(short(v, "reply_to")?);
    }
    if let Some(v) = &p.expiration {
        out = out.with_expiration(short(v, "expiration")?);
    }
    if let Some(v) = &p.message_id {
        out = out.with_message_id(short(v, "message_id")?);
    }
    // A Kafka record's create time, in AMQP's seconds, when the message has no AMQP timestamp
    // (the exact milliseconds are in `x-kafka-timestamp`).
    let kafka_seconds = message
        .record
        .timestamp_ms
        .and_then(|ms| u64::try_from(ms.div_euclid(1000)).ok());
    if let Some(v) = p.timestamp.or(kafka_seconds) {
        out = out.with_timestamp(v);
    }
    if let Some(v) = &p.kind {
        out = out.with_type(short(v, "type")?);
    }
    if let Some(v) = p.user_id.as_deref().filter(|v| *v == user) {
        out = out.with_user_id(short(v, "user_id")?);
    }
    if let Some(v) = &p.app_id {
        out = out.with_app_id(short(v, "app_id")?);
    }
    if let Some(v) = &p.cluster_id {
        out = out.with_cluster_id(short(v, "cluster_id")?);
    }
    Ok(out)
}

/// The header table of `message` (see the module's guarantees).
///
/// # Errors
/// A header name longer than 255 bytes.
fn header_table(message: &Message) -> Result<FieldTable, String> {
    let mut table = FieldTable::default();
    if let TypedHeaders(Some(typed)) = &message.properties.typed_headers {
        for (name, value) in typed.inner() {
            let keep = match text_of(value) {
                Some(text) => message.headers.get(name.as_str()) == Some(&text),
                None => !message
                    .headers
                    .keys()
                    .any(|k| k.eq_ignore_ascii_case(name.as_str())),
            };
            if keep {
                table.insert(name.clone(), value.clone());
            }
        }
    }
    for (name, value) in &message.headers {
        if table.contains_key(name) {
            continue;
        }
        let name = ShortString::try_new(name.as_str())
            .map_err(|e| format!("header name {name:?}: {e}"))?;
        table.insert(
            name,
            AMQPValue::LongString(LongString::from(value.as_bytes())),
        );
    }
    // A Kafka record's headers, key, tombstone and create time that no text header says
    // (`super::record`), each replacing a header of its name.
    if !message.record.is_plain() {
        for (name, value) in super::record::encoded_headers(&message.headers, &message.record) {
            table.insert(
                ShortString::from(name),
                AMQPValue::LongString(LongString::from(value.into_bytes())),
            );
        }
    }
    Ok(without_routing_headers(table))
}

/// `table` with each of [`ROUTING_HEADERS`] renamed, its value unchanged; the renamed value
/// replaces a header already under the new name.
fn without_routing_headers(table: FieldTable) -> FieldTable {
    let renamed = |name: &str| {
        ROUTING_HEADERS
            .iter()
            .find(|(routing, _)| *routing == name)
            .map(|(_, renamed)| *renamed)
    };
    let mut out = FieldTable::default();
    for (name, value) in table.inner() {
        if renamed(name.as_str()).is_none() {
            out.insert(name.clone(), value.clone());
        }
    }
    for (name, value) in table.inner() {
        if let Some(renamed) = renamed(name.as_str()) {
            out.insert(renamed.into(), value.clone());
        }
    }
    out
}

/// The text of a header value, as the text-only brokers carry it: strings and UTF-8 byte arrays
/// as they are, integers and timestamps (seconds) in decimal, booleans `true` / `false`, floats
/// as the shortest decimal that reads back the same (`NaN`, `inf`), decimals with their scale
/// (`123.45`), void as the empty string, tables and arrays as JSON. `None` for bytes that are
/// not UTF-8, at any depth.
pub(super) fn text_of(value: &AMQPValue) -> Option<String> {
    Some(match value {
        AMQPValue::Boolean(v) => v.to_string(),
        AMQPValue::ShortShortInt(v) => v.to_string(),
        AMQPValue::ShortShortUInt(v) => v.to_string(),
        AMQPValue::ShortInt(v) => v.to_string(),
        AMQPValue::ShortUInt(v) => v.to_string(),
        AMQPValue::LongInt(v) => v.to_string(),
        AMQPValue::LongUInt(v) => v.to_string(),
        AMQPValue::LongLongInt(v) => v.to_string(),
        AMQPValue::Timestamp(v) => v.to_string(),
        AMQPValue::Float(v) => v.to_string(),
        AMQPValue::Double(v) => v.to_string(),
        AMQPValue::DecimalValue(v) => decimal_text(*v),
        AMQPValue::ShortString(v) => v.as_str().to_string(),
        AMQPValue::LongString(v) => String::from_utf8(v.as_bytes().to_vec()).ok()?,
        AMQPValue::ByteArray(v) => String::from_utf8(v.as_slice().to_vec()).ok()?,
        AMQPValue::Void => String::new(),
        AMQPValue::FieldArray(_) | AMQPValue::FieldTable(_) => json_of(value)?.to_string(),
    })
}

/// The JSON of a value inside a table or an array: numbers, booleans and strings as JSON ones,
/// decimals as strings (exact), NaN and infinities as strings, void as `null`.
fn json_of(value: &AMQPValue) -> Option<serde_json::Value> {
    use serde_json::Value;
    let float = |v: f64, text: String| {
        serde_json::Number::from_f64(v).map_or(Value::String(text), Value::Number)
    };
    Some(match value {
        AMQPValue::Boolean(v) => Value::Bool(*v),
        AMQPValue::ShortShortInt(v) => Value::from(*v),
        AMQPValue::ShortShortUInt(v) => Value::from(*v),
        AMQPValue::ShortInt(v) => Value::from(*v),
        AMQPValue::ShortUInt(v) => Value::from(*v),
        AMQPValue::LongInt(v) => Value::from(*v),
        AMQPValue::LongUInt(v) => Value::from(*v),
        AMQPValue::LongLongInt(v) => Value::from(*v),
        AMQPValue::Timestamp(v) => Value::from(*v),
        AMQPValue::Float(v) => float(f64::from(*v), v.to_string()),
        AMQPValue::Double(v) => float(*v, v.to_string()),
        AMQPValue::Void => Value::Null,
        AMQPValue::FieldArray(items) => Value::Array(
            items
                .as_slice()
                .iter()
                .map(json_of)
                .collect::<Option<Vec<_>>>()?,
        ),
        AMQPValue::FieldTable(table) => Value::Object(
            table
                .inner()
                .iter()
                .map(|(k, v)| Some((k.as_str().to_string(), json_of(v)?)))
                .collect::<Option<serde_json::Map<_, _>>>()?,
        ),
        scalar => Value::String(text_of(scalar)?),
    })
}

/// `value × 10^-scale` in decimal, exact: scale 2, value 12345 is `123.45`.
fn decimal_text(d: DecimalValue) -> String {
    let digits = d.value.to_string();
    let scale = usize::from(d.scale);
    if scale == 0 {
        return digits;
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{int}.{frac}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use lapin::types::{ByteArray, FieldArray};

    fn typed() -> FieldTable {
        let mut nested = FieldTable::default();
        nested.insert("n".into(), AMQPValue::LongInt(1));
        nested.insert("s".into(), AMQPValue::LongString("x".into()));
        let mut t = FieldTable::default();
        t.insert("bool".into(), AMQPValue::Boolean(true));
        t.insert("i8".into(), AMQPValue::ShortShortInt(-8));
        t.insert("u8".into(), AMQPValue::ShortShortUInt(8));
        t.insert("i16".into(), AMQPValue::ShortInt(-16));
        t.insert("u16".into(), AMQPValue::ShortUInt(16));
        t.insert("i32".into(), AMQPValue::LongInt(-32));
        t.insert("u32".into(), AMQPValue::LongUInt(32));
        t.insert("i64".into(), AMQPValue::LongLongInt(-64));
        t.insert("f32".into(), AMQPValue::Float(1.5));
        t.insert("f64".into(), AMQPValue::Double(0.1));
        t.insert(
            "dec".into(),
            AMQPValue::DecimalValue(DecimalValue {
                scale: 3,
                value: 12,
            }),
        );
        t.insert("ts".into(), AMQPValue::Timestamp(1_767_225_600));
        t.insert("short".into(), AMQPValue::ShortString("s".into()));
        t.insert("long".into(), AMQPValue::LongString("l".into()));
        t.insert("bytes".into(), AMQPValue::ByteArray(b"b".to_vec().into()));
        t.insert(
            "binary".into(),
            AMQPValue::ByteArray(ByteArray::from(vec![0xff, 0])),
        );
        t.insert("void".into(), AMQPValue::Void);
        t.insert("table".into(), AMQPValue::FieldTable(nested));
        let mut array = FieldArray::default();
        array.push(AMQPValue::Boolean(false));
        array.push(AMQPValue::Double(2.5));
        t.insert("array".into(), AMQPValue::FieldArray(array));
        t
    }

    /// Regression: only string headers were read; every typed one was lost on the way.
    #[test]
    fn typed_headers_read_as_text() {
        let (headers, _) = read(&BasicProperties::default().with_headers(typed()));
        let got: Vec<_> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("array", "[false,2.5]"),
                ("bool", "true"),
                ("bytes", "b"),
                ("dec", "0.012"),
                ("f32", "1.5"),
                ("f64", "0.1"),
                ("i16", "-16"),
                ("i32", "-32"),
                ("i64", "-64"),
                ("i8", "-8"),
                ("long", "l"),
                ("short", "s"),
                ("table", r#"{"n":1,"s":"x"}"#),
                ("ts", "1767225600"),
                ("u16", "16"),
                ("u32", "32"),
                ("u8", "8"),
                ("void", ""),
            ]
        );
    }

    #[test]
    fn floats_json_cannot_hold_are_strings_inside_json() {
        let mut array = FieldArray::default();
        array.push(AMQPValue::Double(f64::NAN));
        array.push(AMQPValue::Float(f32::INFINITY));
        let text = text_of(&AMQPValue::FieldArray(array));
        assert_eq!(text.as_deref(), Some(r#"["NaN","inf"]"#));
        assert_eq!(
            text_of(&AMQPValue::Double(f64::NAN)).as_deref(),
            Some("NaN")
        );
    }

    #[test]
    fn binary_values_have_no_text() {
        let binary = AMQPValue::LongString(LongString::from(vec![0xc3, 0x28]));
        assert_eq!(text_of(&binary), None);
        let mut nested = FieldTable::default();
        nested.insert("b".into(), binary);
        assert_eq!(text_of(&AMQPValue::FieldTable(nested)), None);
    }

    #[test]
    fn decimals_keep_their_scale() {
        let d = |scale, value| decimal_text(DecimalValue { scale, value });
        assert_eq!(d(0, 7), "7");
        assert_eq!(d(2, 12_345), "123.45");
        assert_eq!(d(2, 5), "0.05");
        assert_eq!(d(1, 0), "0.0");
    }

    fn amqp_message() -> BasicProperties {
        BasicProperties::default()
            .with_content_type("application/json".into())
            .with_content_encoding("gzip".into())
            .with_delivery_mode(1)
            .with_priority(5)
            .with_correlation_id("corr-1".into())
            .with_reply_to("replies".into())
            .with_expiration("60000".into())
            .with_message_id("msg-1".into())
            .with_timestamp(1_767_225_600)
            .with_type("order.paid".into())
            .with_user_id("producer".into())
            .with_app_id("checkout".into())
            .with_cluster_id("c1".into())
            .with_headers(typed())
    }

    /// Regression: a RabbitMQ → RabbitMQ forward dropped every property and typed header.
    #[test]
    fn read_then_written_every_property_and_typed_header_is_kept() {
        let source = amqp_message();
        let (headers, properties) = read(&source);
        let message = Message {
            headers,
            properties,
            ..Message::new("x")
        };
        let written = write(&message, "producer").expect("writable");
        let expected = source.clone().with_delivery_mode(PERSISTENT);
        assert_eq!(written, expected);
    }

    #[test]
    fn a_foreign_user_id_is_not_written() {
        let (headers, properties) = read(&amqp_message());
        let message = Message {
            headers,
            properties,
            ..Message::new("x")
        };
        let written = write(&message, "bridge").expect("writable");
        assert_eq!(written.user_id(), &None);
        assert_eq!(
            written.app_id().as_ref().map(ShortString::as_str),
            Some("checkout")
        );
    }

    #[test]
    fn a_replaced_header_is_written_as_its_new_text() {
        let (headers, properties) = read(&amqp_message());
        let mut message = Message {
            headers,
            properties,
            ..Message::new("x")
        };
        message.headers.insert("i32".into(), "changed".into());
        message.headers.remove("u8");
        // A header without a text form goes when a header of its name replaced it.
        message.headers.insert("BINARY".into(), "text".into());
        let written = write(&message, "producer").expect("writable");
        let table = written.headers().clone().expect("headers");
        let t = table.inner();
        assert_eq!(t.get("i32"), Some(&AMQPValue::LongString("changed".into())));
        assert_eq!(t.get("BINARY"), Some(&AMQPValue::LongString("text".into())));
        assert_eq!(t.get("u8"), None);
        assert_eq!(t.get("binary"), None);
        assert_eq!(t.get("i64"), Some(&AMQPValue::LongLongInt(-64)));
    }

    #[test]
    fn a_message_from_elsewhere_is_written_with_string_headers() {
        let message = Message::new("x").with_header("a", "1");
        let written = write(&message, "guest").expect("writable");
        let mut table = FieldTable::default();
        table.insert("a".into(), AMQPValue::LongString("1".into()));
        assert_eq!(
            written,
            BasicProperties::default()
                .with_delivery_mode(PERSISTENT)
                .with_headers(table)
        );
    }

    /// Regression: a forwarded `CC` header made RabbitMQ copy the message to the queues it named.
    #[test]
    fn cc_and_bcc_headers_are_never_published_and_keep_their_values_renamed() {
        let mut cc = FieldArray::default();
        cc.push(AMQPValue::LongString("audit".into()));
        let mut source = FieldTable::default();
        source.insert("CC".into(), AMQPValue::FieldArray(cc.clone()));
        source.insert(
            "x-original-cc".into(),
            AMQPValue::LongString("older".into()),
        );
        source.insert("cc".into(), AMQPValue::LongString("not routing".into()));
        let (headers, properties) = read(&BasicProperties::default().with_headers(source));
        let message = Message {
            headers,
            properties,
            ..Message::new("x")
        }
        .with_header("BCC", "elsewhere");
        let written = write(&message, "guest").expect("writable");
        let table = written.headers().clone().expect("headers");
        let t = table.inner();
        assert_eq!(t.get("CC"), None);
        assert_eq!(t.get("BCC"), None);
        assert_eq!(t.get("x-original-cc"), Some(&AMQPValue::FieldArray(cc)));
        assert_eq!(
            t.get("x-original-bcc"),
            Some(&AMQPValue::LongString("elsewhere".into()))
        );
        assert_eq!(
            t.get("cc"),
            Some(&AMQPValue::LongString("not routing".into()))
        );
    }

    #[test]
    fn what_amqp_cannot_carry_is_an_error_naming_it() {
        let long = "n".repeat(256);
        let e = write(&Message::new("x").with_header(long, "v"), "guest").unwrap_err();
        assert!(e.contains("header name"), "{e}");
        let mut message = Message::new("x");
        message.properties.message_id = Some("m".repeat(256));
        let e = write(&message, "guest").unwrap_err();
        assert!(e.contains("message_id"), "{e}");
    }
}
