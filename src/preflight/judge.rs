//! The rules: settings -> findings, then the plan's waivers applied.

use super::check::{Check, Kind};
use super::findings::{Finding, Outcome, Report, Unread, Waiver};
use super::settings::*;

/// One rule's answer before waivers: the outcome, the setting, its value, why, the fix.
struct Verdict {
    outcome: Outcome,
    setting: String,
    value: String,
    why: String,
    fix: Option<String>,
}

fn pass(setting: impl Into<String>, value: impl Into<String>, why: impl Into<String>) -> Verdict {
    Verdict {
        outcome: Outcome::Pass,
        setting: setting.into(),
        value: value.into(),
        why: why.into(),
        fix: None,
    }
}

fn refuse(
    setting: impl Into<String>,
    value: impl Into<String>,
    why: impl Into<String>,
    fix: impl Into<String>,
) -> Verdict {
    Verdict {
        outcome: Outcome::Refuse,
        setting: setting.into(),
        value: value.into(),
        why: why.into(),
        fix: Some(fix.into()),
    }
}

/// A setting that could not be read: refused (a preflight never passes on what it did not see).
fn unknown(setting: impl Into<String>, reason: &str, fix: impl Into<String>) -> Verdict {
    refuse(
        setting,
        format!("unknown ({reason})"),
        "it could not be read, so nothing says acknowledged writes are kept",
        fix,
    )
}

/// Every finding on `settings` and the `unread` brokers, with `waivers` applied.
///
/// # Guarantees
/// Every check that applies to a broker's kind gives exactly one finding, in [`Check::ALL`]'s
/// order, old broker first; an unread broker gives one, `readable`, refused. A refused or
/// warned finding whose check the plan waives for that
/// side is [`Outcome::Waived`] with the reason; a waiver that lets nothing through is listed in
/// [`Report::unused_waivers`]. Pure.
pub fn judge(settings: &[BrokerSettings], unread: &[Unread], waivers: &[Waiver]) -> Report {
    let mut findings = Vec::new();
    let mut used = vec![false; waivers.len()];
    let mut verdicts: Vec<(super::check::Side, &str, Check, Verdict)> = Vec::new();
    for u in unread {
        let v = refuse(
            "its settings",
            "unreadable",
            u.error.clone(),
            "make the broker (and its monitoring endpoint) reachable from here",
        );
        verdicts.push((u.side, &u.broker, Check::Readable, v));
    }
    for b in settings {
        for check in Check::of_kind(b.kind()) {
            verdicts.push((b.side, &b.name, check, rule(b, check)));
        }
    }
    verdicts.sort_by_key(|(side, _, check, _)| (*side, *check));
    for (side, broker, check, v) in verdicts {
        {
            let mut f = Finding {
                side,
                broker: broker.to_string(),
                check,
                outcome: v.outcome,
                setting: v.setting,
                value: v.value,
                why: v.why,
                fix: v.fix,
                waiver: None,
            };
            if matches!(f.outcome, Outcome::Refuse | Outcome::Warn)
                && let Some(i) = waivers
                    .iter()
                    .position(|w| w.side == side && w.check == check)
            {
                used[i] = true;
                f.outcome = Outcome::Waived;
                f.waiver = Some(waivers[i].reason.clone());
            }
            findings.push(f);
        }
    }
    let unused_waivers = waivers
        .iter()
        .zip(used)
        .filter(|(_, u)| !u)
        .map(|(w, _)| w.clone())
        .collect();
    Report {
        findings,
        unused_waivers,
    }
}

fn rule(b: &BrokerSettings, check: Check) -> Verdict {
    match (&b.detail, check) {
        (_, Check::Readable) => pass("its settings", "read", "the broker answered"),
        (_, Check::SingleNode) => single_node(b),
        (Detail::Nats(n), c) => nats(n, c),
        (Detail::Kafka(k), c) => kafka(k, c),
        (Detail::RabbitMq(r), c) => rabbitmq(r, c),
        (Detail::Redis(r), c) => redis(r, c),
    }
}

fn single_node(b: &BrokerSettings) -> Verdict {
    let how = match b.kind() {
        Kind::Nats => "run a JetStream cluster of 3 servers",
        Kind::Kafka => "run 3 or more brokers",
        Kind::RabbitMq => "run a cluster of 3 nodes",
        Kind::Redis => "attach replicas and wait for them (see redis.replica_failover)",
    };
    match &b.nodes {
        Ok(1) => refuse(
            "nodes",
            "1",
            "a single node: whatever it acknowledged is lost with its disk, and nothing serves while it is down",
            how,
        ),
        Ok(n) => pass("nodes", n.to_string(), "more than one node"),
        Err(e) => unknown("nodes", e, how),
    }
}

fn nats(n: &NatsSettings, check: Check) -> Verdict {
    let stream = &n.stream;
    match check {
        Check::NatsStorage => {
            let setting = format!("stream {stream} storage");
            match n.storage.as_deref() {
                Ok(file) if file.starts_with("file") => {
                    pass(setting, file, "messages are written to disk")
                }
                Ok(other) => refuse(
                    setting,
                    other,
                    "messages live in memory: a server restart loses every acknowledged one",
                    format!(
                        "recreate the stream with file storage (`nats stream add {stream} --storage file`)"
                    ),
                ),
                Err(e) => unknown(setting, e, "declare the stream first (file storage)"),
            }
        }
        Check::NatsReplicas => {
            let setting = format!("stream {stream} replicas");
            let fix = format!("`nats stream edit {stream} --replicas 3` on a cluster of 3");
            match n.replicas {
                Ok(r) if r >= 3 => pass(
                    setting,
                    r.to_string(),
                    "a majority of 3 or more holds each ack",
                ),
                Ok(r) => refuse(
                    setting,
                    r.to_string(),
                    "an acknowledged message lives on fewer than 3 servers: losing one may lose it or stop the stream",
                    fix,
                ),
                Err(ref e) => unknown(setting, e, fix),
            }
        }
        Check::NatsSync => {
            let fix = "set `sync_interval: always` in the server's jetstream block (NATS 2.10+), \
                       and let the monitoring endpoint (preflight.X.monitor) show it";
            match &n.sync {
                Ok(NatsSync::Always) => pass(
                    "jetstream sync",
                    "always",
                    "every write is fsynced before its ack",
                ),
                Ok(NatsSync::EveryMs(ms)) => refuse(
                    "jetstream sync_interval",
                    crate::time::human_ms(i64::try_from(*ms).unwrap_or(i64::MAX)),
                    format!(
                        "JetStream acknowledges before it fsyncs: a crash of the servers holding a message \
                         loses what was acknowledged in the last {} (Jepsen, NATS 2.12.1)",
                        crate::time::human_ms(i64::try_from(*ms).unwrap_or(i64::MAX))
                    ),
                    fix,
                ),
                Err(e) => unknown("jetstream sync_interval", e, fix),
            }
        }
        _ => unreachable_check(check),
    }
}

fn kafka(k: &KafkaSettings, check: Check) -> Verdict {
    let topic = &k.topic;
    match check {
        Check::KafkaReplicationFactor => {
            let setting = format!("topic {topic} replication factor");
            let fix = "recreate the topic (or reassign its partitions) with replication factor 3";
            match k.replication_factor {
                Ok(r) if r >= 3 => pass(setting, r.to_string(), "3 or more copies"),
                Ok(r) => refuse(
                    setting,
                    r.to_string(),
                    "fewer than 3 copies: losing a broker loses or blocks its partitions",
                    fix,
                ),
                Err(ref e) => unknown(setting, e, fix),
            }
        }
        Check::KafkaMinInsyncReplicas => {
            let setting = format!("topic {topic} min.insync.replicas");
            let fix = format!(
                "`kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config min.insync.replicas=2` \
                 (with replication factor 3)"
            );
            match k.min_insync_replicas {
                Ok(m) if m >= 2 => pass(
                    setting,
                    m.to_string(),
                    "an ack=all write is on 2 or more replicas",
                ),
                Ok(m) => refuse(
                    setting,
                    m.to_string(),
                    "an acks=all write may be acknowledged by the leader alone: its loss loses the write",
                    fix,
                ),
                Err(ref e) => unknown(setting, e, fix),
            }
        }
        Check::KafkaUncleanLeaderElection => {
            let setting = format!("topic {topic} unclean.leader.election.enable");
            let fix = format!(
                "`kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config unclean.leader.election.enable=false`"
            );
            match k.unclean_leader_election {
                Ok(false) => pass(setting, "false", "only an in-sync replica becomes leader"),
                Ok(true) => refuse(
                    setting,
                    "true",
                    "an out-of-sync replica may become leader and truncate acknowledged writes",
                    fix,
                ),
                Err(ref e) => unknown(setting, e, fix),
            }
        }
        Check::KafkaAcks => match k.producer_acks.as_str() {
            "all" | "-1" => pass(
                "our producer's acks",
                "all",
                "a write is confirmed once every in-sync replica has it",
            ),
            other => refuse(
                "our producer's acks",
                other,
                "a write is confirmed before the in-sync replicas have it",
                "this migrate's Kafka adapter sets acks=all: report a bug",
            ),
        },
        _ => unreachable_check(check),
    }
}

fn rabbitmq(r: &RabbitMqSettings, check: Check) -> Verdict {
    let queue = &r.queue;
    match check {
        Check::RabbitMqQueueType => {
            let setting = format!("queue {queue} type");
            let fix = format!(
                "declare {queue} as a quorum queue (argument x-queue-type: quorum) or a stream, \
                 before the migration writes to it"
            );
            match (r.queue_type.as_deref(), &r.durable) {
                (Ok(t), Ok(true)) if t.starts_with("quorum") || t.starts_with("stream") => pass(
                    setting,
                    r.queue_type.clone().unwrap_or_default(),
                    "replicated, each confirm after a majority wrote it",
                ),
                (Ok(t), Ok(durable)) => refuse(
                    setting,
                    if *durable {
                        t.to_string()
                    } else {
                        format!("{t}, not durable")
                    },
                    "a classic queue lives on one node: its loss loses what it confirmed",
                    fix,
                ),
                (Err(e), _) | (_, Err(e)) => unknown(setting, e, fix),
            }
        }
        Check::RabbitMqPublisherConfirms => {
            if r.publisher_confirms {
                pass(
                    "our publisher confirms",
                    "on",
                    "a publish counts once the broker confirms it",
                )
            } else {
                refuse(
                    "our publisher confirms",
                    "off",
                    "a publish would count before the broker took it",
                    "this migrate's RabbitMQ adapter publishes in confirm mode: report a bug",
                )
            }
        }
        _ => unreachable_check(check),
    }
}

fn redis(r: &RedisSettings, check: Check) -> Verdict {
    match check {
        Check::RedisAppendonly => match r.appendonly {
            Ok(true) => pass("appendonly", "yes", "every write goes to the append-only file"),
            Ok(false) => refuse(
                "appendonly",
                "no",
                "writes live in memory until the next snapshot: a restart loses the acknowledged ones since",
                "`CONFIG SET appendonly yes` and `appendonly yes` in redis.conf",
            ),
            Err(ref e) => unknown("appendonly", e, "allow CONFIG GET to our user"),
        },
        Check::RedisAppendfsync => match r.appendfsync.as_deref() {
            Ok("always") => pass("appendfsync", "always", "fsynced before the reply"),
            Ok("everysec") => Verdict {
                outcome: Outcome::Warn,
                setting: "appendfsync".into(),
                value: "everysec".into(),
                why: "fsynced once a second: a crash of the host loses up to one second of acknowledged writes".into(),
                fix: Some("`CONFIG SET appendfsync always` (and in redis.conf)".into()),
            },
            Ok(other) => refuse(
                "appendfsync",
                other,
                "the operating system decides when the file reaches the disk (often 30 s): a host crash loses acknowledged writes",
                "`CONFIG SET appendfsync always` (and in redis.conf)",
            ),
            Err(e) => unknown("appendfsync", e, "allow CONFIG GET to our user"),
        },
        Check::RedisReplicaFailover => match r.replicas {
            Ok(0) => pass("replicas", "0", "no failover to a replica that may lag"),
            Ok(n) if r.publisher_waits => pass("replicas", n.to_string(), "our publisher waits for them (WAIT)"),
            Ok(n) => refuse(
                "replicas",
                n.to_string(),
                "replication is asynchronous and our publisher does not WAIT: a failover to a replica loses the writes it had not received",
                "no automatic failover to replicas during the migration, or waive it knowing the window",
            ),
            Err(ref e) => unknown("replicas", e, "allow INFO replication to our user"),
        },
        _ => unreachable_check(check),
    }
}

/// A check of another kind never reaches a kind's rule ([`Check::of_kind`]); said as a
/// refusal rather than a panic.
fn unreachable_check(check: Check) -> Verdict {
    refuse(
        check.as_str(),
        "not applicable",
        "a check of another broker kind",
        "report a bug",
    )
}
