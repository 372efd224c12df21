//! What the example apps share: broker flags, a tiny /metrics server, the clock.

use std::time::{SystemTime, UNIX_EPOCH};

use queue_migrate::brokers::{Adapter, Kind};

/// `KIND=URL` (e.g. `rabbitmq=amqp://guest:guest@127.0.0.1:5672/%2f`, `nats=nats://127.0.0.1:4222`,
/// `redis=redis://127.0.0.1:6379`).
pub fn parse_broker(spec: &str) -> Result<(Kind, String), String> {
    let (kind, url) = spec
        .split_once('=')
        .ok_or_else(|| format!("{spec:?}: expected KIND=URL, e.g. nats=nats://127.0.0.1:4222"))?;
    let kind =
        Kind::parse(kind).ok_or_else(|| format!("{kind:?}: expected rabbitmq, nats or redis"))?;
    Ok((kind, url.to_string()))
}

/// Connect, retrying every second until the broker answers (it may be starting or restarting).
pub async fn connect(spec: &(Kind, String), who: &str) -> Adapter {
    let mut warned = false;
    loop {
        match Adapter::connect(spec.0, &spec.1).await {
            Ok(a) => return a,
            Err(e) => {
                if !warned {
                    eprintln!("{who}: {e}; retrying every second");
                    warned = true;
                }
                tokio::time::sleep(std::time::Duration::from_secs(1)).await;
            }
        }
    }
}

/// Serve `render()` on `GET /metrics` at `addr`.
pub async fn serve_metrics<F>(addr: String, who: &'static str, render: F)
where
    F: Fn() -> String + Clone + Send + Sync + 'static,
{
    let listener = match tokio::net::TcpListener::bind(&addr).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{who}: cannot serve /metrics on {addr}: {e}");
            return;
        }
    };
    eprintln!("{who}: /metrics on http://{addr}/metrics");
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let render = render.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "text/plain; version=0.0.4; charset=utf-8",
                    )],
                    render(),
                )
            }
        }),
    );
    if let Err(e) = axum::serve(listener, app).await {
        eprintln!("{who}: /metrics server stopped: {e}");
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
