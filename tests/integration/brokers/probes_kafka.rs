//! Synthetic probes on a Kafka new side, on librdkafka's mock cluster
//! (`QM_TEST_KAFKA_BOOTSTRAP`): `migrate run` in `synthetic` publishes its probes to the plan's
//! topic, each record keyed by the probe's slice key with the mark, the dedup key and the route
//! stamp in headers, and a consumer group of the topic reads them as a consumer does.
#![cfg(feature = "kafka")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use queue_migrate::brokers::{Adapter, HEADER_DEDUP_KEY, HEADER_KEY, Kind, SubscribeOptions};
use queue_migrate::probe::{Probe, ProbeKind};
use queue_migrate::stamp::{RouteLabel, RouteStamp};

use crate::brokers::brokers_real::kafka::{bootstrap, create_topic, records};
use crate::common::dlq_bench::{NEW_BROKER_LINE, preflight_waived};
use crate::common::{Bench, DaemonChild};

#[test]
#[ignore = "needs QM_TEST_KAFKA_BOOTSTRAP (scripts/services.sh start kafka)"]
fn the_daemons_probes_reach_a_kafka_topic_keyed_and_stamped() {
    let kafka = format!("kafka://{}", bootstrap());
    let topic = format!(
        "qm-probes-{}-{}",
        std::process::id(),
        queue_migrate::time::now_ms()
    );
    create_topic(&topic, 3);
    let plan = include_str!("../../../plans/local.yaml")
        .replace(
            NEW_BROKER_LINE,
            &format!("new: {{ name: kafka, kind: kafka, url: \"{kafka}\", queue: {topic} }}"),
        )
        .replace(
            "  synthetic:\n    min_duration: 0s\n",
            "  synthetic:\n    min_duration: 0s\n    probes: { rate: 50, count: 6, repeat: 3 }\n",
        );
    assert!(
        plan.contains(&topic) && plan.contains("probes:"),
        "plans/local.yaml changed"
    );
    let bench = Bench::with_plan(&preflight_waived(&plan));
    bench.indicators.all_green();
    bench.indicators.set("app_probe_ok", 0.0); // hold the migration in synthetic
    bench.init();
    let daemon = DaemonChild::spawn(bench.daemon_command("probes", &[]), Duration::from_secs(30))
        .expect("migrate run started");

    // Read as a consumer does: a group of the topic, each delivery acked.
    let got = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let adapter = Adapter::connect(Kind::Kafka, &kafka).await.unwrap();
            let options = SubscribeOptions {
                visibility_timeout: Duration::from_secs(6),
                ..SubscribeOptions::group("probe-consumers")
            };
            let mut s = adapter.subscribe(&topic, &options).await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut got = Vec::new();
            while got.len() < 9 && Instant::now() < deadline {
                let next = tokio::time::timeout(Duration::from_secs(1), s.next()).await;
                if let Ok(Some(d)) = next.map(Result::unwrap) {
                    got.push(d.message.clone());
                    d.ack().await.unwrap();
                }
            }
            got
        });
    let log = daemon.log.lock().unwrap().join("\n");
    daemon.kill9();
    assert_eq!(
        got.len(),
        9,
        "6 latency probes and 3 copies of the idempotency one\n{log}"
    );

    let mut by_kind: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for m in &got {
        let headers = || m.headers.iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let probe = Probe::from_headers(headers()).expect("marked as a probe");
        let key = m.header(HEADER_KEY).expect("a slice key");
        let stamp = RouteStamp::from_headers(headers()).expect("a route stamp");
        assert_eq!(
            (stamp.side, stamp.broker.as_str(), stamp.producer.as_str()),
            (RouteLabel::New, "kafka", "migrate-probe")
        );
        assert_eq!(stamp.slice, queue_migrate::slice::slice_of(key, 8));
        let dedup = m.header(HEADER_DEDUP_KEY).expect("a dedup key").to_string();
        by_kind.entry(probe.kind.as_str()).or_default().push(dedup);
    }
    let latency = &by_kind[ProbeKind::Latency.as_str()];
    let idempotency = &by_kind[ProbeKind::Idempotency.as_str()];
    let distinct: std::collections::BTreeSet<&String> = latency.iter().collect();
    assert_eq!((latency.len(), distinct.len()), (6, 6), "{latency:?}");
    assert_eq!(idempotency.len(), 3);
    assert!(
        idempotency.iter().all(|k| *k == idempotency[0]),
        "{idempotency:?}"
    );

    // As Kafka holds them: the record key is the probe's slice key, one key on one partition.
    let held = records(&topic, 9);
    assert_eq!(held.len(), 9);
    let mut partition_of = BTreeMap::new();
    for r in &held {
        assert!(r.key.starts_with("probe-"), "{}", r.key);
        let p = *partition_of.entry(r.key.clone()).or_insert(r.partition);
        assert_eq!(p, r.partition, "{}", r.key);
    }
    assert_eq!(partition_of.len(), 7, "probe-1..6 and probe-idempotency");
}
