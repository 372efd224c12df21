//! The daemon's HTTP server: the API's router served over HTTP/1.1 with limits, so that a flood of
//! connections can neither hold the process's file descriptors nor pile up without bound.
//!
//! - At most [`Limits::max_connections`] connections are served at once. One more is answered
//!   `503 Service Unavailable` with `Retry-After` and closed at once (at most
//!   [`REFUSALS_AT_ONCE`] such answers are in flight; beyond them a connection is closed unanswered).
//! - A request's headers must arrive within [`Limits::header_timeout`] of the connection opening or
//!   of the previous response (hyper's `header_read_timeout`, which also ends a kept-alive
//!   connection left idle that long).
//! - A connection on which no byte moved for [`Limits::idle_timeout`] while no request is being
//!   answered is closed (a client that stops reading its response; a body sent too slowly is
//!   the request timeout's).
//! - A request is answered within [`Limits::request_timeout`] (the routing long-poll within its
//!   `?wait`, at most [`MAX_WAIT`], plus that), else `503` with `Retry-After`.
//!
//! [`Limits::fit_open_files`] lowers the connection cap to leave the process descriptors for what
//! the controller itself needs (its store, its sources, its `file:` secrets).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, Sleep};

/// The longest a long-poll may wait.
pub const MAX_WAIT: Duration = Duration::from_secs(120);

/// Connections answered `503` at once when the cap is reached; more are closed unanswered.
pub const REFUSALS_AT_ONCE: usize = 32;

/// Descriptors kept for the controller itself when the connection cap is fitted to the process's
/// limit (see [`Limits::fit_open_files`]).
pub const RESERVED_FILES: u64 = 256;

/// The HTTP server's limits (`migrate run --http-...`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most connections served at once.
    pub max_connections: usize,
    /// Most routing long-polls parked at once; one more is answered `503` with `Retry-After`.
    pub max_long_polls: usize,
    /// Time for a request's headers to arrive (from the connection's start or the previous
    /// response).
    pub header_timeout: Duration,
    /// Time without a byte in either direction, while no request is being answered, after which
    /// a connection is closed.
    pub idle_timeout: Duration,
    /// Time to answer a request (a long-poll: its wait plus this).
    pub request_timeout: Duration,
    /// Most producers remembered from the routing long-poll, across all migrations
    /// ([`crate::indicators::followers`]); one more evicts the one seen longest ago.
    pub max_followers: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 1024,
            max_long_polls: 768,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            max_followers: crate::indicators::followers::DEFAULT_MAX_FOLLOWERS,
        }
    }
}

impl Limits {
    /// These limits with the connection cap lowered to fit a process allowed `open_files`
    /// descriptors (`RLIMIT_NOFILE`), keeping [`RESERVED_FILES`] of them, or half of them when
    /// that is fewer, for the controller itself. `None` (unknown) changes nothing.
    #[must_use]
    pub fn fit_open_files(self, open_files: Option<u64>) -> Limits {
        let Some(open_files) = open_files else {
            return self;
        };
        let room = open_files
            .saturating_sub(RESERVED_FILES)
            .max(open_files / 2)
            .max(1);
        let room = usize::try_from(room).unwrap_or(usize::MAX);
        Limits {
            max_connections: self.max_connections.min(room),
            ..self
        }
    }
}

/// The number of requests of one connection being answered now.
#[derive(Debug, Default)]
struct Busy(AtomicUsize);

/// Held while a request is answered.
struct Answering(Arc<Busy>);

impl Answering {
    fn new(busy: &Arc<Busy>) -> Answering {
        busy.0.fetch_add(1, Ordering::SeqCst);
        Answering(busy.clone())
    }
}

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A connection's socket that fails with `TimedOut` once no byte moved for `idle` while no
/// request is being answered.
struct Idle<T> {
    io: T,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
    busy: Arc<Busy>,
}

impl<T> Idle<T> {
    fn new(io: T, idle: Duration, busy: Arc<Busy>) -> Idle<T> {
        Idle {
            io,
            idle,
            deadline: Box::pin(tokio::time::sleep(idle)),
            busy,
        }
    }

    fn moved(&mut self) {
        let at = Instant::now() + self.idle;
        self.deadline.as_mut().reset(at);
    }

    /// Whether the idle time ran out (else the deadline is armed to wake this task).
    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        loop {
            if self.deadline.as_mut().poll(cx).is_pending() {
                return false;
            }
            if self.busy.0.load(Ordering::SeqCst) == 0 {
                return true;
            }
            // A handler is working (a long-poll waits): not idle.
            self.moved();
        }
    }

    fn timed_out() -> io::Error {
        io::Error::new(io::ErrorKind::TimedOut, "the connection was idle too long")
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Idle<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(r) => {
                this.moved();
                Poll::Ready(r)
            }
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(Self::timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Idle<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_write(cx, buf) {
            Poll::Ready(r) => {
                this.moved();
                Poll::Ready(r)
            }
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(Self::timed_out())),
            Poll::Pending => Poll::Pending,
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_flush(cx) {
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(Self::timed_out())),
            other => other,
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        match Pin::new(&mut this.io).poll_shutdown(cx) {
            Poll::Pending if this.expired(cx) => Poll::Ready(Err(Self::timed_out())),
            other => other,
        }
    }
}

/// `503` with `Retry-After: 1` and `{"error": message}`.
pub fn unavailable(message: &str) -> Response<Body> {
    let body = serde_json::json!({ "error": message }).to_string();
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// Whether a request is the routing long-poll (its time is its own `?wait`).
fn is_long_poll(path: &str) -> bool {
    path.starts_with("/v1/migrations/") && path.ends_with("/routing")
}

/// Serve `app` on `listener` within `limits` until `stop` turns true; then stop accepting, let
/// open connections finish their request in progress, and return.
///
/// # Errors
/// Never today (accept errors are waited out); kept for a listener that can fail for good.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) -> io::Result<()> {
    let permits = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let refusals = Arc::new(Semaphore::new(REFUSALS_AT_ONCE));
    // Every connection task holds a receiver; all dropped = all finished.
    let (done_tx, done_rx) = watch::channel(());
    let service = TowerToHyperService::new(app);
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|s| *s) => break,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors (EMFILE) or a connection reset before it was accepted:
                // wait a little rather than spin; the connection cap normally prevents the first.
                tracing::debug!("cannot accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if let Ok(refusal) = refusals.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    refuse(stream, limits.max_connections).await;
                    drop(refusal);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = service.clone();
        let mut stop = stop.clone();
        let done = done_rx.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, service, limits, &mut stop).await;
            drop(permit);
            drop(done);
        });
    }
    drop(done_rx);
    drop(listener);
    done_tx.closed().await;
    Ok(())
}

/// Answer a connection over the cap: `503` and close, never waiting more than a second.
async fn refuse(mut stream: TcpStream, cap: usize) {
    let body = format!(
        "{{\"error\":\"this daemon serves at most {cap} connections at once (--http-max-connections): retry shortly\"}}"
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
        // Read what the client sent (a little of it) before closing: closing with unread
        // bytes resets the connection, and the client may lose the answer.
        let mut sink = [0u8; 1024];
        for _ in 0..8 {
            match stream.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
}

async fn serve_connection(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    service: TowerToHyperService<Router>,
    limits: Limits,
    stop: &mut watch::Receiver<bool>,
) {
    let busy = Arc::new(Busy::default());
    let local = stream.local_addr().ok().map(super::guard::LocalAddr);
    let io = TokioIo::new(Idle::new(stream, limits.idle_timeout, busy.clone()));
    let handler = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        // The address the connection came in on: a `Host` naming it is allowed (guard).
        if let Some(local) = local {
            req.extensions_mut().insert(local);
        }
        // Who connected: `--trusted-proxy` is checked against it (axum's `ConnectInfo`).
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let answering = Answering::new(&busy);
        let limit = if is_long_poll(req.uri().path()) {
            MAX_WAIT + limits.request_timeout
        } else {
            limits.request_timeout
        };
        let answer = hyper::service::Service::call(&service, req);
        async move {
            let out = match tokio::time::timeout(limit, answer).await {
                Ok(Ok(response)) => response,
                Ok(Err(never)) => match never {},
                Err(_) => unavailable(&format!(
                    "not answered within {} (--http-request-timeout): retry",
                    crate::time::human(limit)
                )),
            };
            drop(answering);
            Ok::<_, Infallible>(out)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    let conn = builder.serve_connection(io, handler);
    tokio::pin!(conn);
    let mut stopping = false;
    loop {
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!("connection closed: {e}");
                }
                break;
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                conn.as_mut().graceful_shutdown();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_cap_leaves_descriptors_to_the_controller() {
        let limits = Limits::default();
        assert_eq!(limits.fit_open_files(None), limits);
        assert_eq!(limits.fit_open_files(Some(1 << 20)), limits);
        assert_eq!(limits.fit_open_files(Some(1024)).max_connections, 768);
        assert_eq!(limits.fit_open_files(Some(256)).max_connections, 128);
        assert_eq!(limits.fit_open_files(Some(1)).max_connections, 1);
        assert_eq!(limits.fit_open_files(Some(0)).max_connections, 1);
    }

    /// A client that stops reading its answer: the write stalls, and the connection fails with
    /// `TimedOut` after the idle time, unless a request is being answered (a parked long-poll).
    #[tokio::test]
    async fn a_connection_whose_client_stopped_reading_times_out_unless_a_request_is_answered() {
        let idle = Duration::from_millis(200);
        let (server, _client) = tokio::io::duplex(64);
        let busy = Arc::new(Busy::default());
        let mut io = Idle::new(server, idle, busy.clone());
        let started = std::time::Instant::now();
        let stalled = async {
            loop {
                io.write_all(&[b'x'; 1024]).await?;
            }
        };
        let r: io::Result<()> = tokio::time::timeout(Duration::from_secs(5), stalled)
            .await
            .expect("closed within the idle time, not held");
        assert_eq!(r.unwrap_err().kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= idle);

        let (server, _client) = tokio::io::duplex(64);
        let mut io = Idle::new(server, idle, busy.clone());
        let answering = Answering::new(&busy);
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(idle * 3, io.read(&mut buf)).await;
        assert!(read.is_err(), "still open while a request is answered");
        drop(answering);
        let read = tokio::time::timeout(idle * 3, io.read(&mut buf)).await;
        assert_eq!(
            read.expect("closed once idle").unwrap_err().kind(),
            io::ErrorKind::TimedOut
        );
    }

    #[test]
    fn only_the_routing_endpoint_is_a_long_poll() {
        assert!(is_long_poll("/v1/migrations/orders/routing"));
        assert!(!is_long_poll("/v1/migrations/orders/history"));
        assert!(!is_long_poll("/routing"));
    }
}
