//! RabbitMQ: the queue's type and durability, the cluster's nodes (management API).

use super::common::{GetError, Target, get_json, http};
use crate::brokers::rabbitmq::{decode, derive_management, split_management, vhost_of};
use crate::preflight::{BrokerSettings, Detail, Known, RabbitMqSettings};

pub(super) async fn read(t: &Target<'_>) -> Result<BrokerSettings, String> {
    let (amqp_url, in_url) = split_management(t.url).map_err(|e| e.to_string())?;
    let management = match (t.monitor, in_url) {
        (Some(m), _) => m.to_string(),
        (None, Some(m)) => m,
        (None, None) => derive_management(&amqp_url).map_err(|e| e.to_string())?,
    };
    let mut base =
        reqwest::Url::parse(&management).map_err(|e| format!("management API URL: {e}"))?;
    // No user in the URL: RabbitMQ's default login, as the AMQP client uses it.
    let (user, password) = match base.username() {
        "" => ("guest".to_string(), Some("guest".to_string())),
        u => (decode(u), base.password().map(decode)),
    };
    let _ = base.set_username("");
    let _ = base.set_password(None);
    let vhost = vhost_of(&amqp_url)?;
    let http = http()?;
    let auth = Some((user.as_str(), password.as_deref()));
    let api = |segments: &[&str]| -> Result<reqwest::Url, String> {
        let mut url = base.clone();
        url.path_segments_mut()
            .map_err(|()| "the management API URL cannot have a path".to_string())?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    };
    // The nodes first: an unreachable management API is the broker's answer missing whole.
    let nodes: Known<u32> = match get_json(&http, api(&["nodes"])?, auth).await {
        Ok(serde_json::Value::Array(nodes)) => Ok(u32::try_from(nodes.len()).unwrap_or(u32::MAX)),
        Ok(_) => Err("GET /api/nodes is not a list".into()),
        Err(GetError::NotFound) => Err("the management API has no /api/nodes".into()),
        Err(GetError::Other(e)) => {
            return Err(format!(
                "management API: {e} (name it in preflight.{}.monitor)",
                t.side
            ));
        }
    };
    let queue = get_json(&http, api(&["queues", &vhost, t.destination])?, auth).await;
    let (queue_type, durable): (Known<String>, Known<bool>) = match queue {
        Ok(q) => (
            q.get("type")
                .and_then(serde_json::Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| "the queue's answer has no type".to_string()),
            q.get("durable")
                .and_then(serde_json::Value::as_bool)
                .ok_or_else(|| "the queue's answer has no durable".to_string()),
        ),
        // What the adapter's `declare` will make of it: a durable classic queue.
        Err(GetError::NotFound) => (
            Ok("classic (no queue yet: as migrate declares it)".into()),
            Ok(true),
        ),
        Err(GetError::Other(e)) => (Err(e.clone()), Err(e)),
    };
    Ok(BrokerSettings {
        side: t.side,
        name: t.name.to_string(),
        destination: t.destination.to_string(),
        nodes,
        detail: Detail::RabbitMq(RabbitMqSettings {
            queue: t.destination.to_string(),
            queue_type,
            durable,
            // The adapter publishes on a channel in confirm mode and waits for each confirm.
            publisher_confirms: true,
        }),
    })
}
