use super::*;

fn nats(storage: &str, replicas: u32, sync: Known<NatsSync>, nodes: u32) -> BrokerSettings {
    BrokerSettings {
        side: Side::New,
        name: "nats".into(),
        destination: "ORDERS".into(),
        nodes: Ok(nodes),
        detail: Detail::Nats(NatsSettings {
            stream: "ORDERS".into(),
            storage: Ok(storage.into()),
            replicas: Ok(replicas),
            sync,
        }),
    }
}

fn redis(appendonly: bool, fsync: &str, replicas: u32) -> BrokerSettings {
    BrokerSettings {
        side: Side::Old,
        name: "redis".into(),
        destination: "orders".into(),
        nodes: Ok(1 + replicas),
        detail: Detail::Redis(RedisSettings {
            appendonly: Ok(appendonly),
            appendfsync: Ok(fsync.into()),
            replicas: Ok(replicas),
            publisher_waits: false,
        }),
    }
}

fn outcome(r: &Report, side: Side, check: Check) -> Outcome {
    r.findings
        .iter()
        .find(|f| f.side == side && f.check == check)
        .map(|f| f.outcome)
        .unwrap_or_else(|| panic!("no finding {side} {check}: {r:#?}"))
}

fn waiver(side: Side, check: Check) -> Waiver {
    Waiver {
        side,
        check,
        reason: "one local server".into(),
    }
}

#[test]
fn a_safe_nats_cluster_passes_every_check() {
    let r = judge(&[nats("file", 3, Ok(NatsSync::Always), 3)], &[], &[]);
    assert!(!r.refused(), "{r:#?}");
    assert_eq!(r.findings.len(), 5);
    assert!(r.findings.iter().all(|f| f.outcome == Outcome::Pass));
}

#[test]
fn nats_memory_storage_and_the_default_sync_interval_are_refused_naming_the_setting() {
    let r = judge(
        &[nats(
            "memory",
            3,
            Ok(NatsSync::EveryMs(NATS_DEFAULT_SYNC_MS)),
            3,
        )],
        &[],
        &[],
    );
    assert_eq!(outcome(&r, Side::New, Check::NatsStorage), Outcome::Refuse);
    assert_eq!(outcome(&r, Side::New, Check::NatsSync), Outcome::Refuse);
    let line = r.refusal_line().unwrap();
    assert!(line.contains("stream ORDERS storage is memory"), "{line}");
    assert!(line.contains("--storage file"), "{line}");
    assert!(line.contains("sync_interval is 2m"), "{line}");
    assert!(line.contains("preflight.new.waive.nats.sync"), "{line}");
}

#[test]
fn an_unknown_setting_is_refused_never_passed() {
    let r = judge(
        &[nats(
            "file",
            3,
            Err("no monitoring endpoint given".into()),
            3,
        )],
        &[],
        &[],
    );
    assert_eq!(outcome(&r, Side::New, Check::NatsSync), Outcome::Refuse);
    assert!(
        r.refusal_line()
            .unwrap()
            .contains("unknown (no monitoring endpoint given)")
    );
}

#[test]
fn a_single_node_is_refused_unless_waived_and_the_waiver_is_reported() {
    let b = nats("file", 1, Ok(NatsSync::Always), 1);
    let r = judge(std::slice::from_ref(&b), &[], &[]);
    assert_eq!(outcome(&r, Side::New, Check::SingleNode), Outcome::Refuse);
    let r = judge(
        &[b],
        &[],
        &[
            waiver(Side::New, Check::SingleNode),
            waiver(Side::New, Check::NatsReplicas),
            // Passes anyway: an unused waiver, listed.
            waiver(Side::New, Check::NatsStorage),
            // The other side: not this broker's.
            waiver(Side::Old, Check::SingleNode),
        ],
    );
    assert!(!r.refused(), "{r:#?}");
    let waived: Vec<_> = r.waived().map(|f| f.check).collect();
    assert_eq!(waived, [Check::SingleNode, Check::NatsReplicas]);
    assert_eq!(
        r.waived().next().unwrap().waiver.as_deref(),
        Some("one local server")
    );
    assert_eq!(
        r.unused_waivers,
        [
            waiver(Side::New, Check::NatsStorage),
            waiver(Side::Old, Check::SingleNode)
        ]
    );
}

#[test]
fn redis_appendfsync_no_is_refused_everysec_warns_always_passes() {
    let r = judge(&[redis(true, "no", 0)], &[], &[]);
    assert_eq!(
        outcome(&r, Side::Old, Check::RedisAppendfsync),
        Outcome::Refuse
    );
    let r = judge(&[redis(true, "everysec", 0)], &[], &[]);
    assert_eq!(
        outcome(&r, Side::Old, Check::RedisAppendfsync),
        Outcome::Warn
    );
    let warn = r
        .findings
        .iter()
        .find(|f| f.check == Check::RedisAppendfsync)
        .unwrap();
    assert!(warn.why.contains("one second"), "{}", warn.why);
    let r = judge(&[redis(true, "always", 0)], &[], &[]);
    assert_eq!(
        outcome(&r, Side::Old, Check::RedisAppendfsync),
        Outcome::Pass
    );
    let r = judge(&[redis(false, "always", 0)], &[], &[]);
    assert_eq!(
        outcome(&r, Side::Old, Check::RedisAppendonly),
        Outcome::Refuse
    );
}

#[test]
fn redis_replicas_without_wait_are_named() {
    let r = judge(&[redis(true, "always", 2)], &[], &[]);
    assert_eq!(
        outcome(&r, Side::Old, Check::RedisReplicaFailover),
        Outcome::Refuse
    );
    assert_eq!(outcome(&r, Side::Old, Check::SingleNode), Outcome::Pass);
    assert!(r.refusal_line().unwrap().contains("does not WAIT"));
}

#[test]
fn kafka_min_insync_one_and_unclean_election_are_refused() {
    let topic = |rf, min, unclean| BrokerSettings {
        side: Side::New,
        name: "kafka".into(),
        destination: "orders".into(),
        nodes: Ok(3),
        detail: Detail::Kafka(KafkaSettings {
            topic: "orders".into(),
            replication_factor: Ok(rf),
            min_insync_replicas: Ok(min),
            unclean_leader_election: Ok(unclean),
            producer_acks: "all".into(),
        }),
    };
    let r = judge(&[topic(3, 2, false)], &[], &[]);
    assert!(!r.refused(), "{r:#?}");
    let r = judge(&[topic(3, 1, true)], &[], &[]);
    assert_eq!(
        outcome(&r, Side::New, Check::KafkaMinInsyncReplicas),
        Outcome::Refuse
    );
    assert_eq!(
        outcome(&r, Side::New, Check::KafkaUncleanLeaderElection),
        Outcome::Refuse
    );
    assert!(r.refusal_line().unwrap().contains("min.insync.replicas=2"));
}

#[test]
fn a_rabbitmq_classic_queue_is_refused_a_quorum_queue_passes() {
    let queue = |t: &str| BrokerSettings {
        side: Side::Old,
        name: "rabbitmq".into(),
        destination: "orders".into(),
        nodes: Ok(3),
        detail: Detail::RabbitMq(RabbitMqSettings {
            queue: "orders".into(),
            queue_type: Ok(t.into()),
            durable: Ok(true),
            publisher_confirms: true,
        }),
    };
    let r = judge(&[queue("classic")], &[], &[]);
    assert_eq!(
        outcome(&r, Side::Old, Check::RabbitMqQueueType),
        Outcome::Refuse
    );
    assert!(r.refusal_line().unwrap().contains("x-queue-type: quorum"));
    assert!(!judge(&[queue("quorum")], &[], &[]).refused());
    assert!(!judge(&[queue("stream")], &[], &[]).refused());
}

#[test]
fn every_check_has_a_name_that_parses_back_and_a_kind_prefix() {
    for c in Check::ALL {
        assert_eq!(Check::parse(c.as_str()), Some(c));
        match c.kind() {
            None => assert!(matches!(c, Check::SingleNode | Check::Readable), "{c}"),
            Some(k) => assert!(c.as_str().starts_with(k.as_str())),
        }
    }
    assert_eq!(Check::parse("nats"), None);
    assert!(Check::SingleNode.applies_to(Kind::Redis));
    assert!(!Check::NatsSync.applies_to(Kind::Redis));
}

#[test]
fn an_unread_broker_is_refused_as_readable_unless_waived() {
    let unread = [Unread {
        side: Side::Old,
        broker: "rabbitmq".into(),
        error: "connection refused".into(),
    }];
    let r = judge(&[], &unread, &[]);
    assert_eq!(outcome(&r, Side::Old, Check::Readable), Outcome::Refuse);
    assert_eq!(r.findings.len(), 1);
    assert!(r.refusal_line().unwrap().contains("connection refused"));
    let r = judge(&[], &unread, &[waiver(Side::Old, Check::Readable)]);
    assert!(!r.refused());
}
