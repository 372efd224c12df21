//! `qm-kafka-mock`: a Kafka-protocol server for the test suites, librdkafka's own mock cluster
//! (`rd_kafka_mock_cluster_new`, the broker librdkafka's test suite runs against) in a process of
//! its own, started by `scripts/services.sh start kafka`.
//!
//! ```text
//! qm-kafka-mock [--brokers N] [--topic NAME:PARTITIONS]... [--control 127.0.0.1:PORT]
//! ```
//!
//! It prints two lines and then serves until it is killed:
//!
//! ```text
//! bootstrap=127.0.0.1:40001,127.0.0.1:40003,127.0.0.1:40005
//! control=127.0.0.1:40007
//! ```
//!
//! The control port takes one command per line and answers `ok` or `error: ...`:
//! `topic NAME PARTITIONS` (creates a topic: the mock answers the CreateTopics request with an
//! error, so tests create theirs here or let the first produce create it with the mock's default
//! of 4 partitions), `leader TOPIC PARTITION BROKER_ID` (moves a partition's leadership: the mock
//! places leaders at random, so a test that needs two partitions on two brokers says so), `down
//! BROKER_ID` and `up BROKER_ID` (a broker stops or resumes answering: the "Kafka broker down"
//! fault).
//!
//! # Gaps of the mock (what tests must not lean on)
//! Not the Admin API (CreateTopics, DeleteTopics); no persistence (a restart is an empty cluster);
//! no ACLs, no SASL, no TLS; retention and compaction are not enforced.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};

use rdkafka::mocking::MockCluster;
use rdkafka::producer::DefaultProducerContext;

fn main() {
    if let Err(e) = run() {
        eprintln!("qm-kafka-mock: {e}");
        std::process::exit(1);
    }
}

struct Args {
    brokers: i32,
    topics: Vec<(String, i32)>,
    control: String,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        brokers: 3,
        topics: Vec::new(),
        control: "127.0.0.1:0".to_string(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--brokers" => {
                out.brokers = value()?.parse().map_err(|e| format!("--brokers: {e}"))?;
            }
            "--topic" => {
                let v = value()?;
                let (name, parts) = v
                    .rsplit_once(':')
                    .ok_or_else(|| format!("--topic {v}: expected NAME:PARTITIONS"))?;
                let parts = parts.parse().map_err(|e| format!("--topic {v}: {e}"))?;
                out.topics.push((name.to_string(), parts));
            }
            "--control" => out.control = value()?,
            other => {
                return Err(format!(
                    "unknown argument {other}; usage: qm-kafka-mock [--brokers N] \
                     [--topic NAME:PARTITIONS]... [--control ADDR]"
                ));
            }
        }
    }
    Ok(out)
}

fn run() -> Result<(), String> {
    let args = args()?;
    let cluster = MockCluster::new(args.brokers).map_err(|e| format!("mock cluster: {e}"))?;
    let replicas = args.brokers.min(3);
    for (name, parts) in &args.topics {
        cluster
            .create_topic(name, *parts, replicas)
            .map_err(|e| format!("topic {name}: {e}"))?;
    }
    let listener =
        TcpListener::bind(&args.control).map_err(|e| format!("control {}: {e}", args.control))?;
    let control = listener.local_addr().map_err(|e| e.to_string())?;
    println!("bootstrap={}", cluster.bootstrap_servers());
    println!("control={control}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    // The cluster is not Send: the control connections are served here, one at a time.
    for stream in listener.incoming() {
        match stream {
            Ok(stream) => serve(&cluster, replicas, stream),
            Err(e) => eprintln!("qm-kafka-mock: control accept: {e}"),
        }
    }
    Ok(())
}

fn serve(cluster: &MockCluster<'_, DefaultProducerContext>, replicas: i32, stream: TcpStream) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        let answer = match command(cluster, replicas, &line) {
            Ok(()) => "ok".to_string(),
            Err(e) => format!("error: {e}"),
        };
        if writeln!(out, "{answer}").is_err() {
            return;
        }
    }
}

fn command(
    cluster: &MockCluster<'_, DefaultProducerContext>,
    replicas: i32,
    line: &str,
) -> Result<(), String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let number = |s: &str| s.parse::<i32>().map_err(|e| format!("{s:?}: {e}"));
    match words.as_slice() {
        ["topic", name, parts] => cluster
            .create_topic(name, number(parts)?, replicas)
            .map_err(|e| e.to_string()),
        ["leader", topic, partition, id] => cluster
            .partition_leader(topic, number(partition)?, Some(number(id)?))
            .map_err(|e| e.to_string()),
        ["down", id] => cluster.broker_down(number(id)?).map_err(|e| e.to_string()),
        ["up", id] => cluster.broker_up(number(id)?).map_err(|e| e.to_string()),
        _ => Err(format!(
            "unknown command {line:?}: topic NAME PARTITIONS | leader TOPIC PARTITION ID | down ID | up ID"
        )),
    }
}
