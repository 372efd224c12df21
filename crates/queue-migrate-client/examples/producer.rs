//! A producer in Rust (feature `router`): follow the routing document, route each message by its
//! aggregate key, stamp it, count it. `producer ROUTING_FILE` or `producer http://DAEMON:8480`.
use std::time::Duration;

use queue_migrate_client::router::Router;
use queue_migrate_client::stamp::PublishedCounter;
use queue_migrate_client::time;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let source = std::env::args()
        .nth(1)
        .ok_or("usage: producer ROUTING_FILE | DAEMON_URL")?;
    // The migration's name (another migration's document is refused), the plan's `slices` and
    // broker names: one `broker` label from the first message on.
    let router = Router::for_migration("orders", 128, "rabbitmq", "nats");
    let _follower = if source.starts_with("http") {
        router.follow_http(&source, "orders", std::env::var("MIGRATE_API_TOKEN").ok())?
    } else {
        router.follow_file(&source, Duration::from_secs(1))?
    };
    // Until the first document arrives every key goes to old (generation 0): safe, not wrong.
    let mut changes = router.subscribe();
    let _ = tokio::time::timeout(Duration::from_secs(5), changes.wait_for(|g| *g > 0)).await;

    let published = PublishedCounter::new(); // serve published.render() on /metrics
    for order in ["order-0", "order-1", "order-2"] {
        let route = router.route(order); // lock-free, never waits
        let stamp = router.stamp(&route, "checkout", time::now_ms())?;
        // publish(route.target, stamp.headers(), body).await?;  (your broker client)
        published.record(&stamp);
        println!(
            "{order} slice {} -> {} ({})",
            route.slice, stamp.broker, stamp.side
        );
    }
    print!("{}", published.render());
    Ok(())
}
