//! The world's /metrics ([`World::render_metrics`]): what the plan's gates read over HTTP.

use super::{World, side_index};
use crate::metrics_text::{Kind, sample, type_line};
use crate::routing::Side;

impl World {
    /// The world's /metrics, as the plan's gates read them.
    pub fn render_metrics(&self) -> String {
        let mut out = String::new();
        let reading: Vec<Side> = if self.consumer_up() {
            self.router.consume()
        } else {
            Vec::new()
        };
        type_line(&mut out, "queue_consumer_connected", Kind::Gauge);
        for side in [Side::Old, Side::New] {
            let broker = self.broker_of(side);
            let connected = reading.contains(&side) && !broker.down;
            let labels = [("broker", side.as_str())];
            sample(
                &mut out,
                "queue_consumer_connected",
                &labels,
                u8::from(connected),
            );
        }
        type_line(&mut out, "broker_queue_depth", Kind::Gauge);
        type_line(&mut out, "broker_dlq_depth", Kind::Gauge);
        for side in [Side::Old, Side::New] {
            let broker = self.broker_of(side);
            // An unreachable broker reports nothing: gates on it hold.
            if broker.down {
                continue;
            }
            let labels = [("broker", side.as_str())];
            sample(&mut out, "broker_queue_depth", &labels, broker.depth());
            sample(&mut out, "broker_dlq_depth", &labels, broker.dead.len());
        }
        type_line(&mut out, "demo_consumer_attempts_total", Kind::Counter);
        for side in [Side::Old, Side::New] {
            let i = side_index(side);
            for (result, n) in [
                ("ok", self.tally.attempts_ok[i]),
                ("error", self.tally.attempts_err[i]),
            ] {
                let labels = [("route", side.as_str()), ("result", result)];
                sample(&mut out, "demo_consumer_attempts_total", &labels, n);
            }
        }
        type_line(&mut out, "demo_probe_effects", Kind::Gauge);
        sample(
            &mut out,
            "demo_probe_effects",
            &[],
            self.tally.probe_effects,
        );
        type_line(&mut out, "demo_probe_deliveries", Kind::Gauge);
        sample(
            &mut out,
            "demo_probe_deliveries",
            &[],
            self.tally.probe_deliveries,
        );
        type_line(&mut out, "demo_probe_latency_seconds", Kind::Gauge);
        for side in [Side::Old, Side::New] {
            if let Some(l) = self.probe_latency_s[side_index(side)] {
                let labels = [("route", side.as_str())];
                sample(&mut out, "demo_probe_latency_seconds", &labels, l);
            }
        }
        type_line(&mut out, "demo_duplicate_effects", Kind::Gauge);
        sample(
            &mut out,
            "demo_duplicate_effects",
            &[],
            self.duplicate_effects,
        );
        if self.consumer_up() {
            let started_s = self.consumer_started_ms / 1000;
            type_line(&mut out, "process_start_time_seconds", Kind::Gauge);
            sample(
                &mut out,
                "process_start_time_seconds",
                &[("job", "consumer")],
                started_s,
            );
        }
        out.push_str(&self.metrics.render());
        out.push_str(&self.published.render());
        out.push_str(&self.stale.render());
        out
    }
}
