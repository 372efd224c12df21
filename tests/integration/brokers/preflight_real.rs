//! The preflight's readers against the real servers of `scripts/services.sh`, each in a lossy
//! and a safe setting as far as one node can show (issue 58): a NATS stream in memory vs on
//! file (and the server's sync interval from `/varz`), a RabbitMQ classic vs quorum queue,
//! Redis `appendonly no`, `appendfsync no`, `everysec`, `always` (on a redis-server of the
//! test's own: the shared one is never reconfigured), a Kafka topic with
//! `min.insync.replicas=1` on the real Apache Kafka. Each server is also reported as the
//! single node it is. Every test is `#[ignore]`d without its server.
#![cfg(feature = "brokers")]

use crate::common;

use std::time::{Duration, Instant};

use queue_migrate::brokers::durability::{Target, read};
use queue_migrate::preflight::{BrokerSettings, Check, Outcome, Report, Side, judge};

fn name(test: &str) -> String {
    format!(
        "qm_preflight_{test}_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    )
}

fn target<'a>(kind: &'a str, url: &'a str, dest: &'a str, monitor: Option<&'a str>) -> Target<'a> {
    Target {
        side: Side::New,
        name: "under-test",
        kind,
        url,
        destination: dest,
        monitor,
    }
}

async fn settings(t: Target<'_>) -> BrokerSettings {
    read(t).await.unwrap_or_else(|e| panic!("{}: {e}", t.kind))
}

fn outcome(r: &Report, check: Check) -> Outcome {
    r.findings
        .iter()
        .find(|f| f.check == check)
        .map(|f| f.outcome)
        .unwrap_or_else(|| panic!("no {check} in {r:#?}"))
}

fn line(r: &Report, check: Check) -> String {
    r.findings
        .iter()
        .find(|f| f.check == check)
        .map(|f| f.line())
        .unwrap_or_default()
}

#[tokio::test]
#[ignore = "needs QM_TEST_NATS_URL and QM_TEST_NATS_MONITOR_URL (scripts/services.sh start nats)"]
async fn nats_memory_storage_is_refused_file_storage_passes_and_the_sync_interval_is_read() {
    use async_nats::jetstream::{self, stream};
    let url = common::server_url("QM_TEST_NATS_URL");
    let monitor = common::server_url("QM_TEST_NATS_MONITOR_URL");
    let js = jetstream::new(async_nats::connect(&url).await.unwrap());
    let (memory, file) = (name("mem"), name("file"));
    for (n, storage) in [
        (&memory, stream::StorageType::Memory),
        (&file, stream::StorageType::File),
    ] {
        js.create_stream(stream::Config {
            name: n.clone(),
            subjects: vec![n.clone()],
            storage,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    let lossy = judge(
        &[settings(target("nats", &url, &memory, Some(&monitor))).await],
        &[],
        &[],
    );
    let safe = judge(
        &[settings(target("nats", &url, &file, Some(&monitor))).await],
        &[],
        &[],
    );
    for n in [&memory, &file] {
        js.delete_stream(n).await.unwrap();
    }
    assert_eq!(outcome(&lossy, Check::NatsStorage), Outcome::Refuse);
    assert!(
        line(&lossy, Check::NatsStorage).contains("storage is memory"),
        "{lossy:#?}"
    );
    assert_eq!(outcome(&safe, Check::NatsStorage), Outcome::Pass);
    // One server, one replica: reported as such.
    assert_eq!(outcome(&safe, Check::SingleNode), Outcome::Refuse);
    assert_eq!(outcome(&safe, Check::NatsReplicas), Outcome::Refuse);
    // The test server names no sync interval in its /varz: the default (2 min) applies.
    let sync = line(&safe, Check::NatsSync);
    assert_eq!(outcome(&safe, Check::NatsSync), Outcome::Refuse, "{sync}");
    assert!(sync.contains("sync_interval is 2m"), "{sync}");
    // Without a monitoring endpoint it is unknown, refused, naming where to say it.
    let blind = judge(
        &[settings(target("nats", &url, &file, None)).await],
        &[],
        &[],
    );
    assert!(
        line(&blind, Check::NatsSync).contains("preflight.new.monitor"),
        "{blind:#?}"
    );
}

#[tokio::test]
#[ignore = "needs QM_TEST_AMQP_URL and the management API (scripts/services.sh start rabbitmq)"]
async fn a_rabbitmq_classic_queue_is_refused_a_quorum_queue_passes() {
    let url = common::server_url("QM_TEST_AMQP_URL");
    let api = common::server_url("QM_TEST_RABBITMQ_API_URL");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (classic, quorum) = (name("classic"), name("quorum"));
    let http = reqwest::Client::new();
    let queue_url = |q: &str| format!("{}/queues/%2f/{q}", api.trim_end_matches('/'));
    let put = |q: String, kind: &'static str| {
        let http = http.clone();
        let u = queue_url(&q);
        async move {
            let base = reqwest::Url::parse(&u).unwrap();
            let (user, password) = (
                base.username().to_string(),
                base.password().map(String::from),
            );
            let mut bare = base.clone();
            bare.set_username("").unwrap();
            bare.set_password(None).unwrap();
            let status = http
                .put(bare)
                .basic_auth(user, password)
                .json(&serde_json::json!({"durable": true, "arguments": {"x-queue-type": kind}}))
                .send()
                .await
                .unwrap()
                .status();
            assert!(status.is_success(), "PUT {q}: {status}");
        }
    };
    put(classic.clone(), "classic").await;
    put(quorum.clone(), "quorum").await;
    let lossy = judge(
        &[settings(target("amqp", &url, &classic, None)).await],
        &[],
        &[],
    );
    let safe = judge(
        &[settings(target("amqp", &url, &quorum, None)).await],
        &[],
        &[],
    );
    for q in [&classic, &quorum] {
        let base = reqwest::Url::parse(&queue_url(q)).unwrap();
        let (user, password) = (
            base.username().to_string(),
            base.password().map(String::from),
        );
        let mut bare = base.clone();
        bare.set_username("").unwrap();
        bare.set_password(None).unwrap();
        let _ = http.delete(bare).basic_auth(user, password).send().await;
    }
    assert_eq!(outcome(&lossy, Check::RabbitMqQueueType), Outcome::Refuse);
    assert!(line(&lossy, Check::RabbitMqQueueType).contains("x-queue-type: quorum"));
    assert_eq!(
        outcome(&safe, Check::RabbitMqQueueType),
        Outcome::Pass,
        "{safe:#?}"
    );
    assert_eq!(
        outcome(&safe, Check::RabbitMqPublisherConfirms),
        Outcome::Pass
    );
    assert_eq!(outcome(&safe, Check::SingleNode), Outcome::Refuse);
}

/// A redis-server of this test's own on a free port, stopped when dropped.
struct OwnRedis {
    child: std::process::Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn own_redis() -> OwnRedis {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let child = std::process::Command::new("redis-server")
        .args([
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--save",
            "",
        ])
        .args(["--appendonly", "no", "--dir"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server (scripts/services.sh install redis)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    OwnRedis {
        child,
        url: format!("redis://127.0.0.1:{port}"),
        _dir: dir,
    }
}

#[tokio::test]
#[ignore = "needs QM_TEST_REDIS_URL and redis-server (scripts/services.sh start redis)"]
async fn redis_appendonly_off_and_appendfsync_no_are_refused_everysec_warns_always_passes() {
    // The shared server (appendfsync always) passes as it is.
    let shared = common::server_url("QM_TEST_REDIS_URL");
    let r = judge(
        &[settings(target("redis", &shared, "s", None)).await],
        &[],
        &[],
    );
    assert_eq!(
        outcome(&r, Check::RedisAppendfsync),
        Outcome::Pass,
        "{r:#?}"
    );
    assert_eq!(outcome(&r, Check::SingleNode), Outcome::Refuse);
    // Our own server, reconfigured step by step.
    let own = own_redis();
    let client = redis::Client::open(own.url.as_str()).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let judged = async || {
        judge(
            &[settings(target("redis", &own.url, "s", None)).await],
            &[],
            &[],
        )
    };
    let r = judged().await;
    assert_eq!(outcome(&r, Check::RedisAppendonly), Outcome::Refuse);
    assert!(line(&r, Check::RedisAppendonly).contains("CONFIG SET appendonly yes"));
    let set = async |con: &mut redis::aio::MultiplexedConnection, k: &str, v: &str| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query_async(con)
            .await
            .unwrap();
    };
    set(&mut con, "appendonly", "yes").await;
    for (fsync, expected) in [
        ("no", Outcome::Refuse),
        ("everysec", Outcome::Warn),
        ("always", Outcome::Pass),
    ] {
        set(&mut con, "appendfsync", fsync).await;
        let r = judged().await;
        assert_eq!(outcome(&r, Check::RedisAppendonly), Outcome::Pass);
        assert_eq!(outcome(&r, Check::RedisAppendfsync), expected, "{fsync}");
        assert_eq!(outcome(&r, Check::RedisReplicaFailover), Outcome::Pass);
    }
}

#[cfg(feature = "kafka")]
#[tokio::test]
#[ignore = "needs QM_TEST_APACHE_KAFKA_BOOTSTRAP (scripts/services.sh start kafka)"]
async fn a_kafka_topic_with_min_insync_replicas_one_is_refused_on_the_real_broker() {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let bootstrap = common::server_url("QM_TEST_APACHE_KAFKA_BOOTSTRAP");
    let admin: AdminClient<DefaultClientContext> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", &bootstrap)
        .create()
        .unwrap();
    let (lossy, safer) = (name("insync1"), name("insync2"));
    let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(10)));
    let t1 = NewTopic::new(&lossy, 1, TopicReplication::Fixed(1))
        .set("min.insync.replicas", "1")
        .set("unclean.leader.election.enable", "true");
    let t2 = NewTopic::new(&safer, 1, TopicReplication::Fixed(1))
        .set("min.insync.replicas", "2")
        .set("unclean.leader.election.enable", "false");
    for r in admin.create_topics([&t1, &t2], &opts).await.unwrap() {
        r.unwrap();
    }
    // The controller acknowledges a creation before the broker serves the topic's configuration
    // (a loaded .ci/run read it as unknown, and once as a describe with no entries at all): wait
    // until it describes both with the setting under test, as a topic made before a migration
    // long is.
    let described = || async {
        let specs = [
            rdkafka::admin::ResourceSpecifier::Topic(&lossy),
            rdkafka::admin::ResourceSpecifier::Topic(&safer),
        ];
        admin.describe_configs(&specs, &opts).await.is_ok_and(|rs| {
            rs.iter().all(|r| {
                r.as_ref()
                    .is_ok_and(|c| c.get("min.insync.replicas").is_some())
            })
        })
    };
    let until = std::time::Instant::now() + Duration::from_secs(20);
    while !described().await && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let url = format!("kafka://{bootstrap}");
    let a = judge(
        &[settings(target("kafka", &url, &lossy, None)).await],
        &[],
        &[],
    );
    let b = judge(
        &[settings(target("kafka", &url, &safer, None)).await],
        &[],
        &[],
    );
    let _ = admin.delete_topics(&[&lossy, &safer], &opts).await;
    assert_eq!(outcome(&a, Check::KafkaMinInsyncReplicas), Outcome::Refuse);
    let insync = line(&a, Check::KafkaMinInsyncReplicas);
    assert!(insync.contains("min.insync.replicas is 1"), "{insync}");
    assert_eq!(
        outcome(&a, Check::KafkaUncleanLeaderElection),
        Outcome::Refuse
    );
    assert_eq!(
        outcome(&b, Check::KafkaMinInsyncReplicas),
        Outcome::Pass,
        "{b:#?}"
    );
    assert_eq!(
        outcome(&b, Check::KafkaUncleanLeaderElection),
        Outcome::Pass
    );
    // One broker: one replica, one node, both said; our producer's acks=all passes.
    assert_eq!(outcome(&b, Check::KafkaReplicationFactor), Outcome::Refuse);
    assert_eq!(outcome(&b, Check::SingleNode), Outcome::Refuse);
    assert_eq!(outcome(&b, Check::KafkaAcks), Outcome::Pass);
}

/// `migrate preflight PLAN` on the real servers: refused (exit 3) with the setting named, then
/// passing (exit 0) once the plan waives it; `--json` says the same.
#[test]
#[ignore = "needs QM_TEST_AMQP_URL, QM_TEST_REDIS_URL (scripts/services.sh start rabbitmq redis)"]
fn the_preflight_command_refuses_with_exit_3_until_waived() {
    let amqp = common::server_url("QM_TEST_AMQP_URL");
    let redis = common::server_url("QM_TEST_REDIS_URL");
    let dir = tempfile::tempdir().unwrap();
    let plan = |waivers: &str| {
        include_str!("../../../plans/local.yaml")
            .replace("amqp://127.0.0.1:5672/%2f", &amqp)
            .replace(
                r#"kind: nats, url: "nats://127.0.0.1:4222", stream: LOCAL"#,
                &format!(r#"kind: redis, url: "{redis}", stream: qm-preflight-cli"#),
            )
            .replace(
                "      - { check: nats.replicas, reason: \"one server holds one replica\" }\n",
                "",
            )
            .replace(
                "      - { check: nats.sync, reason: \"the local server syncs on its default interval (2m); in production set sync_interval: always\" }\n",
                waivers,
            )
    };
    let run = |yaml: String, json: bool| {
        let path = dir.path().join("plan.yaml");
        std::fs::write(&path, yaml).unwrap();
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_migrate"));
        cmd.arg("preflight").arg(&path);
        if json {
            cmd.arg("--json");
        }
        cmd.env("QM_PROM_URL", "http://127.0.0.1:9")
            .env("QM_SCRAPE_URL", "http://127.0.0.1:9/metrics");
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
        )
    };
    // The new Redis is one node, and its single_node waiver is taken away: refused.
    let without = plan("").replace(
        "      - { check: single_node, reason: \"the local NATS of scripts/services.sh is one server\" }\n",
        "",
    );
    let (code, text) = run(without.clone(), false);
    assert_eq!(code, Some(3), "{text}");
    assert!(text.contains("REFUSED new new      single_node"), "{text}");
    assert!(text.contains("or waive it: preflight.new.waive"), "{text}");
    let (code, json) = run(without, true);
    assert_eq!(code, Some(3), "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["ok"], false);
    // Waived (the NATS one now names the Redis): exit 0, the waiver shown.
    let (code, text) = run(plan(""), false);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("waived: the local NATS"), "{text}");
}

/// Regression: `migrate preflight` refused a plan whose source secrets (`QM_PROM_URL`) were not
/// set, though it reads only the brokers. Now the sources' secrets need not resolve, and a
/// broker's that does not makes that broker unread (exit 1) naming the variable.
#[test]
#[ignore = "needs QM_TEST_AMQP_URL (scripts/services.sh start rabbitmq nats)"]
fn preflight_demanded_the_sources_secrets_though_it_reads_only_the_brokers() {
    let amqp = common::server_url("QM_TEST_AMQP_URL");
    let dir = tempfile::tempdir().unwrap();
    let run = |yaml: String| {
        let path = dir.path().join("plan.yaml");
        std::fs::write(&path, yaml).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_migrate"))
            .arg("preflight")
            .arg(&path)
            .env_remove("QM_PROM_URL")
            .env_remove("QM_SCRAPE_URL")
            .env_remove("QM_PREFLIGHT_MISSING_URL")
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    let local =
        include_str!("../../../plans/local.yaml").replace("amqp://127.0.0.1:5672/%2f", &amqp);
    let (code, text) = run(local.clone());
    assert_eq!(
        code,
        Some(0),
        "a source secret must not make the plan invalid here: {text}"
    );
    assert!(!text.contains("QM_PROM_URL"), "{text}");
    // The old broker's URL from a variable that is not set (and its `readable` waiver taken
    // away): that broker is unread, by the variable's name.
    let unwaived = local.replacen(
        "      - { check: readable, reason: \"tests run this plan without its brokers (their settings read when they are up)\" }\n",
        "",
        1,
    );
    let (code, text) = run(unwaived.replace(&amqp, "${QM_PREFLIGHT_MISSING_URL}"));
    assert_eq!(code, Some(1), "{text}");
    assert!(text.contains("QM_PREFLIGHT_MISSING_URL"), "{text}");
}
