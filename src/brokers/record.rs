//! What a Kafka record carries beyond a text header map (pure): header values that are not
//! UTF-8, null header values, a header name given more than once (in order), a key that is not
//! the text of `x-qm-key`, a null payload (a tombstone) and the record's create time.
//!
//! A Kafka read fills [`Record`]; a Kafka publish writes it back as it came
//! ([`kafka_headers`], the key, the tombstone and the timestamp), and the brokers that carry only
//! text (RabbitMQ, NATS JetStream, Redis Streams) get it as the text headers of
//! [`encoded_headers`]:
//!
//! | Kafka record                        | text header (RabbitMQ, NATS, Redis) | value                         |
//! |-------------------------------------|-------------------------------------|-------------------------------|
//! | headers a text map cannot hold      | `x-kafka-headers`                   | a JSON array, in record order |
//! | key not the text of `x-qm-key`      | `x-kafka-key-base64`                | standard base64 of the bytes  |
//! | create time                         | `x-kafka-timestamp`                 | decimal, ms since the epoch   |
//! | null payload (tombstone)            | `x-kafka-tombstone`                 | `true` (the body is empty)    |
//!
//! `x-kafka-headers` lists, in record order, each header that is not a single UTF-8 value of
//! its name: `{"name":N,"value":"text"}` (a name given more than once), `{"name":N,"base64":B}`
//! (a value that is not UTF-8), `{"name":N,"value":null}` (a null value). The headers that are a
//! single UTF-8 value of their name stay plain headers. RabbitMQ also gets the create time as its
//! `timestamp` property (seconds, rounded down) when the message has none.

use std::collections::BTreeMap;

use base64::Engine as _;

/// One header of a Kafka record, as the record has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordHeader {
    /// The header name.
    pub name: String,
    /// The value's bytes; `None` for a null value.
    pub value: Option<Vec<u8>>,
}

impl RecordHeader {
    /// A header `name` with `value` (`None`: a null value).
    pub fn new(name: impl Into<String>, value: Option<&[u8]>) -> RecordHeader {
        RecordHeader {
            name: name.into(),
            value: value.map(<[u8]>::to_vec),
        }
    }
}

/// What a Kafka record carries that [`super::Message::headers`] and the payload cannot say
/// (all empty unless read from Kafka or set by the caller).
///
/// # Guarantees
/// [`super::Message::headers`] stays the authority on the headers that are a single UTF-8 value
/// of their name: a Kafka publish writes [`Record::headers`] in order, each entry the text map
/// also holds (by name, case-insensitively) replaced by the map's value (once, at its first
/// place), each single UTF-8 entry the map no longer holds left out (removed), and the map's
/// other headers after them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Record {
    /// Every header of the record, in order, when one of them is not a single UTF-8 value of
    /// its name (a value that is not UTF-8, a null value, a name given twice); `None` when the
    /// text map holds them all.
    pub headers: Option<Vec<RecordHeader>>,
    /// The record key when `x-qm-key` does not say it: not UTF-8, or not the value of the
    /// record's own `x-qm-key` header. `None`: the key is `x-qm-key` (or there is none).
    pub key: Option<Vec<u8>>,
    /// The payload is null (a tombstone: on a compacted topic it deletes its key), not empty.
    pub tombstone: bool,
    /// The record's create time (ms since the Unix epoch), as its producer set it.
    pub timestamp_ms: Option<i64>,
}

impl Record {
    /// Nothing beyond the text map: no record headers, key, tombstone nor timestamp.
    pub fn is_plain(&self) -> bool {
        self.headers.is_none()
            && self.key.is_none()
            && !self.tombstone
            && self.timestamp_ms.is_none()
    }
}

/// The header carrying the record headers a text map cannot hold (a JSON array).
pub const HEADER_KAFKA_HEADERS: &str = "x-kafka-headers";
/// The header carrying a record key that `x-qm-key` does not say (standard base64).
pub const HEADER_KAFKA_KEY: &str = "x-kafka-key-base64";
/// The header carrying the record's create time (decimal ms since the Unix epoch).
pub const HEADER_KAFKA_TIMESTAMP: &str = "x-kafka-timestamp";
/// The header marking a tombstone (`true`; the body is empty).
pub const HEADER_KAFKA_TOMBSTONE: &str = "x-kafka-tombstone";

/// Whether `headers[i]` is the only header of its name and its value UTF-8 text: what a text
/// map holds.
fn fits(headers: &[RecordHeader], i: usize) -> bool {
    let h = &headers[i];
    h.value
        .as_deref()
        .is_some_and(|v| std::str::from_utf8(v).is_ok())
        && headers.iter().filter(|o| o.name == h.name).count() == 1
}

/// Reads a record's headers: the text map (each header that is a single UTF-8 value of its
/// name), and the whole list when one of them is not ([`Record::headers`]).
pub fn read_headers(
    headers: Vec<RecordHeader>,
) -> (BTreeMap<String, String>, Option<Vec<RecordHeader>>) {
    let mut map = BTreeMap::new();
    let mut plain = true;
    for (i, h) in headers.iter().enumerate() {
        match h.value.as_deref().map(std::str::from_utf8) {
            Some(Ok(text)) if fits(&headers, i) => {
                map.insert(h.name.clone(), text.to_string());
            }
            _ => plain = false,
        }
    }
    (map, if plain { None } else { Some(headers) })
}

/// The name in `text` equal to `name` compared case-insensitively.
fn in_text<'t>(text: &'t BTreeMap<String, String>, name: &str) -> Option<(&'t String, &'t String)> {
    text.iter().find(|(k, _)| k.eq_ignore_ascii_case(name))
}

/// The headers a Kafka publish writes, in order: `text` (the message's text headers) merged into
/// `record`'s list as [`Record`]'s guarantees say; `text` alone (by name) when there is no list.
pub fn kafka_headers<'a>(
    text: &'a BTreeMap<String, String>,
    record: &'a Record,
) -> Vec<(&'a str, Option<&'a [u8]>)> {
    let Some(list) = &record.headers else {
        return text
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.as_bytes())))
            .collect();
    };
    let mut written: Vec<&str> = Vec::new();
    let mut out = Vec::with_capacity(list.len() + text.len());
    for (i, h) in list.iter().enumerate() {
        match in_text(text, &h.name) {
            Some((name, value)) if !written.contains(&name.as_str()) => {
                written.push(name);
                out.push((name.as_str(), Some(value.as_bytes())));
            }
            // Replaced by the map's value, written at the name's first place.
            Some(_) => {}
            None if !fits(list, i) => out.push((h.name.as_str(), h.value.as_deref())),
            None => {}
        }
    }
    for (name, value) in text {
        if !written.contains(&name.as_str()) {
            out.push((name.as_str(), Some(value.as_bytes())));
        }
    }
    out
}

/// The text headers that carry `record` to a broker without Kafka's record (see the module's
/// table), given `text`, the message's text headers (an entry of the list the text map also
/// holds is the map's: not repeated here). Empty for a plain record.
pub fn encoded_headers(
    text: &BTreeMap<String, String>,
    record: &Record,
) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(list) = &record.headers {
        let entries: Vec<String> = list
            .iter()
            .enumerate()
            .filter(|(i, h)| !fits(list, *i) && in_text(text, &h.name).is_none())
            .map(|(_, h)| entry_json(h))
            .collect();
        if !entries.is_empty() {
            out.push((HEADER_KAFKA_HEADERS, format!("[{}]", entries.join(","))));
        }
    }
    if let Some(key) = &record.key {
        out.push((
            HEADER_KAFKA_KEY,
            base64::engine::general_purpose::STANDARD.encode(key),
        ));
    }
    if let Some(ms) = record.timestamp_ms {
        out.push((HEADER_KAFKA_TIMESTAMP, ms.to_string()));
    }
    if record.tombstone {
        out.push((HEADER_KAFKA_TOMBSTONE, "true".to_string()));
    }
    out
}

/// One entry of `x-kafka-headers`, its fields in this order: `name`, then `value` or `base64`.
fn entry_json(h: &RecordHeader) -> String {
    let string = |s: &str| serde_json::Value::String(s.to_string()).to_string();
    let name = string(&h.name);
    match h.value.as_deref().map(|v| (v, std::str::from_utf8(v))) {
        None => format!(r#"{{"name":{name},"value":null}}"#),
        Some((_, Ok(text))) => format!(r#"{{"name":{name},"value":{}}}"#, string(text)),
        Some((bytes, Err(_))) => format!(
            r#"{{"name":{name},"base64":{}}}"#,
            string(&base64::engine::general_purpose::STANDARD.encode(bytes))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, value: Option<&[u8]>) -> RecordHeader {
        RecordHeader::new(name, value)
    }

    fn text(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn single_utf8_headers_need_no_list() {
        let (map, list) = read_headers(vec![h("a", Some(b"1")), h("b", Some(b"2"))]);
        assert_eq!(map, text(&[("a", "1"), ("b", "2")]));
        assert_eq!(list, None);
    }

    #[test]
    fn binary_null_and_repeated_headers_keep_the_whole_list_and_leave_the_map() {
        let all = vec![
            h("tag", Some(b"x")),
            h("bin", Some(&[0xff, 0x00])),
            h("a", Some(b"1")),
            h("gone", None),
            h("tag", Some(b"y")),
        ];
        let (map, list) = read_headers(all.clone());
        assert_eq!(map, text(&[("a", "1")]));
        assert_eq!(list.as_deref(), Some(all.as_slice()));
    }

    #[test]
    fn a_kafka_publish_writes_the_list_back_in_order_with_the_maps_changes() {
        let record = Record {
            headers: Some(vec![
                h("tag", Some(b"x")),
                h("bin", Some(&[0xff])),
                h("a", Some(b"1")),
                h("removed", Some(b"r")),
                h("gone", None),
                h("tag", Some(b"y")),
                h("X-QM-ROUTE", Some(&[0xfe])),
            ]),
            ..Record::default()
        };
        // The map as read, then: `removed` removed, `a` changed, a stamp added over a binary one.
        let map = text(&[("a", "2"), ("x-qm-route", "new"), ("z", "added")]);
        let written = kafka_headers(&map, &record);
        let want: Vec<(&str, Option<&[u8]>)> = vec![
            ("tag", Some(b"x")),
            ("bin", Some(&[0xff])),
            ("a", Some(b"2")),
            ("gone", None),
            ("tag", Some(b"y")),
            ("x-qm-route", Some(b"new")),
            ("z", Some(b"added")),
        ];
        assert_eq!(written, want);
    }

    #[test]
    fn a_plain_record_is_written_as_its_map() {
        let map = text(&[("b", "2"), ("a", "1")]);
        let plain = Record::default();
        let written = kafka_headers(&map, &plain);
        assert_eq!(
            written,
            vec![("a", Some(&b"1"[..])), ("b", Some(&b"2"[..]))]
        );
        assert!(encoded_headers(&map, &Record::default()).is_empty());
    }

    #[test]
    fn text_brokers_get_every_record_property_as_a_documented_header() {
        let record = Record {
            headers: Some(vec![
                h("a", Some(b"1")),
                h("tag", Some(b"x")),
                h("bin", Some(&[0xff, 0x00])),
                h("gone", None),
                h("tag", Some(b"y\n")),
            ]),
            key: Some(vec![0x00, 0xff]),
            tombstone: true,
            timestamp_ms: Some(1_767_225_600_123),
        };
        let map = text(&[("a", "1")]);
        let encoded = encoded_headers(&map, &record);
        assert_eq!(
            encoded,
            vec![
                (
                    HEADER_KAFKA_HEADERS,
                    r#"[{"name":"tag","value":"x"},{"name":"bin","base64":"/wA="},{"name":"gone","value":null},{"name":"tag","value":"y\n"}]"#
                        .to_string()
                ),
                (HEADER_KAFKA_KEY, "AP8=".to_string()),
                (HEADER_KAFKA_TIMESTAMP, "1767225600123".to_string()),
                (HEADER_KAFKA_TOMBSTONE, "true".to_string()),
            ]
        );
        assert!(
            !encoded[0].1.contains(['\r', '\n']),
            "NATS refuses CR and LF"
        );
    }
}
