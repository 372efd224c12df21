//! A producer that reads the routing document itself (feature `routing`: no async runtime):
//! `producer_document ROUTING_FILE`.
use queue_migrate_client::routing::RoutingDocument;
use queue_migrate_client::stamp::RouteStamp;
use queue_migrate_client::time;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: producer_document ROUTING_FILE")?;
    let doc: RoutingDocument = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    for order in ["order-0", "order-1", "order-2"] {
        let route = doc.route(order); // new when slice_of(key, slices_total) < slices_migrated
        let broker = doc.broker_name(route.target);
        let stamp = RouteStamp::new(&route, broker, "checkout", time::now_ms())?;
        println!(
            "{order} slice {} -> {} ({})",
            route.slice, stamp.broker, stamp.side
        );
        for (name, value) in stamp.headers() {
            println!("  {name}: {value}");
        }
    }
    Ok(())
}
