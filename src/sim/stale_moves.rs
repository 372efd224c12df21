//! The stale-producer check over many slice moves (issue 58's figures, BENCHMARKS.md "Stale
//! producers"): producers that follow the routing document with a propagation delay and a
//! skewed clock, an old broker with a backlog at every publish (its consumer stopped around it),
//! and the consumer's [`crate::stale`] check on everything it reads from the old broker, on a
//! simulated clock in 100 ms ticks. A guard scrapes the consumer's stale count every second.
//!
//! Two questions: does a clean move ever trip (a false trip is a `Stale` decision on a message
//! of a producer that follows), and how long after the grace is a producer pinned to the
//! generation before a move detected (the first scrape whose count grew)?

use std::collections::VecDeque;

use crate::dlq::generate::Rng;
use crate::routing::{Route, Side};
use crate::stale::{Bounds, Decision, Delivery, Mark, MoveLedger, Publish, classify};
use crate::stamp::RouteStamp;

const SLICES: u32 = 128;
const TICK_MS: i64 = 100;

/// What the old broker gives a consumer besides the stamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marks {
    /// A position only (RabbitMQ stream offsets, Kafka offsets): the backlog is told exactly,
    /// the grace by the stamp's time and the skew bound.
    Position,
    /// The broker's enqueue time (Redis stream ids, JetStream timestamps, Kafka LogAppendTime):
    /// backlog and grace both on the broker's clock.
    EnqueuedAt,
}

/// The shape of a run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub seed: u64,
    /// Publishes that move slices to the new broker (a rollback to 0 after 128 is not counted).
    pub moves: u32,
    pub slices_per_move: u32,
    pub move_every_ms: i64,
    pub producers: usize,
    /// Messages per producer per tick.
    pub per_tick: u32,
    pub bounds: Bounds,
    /// A producer applies a document up to this long after its publish (below the grace).
    pub max_propagation_ms: i64,
    /// Producers' clocks are off by up to this much (below the skew bound).
    pub max_clock_offset_ms: i64,
    /// The old broker's consumer stops this long before each publish and resumes this long
    /// after it: the backlog.
    pub pause_before_ms: i64,
    pub pause_after_ms: i64,
    /// Messages the consumer reads per tick when it runs.
    pub capacity: usize,
    pub scrape_every_ms: i64,
    pub marks: Marks,
    /// Producer 0 misses every move's publish, and catches up this long after it.
    pub pin_for_ms: Option<i64>,
    /// Producer 0's messages per tick (its clock is exact).
    pub pinned_per_tick: u32,
}

impl Settings {
    /// 1,000 clean moves of 8 slices every 6 s, 8 producers at 200 msg/s each, a 3 s backlog at
    /// each publish.
    pub fn clean(seed: u64, marks: Marks) -> Settings {
        Settings {
            seed,
            moves: 1_000,
            slices_per_move: 8,
            move_every_ms: 6_000,
            producers: 8,
            per_tick: 2,
            bounds: Bounds {
                grace_ms: 3_000,
                clock_skew_ms: 2_000,
            },
            max_propagation_ms: 2_900,
            max_clock_offset_ms: 1_900,
            pause_before_ms: 2_000,
            pause_after_ms: 1_000,
            capacity: 200,
            scrape_every_ms: 1_000,
            marks,
            pin_for_ms: None,
            pinned_per_tick: 2,
        }
    }

    /// The same world with producer 0 (100 msg/s, an exact clock) pinned for 8 s at each of
    /// 1,000 moves (every 10.3 s).
    pub fn pinned(seed: u64, marks: Marks) -> Settings {
        Settings {
            // Not a whole number of scrapes: the publish falls at every phase of the scrape.
            move_every_ms: 10_300,
            pin_for_ms: Some(8_000),
            pinned_per_tick: 10,
            ..Settings::clean(seed, marks)
        }
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    pub moves: u32,
    pub messages_old: u64,
    pub backlog: u64,
    pub in_grace: u64,
    /// Stale decisions on the pinned producer's messages.
    pub stale: u64,
    /// Stale decisions on a following producer's messages (must be 0).
    pub false_trips: u64,
    /// Per detected move: ms from the moment the first stale message could trip (the grace
    /// over, on the clock the check reads, and a stale write made) to the scrape that saw it.
    pub detection_ms: Vec<i64>,
    /// Per detected move: ms from the end of the bound the check applies (the grace, plus the
    /// skew bound when it reads the stamp's time) to the scrape that saw it.
    pub after_grace_ms: Vec<i64>,
    pub missed: u32,
}

struct Producer {
    applied: (u64, u32),
    pending: Option<(i64, u64, u32)>,
    offset_ms: i64,
}

struct Queued {
    position: u64,
    enqueued_at: i64,
    stamp: RouteStamp,
}

/// Where a pinned episode stands.
struct Episode {
    published: i64,
    /// When its first stale-eligible message was written (on the check's clock).
    first_eligible: Option<i64>,
}

/// A run's moving parts.
struct Sim<'s> {
    s: &'s Settings,
    rng: Rng,
    f: Figures,
    ledger: MoveLedger,
    producers: Vec<Producer>,
    names: Vec<String>,
    old: VecDeque<Queued>,
    position: u64,
    generation: u64,
    migrated: u32,
    next_move: i64,
    stale_count: u64,
    scraped: u64,
    episode: Option<Episode>,
    unpin_at: Option<i64>,
}

/// Run it.
pub fn run(s: &Settings) -> Figures {
    let mut rng = Rng::new(s.seed);
    let mut producers: Vec<Producer> = (0..s.producers)
        .map(|_| Producer {
            applied: (0, 0),
            pending: None,
            offset_ms: offset(&mut rng, s.max_clock_offset_ms),
        })
        .collect();
    if s.pin_for_ms.is_some() {
        producers[0].offset_ms = 0;
    }
    let mut sim = Sim {
        s,
        rng,
        f: Figures::default(),
        ledger: MoveLedger::new(),
        producers,
        names: (0..s.producers).map(|i| format!("p{i}")).collect(),
        old: VecDeque::new(),
        position: 0,
        generation: 0,
        migrated: 0,
        next_move: s.move_every_ms,
        stale_count: 0,
        scraped: 0,
        episode: None,
        unpin_at: None,
    };
    let mut t = 0i64;
    while sim.f.moves < s.moves || t < sim.next_move {
        t += TICK_MS;
        if t >= sim.next_move && sim.f.moves < s.moves {
            sim.publish(t);
        }
        sim.follow(t);
        sim.produce(t);
        let paused = t >= sim.next_move - s.pause_before_ms
            || t < sim.next_move - s.move_every_ms + s.pause_after_ms;
        if !paused {
            sim.consume();
        }
        if t % s.scrape_every_ms == 0 {
            sim.scrape(t);
        }
    }
    if sim.episode.is_some() {
        sim.f.missed += 1;
    }
    sim.f
}

impl Sim<'_> {
    /// The next document: 8 more slices to new, or back to 0 after 128.
    fn publish(&mut self, t: i64) {
        let s = self.s;
        self.next_move += s.move_every_ms;
        self.generation += 1;
        let moving = self.migrated < SLICES;
        self.migrated = if moving {
            (self.migrated + s.slices_per_move).min(SLICES)
        } else {
            0
        };
        let mark = match s.marks {
            Marks::Position => Mark::Position(self.position),
            Marks::EnqueuedAt => Mark::EnqueuedAt(t),
        };
        self.ledger.record(Publish {
            generation: self.generation,
            slices_migrated: self.migrated,
            published_at_ms: t,
            old_mark: Some(mark),
        });
        let pinning = moving && s.pin_for_ms.is_some();
        for (i, p) in self.producers.iter_mut().enumerate() {
            if i == 0 && pinning {
                continue;
            }
            let span = u64::try_from(s.max_propagation_ms.max(11) - 10).unwrap_or(1);
            let delay = 10 + i64::try_from(self.rng.below(span)).unwrap_or(0);
            p.pending = Some((t + delay, self.generation, self.migrated));
        }
        if moving {
            self.f.moves += 1;
            if let Some(pin) = s.pin_for_ms {
                if self.episode.take().is_some() {
                    self.f.missed += 1;
                }
                self.episode = Some(Episode {
                    published: t,
                    first_eligible: None,
                });
                self.unpin_at = Some(t + pin);
            }
        }
    }

    /// Producers apply what reached them; the pinned one catches up when its time comes.
    fn follow(&mut self, t: i64) {
        if self.unpin_at.is_some_and(|at| t >= at) {
            self.unpin_at = None;
            self.producers[0].pending = Some((t, self.generation, self.migrated));
        }
        for p in self.producers.iter_mut() {
            if let Some((at, g, m)) = p.pending
                && t >= at
            {
                p.applied = (g, m);
                p.pending = None;
            }
        }
    }

    /// Every producer writes its messages of the tick; those routed to old are queued there.
    fn produce(&mut self, t: i64) {
        let s = self.s;
        for i in 0..self.producers.len() {
            let n = if i == 0 {
                s.pinned_per_tick
            } else {
                s.per_tick
            };
            let ((g, m), at) = (self.producers[i].applied, t + self.producers[i].offset_ms);
            for _ in 0..n {
                let slice = u32::try_from(self.rng.below(u64::from(SLICES))).unwrap_or(0);
                if slice < m {
                    continue; // to the new broker
                }
                let route = Route::new(Side::Old, slice, g);
                let Ok(stamp) = RouteStamp::new(&route, "old", self.names[i].as_str(), at) else {
                    continue;
                };
                if i == 0 {
                    self.note_eligible(t, at, slice);
                }
                self.position += 1;
                self.old.push_back(Queued {
                    position: self.position,
                    enqueued_at: t,
                    stamp,
                });
            }
        }
    }

    /// The pinned producer's first write that the check may call stale (beyond the bound, on
    /// the clock the check reads, to a slice the episode's move moved).
    fn note_eligible(&mut self, t: i64, at: i64, slice: u32) {
        let s = self.s;
        let migrated = self.migrated;
        let Some(e) = self.episode.as_mut() else {
            return;
        };
        if e.first_eligible.is_some() || slice >= migrated {
            return;
        }
        let clock = match s.marks {
            Marks::EnqueuedAt => t,
            Marks::Position => at - s.bounds.clock_skew_ms,
        };
        if clock > e.published + s.bounds.grace_ms {
            e.first_eligible = Some(t);
        }
    }

    /// The old broker's consumer reads and checks up to its capacity.
    fn consume(&mut self) {
        let s = self.s;
        for _ in 0..s.capacity {
            let Some(q) = self.old.pop_front() else { break };
            self.f.messages_old += 1;
            let facts = match s.marks {
                Marks::Position => Delivery::at_position(q.position),
                Marks::EnqueuedAt => Delivery::enqueued_at(q.enqueued_at),
            };
            match classify(Some(&q.stamp), &self.ledger, facts, s.bounds) {
                Decision::Backlog => self.f.backlog += 1,
                Decision::InGrace => self.f.in_grace += 1,
                Decision::Stale { producer, .. } if producer == "p0" && s.pin_for_ms.is_some() => {
                    self.f.stale += 1;
                    self.stale_count += 1;
                }
                Decision::Stale { .. } => self.f.false_trips += 1,
                Decision::Unstamped | Decision::Current => {}
            }
        }
    }

    /// The guard's scrape: a count that grew since the last one is a detection.
    fn scrape(&mut self, t: i64) {
        let s = self.s;
        if self.stale_count > self.scraped
            && let Some(e) = self.episode.take()
        {
            let from = e.first_eligible.unwrap_or(t);
            self.f.detection_ms.push(t - from);
            let skew = match s.marks {
                Marks::Position => s.bounds.clock_skew_ms,
                Marks::EnqueuedAt => 0,
            };
            self.f
                .after_grace_ms
                .push(t - (e.published + s.bounds.grace_ms + skew));
        }
        self.scraped = self.stale_count;
    }
}

fn offset(rng: &mut Rng, max: i64) -> i64 {
    let span = u64::try_from(2 * max + 1).unwrap_or(1);
    i64::try_from(rng.below(span)).unwrap_or(0) - max
}

/// The `q` quantile (0..=1) of `values` (nearest rank), 0 when empty.
pub fn quantile(values: &[i64], q: f64) -> i64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    crate::rank::nearest_rank(v.len(), q).map_or(0, |i| v[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 58's figures: `cargo test --all-features --lib sim::stale_moves -- --nocapture`
    /// prints them (BENCHMARKS.md "Stale producers").
    #[test]
    fn a_thousand_clean_moves_with_a_backlog_never_trip_and_a_pinned_producer_is_caught() {
        for marks in [Marks::Position, Marks::EnqueuedAt] {
            let clean = run(&Settings::clean(58, marks));
            println!(
                "{marks:?} clean: {} moves, {} messages read from old, {} backlog, {} in grace, {} false trips",
                clean.moves, clean.messages_old, clean.backlog, clean.in_grace, clean.false_trips
            );
            assert_eq!(clean.moves, 1_000);
            assert!(clean.backlog > 10_000, "a backlog at each move: {clean:?}");
            assert_eq!(clean.false_trips, 0, "{marks:?}");

            let pinned = run(&Settings::pinned(58, marks));
            let p = |q| quantile(&pinned.detection_ms, q);
            let g = |q| quantile(&pinned.after_grace_ms, q);
            println!(
                "{marks:?} pinned: {} moves, {} detected, {} missed, {} false trips; detection after the first trippable write p50 {} ms p99 {} ms max {} ms; after the bound p50 {} ms p99 {} ms max {} ms",
                pinned.moves,
                pinned.detection_ms.len(),
                pinned.missed,
                pinned.false_trips,
                p(0.5),
                p(0.99),
                p(1.0),
                g(0.5),
                g(0.99),
                g(1.0)
            );
            assert_eq!(pinned.missed, 0, "{marks:?}");
            assert_eq!(pinned.false_trips, 0, "{marks:?}");
            assert!(p(0.99) <= 2_000, "{marks:?}: p99 {}", p(0.99));
            assert!(
                g(0.99) <= 2_000,
                "{marks:?}: p99 after the bound {}",
                g(0.99)
            );
        }
    }
}
