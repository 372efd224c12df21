//! The HTTP follower's one request: `GET` over HTTP/1.1 on tokio's sockets (plain, or rustls with
//! ring and the platform's roots), `Connection: close`, the answer read up to a cap. Just what the
//! routing endpoint needs, so that a producer links no HTTP framework (no hyper).
//!
//! # Guarantees
//! - One connection per request, closed after it; no proxy, no redirect, no pooling.
//! - The body is read as its `Content-Length`, its chunks (`Transfer-Encoding: chunked`) or up
//!   to the end of the connection, and never beyond `cap` bytes.

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use url::Url;

/// How long a connection (TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest response head read.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// An HTTP/1.1 client for one endpoint's `GET`s.
#[derive(Clone)]
pub(crate) struct Client {
    /// For `https://` URLs: rustls with the platform's verifier.
    tls: Option<tokio_rustls::TlsConnector>,
}

/// An answer: its status, its `ETag`, its body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) etag: Option<String>,
    pub(crate) body: Vec<u8>,
}

/// Why a request got no answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// Connection refused, reset, timed out, TLS refused, or an answer that is not HTTP.
    Unreachable(String),
    /// The body is larger than the cap.
    TooLarge,
}

impl Client {
    /// A client for `url`'s scheme (TLS set up only for `https`).
    ///
    /// # Errors
    /// The platform's certificate verifier cannot be set up.
    pub(crate) fn for_url(url: &Url) -> Result<Client, String> {
        if url.scheme() != "https" {
            return Ok(Client { tls: None });
        }
        // The tree's one crypto provider (ring); harmless if one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = rustls::ClientConfig::builder();
        let config = rustls_platform_verifier::BuilderVerifierExt::with_platform_verifier(config)
            .map_err(|e| e.to_string())?
            .with_no_client_auth();
        Ok(Client {
            tls: Some(tokio_rustls::TlsConnector::from(Arc::new(config))),
        })
    }

    /// `GET url` with `headers`, the whole exchange within `timeout`.
    pub(crate) async fn get(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
        timeout: Duration,
        cap: usize,
    ) -> Result<Answer, Failure> {
        let request = request(url, headers)?;
        tokio::time::timeout(timeout, self.exchange(url, &request, cap))
            .await
            .map_err(|_| {
                Failure::Unreachable(format!("no answer within {timeout:?} (timed out)"))
            })?
    }

    async fn exchange(&self, url: &Url, request: &[u8], cap: usize) -> Result<Answer, Failure> {
        let unreachable =
            |what: &str, e: std::io::Error| Failure::Unreachable(format!("{what}: {e}"));
        let host = url
            .host_str()
            .ok_or_else(|| Failure::Unreachable("the URL has no host".into()))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.port_or_known_default().unwrap_or(80);
        let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host, port)))
            .await
            .map_err(|_| Failure::Unreachable("connect: timed out".into()))?
            .map_err(|e| unreachable("connect", e))?;
        let Some(tls) = &self.tls else {
            return read_answer(tcp, request, cap).await;
        };
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| Failure::Unreachable(format!("TLS: {e}")))?;
        let stream = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(name, tcp))
            .await
            .map_err(|_| Failure::Unreachable("TLS handshake: timed out".into()))?
            .map_err(|e| unreachable("TLS handshake", e))?;
        read_answer(stream, request, cap).await
    }
}

/// The request's bytes; a header value with a line break is refused (it would forge headers).
fn request(url: &Url, headers: &[(&str, &str)]) -> Result<Vec<u8>, Failure> {
    let mut target = url.path().to_string();
    if let Some(query) = url.query() {
        target.push('?');
        target.push_str(query);
    }
    let mut host = url.host_str().unwrap_or_default().to_string();
    if let Some(port) = url.port() {
        host.push_str(&format!(":{port}"));
    }
    let mut out = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (name, value) in headers {
        if value.contains(['\r', '\n']) {
            return Err(Failure::Unreachable(format!(
                "the {name} header holds a line break"
            )));
        }
        out.push_str(&format!("{name}: {value}\r\n"));
    }
    out.push_str("\r\n");
    Ok(out.into_bytes())
}

/// Send `request`, then read the answer until it is whole.
async fn read_answer<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    request: &[u8],
    cap: usize,
) -> Result<Answer, Failure> {
    let io = |e: std::io::Error| Failure::Unreachable(e.to_string());
    stream.write_all(request).await.map_err(io)?;
    stream.flush().await.map_err(io)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let n = match stream.read(&mut chunk).await {
            Ok(n) => n,
            // A TLS peer that closes without close_notify: the end, as for plain TCP.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => 0,
            Err(e) => return Err(io(e)),
        };
        buf.extend_from_slice(&chunk[..n]);
        if let Some(answer) = parse(&buf, n == 0, cap)? {
            return Ok(answer);
        }
    }
}

/// The answer in `buf` if it is whole (`eof`: nothing more will come), `None` if more is needed.
fn parse(buf: &[u8], eof: bool, cap: usize) -> Result<Option<Answer>, Failure> {
    let bad = |what: &str| Failure::Unreachable(format!("not an HTTP answer: {what}"));
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut head = httparse::Response::new(&mut headers);
    let head_len = match head.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) if eof => {
            return Err(bad("the connection closed before its head ended"));
        }
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD_BYTES => {
            return Err(bad("its head is too large"));
        }
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(bad(&e.to_string())),
    };
    let status = head.code.unwrap_or_default();
    let header = |name: &str| {
        head.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let etag = header("etag").map(str::to_string);
    let chunked = header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    let length = match header("content-length") {
        Some(v) => Some(v.parse::<usize>().map_err(|_| bad("its Content-Length"))?),
        None => None,
    };
    let rest = &buf[head_len..];
    let body = if status == 304 || status == 204 || (100..200).contains(&status) {
        Some(Vec::new())
    } else if chunked {
        dechunk(rest, cap)?
    } else if let Some(n) = length {
        if n > cap {
            return Err(Failure::TooLarge);
        }
        (rest.len() >= n).then(|| rest[..n].to_vec())
    } else if rest.len() > cap {
        return Err(Failure::TooLarge);
    } else {
        eof.then(|| rest.to_vec())
    };
    match body {
        Some(body) => Ok(Some(Answer { status, etag, body })),
        None if eof => Err(bad("the connection closed before its body ended")),
        None => Ok(None),
    }
}

/// A chunked body, whole (`Some`) or not yet (`None`).
fn dechunk(mut rest: &[u8], cap: usize) -> Result<Option<Vec<u8>>, Failure> {
    let bad = || Failure::Unreachable("not an HTTP answer: a malformed chunk".into());
    let mut body = Vec::new();
    loop {
        let Some(line_end) = rest.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&rest[..line_end]).map_err(|_| bad())?;
        let size = line.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size, 16).map_err(|_| bad())?;
        if size == 0 {
            return Ok(Some(body));
        }
        if body.len().saturating_add(size) > cap {
            return Err(Failure::TooLarge);
        }
        let data = &rest[line_end + 2..];
        if data.len() < size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&data[..size]);
        rest = &data[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn whole(text: &str) -> Answer {
        parse(text.as_bytes(), true, 1024).unwrap().unwrap()
    }

    #[test]
    fn a_body_is_read_by_its_length_its_chunks_or_to_the_end() {
        let a = whole("HTTP/1.1 200 OK\r\nETag: \"7\"\r\nContent-Length: 2\r\n\r\n{}trailing");
        assert_eq!(
            (a.status, a.etag.as_deref(), &a.body[..]),
            (200, Some("\"7\""), &b"{}"[..])
        );
        let a = whole(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{\"\r\n1;x\r\n}\r\n0\r\n\r\n",
        );
        assert_eq!(a.body, b"{\"}");
        assert_eq!(whole("HTTP/1.1 200 OK\r\n\r\n{}").body, b"{}");
        assert_eq!(whole("HTTP/1.1 304 Not Modified\r\n\r\n").status, 304);
    }

    #[test]
    fn an_unfinished_answer_waits_then_fails_at_the_end() {
        let partial = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n{}";
        assert!(parse(partial, false, 1024).unwrap().is_none());
        assert!(matches!(
            parse(partial, true, 1024),
            Err(Failure::Unreachable(_))
        ));
        assert!(parse(b"HTTP/1.1 200", false, 1024).unwrap().is_none());
        assert!(matches!(
            parse(b"SSH-2.0\r\n\r\n", false, 1024),
            Err(Failure::Unreachable(_))
        ));
    }

    #[test]
    fn a_body_over_the_cap_is_refused_however_it_comes() {
        let long = "HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n";
        assert_eq!(
            parse(long.as_bytes(), false, 1024).err(),
            Some(Failure::TooLarge)
        );
        let chunks = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n";
        assert_eq!(
            parse(chunks.as_bytes(), false, 1024).err(),
            Some(Failure::TooLarge)
        );
        let endless = format!("HTTP/1.1 200 OK\r\n\r\n{}", "x".repeat(1025));
        assert_eq!(
            parse(endless.as_bytes(), false, 1024).err(),
            Some(Failure::TooLarge)
        );
    }

    #[test]
    fn a_header_value_with_a_line_break_is_refused() {
        let url =
            Url::parse("http://127.0.0.1:8480/v1/migrations/orders/routing?wait=30s").unwrap();
        let bytes = request(&url, &[("Authorization", "Bearer t")]).unwrap();
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "GET /v1/migrations/orders/routing?wait=30s HTTP/1.1\r\nHost: 127.0.0.1:8480\r\n\
             Connection: close\r\nAuthorization: Bearer t\r\n\r\n"
        );
        assert!(request(&url, &[("Authorization", "Bearer t\r\nX-Evil: 1")]).is_err());
    }
}
