//! Writing the routing document to an etcd key, through the fetcher's HTTP client (the v3
//! HTTP/JSON gateway).

use super::{FetchError, Fetcher};
use crate::redact;

impl Fetcher {
    /// Write a routing document to an etcd key through the v3 HTTP/JSON gateway
    /// (`POST /v3/kv/put` with base64 key and value).
    ///
    /// # Errors
    /// What failed, in a sentence naming the endpoint.
    pub async fn etcd_put(
        &self,
        endpoint: &str,
        key: &str,
        doc: &crate::routing::RoutingDocument,
    ) -> Result<(), FetchError> {
        self.etcd_put_unmasked(endpoint, key, doc)
            .await
            .map_err(|reason| reason.masked(endpoint))
    }

    async fn etcd_put_unmasked(
        &self,
        endpoint: &str,
        key: &str,
        doc: &crate::routing::RoutingDocument,
    ) -> Result<(), FetchError> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let value = serde_json::to_vec(doc)
            .map_err(|e| FetchError::Encode(format!("cannot encode routing: {e}")))?;
        // The generation beside the document, zero-padded so that etcd's byte order is the
        // numbers' order: the put is a transaction that writes only over a lower generation
        // (a stale writer, an ex-leader, never moves the mirror back).
        let gen_key = format!("{key}.generation");
        let generation = format!("{:020}", doc.generation);
        let url = format!("{}/v3/kv/txn", endpoint.trim_end_matches('/'));
        let puts = serde_json::json!([
            { "request_put": { "key": b64.encode(key), "value": b64.encode(&value) } },
            { "request_put": { "key": b64.encode(&gen_key), "value": b64.encode(&generation) } },
        ]);
        let compares = [
            // First publication: no generation stored yet.
            serde_json::json!({ "key": b64.encode(&gen_key), "target": "VERSION", "result": "EQUAL", "version": "0" }),
            serde_json::json!({ "key": b64.encode(&gen_key), "target": "VALUE", "result": "LESS", "value": b64.encode(&generation) }),
        ];
        for compare in compares {
            let body = serde_json::json!({ "compare": [compare], "success": puts, "failure": [] });
            let response = self
                .client
                .post(&url)
                .json(&body)
                .send()
                .await
                .map_err(|e| FetchError::Request(format!("etcd {}", self.describe(&url, &e))))?;
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            if !status.is_success() {
                return Err(FetchError::Status(format!(
                    "etcd {}: HTTP {status}: {}",
                    redact::url(&url),
                    redact::text(text.trim())
                )));
            }
            let answer: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if answer["succeeded"].as_bool() == Some(true) {
                return Ok(());
            }
        }
        // The stored generation is this one or newer: nothing to write, nothing goes back.
        Ok(())
    }

    /// The shared HTTP client (webhooks reuse it).
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }
}
