//! What the compiler's tests share: a [`Resolve`] from maps, the full example plan, and
//! helpers that compile it and read the diagnostics.

use crate::plan::compile::{Compiled, Diagnostic, Resolve, compile};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Environment variables and files from maps.
#[derive(Default)]
pub(super) struct TestResolve {
    pub(super) env: HashMap<String, String>,
    pub(super) files: HashMap<PathBuf, String>,
}

impl TestResolve {
    pub(super) fn with_env(pairs: &[(&str, &str)]) -> Self {
        TestResolve {
            env: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            files: HashMap::new(),
        }
    }
}

impl Resolve for TestResolve {
    fn env(&self, name: &str) -> Option<String> {
        self.env.get(name).cloned()
    }
    fn read_file(&self, path: &Path) -> Result<String, String> {
        self.files
            .get(path)
            .cloned()
            .ok_or_else(|| "No such file or directory (os error 2)".to_string())
    }
}

pub(super) fn resolve() -> TestResolve {
    TestResolve::with_env(&[
        (
            "OLD_BROKER_URL",
            "amqp://orders:s3cr3t-old@rabbit.internal:5672/%2f",
        ),
        (
            "NEW_BROKER_URL",
            "nats://orders:s3cr3t-new@nats.internal:4222",
        ),
        ("QM_PROM_URL", "http://127.0.0.1:19090"),
        ("QM_SCRAPE_URL", "http://127.0.0.1:19464/metrics"),
        ("PASS", "s3cr3t-pass"),
        ("KAFKA_USER", "orders"),
        ("KAFKA_PASSWORD", "s3cr3t-kafka"),
        (
            "KAFKA_BOOTSTRAP",
            "kafka-0.internal:9093,kafka-1.internal:9093",
        ),
        ("KAFKA_CA", "/etc/kafka/ca.pem"),
    ])
}

/// The example of the format's description, with its `...` filled in.
pub(super) const FULL: &str = r#"version: 1
name: orders
slices: 128
auto_advance: true
brokers:
  old: { name: rabbitmq, kind: amqp, url: "${OLD_BROKER_URL}", queue: orders, dead_letter: orders.dlq }
  new: { name: nats, kind: nats, url: "${NEW_BROKER_URL}", stream: ORDERS }
retry: { max_backoff: 15m, visibility_timeout: 5m }
dedup: { window: 90d, max_redelivery_delay: 1h, max_consumer_delay: 10m, reprocess_margin: 30d }
sources:
  prom: { prometheus: "http://127.0.0.1:9090" }
  consumer: { scrape: "http://127.0.0.1:9464/metrics" }
routing: { file: "orders.routing.json" }
phases:
  consume_dual:
    min_duration: 24h
    exit:
      - name: new consumer connected
        source: consumer
        query: 'queue_consumer_connected{broker="new"}'
        pass_if: ">= 1"
  synthetic:
    min_duration: 1h
    exit:
      - name: probe latency
        source: prom
        compare: { new: 'p99_new', old: 'p99_old' }
        tolerance: { ratio: 1.2, absolute: 0.05 }
    guard:
      - { name: probe errors, source: prom, query: 'probe_errors', pass_if: "== 0" }
    on_breach: pause
  slices:
    steps: [6, 32, 64, 128]
    observe: 2h
    require_peak: { source: prom, query: 'sum(rate(consumer_messages_total[5m]))', at_least: 300 }
    require_deploy: { source: consumer, query: 'min(process_start_time_seconds{job="consumer"})' }
    exit:
      - name: error rate
        source: prom
        compare: { new: 'err_new', old: 'err_old' }
        tolerance: { ratio: 1.1 }
        min_samples: 10
    guard:
      - name: error rate breach
        source: prom
        query: 'err_new'
        pass_if: "< 0.05"
        for: 5m
    on_breach: rollback
  drain:
    quiet: auto
    exit:
      - { name: old queue empty, source: prom, query: 'sum(rabbitmq_queue_messages{queue="orders"})', pass_if: "== 0", for: quiet }
  disconnect: { retain: 7d, exit: [ { name: no producers, source: prom, query: 'producers_old', pass_if: "== 0" } ] }
"#;

pub(super) fn ok(yaml: &str) -> Compiled {
    match compile(yaml, Some(Path::new("/etc/qm")), &resolve()) {
        Ok(c) => c,
        Err(errors) => panic!("expected the plan to compile, got:\n{}", lines(&errors)),
    }
}

pub(super) fn errors(yaml: &str) -> Vec<Diagnostic> {
    match compile(yaml, Some(Path::new("/etc/qm")), &resolve()) {
        Ok(c) => panic!(
            "expected errors, the plan compiled (warnings: {})",
            lines(&c.warnings)
        ),
        Err(errors) => errors,
    }
}

pub(super) fn lines(ds: &[Diagnostic]) -> String {
    ds.iter().map(|d| format!("  {d}\n")).collect()
}

/// 1-based line of the first line of `yaml` containing `needle`.
pub(super) fn line_of(yaml: &str, needle: &str) -> Option<usize> {
    yaml.lines().position(|l| l.contains(needle)).map(|i| i + 1)
}

/// `from` replaced by `to`, exactly once.
pub(super) fn edit(from: &str, to: &str) -> String {
    assert_eq!(
        FULL.matches(from).count(),
        1,
        "`{from}` must occur once in FULL"
    );
    FULL.replacen(from, to, 1)
}
