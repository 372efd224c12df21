//! Where a replayed dead letter goes on the brokers, and what it carries (pure: the routing
//! document and the publish instant are arguments).
//!
//! A dead letter goes to the side its aggregate key's slice routes to under the migration's
//! current routing document, exactly as a producer routes ([`RoutingDocument::route`]), so that a
//! replay never puts a key's messages on both sides at once. The seed-001 envelope keeps no key
//! and no headers: the key is read from the payload, by `--key-field NAME` when given, else by
//! the plan's `bridge.key` when that is a JSON field ([`KeySource::choose`]).
//!
//! The message is the original payload, byte for byte, with the origin headers (`x-replay-of`,
//! `x-replay-reason`), the key ([`HEADER_KEY`]) and the route stamp with the route `replay`
//! ([`RouteStamp::replayed`]), producer [`REPLAY_PRODUCER`].

use crate::bridge::key::{KeyError, key_of};
use crate::brokers::{HEADER_KEY, Message};
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

/// A replayed message and the side it goes to.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// Old or new.
    pub side: Side,
    /// The payload with its headers.
    pub message: Message,
}

/// Route `replayed` by its key under `document`, stamped as published at `at_ms`.
///
/// # Errors
/// [`ReplayRouteError::Key`] when its key cannot be read; [`ReplayRouteError::Stamp`] when the
/// destination broker's name cannot be written in a stamp.
pub fn route_replay(
    replayed: &ReplayMessage<'_>,
    key: &KeySource,
    document: &RoutingDocument,
    at_ms: u64,
) -> Result<Routed, ReplayRouteError> {
    let mut message = Message::new(replayed.payload.to_bytes().into_owned());
    let aggregate = key_of(&message, &key.key)?;
    let route = document.route(&aggregate);
    let broker = match route.target {
        Side::Old => &document.brokers.old,
        Side::New => &document.brokers.new,
    };
    let stamp = RouteStamp::new(&route, broker.clone(), REPLAY_PRODUCER, at_ms)?.replayed();
    for (name, value) in replayed.headers {
        message = message.with_header(name, value);
    }
    message = message.with_header(HEADER_KEY, aggregate);
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
    use crate::routing::BrokerNames;
    use crate::stamp::RouteLabel;

    fn document(migrated: u32) -> RoutingDocument {
        RoutingDocument {
            migration: "orders".into(),
            generation: 7,
            state: "slices".into(),
            step: Some(0),
            paused: false,
            slices_total: 128,
            slices_migrated: migrated,
            consume: vec![Side::Old, Side::New],
            brokers: BrokerNames {
                old: "rabbitmq".into(),
                new: "nats".into(),
            },
            updated_at: "2026-11-30T00:00:00Z".into(),
        }
    }

    fn dead(payload: Payload) -> DeadLetter {
        DeadLetter {
            payload,
            error_class: "dependency_timeout".into(),
            error_message: "t".into(),
            consumer_version: "1".into(),
            trace_id: None,
            attempts: 3,
            first_attempt_at: "2026-11-29T10:00:00.000Z".into(),
            dead_lettered_at: "2026-11-29T10:05:00.000Z".into(),
        }
    }

    fn by_field(field: &str) -> KeySource {
        KeySource::choose(Some(field), None).expect("a field")
    }

    #[test]
    fn a_message_goes_where_its_key_routes_with_origin_key_and_stamp() {
        // order-0 is slice 8 of 128 (seed 000 vectors).
        let entry = dead(Payload::Bytes(br#"{"orderId":"order-0","n":1}"#.to_vec()));
        let replayed = ReplayMessage::of(&entry);
        let key = by_field("orderId");
        let old = route_replay(&replayed, &key, &document(8), 42).expect("routed");
        assert_eq!(old.side, Side::Old);
        let new = route_replay(&replayed, &key, &document(9), 42).expect("routed");
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
            let e = route_replay(&ReplayMessage::of(&entry), &key, &document(64), 1)
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
        let routed = route_replay(
            &ReplayMessage::of(&entry),
            &by_field("/order/id"),
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
}
