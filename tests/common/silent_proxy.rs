//! A TCP proxy that makes established connections go silent without closing them: what a
//! partition that heals only for new connections looks like to a client (a lost NAT or
//! conntrack entry, a failed-over load balancer: no FIN, no RST, the bytes go nowhere).
//!
//! [`SilentProxy::silence_established`]: from then on nothing is forwarded either way on every
//! connection open at that moment (what comes is read and dropped), and their sockets stay
//! open. Connections opened later are forwarded as usual.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The proxy (see the module doc); it runs on the caller's tokio runtime.
pub struct SilentProxy {
    pub addr: SocketAddr,
    /// The connections numbered below this are silent.
    cutoff: Arc<AtomicUsize>,
    /// Connections accepted so far (each numbered by the count before it).
    accepted: Arc<AtomicUsize>,
}

impl SilentProxy {
    /// A proxy on 127.0.0.1 (a free port) to `upstream`.
    pub async fn start(upstream: SocketAddr) -> SilentProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let cutoff = Arc::new(AtomicUsize::new(0));
        let (count, cut) = (accepted.clone(), cutoff.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                // Numbered as accepted: silenced by a silence from now on.
                let id = count.fetch_add(1, Ordering::SeqCst);
                let cut = cut.clone();
                tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::spawn(pump(cr, sw, id, cut.clone()));
                    tokio::spawn(pump(sr, cw, id, cut));
                });
            }
        });
        SilentProxy {
            addr,
            cutoff,
            accepted,
        }
    }

    /// `url` (a `postgres://user@host:port/db` URL) through this proxy.
    pub fn url_through(&self, url: &str) -> String {
        url.replacen(host_port(url), &self.addr.to_string(), 1)
    }

    /// Make every connection open now silent (see the module doc).
    pub fn silence_established(&self) {
        self.cutoff
            .store(self.accepted.load(Ordering::SeqCst), Ordering::SeqCst);
    }

    /// How many connections the proxy accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Forward `from` to `to` until connection `id` is silenced (then hold both open, forwarding
/// nothing) or either side closes.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    id: usize,
    cutoff: Arc<AtomicUsize>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if id < cutoff.load(Ordering::SeqCst) {
            // Silent: keep both halves open and drop what comes, forever.
            let _keep = to;
            loop {
                if let Ok(0) | Err(_) = from.read(&mut buf).await {
                    std::future::pending::<()>().await;
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// The `host:port` of a `postgres://user@host:port/db` URL.
fn host_port(url: &str) -> &str {
    let after_at = url.rsplit_once('@').map_or(url, |(_, rest)| rest);
    after_at.split('/').next().unwrap()
}

/// The `host:port` of a `postgres://user@host:port/db` URL, resolved.
pub fn upstream_of(url: &str) -> SocketAddr {
    std::net::ToSocketAddrs::to_socket_addrs(host_port(url))
        .unwrap()
        .next()
        .unwrap()
}
