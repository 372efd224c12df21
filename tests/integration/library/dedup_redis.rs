//! The Redis dedup mode against a real redis-server (Debian's `redis-server`; run when
//! `QM_TEST_REDIS_URL` is set, e.g. `redis://127.0.0.1:6379`). Every test uses a key prefix of its
//! own and short TTLs, so runs do not see each other and leave nothing behind for long.
//! Lease expiry is real Redis time (hundreds of milliseconds), polled with a bound, never assumed.
#![cfg(feature = "dedup-redis")]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queue_migrate::dedup::redis::{RedisDedup, RedisDedupError};
use queue_migrate::dedup::{
    Begin, BusinessKey, ConsumerMetrics, LeaseDedup, Outcome, PayloadHash, ProcessError, Processed,
    process_once,
};
use queue_migrate::stamp::RouteLabel;

static SEQ: AtomicU32 = AtomicU32::new(0);

/// The server's URL. Every test here is `#[ignore]`d without it; run with `--include-ignored`
/// and no URL, it fails instead of passing without having run.
fn url() -> String {
    match std::env::var("QM_TEST_REDIS_URL") {
        Ok(u) if !u.is_empty() => u,
        _ => panic!("QM_TEST_REDIS_URL is not set (scripts/services.sh start redis)"),
    }
}

/// A consumer's dedup handle on its own connection, under this test's prefix.
async fn consumer(url: &str, prefix: &str, lease: Duration) -> RedisDedup {
    RedisDedup::connect(url)
        .await
        .unwrap_or_else(|e| panic!("QM_TEST_REDIS_URL={url}: {e}"))
        .with_prefix(prefix)
        .with_lease(lease)
        .with_completed_ttl(Duration::from_secs(120))
}

fn prefix() -> String {
    format!(
        "qm:test:{}:{}:{}:",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
    )
}

fn key(n: u32) -> BusinessKey {
    BusinessKey::new("order.paid", &format!("order-{n}"), "evt-1").unwrap()
}

fn hash(s: &str) -> PayloadHash {
    PayloadHash::of_bytes(s.as_bytes())
}

fn fresh(b: Begin) -> queue_migrate::dedup::Lease {
    match b {
        Begin::Fresh(l) => l,
        other => panic!("expected Fresh, got {other:?}"),
    }
}

async fn pttl(url: &str, redis_key: &str) -> i64 {
    let client = redis::Client::open(url).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    redis::cmd("PTTL")
        .arg(redis_key)
        .query_async(&mut conn)
        .await
        .unwrap()
}

#[tokio::test]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn the_same_message_five_times_gives_one_effect() {
    let url = url();
    let d = consumer(&url, &prefix(), Duration::from_secs(30)).await;
    let metrics = ConsumerMetrics::new();
    let effects = AtomicU32::new(0);
    for route in [
        RouteLabel::Old,
        RouteLabel::New,
        RouteLabel::Bridge,
        RouteLabel::Old,
        RouteLabel::New,
    ] {
        let r = process_once(
            &d,
            &key(1),
            &hash("a"),
            || 0,
            || async {
                effects.fetch_add(1, Ordering::SeqCst);
                Ok::<_, std::io::Error>(())
            },
        )
        .await
        .unwrap();
        metrics.record(route, r.outcome());
    }
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    assert_eq!(metrics.get(RouteLabel::Old, Outcome::Processed), 1);
    let blocked: u64 = RouteLabel::ALL
        .iter()
        .map(|r| metrics.get(*r, Outcome::DuplicateBlocked))
        .sum();
    assert_eq!(blocked, 4);
    // Completed keys are kept for the TTL, not the lease.
    let ttl = pttl(&url, &d.redis_key(&key(1))).await;
    assert!(ttl > 60_000, "completed TTL {ttl} ms");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn consumers_racing_from_separate_connections_apply_each_key_once() {
    let url = url();
    let p = prefix();
    let a = consumer(&url, &p, Duration::from_secs(30)).await;
    let b = consumer(&url, &p, Duration::from_secs(30)).await;
    // A holds the key; B sees it in progress and must not ack; then B sees it done.
    let lease = fresh(a.begin(&key(1), &hash("a"), 0).await.unwrap());
    assert_eq!(
        b.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::InProgress
    );
    a.complete(&lease, 0).await.unwrap();
    assert_eq!(
        b.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::Duplicate
    );

    // 25 keys, 4 consumers each (each its own connection), all at once; an in-progress answer
    // goes back for a retry, as a broker redelivery would.
    let effects: Arc<Mutex<HashMap<u32, u32>>> = Arc::default();
    let mut tasks = Vec::new();
    for c in 0..4 {
        let d = consumer(&url, &p, Duration::from_secs(30)).await;
        let effects = effects.clone();
        tasks.push(tokio::spawn(async move {
            let mut applied = 0;
            for n in 100..125 {
                loop {
                    let r = process_once(
                        &d,
                        &key(n),
                        &hash("a"),
                        || 0,
                        || async {
                            tokio::time::sleep(Duration::from_millis(2)).await;
                            *effects.lock().unwrap().entry(n).or_default() += 1;
                            Ok::<_, std::io::Error>(c)
                        },
                    )
                    .await
                    .unwrap();
                    match r {
                        Processed::InProgress => tokio::time::sleep(Duration::from_millis(5)).await,
                        Processed::Applied(_) => {
                            applied += 1;
                            break;
                        }
                        Processed::Duplicate => break,
                        other => panic!("{other:?}"),
                    }
                }
            }
            applied
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 25);
    let effects = effects.lock().unwrap();
    assert_eq!(effects.len(), 25);
    assert!(effects.values().all(|&n| n == 1), "{effects:?}");
}

#[tokio::test]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn a_failed_effect_releases_the_key_and_the_retry_applies_it() {
    let url = url();
    let d = consumer(&url, &prefix(), Duration::from_secs(30)).await;
    let failed = process_once(
        &d,
        &key(1),
        &hash("a"),
        || 0,
        || async { Err::<(), _>(std::io::Error::other("payment service 503")) },
    )
    .await;
    assert!(matches!(failed, Err(ProcessError::Effect(_))));
    // Released at once, not after the lease: the retry applies it.
    let retried = process_once(
        &d,
        &key(1),
        &hash("a"),
        || 0,
        || async { Ok::<_, std::io::Error>("paid") },
    )
    .await
    .unwrap();
    assert_eq!(retried, Processed::Applied("paid"));
    assert_eq!(
        d.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::Duplicate
    );
}

#[tokio::test]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn the_lease_expires_after_a_simulated_crash_and_a_late_holder_cannot_touch_the_new_claim() {
    let url = url();
    let p = prefix();
    let lease = Duration::from_millis(300);
    let crashed = consumer(&url, &p, lease).await;
    let survivor = consumer(&url, &p, lease).await;

    // The first consumer claims and "crashes": no complete, no release.
    let lost = fresh(crashed.begin(&key(1), &hash("a"), 0).await.unwrap());
    drop(crashed);
    assert_eq!(
        survivor.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::InProgress
    );
    let ttl = pttl(&url, &survivor.redis_key(&key(1))).await;
    assert!(
        (1..=300).contains(&ttl),
        "the processing state has the short lease: {ttl} ms"
    );

    // After the lease, not after the dedup window, another consumer takes the key.
    let mut taken = None;
    for _ in 0..100 {
        match survivor.begin(&key(1), &hash("a"), 0).await.unwrap() {
            Begin::Fresh(l) => {
                taken = Some(l);
                break;
            }
            Begin::InProgress => tokio::time::sleep(Duration::from_millis(20)).await,
            other => panic!("{other:?}"),
        }
    }
    let taken = taken.expect("the crashed consumer's lease never expired");

    // The crashed consumer comes back late: it can neither release nor complete the new claim.
    let late = consumer(&url, &p, lease).await;
    assert!(!late.release(&lost).await.unwrap());
    assert!(matches!(
        late.complete(&lost, 0).await,
        Err(RedisDedupError::LeaseLost { .. })
    ));
    assert!(!late.extend(&lost, 0).await.unwrap());
    assert_eq!(
        late.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::InProgress
    );
    survivor.complete(&taken, 0).await.unwrap();
    assert_eq!(
        late.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::Duplicate
    );
}

#[tokio::test]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn extend_keeps_a_long_effect_s_claim() {
    let url = url();
    let p = prefix();
    let d = consumer(&url, &p, Duration::from_millis(400)).await;
    let l = fresh(d.begin(&key(1), &hash("a"), 0).await.unwrap());
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(d.extend(&l, 0).await.unwrap());
    }
    // 800 ms after the claim, past its first lease: still held.
    assert_eq!(
        d.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::InProgress
    );
    assert!(d.release(&l).await.unwrap());
    assert!(matches!(
        d.begin(&key(1), &hash("a"), 0).await.unwrap(),
        Begin::Fresh(_)
    ));
}

#[tokio::test]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn a_different_payload_under_the_same_key_is_a_conflict() {
    let url = url();
    let d = consumer(&url, &prefix(), Duration::from_secs(30)).await;
    let l = fresh(d.begin(&key(1), &hash("a"), 0).await.unwrap());
    assert_eq!(
        d.begin(&key(1), &hash("b"), 0).await.unwrap(),
        Begin::Conflict {
            stored_hash: hash("a")
        }
    );
    d.complete(&l, 0).await.unwrap();
    let applied = AtomicU32::new(0);
    let r = process_once(
        &d,
        &key(1),
        &hash("b"),
        || 0,
        || async {
            applied.fetch_add(1, Ordering::SeqCst);
            Ok::<(), std::io::Error>(())
        },
    )
    .await
    .unwrap();
    assert_eq!(
        r,
        Processed::Conflict {
            stored_hash: hash("a")
        }
    );
    assert_eq!(
        applied.load(Ordering::SeqCst),
        0,
        "a conflicting payload must not be applied"
    );
    assert_eq!(r.outcome(), Outcome::Conflict);
}

#[tokio::test]
#[ignore = "needs QM_TEST_REDIS_URL (scripts/services.sh start redis)"]
async fn a_value_this_module_did_not_write_is_reported() {
    let url = url();
    let d = consumer(&url, &prefix(), Duration::from_secs(30)).await;
    let client = redis::Client::open(url.as_str()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(d.redis_key(&key(1)))
        .arg("processando")
        .arg("PX")
        .arg(60_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(matches!(
        d.begin(&key(1), &hash("a"), 0).await,
        Err(RedisDedupError::Corrupt { .. })
    ));
}
