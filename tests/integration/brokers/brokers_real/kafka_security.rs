//! The Kafka adapter over the real broker's secured listeners (`scripts/services.sh start
//! apache-kafka`): SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (the CA in
//! `QM_TEST_APACHE_KAFKA_CA`, the host name checked), OAUTHBEARER with an unsigned token, and SSL
//! with a client certificate (mTLS). Each runs what every Kafka use does through the adapter's
//! URL: CreateTopics (`declare`), publish (what the bridge and `dlq replay` do), browse (what
//! `dlq triage --from-broker` does), a consumer group's reads and commits, and the group's lag
//! (what the `kafka_lag` source reads). A wrong password and a missing client certificate are
//! refused, and the error shows no secret.

use std::time::Duration;

use queue_migrate::brokers::{Adapter, Kind, SubscribeOptions};

use super::{queue, stamped};
use crate::common::server_url;

pub(crate) fn ca() -> String {
    server_url("QM_TEST_APACHE_KAFKA_CA")
}

/// The SASL_SSL URL with `mechanism`, the credentials in the userinfo.
pub(crate) fn sasl_url(mechanism: &str, password: &str) -> String {
    format!(
        "kafka://{}:{password}@{}?security.protocol=SASL_SSL&sasl.mechanism={mechanism}\
         &ssl.ca.location={}&partitions=2",
        server_url("QM_TEST_APACHE_KAFKA_SASL_USER"),
        server_url("QM_TEST_APACHE_KAFKA_SASL_BOOTSTRAP"),
        ca()
    )
}

pub(crate) fn password() -> String {
    server_url("QM_TEST_APACHE_KAFKA_SASL_PASSWORD")
}

/// The mTLS URL, with the client's certificate when `with_certificate`.
fn mtls_url(with_certificate: bool) -> String {
    let mut url = format!(
        "kafka://{}?security.protocol=SSL&ssl.ca.location={}&partitions=2",
        server_url("QM_TEST_APACHE_KAFKA_MTLS_BOOTSTRAP"),
        ca()
    );
    if with_certificate {
        url.push_str(&format!(
            "&ssl.certificate.location={}&ssl.key.location={}",
            server_url("QM_TEST_APACHE_KAFKA_CLIENT_CERT"),
            server_url("QM_TEST_APACHE_KAFKA_CLIENT_KEY")
        ));
    }
    url
}

/// Declare, publish 3, browse 3, read and ack them in a group, its lag 0 (read through
/// `kafka_lag`, the drain gate's source): everything over `url`.
async fn every_use_over(url: &str, test: &str) {
    let adapter = Adapter::connect(Kind::Kafka, url)
        .await
        .unwrap_or_else(|e| panic!("{test}: {e}"));
    let t = queue(test);
    adapter.declare(&t).await.unwrap();
    for n in 0..3 {
        adapter.publish(&t, &stamped(n)).await.unwrap();
    }
    assert_eq!(adapter.browse(&t, 10).await.unwrap().len(), 3, "{test}");
    let group = format!("{t}-g");
    let options = SubscribeOptions {
        visibility_timeout: Duration::from_secs(6),
        ..SubscribeOptions::group(&group)
    };
    let mut s = adapter.subscribe(&t, &options).await.unwrap();
    for _ in 0..3 {
        let d = tokio::time::timeout(Duration::from_secs(30), s.next())
            .await
            .expect("a record within 30 s")
            .unwrap()
            .expect("the subscription ended");
        d.ack().await.unwrap();
    }
    s.release().await.unwrap();
    let lags = queue_migrate::indicators::kafka_lag::read(url, &group, std::slice::from_ref(&t))
        .await
        .unwrap();
    assert_eq!(lags.iter().map(|l| l.2).sum::<u64>(), 0, "{test}: {lags:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn sasl_ssl_with_plain_carries_every_use() {
    every_use_over(&sasl_url("PLAIN", &password()), "kafka-sasl-plain").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn sasl_ssl_with_scram_sha_256_carries_every_use() {
    every_use_over(&sasl_url("SCRAM-SHA-256", &password()), "kafka-scram-256").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn sasl_ssl_with_scram_sha_512_carries_every_use() {
    every_use_over(&sasl_url("SCRAM-SHA-512", &password()), "kafka-scram-512").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn oauthbearer_with_an_unsigned_token_carries_every_use() {
    let url = format!(
        "kafka://{}?security.protocol=SASL_SSL&sasl.mechanism=OAUTHBEARER\
         &enable.sasl.oauthbearer.unsecure.jwt=true&sasl.oauthbearer.config=principal%3Dqm-client\
         &ssl.ca.location={}&partitions=2",
        server_url("QM_TEST_APACHE_KAFKA_SASL_BOOTSTRAP"),
        ca()
    );
    every_use_over(&url, "kafka-oauthbearer").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn mtls_with_the_clients_certificate_carries_every_use() {
    every_use_over(&mtls_url(true), "kafka-mtls").await;
}

/// A wrong password and a missing client certificate are refused at connect; the error names
/// the cluster, never the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn a_wrong_password_or_no_client_certificate_is_refused_without_showing_a_secret() {
    let wrong = "not-the-secret-9137";
    let e = Adapter::connect(Kind::Kafka, &sasl_url("SCRAM-SHA-512", wrong))
        .await
        .expect_err("a wrong SCRAM password");
    let shown = e.to_string();
    assert!(!shown.contains(wrong), "{shown}");
    assert!(
        shown.contains(&server_url("QM_TEST_APACHE_KAFKA_SASL_BOOTSTRAP")),
        "{shown}"
    );
    let e = Adapter::connect(Kind::Kafka, &mtls_url(false))
        .await
        .expect_err("no client certificate");
    eprintln!("without a certificate: {e}");
}

/// plans/orders-rabbitmq-to-kafka-sasl.yaml, with its variables pointing at the real broker's
/// SASL_SSL listener, compiles and reaches Kafka: the new broker's URL publishes, and its
/// `kafka_lag` source reads the group's lag there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs the QM_TEST_APACHE_KAFKA_* variables (scripts/services.sh start apache-kafka)"]
async fn the_shipped_sasl_plan_reaches_kafka_over_sasl_ssl() {
    use queue_migrate::plan::Source;
    struct Env(Vec<(&'static str, String)>);
    impl queue_migrate::plan::Resolve for Env {
        fn env(&self, name: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.clone())
        }
        fn read_file(&self, path: &std::path::Path) -> Result<String, String> {
            Err(format!("no file {}", path.display()))
        }
    }
    let env = Env(vec![
        (
            "OLD_BROKER_URL",
            "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
        ),
        ("KAFKA_USER", server_url("QM_TEST_APACHE_KAFKA_SASL_USER")),
        ("KAFKA_PASSWORD", password()),
        (
            "KAFKA_BOOTSTRAP",
            server_url("QM_TEST_APACHE_KAFKA_SASL_BOOTSTRAP"),
        ),
        ("KAFKA_CA", ca()),
    ]);
    let yaml = include_str!("../../../../plans/orders-rabbitmq-to-kafka-sasl.yaml");
    let plan = queue_migrate::plan::compile(yaml, None, &env)
        .unwrap_or_else(|e| panic!("{e:?}"))
        .plan;
    let url = plan.brokers.new.url.value().unwrap();
    let adapter = Adapter::connect(Kind::Kafka, url).await.unwrap();
    let topic = plan.brokers.new.destination().unwrap().to_string();
    adapter.declare(&topic).await.unwrap();
    adapter.publish(&topic, &stamped(1)).await.unwrap();
    let Some(Source::KafkaLag { url, group, topics }) = plan.sources.get("new_lag") else {
        panic!("new_lag")
    };
    let lags = queue_migrate::indicators::kafka_lag::read(url.value().unwrap(), group, topics)
        .await
        .unwrap();
    assert_eq!(lags.len(), 12, "12 partitions: {lags:?}");
    assert!(lags.iter().map(|l| l.2).sum::<u64>() >= 1, "{lags:?}");
    // The plan's partition-growth guard reads the topic's count from the same reading.
    let samples = queue_migrate::indicators::kafka_lag::samples(group, &lags);
    let q = r#"kafka_topic_partitions{topic="orders"}"#;
    assert_eq!(
        queue_migrate::indicators::kafka_lag::evaluate(q, &samples, 0),
        Ok(12.0)
    );
}
