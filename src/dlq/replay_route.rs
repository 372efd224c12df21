//! Where a replayed dead letter goes on the brokers, and what it carries (pure: the routing
//! document and the publish instant are arguments).
//!
//! A dead letter goes to the side its aggregate key's slice routes to under the migration's
//! current routing document, exactly as a producer routes ([`RoutingDocument::route`]), so that a
//! replay never puts a key's messages on both sides at once. The dead-letter article's envelope
//! keeps no key and no headers: the key is read from the payload, by `--key-field NAME` when
//! given, else by the plan's `bridge.key` when that is a JSON field ([`KeySource::choose`]).
//!
//! The message is the original payload, byte for byte, with the origin headers (`x-replay-of`,
//! `x-replay-reason`), the key ([`HEADER_KEY`]), the dedup key ([`HEADER_DEDUP_KEY`], built by
//! a [`DedupTemplate`] from the payload, since the envelope does not keep the original's) and the
//! route stamp with the route `replay` ([`RouteStamp::replayed`]), producer [`REPLAY_PRODUCER`].

use crate::adapters::key::{KeyError, json_field, key_of};
use crate::brokers::{HEADER_DEDUP_KEY, HEADER_KEY, Message};
use crate::dedup::BusinessKey;
use crate::plan::BridgeKey;
use crate::routing::{RoutingDocument, Side};
use crate::stamp::{RouteStamp, StampError};

use super::replay::ReplayMessage;

/// The producer name on replayed messages' route stamps.
pub const REPLAY_PRODUCER: &str = "migrate-dlq-replay";

/// Why a replay cannot route (the whole run, or one message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplayRouteError {
    /// Neither `--key-field` nor the plan's `bridge.key` says where a message's key is.
    #[error(
        "replaying to the brokers routes each message by its key, and nothing says where the key \
         is: give --key-field NAME (a JSON field of the payload, or a JSON pointer such as \
         /order/id), or add `bridge: {{ key: {{ json: NAME }} }}` to the plan"
    )]
    NoKeySource,
    /// The plan's bridge reads the key from a header, and an envelope keeps no headers.
    #[error(
        "the plan's bridge reads the key from the header {0:?}, which a dead-letter envelope does \
         not keep: give --key-field NAME, the JSON field of the payload that holds the same key"
    )]
    HeaderKey(String),
    /// `--key-field` is empty.
    #[error("--key-field: give the name of a JSON field of the payload (or a /pointer)")]
    EmptyField,
    /// This message's key cannot be read: it was not published.
    #[error("its key cannot be read, so its slice is unknown and it was not published: {0}")]
    Key(#[from] KeyError),
    /// The route stamp cannot be written (a broker name the wire format refuses).
    #[error("it cannot be stamped: {0}; rename the broker in the plan")]
    Stamp(#[from] StampError),
    /// Neither `--dedup-key` nor `--no-dedup-key`.
    #[error(
        "a replayed message needs a dedup key (x-qm-dedup-key): consumers deduplicate by it, and \
         a replay that stopped is continued with --skip N or run again, which sends some messages \
         a second time. A dead-letter envelope does not keep the original's, so give \
         --dedup-key TEMPLATE that builds it from the payload as the producers do (e.g. \
         'order.paid:{{orderId}}:{{version}}'), or --no-dedup-key to publish without one"
    )]
    NoDedupKey,
    /// `--dedup-key` is not a template of a dedup key.
    #[error(
        "--dedup-key {template:?}: {reason}; write it as type:aggregate:event, each part text \
         and {{FIELD}} or {{/json/pointer}} read from the payload, e.g. \
         'order.paid:{{orderId}}:{{version}}' ({{{{ and }}}} for a brace)"
    )]
    DedupTemplate {
        /// The template given.
        template: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// This message's dedup key cannot be built: it was not published.
    #[error(
        "its dedup key cannot be built by --dedup-key ({0}), so a consumer could not deduplicate \
         it: not published; fix the template, or give --no-dedup-key to publish without one"
    )]
    DedupKey(#[from] DedupKeyError),
}

/// Why one message's dedup key cannot be built from its payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DedupKeyError {
    /// The payload is not JSON.
    #[error("the payload is not JSON: {0}")]
    NotJson(String),
    /// A field the template reads is absent, null, an object or an array.
    #[error("{0}")]
    Field(#[from] KeyError),
    /// A field the template reads is the empty string.
    #[error("JSON field {0:?} is empty")]
    EmptyField(String),
    /// The key built is not a business key (a part empty, or too long).
    #[error("{0}")]
    Key(#[from] crate::dedup::key::KeyError),
}

/// Which option gave the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrigin {
    /// `--key-field`.
    Option,
    /// The plan's `bridge.key`.
    Plan,
}

/// Where each message's key is, and who said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySource {
    /// Always [`BridgeKey::Json`]: an envelope has no headers.
    pub key: BridgeKey,
    /// Who said so.
    pub origin: KeyOrigin,
}

impl KeySource {
    /// The key's place: `--key-field` when given (the operator names the field of this queue's
    /// payloads), else the plan's `bridge.key` when it is a JSON field.
    ///
    /// # Errors
    /// [`ReplayRouteError::EmptyField`], [`ReplayRouteError::HeaderKey`] (the plan's key is a
    /// header and no `--key-field`), [`ReplayRouteError::NoKeySource`].
    pub fn choose(
        key_field: Option<&str>,
        plan_key: Option<&BridgeKey>,
    ) -> Result<KeySource, ReplayRouteError> {
        match (key_field, plan_key) {
            (Some(field), _) if field.trim().is_empty() => Err(ReplayRouteError::EmptyField),
            (Some(field), _) => Ok(KeySource {
                key: BridgeKey::Json(field.to_string()),
                origin: KeyOrigin::Option,
            }),
            (None, Some(BridgeKey::Json(field))) => Ok(KeySource {
                key: BridgeKey::Json(field.clone()),
                origin: KeyOrigin::Plan,
            }),
            (None, Some(BridgeKey::Header(name))) => Err(ReplayRouteError::HeaderKey(name.clone())),
            (None, None) => Err(ReplayRouteError::NoKeySource),
        }
    }

    /// "the JSON field "orderId" of the payload (--key-field)", for a person.
    pub fn describe(&self) -> String {
        let what = match &self.key {
            BridgeKey::Json(field) => format!("the JSON field {field:?} of the payload"),
            BridgeKey::Header(name) => format!("the header {name:?}"),
        };
        let from = match self.origin {
            KeyOrigin::Option => "--key-field",
            KeyOrigin::Plan => "the plan's bridge.key",
        };
        format!("{what} ({from})")
    }
}

/// One piece of a part of a [`DedupTemplate`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    /// Written as it is.
    Text(String),
    /// The scalar at this field or `/pointer` of the payload.
    Field(String),
}

/// How a replayed message's dedup key is built from its payload: `type:aggregate:event`, each
/// part text and `{FIELD}` / `{/json/pointer}` placeholders (`{{` and `}}` for braces), e.g.
/// `order.paid:{orderId}:{version}`. The parts are joined as a [`BusinessKey`] (a `:` or `\` in
/// a value is escaped), so the key is the one a producer that builds it with
/// [`BusinessKey::new`] from the same values writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DedupTemplate {
    text: String,
    parts: [Vec<Piece>; 3],
}

impl DedupTemplate {
    /// Reads `template`.
    ///
    /// # Errors
    /// [`ReplayRouteError::DedupTemplate`]: an unclosed `{`, a lone `}`, an empty `{}`, not three
    /// parts, an empty part, or no placeholder at all (every message would get the same key).
    pub fn parse(template: &str) -> Result<DedupTemplate, ReplayRouteError> {
        let refuse = |reason| ReplayRouteError::DedupTemplate {
            template: template.to_string(),
            reason,
        };
        let mut parts: Vec<Vec<Piece>> = vec![Vec::new()];
        let mut text = String::new();
        let mut chars = template.chars().peekable();
        let flush = |text: &mut String, parts: &mut Vec<Vec<Piece>>| {
            if !text.is_empty()
                && let Some(part) = parts.last_mut()
            {
                part.push(Piece::Text(std::mem::take(text)));
            }
        };
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '}' => return Err(refuse("a `}` closes nothing")),
                '{' => {
                    let mut field = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some('{') | None => return Err(refuse("a `{` is not closed by `}`")),
                            Some(c) => field.push(c),
                        }
                    }
                    if field.trim().is_empty() {
                        return Err(refuse("a `{}` names no field"));
                    }
                    flush(&mut text, &mut parts);
                    if let Some(part) = parts.last_mut() {
                        part.push(Piece::Field(field));
                    }
                }
                ':' => {
                    flush(&mut text, &mut parts);
                    parts.push(Vec::new());
                }
                c => text.push(c),
            }
        }
        flush(&mut text, &mut parts);
        let Ok(parts) = <[Vec<Piece>; 3]>::try_from(parts) else {
            return Err(refuse(
                "a dedup key has three parts separated by `:`, type:aggregate:event",
            ));
        };
        if parts.iter().any(Vec::is_empty) {
            return Err(refuse("a part is empty"));
        }
        let reads = |part: &Vec<Piece>| part.iter().any(|p| matches!(p, Piece::Field(_)));
        if !parts.iter().any(reads) {
            return Err(refuse(
                "it reads no field of the payload, so every message would get the same key",
            ));
        }
        if !reads(&parts[2]) {
            return Err(refuse(
                "its event part (the third) reads no field of the payload, so all the events of \
                 an aggregate would share one key and a consumer would set all but the first \
                 aside as conflicts: use the event's own field, e.g. {version} or {eventId}",
            ));
        }
        Ok(DedupTemplate {
            text: template.to_string(),
            parts,
        })
    }

    /// The template as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The dedup key of `payload`.
    ///
    /// # Errors
    /// [`DedupKeyError`]: the payload is not JSON, a field is missing, null, empty or not a
    /// scalar, or the key is not a business key.
    pub fn build(&self, payload: &[u8]) -> Result<BusinessKey, DedupKeyError> {
        let value: serde_json::Value =
            serde_json::from_slice(payload).map_err(|e| DedupKeyError::NotJson(e.to_string()))?;
        let mut built: [String; 3] = Default::default();
        for (out, pieces) in built.iter_mut().zip(&self.parts) {
            for piece in pieces {
                match piece {
                    Piece::Text(text) => out.push_str(text),
                    Piece::Field(field) => {
                        let found = json_field(&value, field)?;
                        if found.is_empty() {
                            return Err(DedupKeyError::EmptyField(field.clone()));
                        }
                        out.push_str(&found);
                    }
                }
            }
        }
        let [kind, aggregate, event] = &built;
        Ok(BusinessKey::new(kind, aggregate, event)?)
    }
}

/// Whether replayed messages carry a dedup key, and how it is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DedupKey {
    /// Built from each payload (`--dedup-key`); a message it cannot be built for is not sent.
    Template(DedupTemplate),
    /// None (`--no-dedup-key`, the operator's explicit choice).
    Off,
}

impl DedupKey {
    /// `--dedup-key TEMPLATE`, or `--no-dedup-key` (`off`).
    ///
    /// # Errors
    /// [`ReplayRouteError::NoDedupKey`] when neither is given; [`ReplayRouteError::DedupTemplate`].
    pub fn choose(template: Option<&str>, off: bool) -> Result<DedupKey, ReplayRouteError> {
        match (template, off) {
            (Some(template), _) => DedupTemplate::parse(template).map(DedupKey::Template),
            (None, true) => Ok(DedupKey::Off),
            (None, false) => Err(ReplayRouteError::NoDedupKey),
        }
    }

    /// "dedup keys order.paid:{orderId}:{n}", for a person.
    pub fn describe(&self) -> String {
        match self {
            DedupKey::Template(t) => format!("dedup keys {}", t.as_str()),
            DedupKey::Off => "no dedup key (--no-dedup-key)".into(),
        }
    }
}

/// The aggregate key of `replayed`, read where `key` says.
///
/// # Errors
/// [`ReplayRouteError::Key`].
pub fn replay_key(
    replayed: &ReplayMessage<'_>,
    key: &KeySource,
) -> Result<String, ReplayRouteError> {
    let message = Message::new(replayed.payload.to_bytes().into_owned());
    Ok(key_of(&message, &key.key)?)
}

/// A replayed message and the side it goes to.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// Old or new.
    pub side: Side,
    /// The payload with its headers.
    pub message: Message,
}

/// Route `replayed`, whose aggregate key is `aggregate` ([`replay_key`]), under `document`,
/// with its dedup key built as `dedup` says, stamped as published at `at_ms`.
///
/// # Errors
/// [`ReplayRouteError::DedupKey`] when its dedup key cannot be built; [`ReplayRouteError::Stamp`]
/// when the destination broker's name cannot be written in a stamp.
pub fn route_replay(
    replayed: &ReplayMessage<'_>,
    aggregate: &str,
    dedup: &DedupKey,
    document: &RoutingDocument,
    at_ms: i64,
) -> Result<Routed, ReplayRouteError> {
    let mut message = Message::new(replayed.payload.to_bytes().into_owned());
    let dedup_key = match dedup {
        DedupKey::Template(template) => Some(template.build(&message.payload)?),
        DedupKey::Off => None,
    };
    let route = document.route(aggregate);
    let broker = match route.target {
        Side::Old => &document.brokers.old,
        Side::New => &document.brokers.new,
    };
    let stamp = RouteStamp::new(&route, broker.clone(), REPLAY_PRODUCER, at_ms)?.replayed();
    for (name, value) in replayed.headers {
        message = message.with_header(name, value);
    }
    message = message.with_header(HEADER_KEY, aggregate);
    if let Some(dedup_key) = dedup_key {
        message = message.with_header(HEADER_DEDUP_KEY, dedup_key.as_str());
    }
    for (name, value) in stamp.headers() {
        message = message.with_header(name, value);
    }
    Ok(Routed {
        side: route.target,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dlq::envelope::{DeadLetter, Payload};
    use crate::stamp::RouteLabel;

    fn document(migrated: u32) -> RoutingDocument {
        crate::routing::sample_document(7, migrated)
    }

    fn dead(payload: Payload) -> DeadLetter {
        crate::dlq::envelope::sample_dead_letter(payload)
    }

    fn by_field(field: &str) -> KeySource {
        KeySource::choose(Some(field), None).expect("a field")
    }

    fn template(text: &str) -> DedupKey {
        DedupKey::choose(Some(text), false).expect("a template")
    }

    /// [`replay_key`] then [`route_replay`].
    fn route(
        replayed: &ReplayMessage<'_>,
        key: &KeySource,
        dedup: &DedupKey,
        document: &RoutingDocument,
        at_ms: i64,
    ) -> Result<Routed, ReplayRouteError> {
        let aggregate = replay_key(replayed, key)?;
        route_replay(replayed, &aggregate, dedup, document, at_ms)
    }

    #[test]
    fn a_message_goes_where_its_key_routes_with_origin_key_and_stamp() {
        // order-0 is slice 8 of 128 (the migration article's vectors).
        let entry = dead(Payload::Bytes(br#"{"orderId":"order-0","n":1}"#.to_vec()));
        let replayed = ReplayMessage::of(&entry);
        let key = by_field("orderId");
        let off = DedupKey::Off;
        let old = route(&replayed, &key, &off, &document(8), 42).expect("routed");
        assert_eq!(old.side, Side::Old);
        let new = route(&replayed, &key, &off, &document(9), 42).expect("routed");
        assert_eq!(new.side, Side::New);
        let m = &new.message;
        assert_eq!(m.payload, br#"{"orderId":"order-0","n":1}"#.to_vec());
        assert_eq!(m.header("x-replay-of"), Some("2026-11-29T10:05:00.000Z"));
        assert_eq!(m.header("x-replay-reason"), Some("dependency_timeout"));
        assert_eq!(m.header(HEADER_KEY), Some("order-0"));
        let stamp = RouteStamp::from_headers(&m.headers).expect("stamped");
        assert_eq!(stamp.side, RouteLabel::Replay);
        assert_eq!(
            (stamp.broker.as_str(), stamp.slice, stamp.generation),
            ("nats", 8, 7)
        );
        assert_eq!(
            (stamp.producer.as_str(), stamp.at_ms),
            (REPLAY_PRODUCER, 42)
        );
        let stamp = RouteStamp::from_headers(&old.message.headers).expect("stamped");
        assert_eq!(stamp.broker, "rabbitmq");
    }

    #[test]
    fn a_message_whose_key_cannot_be_read_is_not_routed() {
        let key = by_field("orderId");
        let cases = [
            (Payload::Bytes(b"not json".to_vec()), "not JSON"),
            (Payload::Bytes(vec![0xff, 0x00]), "not JSON"),
            (Payload::Bytes(br#"{"other":1}"#.to_vec()), "no JSON field"),
            (Payload::Bytes(br#"{"orderId":""}"#.to_vec()), "empty"),
            (
                Payload::Bytes(br#"{"orderId":{"a":1}}"#.to_vec()),
                "not a string",
            ),
            (
                Payload::Bytes(br#"{"orderId":null}"#.to_vec()),
                "no JSON field",
            ),
        ];
        for (payload, why) in cases {
            let entry = dead(payload);
            let e = route(
                &ReplayMessage::of(&entry),
                &key,
                &template("t:{orderId}:{n}"),
                &document(64),
                1,
            )
            .expect_err("no key");
            assert!(matches!(e, ReplayRouteError::Key(_)), "{e:?}");
            let text = e.to_string();
            assert!(
                text.contains(why) && text.contains("not published"),
                "{text}"
            );
        }
        // A JSON payload kept as a value, and a pointer into it.
        let entry = dead(Payload::Json(serde_json::json!({"order": {"id": 17}})));
        let routed = route(
            &ReplayMessage::of(&entry),
            &by_field("/order/id"),
            &DedupKey::Off,
            &document(64),
            1,
        )
        .expect("routed");
        assert_eq!(routed.message.header(HEADER_KEY), Some("17"));
    }

    #[test]
    fn the_key_option_wins_over_the_plan_and_a_header_key_needs_it() {
        let plan_json = BridgeKey::Json("orderId".into());
        let plan_header = BridgeKey::Header("x-order-id".into());
        let chosen = KeySource::choose(Some("id"), Some(&plan_json)).expect("option");
        assert_eq!(
            (chosen.key, chosen.origin),
            (BridgeKey::Json("id".into()), KeyOrigin::Option)
        );
        let chosen = KeySource::choose(None, Some(&plan_json)).expect("plan");
        assert_eq!(
            (chosen.key, chosen.origin),
            (BridgeKey::Json("orderId".into()), KeyOrigin::Plan)
        );
        let chosen = KeySource::choose(Some("id"), Some(&plan_header)).expect("option");
        assert_eq!(chosen.origin, KeyOrigin::Option);
        assert_eq!(
            KeySource::choose(None, Some(&plan_header)),
            Err(ReplayRouteError::HeaderKey("x-order-id".into()))
        );
        assert_eq!(
            KeySource::choose(None, None),
            Err(ReplayRouteError::NoKeySource)
        );
        assert_eq!(
            KeySource::choose(Some(" "), Some(&plan_json)),
            Err(ReplayRouteError::EmptyField)
        );
        assert!(
            ReplayRouteError::NoKeySource
                .to_string()
                .contains("--key-field")
        );
    }

    /// Regression: replayed messages carried no `x-qm-dedup-key`, so a consumer that deduplicates
    /// by it refused them, or could not recognise the messages a replay run again sends twice.
    #[test]
    fn a_replayed_message_carries_the_dedup_key_its_template_builds() {
        let entry = dead(Payload::Bytes(
            br#"{"orderId":"tenant:7","version":3,"order":{"kind":"paid"}}"#.to_vec(),
        ));
        let replayed = ReplayMessage::of(&entry);
        let dedup = template("order.{/order/kind}:{orderId}:v{version}");
        let routed =
            route(&replayed, &by_field("orderId"), &dedup, &document(8), 1).expect("routed");
        let key = routed
            .message
            .header(HEADER_DEDUP_KEY)
            .expect("a dedup key");
        assert_eq!(key, r"order.paid:tenant\:7:v3");
        let parsed = BusinessKey::parse(key).expect("a business key");
        assert_eq!(
            parsed.parts(),
            ("order.paid".into(), "tenant:7".into(), "v3".into())
        );
        // The same message replayed again gets the same key.
        let again =
            route(&replayed, &by_field("orderId"), &dedup, &document(9), 2).expect("routed");
        assert_eq!(again.message.header(HEADER_DEDUP_KEY), Some(key));
        // Only when the operator says so does a message go without one.
        let off = route(
            &replayed,
            &by_field("orderId"),
            &DedupKey::Off,
            &document(8),
            1,
        )
        .expect("routed");
        assert_eq!(off.message.header(HEADER_DEDUP_KEY), None);
    }

    #[test]
    fn a_message_whose_dedup_key_cannot_be_built_is_not_routed() {
        let dedup = template("order.paid:{orderId}:{version}");
        let cases = [
            (r#"{"orderId":"o-1"}"#, "no JSON field \"version\""),
            (
                r#"{"orderId":"o-1","version":null}"#,
                "no JSON field \"version\"",
            ),
            (
                r#"{"orderId":"o-1","version":[1]}"#,
                "not a string or a number",
            ),
            (r#"{"orderId":"o-1","version":""}"#, "\"version\" is empty"),
        ];
        for (payload, why) in cases {
            let entry = dead(Payload::Bytes(payload.as_bytes().to_vec()));
            let e = route(
                &ReplayMessage::of(&entry),
                &by_field("orderId"),
                &dedup,
                &document(8),
                1,
            )
            .expect_err("no dedup key");
            assert!(matches!(e, ReplayRouteError::DedupKey(_)), "{e:?}");
            let text = e.to_string();
            assert!(
                text.contains(why)
                    && text.contains("not published")
                    && text.contains("--no-dedup-key"),
                "{text}"
            );
        }
        let long = format!(r#"{{"orderId":"o-1","version":"{}"}}"#, "v".repeat(2000));
        let entry = dead(Payload::Bytes(long.into_bytes()));
        let e = route(
            &ReplayMessage::of(&entry),
            &by_field("orderId"),
            &dedup,
            &document(8),
            1,
        )
        .expect_err("too long");
        assert!(e.to_string().contains("longer than"), "{e}");
    }

    #[test]
    fn a_dedup_key_is_required_unless_refused_and_its_template_is_checked() {
        assert_eq!(
            DedupKey::choose(None, false),
            Err(ReplayRouteError::NoDedupKey)
        );
        assert!(
            ReplayRouteError::NoDedupKey
                .to_string()
                .contains("--no-dedup-key")
        );
        assert_eq!(DedupKey::choose(None, true), Ok(DedupKey::Off));
        let refused = [
            ("order.paid:{orderId", "not closed"),
            ("order.paid:{order{Id}}:1", "not closed"),
            ("order.paid:o}:{n}", "closes nothing"),
            ("order.paid:{}:{n}", "names no field"),
            ("order.paid:{orderId}", "three parts"),
            ("a:{b}:c:d", "three parts"),
            ("order.paid::{n}", "a part is empty"),
            ("order.paid:o-1:1", "reads no field"),
            ("order.paid:{orderId}:1", "event part"),
            ("{type}:{orderId}:paid", "event part"),
        ];
        for (text, why) in refused {
            let e = DedupKey::choose(Some(text), false).expect_err(text);
            let shown = e.to_string();
            assert!(shown.contains(why) && shown.contains(text), "{shown}");
        }
        let t = DedupTemplate::parse("{{x}}:{id}:v{n}").expect("braces");
        assert_eq!(
            t.build(br#"{"id":"a","n":1}"#).expect("built").as_str(),
            "{x}:a:v1"
        );
        assert!(matches!(
            t.build(b"not json"),
            Err(DedupKeyError::NotJson(_))
        ));
    }
}
