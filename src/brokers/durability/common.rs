//! What every reader shares: the broker to read, and the monitoring endpoints' HTTP.

use std::time::Duration;

use crate::preflight::Side;

/// How long one HTTP request to a monitoring endpoint may take.
pub(super) const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// What to read: one broker of a plan.
#[derive(Debug, Clone, Copy)]
pub struct Target<'a> {
    pub side: Side,
    /// The display name.
    pub name: &'a str,
    /// The plan's kind (`nats`, `amqp`...).
    pub kind: &'a str,
    /// Its connection URL (may hold credentials: never shown as is).
    pub url: &'a str,
    /// The queue, stream or topic the migration writes to.
    pub destination: &'a str,
    /// The monitoring endpoint, when the plan names one.
    pub monitor: Option<&'a str>,
}

/// The HTTP client of the monitoring endpoints: bounded connect and request.
pub(super) fn http() -> Result<reqwest::Client, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(HTTP_TIMEOUT)
        .connect_timeout(crate::brokers::CONNECT_TIMEOUT)
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// A GET answered with JSON, or why not (its body's start on an HTTP error).
pub(super) async fn get_json(
    http: &reqwest::Client,
    url: reqwest::Url,
    auth: Option<(&str, Option<&str>)>,
) -> Result<serde_json::Value, GetError> {
    let shown = crate::redact::url(url.as_str());
    let mut req = http.get(url);
    if let Some((user, password)) = auth {
        req = req.basic_auth(user, password);
    }
    let response = req
        .send()
        .await
        .map_err(|e| GetError::Other(format!("{shown}: {}", crate::redact::error(&e))))?;
    let status = response.status();
    if status == reqwest::StatusCode::NOT_FOUND {
        return Err(GetError::NotFound);
    }
    if !status.is_success() {
        return Err(GetError::Other(format!("{shown}: HTTP {status}")));
    }
    response
        .json()
        .await
        .map_err(|e| GetError::Other(format!("{shown}: not JSON: {e}")))
}

/// Why a GET gave no JSON.
pub(super) enum GetError {
    NotFound,
    Other(String),
}
