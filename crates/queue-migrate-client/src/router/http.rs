//! The HTTP follower's requests: `GET`s by reqwest on the caller's tokio runtime (HTTP/1.1; plain,
//! or rustls with ring and the platform's roots), through the proxy [`ProxyChoice`] names, the
//! answer's body read up to a cap.
//!
//! # Guarantees
//! - No redirect is followed: a 3xx is an answer like any other status. Connections are kept
//!   alive between the long-polls and closed when the follower stops.
//! - A 200's body is refused past `cap` bytes, by its `Content-Length` before it is read, or by
//!   what arrived so far; the bodies of other statuses are not read.
//! - The whole exchange (connection, proxy, TLS, holding, body) ends within the timeout given, on
//!   tokio's clock; a connection alone within [`CONNECT_TIMEOUT`].
//! - No process-wide state is touched: the ring provider is handed to reqwest in the TLS config,
//!   not installed as the process's default; the environment is read once, when the client is
//!   built.
//! - Failures never quote a URL's credentials (the daemon's or the proxy's): see
//!   [`crate::redact`].

use std::sync::Arc;
use std::time::Duration;

use url::Url;

/// How long a connection (TCP, the proxy's tunnel, TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which proxy the HTTP follower's requests go through
/// ([`HttpFollow::proxy`](super::HttpFollow::proxy)).
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyChoice {
    /// As the environment says when the follower starts: `HTTP_PROXY` for an
    /// `http://` daemon, `HTTPS_PROXY` for an `https://` one (tunnelled by `CONNECT`), else
    /// `ALL_PROXY`, each also in lower case; no proxy for a host `NO_PROXY` (or `no_proxy`)
    /// lists. `HTTP_PROXY` is ignored when `REQUEST_METHOD` is set (a CGI program, whose
    /// request may set it). Variables changed after the follower started are not seen. The
    /// default.
    #[default]
    Environment,
    /// No proxy, whatever the environment says.
    Direct,
    /// Every request through one proxy, except to the hosts `no_proxy` lists; the environment is
    /// not read.
    Through {
        /// The proxy, `http://host:port` (credentials as `http://user:password@host:port`).
        url: String,
        /// Hosts reached directly, in `NO_PROXY`'s syntax: comma-separated names (each matches
        /// its subdomains too), IP addresses, networks such as `10.0.0.0/8`, or `*` for all.
        no_proxy: Option<String>,
    },
}

impl std::fmt::Debug for ProxyChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyChoice::Environment => f.write_str("Environment"),
            ProxyChoice::Direct => f.write_str("Direct"),
            ProxyChoice::Through { url, no_proxy } => f
                .debug_struct("Through")
                .field("url", &shown(url))
                .field("no_proxy", no_proxy)
                .finish(),
        }
    }
}

/// A proxy URL as reqwest reads it: one without a scheme is `http://`.
fn with_scheme(proxy: &str) -> String {
    if proxy.contains("://") {
        proxy.to_string()
    } else {
        format!("http://{proxy}")
    }
}

/// A proxy URL as shown: its credentials masked, with or without a scheme.
fn shown(proxy: &str) -> String {
    crate::redact::url(&with_scheme(proxy))
}

/// An HTTP client for one endpoint's `GET`s.
#[derive(Clone)]
pub(crate) struct Client {
    inner: reqwest::Client,
}

/// An answer: its status, its `ETag`, its body (empty unless the status is 200).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) etag: Option<String>,
    pub(crate) body: Vec<u8>,
}

/// Why a request got no answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Connection refused, reset, timed out, TLS or proxy refused, or an answer that is not HTTP.
    Unreachable(String),
    /// The body is larger than the cap.
    TooLarge,
}

impl Client {
    /// A client sending `user_agent`, through `proxy`, for an `https://` daemon if `https`.
    ///
    /// # Errors
    /// The platform's certificate verifier cannot be set up for an `https://` daemon, or the
    /// proxy's URL is not one.
    pub(crate) fn new(
        user_agent: &str,
        proxy: &ProxyChoice,
        https: bool,
    ) -> Result<Client, String> {
        let builder = reqwest::Client::builder()
            .tls_backend_preconfigured(tls_config(https)?)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(user_agent);
        let builder = match proxy {
            // reqwest reads the variables when the client is built (its `system-proxy` feature,
            // the macOS and Windows settings, is off).
            ProxyChoice::Environment => builder,
            ProxyChoice::Direct => builder.no_proxy(),
            ProxyChoice::Through { url, no_proxy } => {
                let through = reqwest::Proxy::all(url.as_str())
                    .map_err(|e| format!("proxy {}: {}", shown(url), shown_error(&e, url)))?
                    .no_proxy(no_proxy.as_deref().and_then(reqwest::NoProxy::from_string));
                builder.proxy(through)
            }
        };
        let inner = builder
            .build()
            .map_err(|e| crate::redact::error(&e.without_url()))?;
        Ok(Client { inner })
    }

    /// `GET url` with `headers`, the whole exchange within `timeout`.
    pub(crate) async fn get(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
        timeout: Duration,
        cap: usize,
    ) -> Result<Answer, Failure> {
        let mut request = self.inner.get(url.clone()).timeout(timeout);
        for (name, value) in headers {
            // Refused here with its name; reqwest would refuse it too, later and anonymously.
            if value.contains(['\r', '\n']) {
                return Err(Failure::Unreachable(format!(
                    "the {name} header holds a line break"
                )));
            }
            request = request.header(*name, *value);
        }
        let failed = |e: reqwest::Error| unreachable(e, timeout);
        let mut response = request.send().await.map_err(failed)?;
        let status = response.status().as_u16();
        let etag = response
            .headers()
            .get(reqwest::header::ETAG)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.trim().to_string());
        let mut body = Vec::new();
        if status == 200 {
            if response.content_length().is_some_and(|n| n > cap as u64) {
                return Err(Failure::TooLarge);
            }
            while let Some(chunk) = response.chunk().await.map_err(failed)? {
                if body.len().saturating_add(chunk.len()) > cap {
                    return Err(Failure::TooLarge);
                }
                body.extend_from_slice(&chunk);
            }
        }
        Ok(Answer { status, etag, body })
    }
}

/// rustls with ring and the platform's roots. For an `http://` daemon a system without roots
/// (a minimal container) is no error: it gets none, and only a proxy reached by `https://`
/// would need them (and be refused).
fn tls_config(https: bool) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = || {
        rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())
    };
    match rustls_platform_verifier::BuilderVerifierExt::with_platform_verifier(builder()?) {
        Ok(config) => Ok(config.with_no_client_auth()),
        Err(e) if https => Err(e.to_string()),
        Err(_) => Ok(builder()?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth()),
    }
}

/// A failed request as the router says it: the timeout it was given, or reqwest's error and its
/// causes, URLs redacted.
fn unreachable(e: reqwest::Error, timeout: Duration) -> Failure {
    if e.is_timeout() && !e.is_connect() {
        return Failure::Unreachable(format!("no answer within {timeout:?} (timed out)"));
    }
    Failure::Unreachable(crate::redact::error(&e.without_url()))
}

/// reqwest's error about the proxy `url`, its credentials masked even if it has no scheme.
fn shown_error(e: &reqwest::Error, url: &str) -> String {
    let url = with_scheme(url);
    crate::redact::known(&crate::redact::error(e), crate::redact::secret_parts(&url))
}
