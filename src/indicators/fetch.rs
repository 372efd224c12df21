//! HTTP for indicator sources: PromQL instant queries and /metrics scrapes.
//!
//! Every failure comes back as a sentence that names the source and says what went wrong; the
//! controller turns it into a gate hold, never into a number.

use std::time::Duration;

use super::promql::decode_instant;

/// Largest /metrics body read (a runaway exporter must not exhaust the controller).
pub const MAX_SCRAPE_BYTES: usize = 64 * 1024 * 1024;

/// Errors of the HTTP client itself.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The HTTP client could not be built (TLS setup).
    #[error("cannot build the HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Fetches readings over HTTP with a per-request timeout.
#[derive(Debug, Clone)]
pub struct Fetcher {
    client: reqwest::Client,
}

/// Install the one rustls crypto provider of the tree (ring). Safe to call more than once.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl Fetcher {
    /// A client whose every request gives up after `timeout`.
    ///
    /// # Errors
    /// The TLS stack cannot be initialised.
    pub fn new(timeout: Duration) -> Result<Fetcher, FetchError> {
        install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("queue-migrate/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Fetcher { client })
    }

    /// One PromQL instant query at `at_ms`: exactly one finite number, or why not.
    ///
    /// # Errors
    /// A sentence for the gate's hold reason.
    pub async fn prometheus(&self, base: &str, query: &str, at_ms: i64) -> Result<f64, String> {
        let url = format!("{}/api/v1/query", base.trim_end_matches('/'));
        let time = format!("{}.{:03}", at_ms.div_euclid(1000), at_ms.rem_euclid(1000));
        let response = self
            .client
            .get(&url)
            .query(&[("query", query), ("time", time.as_str())])
            .send()
            .await
            .map_err(|e| describe(&url, &e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| describe(&url, &e))?;
        // Prometheus answers 400/422/503 with a JSON error body worth showing.
        match decode_instant(&body) {
            Ok(v) => Ok(v),
            Err(e) if status.is_success() => Err(e.to_string()),
            Err(e) => Err(format!("HTTP {status} from {url}: {e}")),
        }
    }

    /// Scrape a /metrics endpoint: its text, or why not.
    ///
    /// # Errors
    /// A sentence for the gate's hold reason.
    pub async fn scrape(&self, url: &str) -> Result<String, String> {
        let mut response = self
            .client
            .get(url)
            .header(
                reqwest::header::ACCEPT,
                "text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5",
            )
            .send()
            .await
            .map_err(|e| describe(url, &e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {status} from {url}"));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| describe(url, &e))? {
            if body.len() + chunk.len() > MAX_SCRAPE_BYTES {
                return Err(format!(
                    "{url} sent more than {} MiB of metrics: refusing to parse it",
                    MAX_SCRAPE_BYTES / (1024 * 1024)
                ));
            }
            body.extend_from_slice(&chunk);
        }
        String::from_utf8(body).map_err(|e| format!("{url} sent metrics that are not UTF-8: {e}"))
    }
}

impl Fetcher {
    /// Write a routing document to an etcd key through the v3 HTTP/JSON gateway
    /// (`POST /v3/kv/put` with base64 key and value).
    ///
    /// # Errors
    /// A sentence naming the endpoint and what failed.
    pub async fn etcd_put(
        &self,
        endpoint: &str,
        key: &str,
        doc: &crate::routing::RoutingDocument,
    ) -> Result<(), String> {
        use base64::Engine;
        let b64 = base64::engine::general_purpose::STANDARD;
        let value = serde_json::to_vec(doc).map_err(|e| format!("cannot encode routing: {e}"))?;
        let url = format!("{}/v3/kv/put", endpoint.trim_end_matches('/'));
        let body = serde_json::json!({ "key": b64.encode(key), "value": b64.encode(value) });
        let response = self
            .client
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("etcd {}", describe(&url, &e)))?;
        let status = response.status();
        if status.is_success() {
            Ok(())
        } else {
            let text = response.text().await.unwrap_or_default();
            Err(format!("etcd {url}: HTTP {status}: {}", text.trim()))
        }
    }

    /// The shared HTTP client (webhooks reuse it).
    pub fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

fn describe(url: &str, e: &reqwest::Error) -> String {
    if e.is_timeout() {
        format!("{url}: timed out")
    } else if e.is_connect() {
        format!("{url}: cannot connect (is the source up?)")
    } else {
        let mut msg = format!("{url}: {e}");
        let mut source = std::error::Error::source(e);
        while let Some(s) = source {
            msg.push_str(&format!(": {s}"));
            source = s.source();
        }
        msg
    }
}
