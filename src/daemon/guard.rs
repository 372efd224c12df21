//! What every answer of the daemon's HTTP server goes through, whatever its route: the `Host`
//! check (`--allowed-host`, against DNS rebinding: a page on a name its owner points at
//! 127.0.0.1 must not read the API, the console or `/metrics`) and `X-Content-Type-Options:
//! nosniff` on every answer (a browser never guesses a JSON or `/metrics` body to be a page).
//!
//! # Guarantees
//! - A request whose `Host` header is absent, or whose host part (port aside, case and a final
//!   dot ignored) is not allowed, is answered `403` with a JSON error before any route sees it,
//!   reads included.
//! - Allowed: loopback names (`localhost`, `127.0.0.0/8`, `::1`), the listen address, the
//!   address the connection came in on (the pod's IP of a daemon listening on `0.0.0.0`: what
//!   probes and scrapes send; a rebinding page names a host, not this address), this
//!   machine's hostname, and every `--allowed-host`; `--allowed-host '*'` allows any `Host`
//!   (behind an ingress that checks it itself).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The local address a request's connection came in on (set by [`super::http`]).
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub SocketAddr);

/// The `Host` names a daemon answers for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    /// Lowercase names without a final dot; IPv6 addresses without brackets.
    names: Vec<String>,
    /// `*` was given: any `Host`.
    any: bool,
}

impl AllowedHosts {
    /// Loopback names, the listen address, `hostname` (this machine's, when known) and `extra`
    /// (`--allowed-host`, each a name, an address, or `*`).
    pub fn new(listen: SocketAddr, hostname: Option<&str>, extra: &[String]) -> AllowedHosts {
        let mut names: Vec<String> = vec![listen.ip().to_string()];
        names.extend(hostname.map(str::to_string));
        names.extend(extra.iter().cloned());
        let any = names.iter().any(|n| n.trim() == "*");
        let names = names.iter().map(|n| normal(host_part(n))).collect();
        AllowedHosts { names, any }
    }

    /// Whether a request with this `Host` header, on a connection that came in on `local`, may
    /// be answered.
    pub fn allows_on(&self, host: Option<&str>, local: Option<SocketAddr>) -> bool {
        let on_local = |h: &str| {
            local.is_some_and(|l| {
                normal(host_part(h))
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip == l.ip())
            })
        };
        self.allows(host) || host.is_some_and(on_local)
    }

    /// Whether a request with this `Host` header may be answered.
    pub fn allows(&self, host: Option<&str>) -> bool {
        if self.any {
            return true;
        }
        let Some(host) = host else {
            return false;
        };
        let host = normal(host_part(host));
        is_loopback(&host) || self.names.contains(&host)
    }
}

/// This machine's hostname, when `/etc/hostname` says it.
pub fn machine_hostname() -> Option<String> {
    let name = std::fs::read_to_string("/etc/hostname").ok()?;
    let name = name.trim();
    (!name.is_empty()).then(|| name.to_string())
}

/// A host name compared: lowercase, without a final dot.
fn normal(host: &str) -> String {
    host.trim().trim_end_matches('.').to_ascii_lowercase()
}

/// The host part of a `Host` header (`[::1]:8480` → `::1`, `example.org:80` → `example.org`).
pub fn host_part(authority: &str) -> &str {
    let authority = authority.trim();
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    // A bare IPv6 address (given to --allowed-host) has several colons and no port.
    if authority.matches(':').count() > 1 {
        return authority;
    }
    authority.split(':').next().unwrap_or(authority)
}

/// Whether a host name is this machine's loopback (`localhost`, `127.0.0.0/8`, `::1`).
pub fn is_loopback(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The middleware: the `Host` check, then `nosniff` on whatever is answered.
pub async fn guard(
    State(allowed): State<Arc<AllowedHosts>>,
    request: Request,
    next: Next,
) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("?"));
    let local = request.extensions().get::<LocalAddr>().map(|l| l.0);
    let mut response = if allowed.allows_on(host, local) {
        next.run(request).await
    } else {
        let shown = host.map_or_else(|| "none".to_string(), crate::outgoing::line);
        let body = serde_json::json!({
            "error": format!(
                "Host {shown:?} is not one this daemon answers for (--allowed-host; loopback, \
                 the listen address and this machine's hostname are allowed)"
            )
        });
        let mut r = (StatusCode::FORBIDDEN, body.to_string()).into_response();
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        r
    };
    response.headers_mut().insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

/// `router` with [`guard`] in front of every route.
pub fn guarded(router: axum::Router, allowed: AllowedHosts) -> axum::Router {
    router.layer(axum::middleware::from_fn_with_state(
        Arc::new(allowed),
        guard,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_the_listen_address_the_hostname_and_the_given_names_are_allowed() {
        let listen: SocketAddr = "10.1.2.3:8480".parse().unwrap();
        let a = AllowedHosts::new(listen, Some("ctl-1"), &["Migrate.Example.org".into()]);
        for ok in [
            "127.0.0.1:8480",
            "localhost",
            "LOCALHOST.:1",
            "[::1]:8480",
            "10.1.2.3:8480",
            "ctl-1",
            "migrate.example.org",
            "migrate.example.org.:443",
        ] {
            assert!(a.allows(Some(ok)), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:8480",
            "10.1.2.4",
            "",
            "ctl-1.evil",
        ] {
            assert!(!a.allows(Some(refused)), "{refused}");
        }
        assert!(!a.allows(None));
        let on: SocketAddr = "10.9.9.9:8480".parse().unwrap();
        assert!(a.allows_on(Some("10.9.9.9:8480"), Some(on)));
        assert!(!a.allows_on(Some("evil.example"), Some(on)));
        let any = AllowedHosts::new(listen, None, &["*".into()]);
        assert!(any.allows(Some("evil.example")) && any.allows(None));
    }

    #[test]
    fn an_ipv6_listen_address_is_allowed_with_brackets() {
        let listen: SocketAddr = "[fd00::1]:8480".parse().unwrap();
        let a = AllowedHosts::new(listen, None, &["fd00::2".into()]);
        assert!(a.allows(Some("[fd00::1]:8480")));
        assert!(a.allows(Some("[fd00::2]")));
        assert!(!a.allows(Some("[fd00::3]:8480")));
    }
}
