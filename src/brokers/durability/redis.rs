//! Redis: `appendonly`, `appendfsync`, the replicas (`INFO replication`).

use std::collections::HashMap;

use super::common::Target;
use crate::preflight::{BrokerSettings, Detail, Known, RedisSettings};

pub(super) async fn read(t: &Target<'_>) -> Result<BrokerSettings, String> {
    let client = ::redis::Client::open(t.url).map_err(|e| crate::redact::error(&e))?;
    let config = crate::brokers::redis_streams::config(super::common::HTTP_TIMEOUT);
    let mut con = client
        .get_multiplexed_async_connection_with_config(&config)
        .await
        .map_err(|e| crate::redact::error(&e))?;
    let mut get = async |name: &str| -> Known<String> {
        let answer: HashMap<String, String> = ::redis::cmd("CONFIG")
            .arg("GET")
            .arg(name)
            .query_async(&mut con)
            .await
            .map_err(|e| format!("CONFIG GET {name}: {}", crate::redact::error(&e)))?;
        answer
            .get(name)
            .cloned()
            .ok_or_else(|| format!("CONFIG GET {name} answered nothing"))
    };
    let appendonly = get("appendonly").await.and_then(|v| match v.as_str() {
        "yes" => Ok(true),
        "no" => Ok(false),
        other => Err(format!("appendonly is {other:?}")),
    });
    let appendfsync = get("appendfsync").await;
    let info: Known<String> = ::redis::cmd("INFO")
        .arg("replication")
        .query_async(&mut con)
        .await
        .map_err(|e| format!("INFO replication: {}", crate::redact::error(&e)));
    let replicas = info.and_then(|i| replicas_of_info(&i));
    Ok(BrokerSettings {
        side: t.side,
        name: t.name.to_string(),
        destination: t.destination.to_string(),
        nodes: replicas.clone().map(|r| r.saturating_add(1)),
        detail: Detail::Redis(RedisSettings {
            appendonly,
            appendfsync,
            replicas,
            // The adapter counts a write confirmed on XADD's reply, without WAIT.
            publisher_waits: false,
        }),
    })
}

/// The replicas of `INFO replication`: `connected_slaves` of a primary; a replica is one
/// node among at least two.
pub(super) fn replicas_of_info(info: &str) -> Known<u32> {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    match field("role") {
        Some("slave" | "replica") => Ok(1),
        Some("master") => field("connected_slaves")
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| "INFO replication has no connected_slaves".to_string()),
        _ => Err("INFO replication has no role".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_replication_gives_the_replicas() {
        let primary = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\nslave0:ip=x\r\n";
        assert_eq!(replicas_of_info(primary), Ok(2));
        assert_eq!(replicas_of_info("role:master\nconnected_slaves:0\n"), Ok(0));
        assert_eq!(replicas_of_info("role:slave\nmaster_host:x\n"), Ok(1));
        assert!(replicas_of_info("nothing").is_err());
    }
}
