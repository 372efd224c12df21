//! The route stamp's documented wire format: the header and JSON examples of `docs/routing.md` are
//! read back by the library and are the same stamp, and what the library writes is what the page
//! shows. The producer counter's exposition parses as Prometheus text.
#![cfg(feature = "routing")]

use queue_migrate::routing::{Route, Side};
use queue_migrate::stamp::{PublishedCounter, RouteLabel, RouteStamp};

fn docs() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/routing.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The fenced block that follows `<!-- marker -->`.
fn block_after(docs: &str, marker: &str) -> String {
    let at = docs
        .find(&format!("<!-- {marker} -->"))
        .unwrap_or_else(|| panic!("docs/routing.md has no <!-- {marker} -->"));
    let rest = &docs[at..];
    let open = rest.find("```").unwrap();
    let body_start = open + rest[open..].find('\n').unwrap() + 1;
    let close = body_start + rest[body_start..].find("```").unwrap();
    rest[body_start..close].to_string()
}

fn documented() -> RouteStamp {
    let route = Route::new(Side::New, 8, 7);
    RouteStamp::new(&route, "nats", "checkout", 1_764_460_800_123).unwrap()
}

#[test]
fn the_documented_headers_are_the_stamp_and_the_library_writes_them() {
    let text = block_after(&docs(), "stamp-headers");
    let pairs: Vec<(String, String)> = text
        .lines()
        .map(|l| {
            let (k, v) = l.split_once(": ").unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    assert_eq!(RouteStamp::from_headers(pairs).unwrap(), documented());
    let written: String = documented()
        .headers()
        .iter()
        .map(|(k, v)| format!("{k}: {v}\n"))
        .collect();
    assert_eq!(written, text);
}

#[test]
fn the_documented_payload_is_the_same_stamp() {
    let payload: serde_json::Value =
        serde_json::from_str(&block_after(&docs(), "stamp-json")).unwrap();
    assert_eq!(RouteStamp::from_payload(&payload).unwrap(), documented());
    // The slice in the example is the real slice of the example's aggregate key.
    assert_eq!(
        queue_migrate::slice::slice_of(payload["orderId"].as_str().unwrap(), 128),
        8
    );
    let mut rewritten = payload.clone();
    documented().insert_into(&mut rewritten).unwrap();
    assert_eq!(rewritten, payload);
}

#[test]
fn the_published_counter_is_valid_prometheus_text() {
    let c = PublishedCounter::new();
    c.touch("rabbitmq", RouteLabel::Old, "billing-monthly");
    for _ in 0..3 {
        c.record(&documented());
    }
    c.record(&documented().bridged());
    let text = c.render();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_string()))).unwrap();
    let value = |broker: &str, route: &str, producer: &str| {
        scrape
            .samples
            .iter()
            .find(|s| {
                s.metric == "queue_migrate_published_total"
                    && s.labels.get("broker") == Some(broker)
                    && s.labels.get("route") == Some(route)
                    && s.labels.get("producer") == Some(producer)
            })
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v) => v,
                ref other => panic!("{other:?}"),
            })
    };
    assert_eq!(value("nats", "new", "checkout"), Some(3.0));
    assert_eq!(value("nats", "bridge", "checkout"), Some(1.0));
    // The monthly producer is visible at 0 before it publishes.
    assert_eq!(value("rabbitmq", "old", "billing-monthly"), Some(0.0));
    assert_eq!(scrape.samples.len(), 3);
}

/// A dead letter republished by `migrate dlq replay` carries the route `replay` (on either
/// broker): readers in this library take it, in both forms, and count it apart from producers.
#[test]
fn a_replayed_message_reads_back_with_the_route_replay() {
    let mut headers: Vec<(String, String)> = documented()
        .headers()
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    for (k, v) in &mut headers {
        if k == "x-qm-route" {
            *v = "replay".into();
        }
    }
    let read = RouteStamp::from_headers(headers).unwrap();
    assert_eq!(read.side.to_string(), "replay");
    assert_eq!((read.broker.as_str(), read.slice), ("nats", 8));
    let mut json = documented().to_json();
    json["route"] = "replay".into();
    let read_json = RouteStamp::from_json(&json).unwrap();
    assert_eq!(read_json, read);
    assert_eq!(RouteLabel::parse("replay"), Some(read.side));
    let c = PublishedCounter::new();
    c.record(&read);
    assert!(
        c.render().contains(
            r#"queue_migrate_published_total{broker="nats",route="replay",producer="checkout"} 1"#
        ),
        "{}",
        c.render()
    );
}
