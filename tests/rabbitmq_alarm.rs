//! RabbitMQ under a memory alarm: the broker stops reading every connection that publishes, and a
//! subscription's acks still reach it, because it consumes on a connection of its own
//! (`brokers_real.rs::a_consumer_has_a_connection_of_its_own` pins the layout; this pins why: the
//! bridge acks its ingress while its publishes wait, BENCHMARKS.md, bridge seventh pass).
//!
//! The alarm is broker-wide, so this file holds one test: cargo runs test binaries one after the
//! other, and no other test's publishes wait behind it. It runs when `QM_TEST_AMQP_URL`,
//! `QM_TEST_RABBITMQ_API_URL` and `QM_TEST_RABBITMQCTL` (the `rabbitmqctl` that reaches that
//! broker) are set: `scripts/services.sh start rabbitmq` prints them.
#![cfg(feature = "brokers")]

mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use queue_migrate::brokers::{AckMode, Adapter, Kind, Message, SubscribeOptions};

/// A memory alarm set on the broker `rabbitmqctl` reaches, cleared when dropped (a failing test
/// too leaves the broker as it found it).
struct Alarm {
    ctl: String,
}

const SET: &str = "rabbit_alarm:set_alarm({{resource_limit, memory, node()}, []}).";
const CLEAR: &str = "rabbit_alarm:clear_alarm({resource_limit, memory, node()}).";

fn eval(ctl: &str, expression: &str) -> Result<(), String> {
    let out = Command::new(ctl)
        .args(["eval", expression])
        .output()
        .map_err(|e| format!("{ctl}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{ctl} eval {expression:?}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Alarm {
    /// Clears what an earlier run killed before its drop may have left, then sets the alarm.
    fn set(ctl: &str) -> Alarm {
        eval(ctl, CLEAR)
            .unwrap_or_else(|e| panic!("QM_TEST_RABBITMQCTL cannot reach the broker : {e}"));
        eval(ctl, SET).unwrap_or_else(|e| panic!("QM_TEST_RABBITMQCTL cannot set the alarm: {e}"));
        Alarm {
            ctl: ctl.to_string(),
        }
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        if let Err(e) = eval(&self.ctl, CLEAR) {
            eprintln!("the memory alarm may still be set: {e}");
        }
    }
}

/// Polls the management API (its statistics lag a few seconds) until `want` holds.
async fn until(api: &str, path: &[&str], what: &str, want: impl Fn(&serde_json::Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = common::management::get(api, path).await;
        if want(&got) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {path:?} is {got}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs QM_TEST_AMQP_URL, QM_TEST_RABBITMQ_API_URL and QM_TEST_RABBITMQCTL (scripts/services.sh start rabbitmq)"]
async fn acks_reach_the_broker_while_it_blocks_the_publishing_connection() {
    let url = common::server_url("QM_TEST_AMQP_URL");
    let api = common::server_url("QM_TEST_RABBITMQ_API_URL");
    let ctl = common::server_url("QM_TEST_RABBITMQCTL");
    let adapter = Arc::new(Adapter::connect(Kind::RabbitMq, &url).await.unwrap());
    let q = format!("qm.test.alarm.{}", std::process::id());
    adapter.declare(&q).await.unwrap();
    for n in 0..3 {
        adapter
            .publish(&q, &Message::new(format!("#{n}").into_bytes()))
            .await
            .unwrap();
    }
    let options = SubscribeOptions {
        prefetch: 8,
        ..SubscribeOptions::group("g")
    };
    let mut subscription = adapter
        .subscribe_acking(&q, &options, AckMode::Coalesced)
        .await
        .unwrap();
    let mut deliveries = Vec::new();
    for _ in 0..3 {
        let next = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await;
        deliveries.push(next.expect("a delivery").unwrap().expect("one"));
    }
    let queue_path = ["queues", "/", q.as_str()];
    until(&api, &queue_path, "three unacked", |v| {
        v["messages_unacknowledged"] == 3
    })
    .await;

    let alarm = Alarm::set(&ctl);
    // A publish now: the broker blocks the connection it came on and stops reading it.
    let publish = {
        let (adapter, q) = (adapter.clone(), q.clone());
        tokio::spawn(async move { adapter.publish(&q, &Message::new(b"#3".to_vec())).await })
    };
    until(
        &api,
        &["connections"],
        "the publishing connection blocked",
        |v| {
            v.as_array().unwrap().iter().any(|c| {
                c["client_properties"]["connection_name"] == "queue-migrate"
                    && c["state"] == "blocked"
            })
        },
    )
    .await;
    let still_blocked = |publish: &tokio::task::JoinHandle<_>, when: &str| {
        assert!(
            !publish.is_finished(),
            "the publish returned {when} (confirmed through the alarm, or failed)"
        );
    };
    still_blocked(&publish, "before the acks");

    for d in deliveries {
        d.ack().await.unwrap();
    }
    subscription.flush_acks().await.unwrap();
    until(&api, &queue_path, "the acks taken during the alarm", |v| {
        v["messages_unacknowledged"] == 0
    })
    .await;
    still_blocked(&publish, "while the acks were taken");

    drop(alarm);
    tokio::time::timeout(Duration::from_secs(30), publish)
        .await
        .expect("the publish is confirmed once the alarm is cleared")
        .unwrap()
        .unwrap();
    let last = tokio::time::timeout(Duration::from_secs(10), subscription.next())
        .await
        .expect("the message published during the alarm")
        .unwrap()
        .unwrap();
    assert_eq!(last.message.payload, b"#3");
    last.ack().await.unwrap();
    subscription.flush_acks().await.unwrap();
    drop(subscription);
    common::delete_queue(Kind::RabbitMq, &url, &q).await;
}
