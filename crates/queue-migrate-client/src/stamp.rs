//! The route stamp: where a published message went and under which routing it was decided, written
//! on every message so that its path can be reconstructed later (`docs/design.md`, "The slice
//! function"), and the
//! producer-side `published` counter that lets a gate count the producers still on the old broker.
//!
//! A stamp travels in one of two forms, with the same six fields (the full wire format, for
//! producers in other languages, is in `docs/routing.md`):
//!
//! | header            | JSON (`"route": {..}`) | value                                             |
//! |-------------------|------------------------|---------------------------------------------------|
//! | `x-qm-broker`     | `broker`               | the broker's name, as in the routing document     |
//! | `x-qm-route`      | `route`                | `old`, `new`, `bridge` or `replay`                |
//! | `x-qm-slice`      | `slice`                | the key's slice, decimal `u32`                    |
//! | `x-qm-generation` | `generation`           | the routing document's generation, decimal `u64`  |
//! | `x-qm-producer`   | `producer`             | the producer's identity (service name)            |
//! | `x-qm-at`         | `at`                   | publish time, ms since the Unix epoch, `0..=2^63-1` |
//!
//! # Guarantees
//! - What [`RouteStamp::headers`] / [`RouteStamp::to_json`] write, [`RouteStamp::from_headers`] /
//!   [`RouteStamp::from_json`] read back unchanged; a malformed stamp is an error that names the
//!   field and says what was expected, never a default.
//! - Header names are matched case-insensitively (brokers and proxies change case); unknown `x-qm-*`
//!   headers and unknown JSON fields are ignored, so that a later version can add fields.
//! - [`PublishedCounter::record`] takes no lock for writing and allocates nothing once a
//!   (broker, producer) pair has been seen.

// Part of the library consumers depend on: every public item is documented.
#![warn(missing_docs)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use serde_json::{Map, Value};

use crate::metrics_text::{self, Kind};
use crate::routing::{Route, Side};
use crate::time::Millis;

/// Header carrying [`RouteStamp::broker`].
pub const HEADER_BROKER: &str = "x-qm-broker";
/// Header carrying [`RouteStamp::side`] (`old`, `new`, `bridge`, `replay`).
pub const HEADER_ROUTE: &str = "x-qm-route";
/// Header carrying [`RouteStamp::slice`].
pub const HEADER_SLICE: &str = "x-qm-slice";
/// Header carrying [`RouteStamp::generation`].
pub const HEADER_GENERATION: &str = "x-qm-generation";
/// Header carrying [`RouteStamp::producer`].
pub const HEADER_PRODUCER: &str = "x-qm-producer";
/// Header carrying [`RouteStamp::at_ms`].
pub const HEADER_AT: &str = "x-qm-at";
/// The payload field holding the JSON form of the stamp.
pub const PAYLOAD_FIELD: &str = "route";
/// The longest broker name or producer identity accepted (bytes).
pub const MAX_NAME_LEN: usize = 128;
/// The default name of the producer counter.
pub const PUBLISHED_METRIC: &str = "queue_migrate_published_total";

/// Errors of reading or building a route stamp or a producer counter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StampError {
    /// A field of the stamp is absent (`field` is the header name or `route.<name>`).
    #[error("route stamp: {field} is missing")]
    Missing {
        /// The header name or JSON path.
        field: String,
    },
    /// A header appears more than once (case-insensitively), so the stamp is ambiguous.
    #[error("route stamp: header {field} appears more than once")]
    Duplicate {
        /// The header name.
        field: String,
    },
    /// A field is present but its value is not what the wire format allows.
    #[error("route stamp: {field} = {value:?} is invalid: expected {expected}")]
    Invalid {
        /// The header name or JSON path.
        field: String,
        /// The offending value, as received (cut at 64 characters).
        value: String,
        /// What the wire format allows there.
        expected: &'static str,
    },
    /// The payload (or its `route` field) is not a JSON object.
    #[error("route stamp: {0} is not a JSON object")]
    NotAnObject(&'static str),
    /// A metric name that Prometheus would reject.
    #[error("invalid metric name {0:?}: expected [a-zA-Z_:][a-zA-Z0-9_:]*")]
    InvalidMetricName(String),
}

/// The path a message took, as the consumer metrics label it: `old`, `new`, `bridge` (published
/// by the bridge on behalf of a producer that could not be changed), or `replay` (a dead letter
/// republished by `migrate dlq replay`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum RouteLabel {
    /// Published by a producer straight to the old broker.
    Old,
    /// Published by a producer straight to the new broker.
    New,
    /// Re-published by the bridge (from the old ingress queue to either side).
    Bridge,
    /// A dead letter's payload republished by `migrate dlq replay` (to either side, by its key's
    /// slice): not a producer's traffic, so the disconnect gate's count of producers still on
    /// the old broker does not see it.
    Replay,
}

impl RouteLabel {
    /// Every label, in rendering order.
    pub const ALL: [RouteLabel; 4] = [
        RouteLabel::Old,
        RouteLabel::New,
        RouteLabel::Bridge,
        RouteLabel::Replay,
    ];

    /// The wire and label value.
    pub fn as_str(self) -> &'static str {
        match self {
            RouteLabel::Old => "old",
            RouteLabel::New => "new",
            RouteLabel::Bridge => "bridge",
            RouteLabel::Replay => "replay",
        }
    }

    /// Parse the wire value (exact, lowercase).
    pub fn parse(s: &str) -> Option<RouteLabel> {
        match s {
            "old" => Some(RouteLabel::Old),
            "new" => Some(RouteLabel::New),
            "bridge" => Some(RouteLabel::Bridge),
            "replay" => Some(RouteLabel::Replay),
            _ => None,
        }
    }

    /// The position of this label in [`RouteLabel::ALL`].
    pub fn index(self) -> usize {
        match self {
            RouteLabel::Old => 0,
            RouteLabel::New => 1,
            RouteLabel::Bridge => 2,
            RouteLabel::Replay => 3,
        }
    }
}

impl From<Side> for RouteLabel {
    fn from(side: Side) -> RouteLabel {
        match side {
            Side::Old => RouteLabel::Old,
            Side::New => RouteLabel::New,
        }
    }
}

impl fmt::Display for RouteLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The route stamp of one published message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RouteStamp {
    /// The broker the message was published to (its name in the routing document).
    pub broker: String,
    /// Old, new, bridge or replay.
    pub side: RouteLabel,
    /// The slice of the message's aggregate key.
    pub slice: u32,
    /// The generation of the routing document that decided the route (0: none yet, safe default).
    pub generation: u64,
    /// Who published: a stable service name, the same on every instance of the service.
    pub producer: String,
    /// Publish time, milliseconds since the Unix epoch ([`Millis`], what [`crate::time::now_ms`]
    /// answers); never negative.
    pub at_ms: Millis,
}

impl RouteStamp {
    /// The stamp of a message routed by `route` and published to `broker` by `producer` at
    /// `at_ms` (a negative instant, a clock before 1970, is stamped as 0).
    ///
    /// ```
    /// use queue_migrate_client::routing::Route;
    /// use queue_migrate_client::stamp::RouteStamp;
    ///
    /// let route = Route::of("order-0", 128, 32, 7); // slice 8 < 32: new
    /// let stamp = RouteStamp::new(&route, "nats", "checkout", 1_764_460_800_123)?;
    /// assert_eq!(stamp.headers()[1], ("x-qm-route", "new".to_string()));
    /// assert_eq!(RouteStamp::from_headers(stamp.headers())?, stamp);
    /// # Ok::<(), queue_migrate_client::stamp::StampError>(())
    /// ```
    ///
    /// # Errors
    /// `broker` or `producer` is empty, longer than [`MAX_NAME_LEN`], or has a character outside
    /// `A-Z a-z 0-9 . _ - : @ / +`.
    pub fn new(
        route: &Route,
        broker: impl Into<String>,
        producer: impl Into<String>,
        at_ms: Millis,
    ) -> Result<RouteStamp, StampError> {
        let stamp = RouteStamp {
            broker: broker.into(),
            side: route.target.into(),
            slice: route.slice,
            generation: route.generation,
            producer: producer.into(),
            at_ms: at_ms.max(0),
        };
        check_name(HEADER_BROKER, &stamp.broker)?;
        check_name(HEADER_PRODUCER, &stamp.producer)?;
        Ok(stamp)
    }

    /// The same stamp, marked as published by the bridge.
    pub fn bridged(mut self) -> RouteStamp {
        self.side = RouteLabel::Bridge;
        self
    }

    /// The same stamp, marked as a dead letter republished by `migrate dlq replay`.
    pub fn replayed(mut self) -> RouteStamp {
        self.side = RouteLabel::Replay;
        self
    }

    /// The six headers, lowercase names, values in the wire format.
    pub fn headers(&self) -> [(&'static str, String); 6] {
        [
            (HEADER_BROKER, self.broker.clone()),
            (HEADER_ROUTE, self.side.as_str().to_string()),
            (HEADER_SLICE, self.slice.to_string()),
            (HEADER_GENERATION, self.generation.to_string()),
            (HEADER_PRODUCER, self.producer.clone()),
            (HEADER_AT, self.at_ms.to_string()),
        ]
    }

    /// Read a stamp from a message's headers (any iterable of name/value pairs; names are matched
    /// case-insensitively, other headers are ignored).
    ///
    /// # Errors
    /// A stamp header is missing, repeated, or not in the wire format.
    pub fn from_headers<I, K, V>(headers: I) -> Result<RouteStamp, StampError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<str>,
        V: AsRef<str>,
    {
        const NAMES: [&str; 6] = [
            HEADER_BROKER,
            HEADER_ROUTE,
            HEADER_SLICE,
            HEADER_GENERATION,
            HEADER_PRODUCER,
            HEADER_AT,
        ];
        let mut found: [Option<String>; 6] = Default::default();
        for (name, value) in headers {
            let name = name.as_ref();
            if let Some(i) = NAMES.iter().position(|n| n.eq_ignore_ascii_case(name)) {
                if found[i].is_some() {
                    return Err(StampError::Duplicate {
                        field: NAMES[i].to_string(),
                    });
                }
                found[i] = Some(value.as_ref().to_string());
            }
        }
        let [broker, route, slice, generation, producer, at] = found;
        let take = |v: Option<String>, field: &str| {
            v.ok_or_else(|| StampError::Missing {
                field: field.to_string(),
            })
        };
        let broker = take(broker, HEADER_BROKER)?;
        check_name(HEADER_BROKER, &broker)?;
        let producer = take(producer, HEADER_PRODUCER)?;
        check_name(HEADER_PRODUCER, &producer)?;
        let route = take(route, HEADER_ROUTE)?;
        let side = RouteLabel::parse(&route).ok_or_else(|| invalid(HEADER_ROUTE, &route, ROUTE))?;
        let slice = take(slice, HEADER_SLICE)?;
        let slice = parse_decimal(&slice)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| invalid(HEADER_SLICE, &slice, U32))?;
        let generation = take(generation, HEADER_GENERATION)?;
        let generation = parse_decimal(&generation)
            .ok_or_else(|| invalid(HEADER_GENERATION, &generation, U64))?;
        let at = take(at, HEADER_AT)?;
        let at_ms = parse_decimal(&at)
            .and_then(|n| Millis::try_from(n).ok())
            .ok_or_else(|| invalid(HEADER_AT, &at, MILLIS))?;
        Ok(RouteStamp {
            broker,
            side,
            slice,
            generation,
            producer,
            at_ms,
        })
    }

    /// The JSON form: `{"broker", "route", "slice", "generation", "producer", "at"}`.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("broker".into(), Value::from(self.broker.clone()));
        m.insert("route".into(), Value::from(self.side.as_str()));
        m.insert("slice".into(), Value::from(self.slice));
        m.insert("generation".into(), Value::from(self.generation));
        m.insert("producer".into(), Value::from(self.producer.clone()));
        m.insert("at".into(), Value::from(self.at_ms));
        Value::Object(m)
    }

    /// Read the JSON form (the value of a payload's `route` field).
    ///
    /// # Errors
    /// Not an object, or a field missing or not in the wire format.
    pub fn from_json(value: &Value) -> Result<RouteStamp, StampError> {
        let obj = value
            .as_object()
            .ok_or(StampError::NotAnObject("the route field"))?;
        let get = |name: &'static str| {
            obj.get(name).ok_or_else(|| StampError::Missing {
                field: format!("{PAYLOAD_FIELD}.{name}"),
            })
        };
        let text = |name: &'static str| -> Result<String, StampError> {
            let v = get(name)?;
            let s = v
                .as_str()
                .ok_or_else(|| json_invalid(name, v, "a string"))?;
            check_name(&format!("{PAYLOAD_FIELD}.{name}"), s)?;
            Ok(s.to_string())
        };
        let number = |name: &'static str, expected: &'static str| -> Result<u64, StampError> {
            let v = get(name)?;
            v.as_u64().ok_or_else(|| json_invalid(name, v, expected))
        };
        let broker = text("broker")?;
        let producer = text("producer")?;
        let route = get("route")?;
        let side = route
            .as_str()
            .and_then(RouteLabel::parse)
            .ok_or_else(|| json_invalid("route", route, ROUTE))?;
        let slice_value = get("slice")?;
        let slice = number("slice", U32)?;
        let slice = u32::try_from(slice).map_err(|_| json_invalid("slice", slice_value, U32))?;
        let generation = number("generation", U64)?;
        let at_value = get("at")?;
        let at_ms = number("at", MILLIS)?;
        let at_ms = Millis::try_from(at_ms).map_err(|_| json_invalid("at", at_value, MILLIS))?;
        Ok(RouteStamp {
            broker,
            side,
            slice,
            generation,
            producer,
            at_ms,
        })
    }

    /// Put the JSON form into a JSON object payload as its `route` field (replacing any).
    ///
    /// # Errors
    /// The payload is not a JSON object.
    pub fn insert_into(&self, payload: &mut Value) -> Result<(), StampError> {
        let obj = payload
            .as_object_mut()
            .ok_or(StampError::NotAnObject("the payload"))?;
        obj.insert(PAYLOAD_FIELD.to_string(), self.to_json());
        Ok(())
    }

    /// Read the stamp from a JSON object payload's `route` field.
    ///
    /// # Errors
    /// The payload is not an object, has no `route` field, or the field is malformed.
    pub fn from_payload(payload: &Value) -> Result<RouteStamp, StampError> {
        let obj = payload
            .as_object()
            .ok_or(StampError::NotAnObject("the payload"))?;
        let route = obj.get(PAYLOAD_FIELD).ok_or_else(|| StampError::Missing {
            field: PAYLOAD_FIELD.to_string(),
        })?;
        RouteStamp::from_json(route)
    }
}

const ROUTE: &str = "old, new, bridge or replay";
const U32: &str = "a decimal integer from 0 to 4294967295";
const U64: &str = "a decimal integer from 0 to 18446744073709551615";
const MILLIS: &str = "a decimal integer from 0 to 9223372036854775807";
const NAME: &str = "1 to 128 characters of A-Z a-z 0-9 . _ - : @ / +";

fn invalid(field: &str, value: &str, expected: &'static str) -> StampError {
    StampError::Invalid {
        field: field.to_string(),
        value: value.chars().take(64).collect(),
        expected,
    }
}

fn json_invalid(name: &str, value: &Value, expected: &'static str) -> StampError {
    invalid(
        &format!("{PAYLOAD_FIELD}.{name}"),
        &value.to_string(),
        expected,
    )
}

/// Digits only (no sign, no spaces), at most 20 of them, fitting a `u64`.
fn parse_decimal(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Whether `c` may appear in a broker name or producer identity.
fn name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b':' | b'@' | b'/' | b'+')
}

fn check_name(field: &str, s: &str) -> Result<(), StampError> {
    if s.is_empty() || s.len() > MAX_NAME_LEN || !s.bytes().all(name_char) {
        return Err(invalid(field, s, NAME));
    }
    Ok(())
}

/// Whether `name` is a valid Prometheus metric name.
pub(crate) fn valid_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' || b == b':' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}

/// The counts of one (broker, producer) pair, one slot per [`RouteLabel`].
#[derive(Debug, Default)]
struct Slots {
    counts: [AtomicU64; RouteLabel::ALL.len()],
    seen: [AtomicBool; RouteLabel::ALL.len()],
}

/// Messages published, by broker, route and producer, rendered as a Prometheus counter:
///
/// ```text
/// queue_migrate_published_total{broker="rabbitmq",route="old",producer="checkout"} 1042
/// ```
///
/// The disconnect gate counts distinct producers, not volume, so that the producer that publishes
/// once a month still holds the old broker:
/// `count(sum by (producer) (increase(queue_migrate_published_total{route="old"}[30d])) > 0)`.
/// A short-lived producer (a monthly batch job) should call [`PublishedCounter::touch`] at start
/// so that its first publish shows as an increase from 0, and be scraped (or push) before it exits.
#[derive(Debug)]
pub struct PublishedCounter {
    name: String,
    series: RwLock<BTreeMap<String, BTreeMap<String, Slots>>>,
}

impl Default for PublishedCounter {
    fn default() -> Self {
        PublishedCounter {
            name: PUBLISHED_METRIC.to_string(),
            series: RwLock::new(BTreeMap::new()),
        }
    }
}

impl PublishedCounter {
    /// A counter named [`PUBLISHED_METRIC`].
    pub fn new() -> PublishedCounter {
        PublishedCounter::default()
    }

    /// A counter with another metric name (for a plan whose gates use their own name).
    ///
    /// # Errors
    /// The name is not a valid Prometheus metric name.
    pub fn with_name(name: &str) -> Result<PublishedCounter, StampError> {
        if !valid_metric_name(name) {
            return Err(StampError::InvalidMetricName(name.to_string()));
        }
        Ok(PublishedCounter {
            name: name.to_string(),
            ..PublishedCounter::default()
        })
    }

    /// Count one message published with `stamp`.
    pub fn record(&self, stamp: &RouteStamp) {
        self.add(&stamp.broker, stamp.side, &stamp.producer, 1);
    }

    /// Make the series exist at 0 (at producer start), so that a first publish is an increase.
    pub fn touch(&self, broker: &str, route: RouteLabel, producer: &str) {
        self.add(broker, route, producer, 0);
    }

    /// Add `n` messages.
    pub fn add(&self, broker: &str, route: RouteLabel, producer: &str, n: u64) {
        let i = route.index();
        {
            let map = self.series.read().unwrap_or_else(PoisonError::into_inner);
            if let Some(slots) = map.get(broker).and_then(|p| p.get(producer)) {
                slots.counts[i].fetch_add(n, Ordering::Relaxed);
                slots.seen[i].store(true, Ordering::Relaxed);
                return;
            }
        }
        let mut map = self.series.write().unwrap_or_else(PoisonError::into_inner);
        let slots = map
            .entry(broker.to_string())
            .or_default()
            .entry(producer.to_string())
            .or_default();
        slots.counts[i].fetch_add(n, Ordering::Relaxed);
        slots.seen[i].store(true, Ordering::Relaxed);
    }

    /// The current count of one series (0 if never seen).
    pub fn get(&self, broker: &str, route: RouteLabel, producer: &str) -> u64 {
        let map = self.series.read().unwrap_or_else(PoisonError::into_inner);
        map.get(broker)
            .and_then(|p| p.get(producer))
            .map_or(0, |s| s.counts[route.index()].load(Ordering::Relaxed))
    }

    /// The Prometheus text exposition (format 0.0.4) of every series seen, sorted.
    pub fn render(&self) -> String {
        let mut out = String::new();
        metrics_text::family(
            &mut out,
            &self.name,
            Kind::Counter,
            "Messages published, by the broker they went to, the route stamp's route (old, new, bridge, replay) and the producer.",
        );
        let map = self.series.read().unwrap_or_else(PoisonError::into_inner);
        for (broker, producers) in map.iter() {
            for (producer, slots) in producers {
                for route in RouteLabel::ALL {
                    let i = route.index();
                    if !slots.seen[i].load(Ordering::Relaxed) {
                        continue;
                    }
                    let labels = [
                        ("broker", broker.as_str()),
                        ("route", route.as_str()),
                        ("producer", producer.as_str()),
                    ];
                    let count = slots.counts[i].load(Ordering::Relaxed);
                    metrics_text::sample(&mut out, &self.name, &labels, count);
                }
            }
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// The stamp written into a caller's reusable header buffer: the producer's hot path, with no
// allocation once the buffer has held a broker name as long as the current one. `set` checks a
// broker name only when it differs from the one held; the producer's name is checked once, by
// `StampHeaders::new`. `pairs` answers what `RouteStamp::headers` answers for the same stamp.

/// A decimal number written into a fixed array (u64::MAX has 20 digits).
#[derive(Debug, Clone, Copy)]
struct Decimal {
    digits: [u8; 20],
    start: u8,
}

impl Decimal {
    const ZERO: Decimal = Decimal {
        digits: [b'0'; 20],
        start: 19,
    };

    #[inline]
    fn set(&mut self, n: u64) {
        // Two digits per division (itoa's table), instead of one: a 13-digit instant in 7 steps.
        let mut buffer = itoa::Buffer::new();
        let text = buffer.format(n).as_bytes();
        let start = self.digits.len() - text.len();
        self.digits[start..].copy_from_slice(text);
        // At most 20 digits: the start fits a byte.
        self.start = start as u8;
    }

    fn as_str(&self) -> &str {
        // Only ASCII digits are ever written: the conversion cannot fail.
        std::str::from_utf8(&self.digits[usize::from(self.start)..]).unwrap_or("0")
    }
}

/// Which broker name a [`StampHeaders`] stamp carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Named {
    /// The held names' old broker ([`crate::router::Router::stamp_into`]).
    Old,
    /// The held names' new broker.
    New,
    /// The name [`StampHeaders::set`] was given.
    Given,
}

/// A reusable buffer of one producer's route stamp headers: fill it per message with
/// [`StampHeaders::set`] (or [`crate::router::Router::stamp_into`]), then hand
/// [`StampHeaders::pairs`] to the broker client.
///
/// ```
/// use queue_migrate_client::routing::Route;
/// use queue_migrate_client::stamp::StampHeaders;
///
/// let mut headers = StampHeaders::new("checkout")?;
/// let route = Route::of("order-0", 128, 32, 7); // slice 8 < 32: new
/// headers.set(&route, "nats", 1_764_460_800_123)?;
/// assert_eq!(headers.pairs()[2], ("x-qm-slice", "8"));
/// assert_eq!(headers.get("x-qm-broker"), Some("nats"));
/// # Ok::<(), queue_migrate_client::stamp::StampError>(())
/// ```
#[derive(Debug, Clone)]
pub struct StampHeaders {
    /// The router's names `old` and `new` are, by the id the router gave them (0: none held):
    /// while it is the router's current one, a stamp reads no name and compares none.
    names: u64,
    old: String,
    new: String,
    /// The broker of a stamp written by [`StampHeaders::set`].
    given: String,
    named: Named,
    route: RouteLabel,
    slice: Decimal,
    generation: Decimal,
    producer: String,
    at: Decimal,
}

impl StampHeaders {
    /// A buffer for the stamps of `producer` (its broker empty until the first
    /// [`StampHeaders::set`]).
    ///
    /// # Errors
    /// [`StampError::Invalid`] when `producer` is outside the wire format (1 to 128 characters
    /// of `A-Z a-z 0-9 . _ - : @ / +`).
    pub fn new(producer: impl Into<String>) -> Result<StampHeaders, StampError> {
        let producer = producer.into();
        check_name(HEADER_PRODUCER, &producer)?;
        Ok(StampHeaders {
            // Room for most broker names: the first stamp does not allocate either.
            names: 0,
            old: String::with_capacity(32),
            new: String::with_capacity(32),
            given: String::with_capacity(32),
            named: Named::Given,
            route: RouteLabel::Old,
            slice: Decimal::ZERO,
            generation: Decimal::ZERO,
            producer,
            at: Decimal::ZERO,
        })
    }

    /// Write the stamp of a message routed by `route`, published to `broker` at `at_ms` (a
    /// negative instant is stamped as 0).
    ///
    /// # Errors
    /// [`StampError::Invalid`] when `broker` is outside the wire format; the buffer keeps the
    /// previous stamp then.
    pub fn set(&mut self, route: &Route, broker: &str, at_ms: Millis) -> Result<(), StampError> {
        if self.given != broker {
            check_name(HEADER_BROKER, broker)?;
            self.given.clear();
            self.given.push_str(broker);
        }
        self.named = Named::Given;
        self.numbers(route, at_ms);
        Ok(())
    }

    /// Whether the broker names the router calls `id` are held (never for 0: none known).
    #[inline]
    pub(crate) fn holds_names(&self, id: u64) -> bool {
        id != 0 && self.names == id
    }

    /// Hold `old` and `new`, the names the router calls `id`, for a stamp of `side`.
    ///
    /// # Errors
    /// [`StampError::Invalid`] when `side`'s name is outside the wire format: nothing changes
    /// then. The other side's name outside it is not an error here: the names are then not held
    /// as `id`, and a stamp of that side checks them again.
    pub(crate) fn hold_names(
        &mut self,
        id: u64,
        old: &str,
        new: &str,
        side: Side,
    ) -> Result<(), StampError> {
        let (this, other) = match side {
            Side::Old => (old, new),
            Side::New => (new, old),
        };
        check_name(HEADER_BROKER, this)?;
        let both = check_name(HEADER_BROKER, other).is_ok();
        for (held, name) in [(&mut self.old, old), (&mut self.new, new)] {
            if held != name {
                held.clear();
                held.push_str(name);
            }
        }
        self.names = if both { id } else { 0 };
        Ok(())
    }

    /// Write the stamp of a message routed by `route` to the held broker of its side (after
    /// [`StampHeaders::hold_names`]), published at `at_ms`.
    #[inline]
    pub(crate) fn set_held(&mut self, route: &Route, at_ms: Millis) {
        self.named = match route.target {
            Side::Old => Named::Old,
            Side::New => Named::New,
        };
        self.numbers(route, at_ms);
    }

    #[inline]
    fn numbers(&mut self, route: &Route, at_ms: Millis) {
        self.route = route.target.into();
        self.slice.set(u64::from(route.slice));
        self.generation.set(route.generation);
        self.at.set(at_ms.max(0).unsigned_abs());
    }

    /// Mark the stamp as published by the bridge (`x-qm-route: bridge`).
    pub fn bridged(&mut self) {
        self.route = RouteLabel::Bridge;
    }

    /// The six headers: lowercase names, values in the wire format, in [`RouteStamp::headers`]'s
    /// order.
    pub fn pairs(&self) -> [(&'static str, &str); 6] {
        [
            (HEADER_BROKER, self.broker()),
            (HEADER_ROUTE, self.route.as_str()),
            (HEADER_SLICE, self.slice.as_str()),
            (HEADER_GENERATION, self.generation.as_str()),
            (HEADER_PRODUCER, self.producer.as_str()),
            (HEADER_AT, self.at.as_str()),
        ]
    }

    /// The value of the header `name` (lowercase, as written), if it is one of the six.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs()
            .into_iter()
            .find_map(|(n, v)| (n == name).then_some(v))
    }

    /// The broker the last stamp names.
    pub fn broker(&self) -> &str {
        match self.named {
            Named::Old => &self.old,
            Named::New => &self.new,
            Named::Given => &self.given,
        }
    }

    /// The producer these stamps name.
    pub fn producer(&self) -> &str {
        &self.producer
    }

    /// The stamp held, as an owned [`RouteStamp`] (this allocates: for tests and logs).
    ///
    /// # Errors
    /// As [`RouteStamp::from_headers`]: before the first [`StampHeaders::set`] the broker is
    /// missing.
    pub fn to_stamp(&self) -> Result<RouteStamp, StampError> {
        RouteStamp::from_headers(self.pairs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics_text::escape_label;
    use crate::routing::Side;

    fn stamp() -> RouteStamp {
        let route = Route {
            target: Side::New,
            slice: 8,
            generation: 7,
        };
        RouteStamp::new(&route, "nats", "checkout@v2", 1_764_460_800_123).unwrap()
    }

    #[test]
    fn headers_round_trip() {
        let s = stamp();
        let h = s.headers();
        assert_eq!(h[1], (HEADER_ROUTE, "new".to_string()));
        assert_eq!(RouteStamp::from_headers(h.clone()).unwrap(), s);
        // case-insensitive names, other headers ignored, order free
        let mut mixed: Vec<(String, String)> = h
            .iter()
            .rev()
            .map(|(k, v)| (k.to_ascii_uppercase(), v.clone()))
            .collect();
        mixed.push(("content-type".into(), "application/json".into()));
        mixed.push(("x-qm-future-field".into(), "whatever".into()));
        assert_eq!(RouteStamp::from_headers(mixed).unwrap(), s);
    }

    #[test]
    fn json_round_trip_and_payload_field() {
        let s = stamp().bridged();
        let json = s.to_json();
        assert_eq!(json["route"], "bridge");
        assert_eq!(json["at"], 1_764_460_800_123u64);
        assert_eq!(RouteStamp::from_json(&json).unwrap(), s);
        let mut payload = serde_json::json!({"orderId": "4711"});
        s.insert_into(&mut payload).unwrap();
        assert_eq!(payload["orderId"], "4711");
        assert_eq!(RouteStamp::from_payload(&payload).unwrap(), s);
        assert_eq!(
            stamp().insert_into(&mut serde_json::json!([1])),
            Err(StampError::NotAnObject("the payload"))
        );
    }

    #[test]
    fn header_errors_name_the_field() {
        let h = stamp().headers();
        let without: Vec<_> = h
            .iter()
            .filter(|(k, _)| *k != HEADER_SLICE)
            .cloned()
            .collect();
        assert_eq!(
            RouteStamp::from_headers(without).unwrap_err().to_string(),
            "route stamp: x-qm-slice is missing"
        );
        let mut dup = h.to_vec();
        dup.push(("X-QM-AT", "1".into()));
        assert_eq!(
            RouteStamp::from_headers(dup),
            Err(StampError::Duplicate {
                field: "x-qm-at".into()
            })
        );
        for (field, bad) in [
            (HEADER_SLICE, "4294967296"),
            (HEADER_SLICE, "-1"),
            (HEADER_SLICE, "+8"),
            (HEADER_GENERATION, " 7"),
            (HEADER_AT, "1e3"),
            (HEADER_AT, "9223372036854775808"),
            (HEADER_ROUTE, "OLD"),
            (HEADER_BROKER, ""),
            (HEADER_PRODUCER, "has space"),
        ] {
            let changed: Vec<(String, String)> = h
                .iter()
                .map(|(k, v)| {
                    let v = if *k == field {
                        bad.to_string()
                    } else {
                        v.clone()
                    };
                    (k.to_string(), v)
                })
                .collect();
            match RouteStamp::from_headers(changed) {
                Err(StampError::Invalid { field: f, .. }) => assert_eq!(f, field, "{bad}"),
                other => panic!("{field}={bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn json_errors_name_the_field() {
        let mut json = stamp().to_json();
        json["slice"] = Value::from("8");
        let err = RouteStamp::from_json(&json).unwrap_err();
        assert_eq!(
            err.to_string(),
            "route stamp: route.slice = \"\\\"8\\\"\" is invalid: expected a decimal integer from 0 to 4294967295"
        );
        json["slice"] = Value::from(5_000_000_000u64);
        assert!(matches!(
            RouteStamp::from_json(&json),
            Err(StampError::Invalid { ref field, .. }) if field == "route.slice"
        ));
        let mut json = stamp().to_json();
        json.as_object_mut().unwrap().remove("producer");
        assert_eq!(
            RouteStamp::from_json(&json),
            Err(StampError::Missing {
                field: "route.producer".into()
            })
        );
        assert_eq!(
            RouteStamp::from_payload(&serde_json::json!({})),
            Err(StampError::Missing {
                field: "route".into()
            })
        );
    }

    #[test]
    fn new_rejects_bad_names() {
        let route = Route {
            target: Side::Old,
            slice: 0,
            generation: 0,
        };
        assert!(RouteStamp::new(&route, "", "p", 0).is_err());
        assert!(RouteStamp::new(&route, "b", "x".repeat(129), 0).is_err());
        assert!(RouteStamp::new(&route, "b", "x".repeat(128), 0).is_ok());
        assert!(RouteStamp::new(&route, "rabbit\"mq", "p", 0).is_err());
        assert_eq!(RouteStamp::new(&route, "b", "p", -5).unwrap().at_ms, 0);
    }

    #[test]
    fn published_counter_renders_sorted_series() {
        let c = PublishedCounter::new();
        c.touch("rabbitmq", RouteLabel::Old, "billing");
        let s = stamp().bridged();
        c.record(&s);
        c.record(&s);
        c.add("rabbitmq", RouteLabel::Old, "checkout@v2", 3);
        assert_eq!(c.get("nats", RouteLabel::Bridge, "checkout@v2"), 2);
        assert_eq!(c.get("nats", RouteLabel::Old, "checkout@v2"), 0);
        let text = c.render();
        let series: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            series,
            [
                r#"queue_migrate_published_total{broker="nats",route="bridge",producer="checkout@v2"} 2"#,
                r#"queue_migrate_published_total{broker="rabbitmq",route="old",producer="billing"} 0"#,
                r#"queue_migrate_published_total{broker="rabbitmq",route="old",producer="checkout@v2"} 3"#,
            ]
        );
        assert!(text.contains("# TYPE queue_migrate_published_total counter\n"));
    }

    #[test]
    fn metric_names_are_checked() {
        assert!(PublishedCounter::with_name("producer_messages_total").is_ok());
        assert!(PublishedCounter::with_name("1bad").is_err());
        assert!(PublishedCounter::with_name("bad-name").is_err());
        assert!(PublishedCounter::with_name("").is_err());
    }

    #[test]
    fn label_values_are_escaped() {
        let mut out = String::new();
        escape_label(&mut out, "a\\b\"c\nd");
        assert_eq!(out, "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn the_buffer_writes_what_route_stamp_headers_writes() {
        let mut buffer = StampHeaders::new("checkout").unwrap();
        let cases = [
            (Route::of("order-0", 128, 32, 7), "nats", 1_764_460_800_123),
            (Route::of("order-1", 1, 0, 0), "rabbitmq", 0),
            (
                Route::of("x", u32::MAX, u32::MAX, u64::MAX),
                "redis",
                i64::MAX,
            ),
            (Route::of("order-2", 128, 0, 10), "rabbitmq", -5),
        ];
        for (route, broker, at) in cases {
            buffer.set(&route, broker, at).unwrap();
            let owned = RouteStamp::new(&route, broker, "checkout", at).unwrap();
            let want = owned.headers();
            let got = buffer.pairs();
            for ((wn, wv), (gn, gv)) in want.iter().zip(got.iter()) {
                assert_eq!((*wn, wv.as_str()), (*gn, *gv));
            }
            assert_eq!(buffer.to_stamp().unwrap(), owned);
        }
    }

    #[test]
    fn a_broker_or_producer_outside_the_wire_format_is_refused() {
        assert!(StampHeaders::new("has space").is_err());
        let mut buffer = StampHeaders::new("checkout").unwrap();
        let route = Route::of("order-0", 128, 0, 3);
        buffer.set(&route, "nats", 1).unwrap();
        let err = buffer.set(&route, "bad broker", 2).unwrap_err();
        assert!(err.to_string().contains("x-qm-broker"), "{err}");
        assert_eq!(buffer.get("x-qm-broker"), Some("nats"));
        assert_eq!(buffer.get("x-qm-at"), Some("1"));
        buffer.bridged();
        assert_eq!(buffer.get("x-qm-route"), Some("bridge"));
        assert_eq!(buffer.get("x-qm-nothing"), None);
    }
}
