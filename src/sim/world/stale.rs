//! The world's stale producers: a producer instance pinned to an old routing document (the
//! `stale-producer` fault), and the consumer's check of what it reads from the old broker
//! ([`crate::stale`]), with the broker's own position as the backlog's mark.

use super::World;
use crate::routing::{Route, Side};
use crate::sim::broker::Delivery;
use crate::stale::{Decision, Delivery as Facts};
use crate::stamp::RouteStamp;

impl World {
    /// Stop producer `name` from following the routing: it keeps the document followed before
    /// the current one (it missed the last publish). Answers the generation it is pinned to.
    pub fn pin_producer(&mut self, name: &str) -> Option<u64> {
        let i = self.producers.iter().position(|p| p.name == name)?;
        let doc = self.previous_doc.clone()?;
        let generation = doc.generation;
        self.pinned = Some((i, doc));
        Some(generation)
    }

    /// The pinned producer follows the routing again.
    pub fn unpin_producer(&mut self) {
        self.pinned = None;
    }

    /// The route producer `p` gives `aggregate` when it is the pinned one.
    pub(super) fn pinned_route(&self, p: usize, aggregate: &str) -> Option<Route> {
        match &self.pinned {
            Some((i, doc)) if *i == p => Some(doc.route(aggregate)),
            _ => None,
        }
    }

    /// The consumer's check of one delivery from the old broker (its first delivery only: a
    /// redelivery is the same message), by its route stamp and the broker's position.
    pub(super) fn check_stale(&mut self, d: &Delivery) -> Option<Decision> {
        let m = &d.message;
        if m.probe || m.attempts > 1 {
            return None;
        }
        let broker = self.broker_name(Side::Old);
        let route = Route::new(Side::Old, m.slice, m.generation);
        let stamp = RouteStamp::new(&route, broker, m.producer, m.at_ms).ok();
        let facts = Facts::at_position(m.position);
        Some(self.stale.check(stamp.as_ref(), facts))
    }
}
