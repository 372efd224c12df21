//! NATS: the stream's storage and replicas, the cluster, the sync interval (`/varz`).

use async_nats::jetstream::{self, stream};

use super::common::{GetError, Target, get_json, http};
use crate::preflight::{
    BrokerSettings, Detail, Known, NATS_DEFAULT_SYNC_MS, NatsSettings, NatsSync,
};

pub(super) async fn read(t: &Target<'_>) -> Result<BrokerSettings, String> {
    let client = async_nats::ConnectOptions::new()
        .name("queue-migrate preflight")
        .connection_timeout(crate::brokers::CONNECT_TIMEOUT)
        .request_timeout(Some(super::common::HTTP_TIMEOUT))
        .connect(t.url)
        .await
        .map_err(|e| crate::redact::error(&e))?;
    let info = client.server_info();
    // A server in no cluster is one node; in one, the servers it advertises to clients.
    let nodes = match info.cluster.as_deref() {
        None | Some("") => Ok(1),
        Some(_) => Ok(u32::try_from(info.connect_urls.len().max(2)).unwrap_or(u32::MAX)),
    };
    let js = jetstream::new(client);
    let name = crate::brokers::nats::jetstream_name(t.destination);
    let (storage, replicas): (Known<String>, Known<u32>) = match js.get_stream(&name).await {
        Ok(mut s) => match s.info().await {
            Ok(i) => (
                Ok(match i.config.storage {
                    stream::StorageType::File => "file".into(),
                    stream::StorageType::Memory => "memory".into(),
                }),
                Ok(u32::try_from(i.config.num_replicas.max(1)).unwrap_or(u32::MAX)),
            ),
            Err(e) => {
                let why = crate::redact::error(&e);
                (Err(why.clone()), Err(why))
            }
        },
        Err(e) => match e.kind() {
            // What the adapter's `declare` will make of it: file storage, one replica.
            jetstream::context::GetStreamErrorKind::JetStream(j)
                if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND =>
            {
                (
                    Ok("file (no stream yet: as migrate declares it)".into()),
                    Ok(1),
                )
            }
            _ => {
                let why = crate::redact::error(&e);
                (Err(why.clone()), Err(why))
            }
        },
    };
    let sync = match t.monitor {
        Some(m) => varz_sync(m).await,
        None => Err(format!(
            "no monitoring endpoint given: preflight.{}.monitor: http://HOST:8222",
            t.side
        )),
    };
    Ok(BrokerSettings {
        side: t.side,
        name: t.name.to_string(),
        destination: t.destination.to_string(),
        nodes,
        detail: Detail::Nats(NatsSettings {
            stream: name,
            storage,
            replicas,
            sync,
        }),
    })
}

/// The server's JetStream sync setting from `/varz`: `sync_always`, else `sync_interval`
/// (nanoseconds), else the default (the field is left out when it has its default value; a
/// server older than 2.10 has no such setting and syncs on that default).
async fn varz_sync(monitor: &str) -> Known<NatsSync> {
    let mut url = reqwest::Url::parse(monitor).map_err(|e| format!("monitoring URL: {e}"))?;
    url.path_segments_mut()
        .map_err(|()| "the monitoring URL cannot have a path".to_string())?
        .pop_if_empty()
        .push("varz");
    let varz = match get_json(&http()?, url, None).await {
        Ok(v) => v,
        Err(GetError::NotFound) => return Err("the monitoring endpoint has no /varz".into()),
        Err(GetError::Other(e)) => return Err(e),
    };
    sync_of_varz(&varz)
}

/// [`varz_sync`]'s reading of a `/varz` answer.
pub(super) fn sync_of_varz(varz: &serde_json::Value) -> Known<NatsSync> {
    let Some(config) = varz.pointer("/jetstream/config") else {
        return Err("the server's /varz shows no JetStream".into());
    };
    if config
        .get("sync_always")
        .and_then(serde_json::Value::as_bool)
        == Some(true)
    {
        return Ok(NatsSync::Always);
    }
    match config
        .get("sync_interval")
        .and_then(serde_json::Value::as_u64)
    {
        Some(ns) if ns > 0 => Ok(NatsSync::EveryMs(ns / 1_000_000)),
        _ => Ok(NatsSync::EveryMs(NATS_DEFAULT_SYNC_MS)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varz_says_always_an_interval_or_by_its_silence_the_default() {
        let v = |j: &str| sync_of_varz(&serde_json::from_str(j).unwrap());
        assert_eq!(
            v(r#"{"jetstream":{"config":{"sync_always":true,"sync_interval":1000000000}}}"#),
            Ok(NatsSync::Always)
        );
        assert_eq!(
            v(r#"{"jetstream":{"config":{"sync_interval":1000000000}}}"#),
            Ok(NatsSync::EveryMs(1000))
        );
        assert_eq!(
            v(r#"{"jetstream":{"config":{"max_memory":1}}}"#),
            Ok(NatsSync::EveryMs(NATS_DEFAULT_SYNC_MS))
        );
        assert!(v(r#"{"server_id":"x"}"#).is_err());
    }
}
