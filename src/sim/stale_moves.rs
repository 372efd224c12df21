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

/// Run it.
pub fn run(s: &Settings) -> Figures {
    let mut rng = Rng::new(s.seed);
    let mut f = Figures::default();
    let mut ledger = MoveLedger::new();
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
    let names: Vec<String> = (0..s.producers).map(|i| format!("p{i}")).collect();
    let mut old: VecDeque<Queued> = VecDeque::new();
    let mut position = 0u64;
    let (mut generation, mut migrated) = (0u64, 0u32);
    let mut next_move = s.move_every_ms;
    let mut stale_count = 0u64;
    let mut scraped = 0u64;
    let mut episode: Option<Episode> = None;
    let mut unpin_at: Option<i64> = None;
    let mut t = 0i64;
    while f.moves < s.moves || t < next_move {
        t += TICK_MS;
        if t >= next_move && f.moves < s.moves {
            next_move += s.move_every_ms;
            generation += 1;
            let moving = migrated < SLICES;
            migrated = if moving {
                (migrated + s.slices_per_move).min(SLICES)
            } else {
                0
            };
            let mark = match s.marks {
                Marks::Position => Mark::Position(position),
                Marks::EnqueuedAt => Mark::EnqueuedAt(t),
            };
            ledger.record(Publish {
                generation,
                slices_migrated: migrated,
                published_at_ms: t,
                old_mark: Some(mark),
            });
            for (i, p) in producers.iter_mut().enumerate() {
                if i == 0 && moving && s.pin_for_ms.is_some() {
                    continue;
                }
                let delay = 10
                    + i64::try_from(rng.below(s.max_propagation_ms.max(11) as u64 - 10))
                        .unwrap_or(0);
                p.pending = Some((t + delay, generation, migrated));
            }
            if moving {
                f.moves += 1;
                if let Some(pin) = s.pin_for_ms {
                    if episode.take().is_some() {
                        f.missed += 1;
                    }
                    episode = Some(Episode {
                        published: t,
                        first_eligible: None,
                    });
                    unpin_at = Some(t + pin);
                }
            }
        }
        if unpin_at.is_some_and(|at| t >= at) {
            unpin_at = None;
            producers[0].pending = Some((t, generation, migrated));
        }
        for p in producers.iter_mut() {
            if let Some((at, g, m)) = p.pending
                && t >= at
            {
                p.applied = (g, m);
                p.pending = None;
            }
        }
        for (i, p) in producers.iter().enumerate() {
            let n = if i == 0 {
                s.pinned_per_tick
            } else {
                s.per_tick
            };
            for _ in 0..n {
                let slice = u32::try_from(rng.below(u64::from(SLICES))).unwrap_or(0);
                let (g, m) = p.applied;
                if slice < m {
                    continue; // to the new broker
                }
                position += 1;
                let at = t + p.offset_ms;
                let route = Route::new(Side::Old, slice, g);
                let Ok(stamp) = RouteStamp::new(&route, "old", names[i].as_str(), at) else {
                    continue;
                };
                if i == 0
                    && let Some(e) = episode.as_mut()
                    && e.first_eligible.is_none()
                    && slice < migrated
                {
                    let clock = match s.marks {
                        Marks::EnqueuedAt => t,
                        Marks::Position => at - s.bounds.clock_skew_ms,
                    };
                    if clock > e.published + s.bounds.grace_ms {
                        e.first_eligible = Some(t);
                    }
                }
                old.push_back(Queued {
                    position,
                    enqueued_at: t,
                    stamp,
                });
            }
        }
        let paused = t >= next_move - s.pause_before_ms
            || t < next_move - s.move_every_ms + s.pause_after_ms;
        if !paused {
            for _ in 0..s.capacity {
                let Some(q) = old.pop_front() else { break };
                f.messages_old += 1;
                let facts = match s.marks {
                    Marks::Position => Delivery {
                        position: Some(q.position),
                        enqueued_at_ms: None,
                    },
                    Marks::EnqueuedAt => Delivery {
                        position: None,
                        enqueued_at_ms: Some(q.enqueued_at),
                    },
                };
                match classify(Some(&q.stamp), &ledger, facts, s.bounds) {
                    Decision::Backlog => f.backlog += 1,
                    Decision::InGrace => f.in_grace += 1,
                    Decision::Stale { producer, .. }
                        if producer == "p0" && s.pin_for_ms.is_some() =>
                    {
                        f.stale += 1;
                        stale_count += 1;
                    }
                    Decision::Stale { .. } => f.false_trips += 1,
                    Decision::Unstamped | Decision::Current => {}
                }
            }
        }
        if t % s.scrape_every_ms == 0 {
            if stale_count > scraped
                && let Some(e) = episode.take()
            {
                let from = e.first_eligible.unwrap_or(t);
                f.detection_ms.push(t - from);
                let skew = match s.marks {
                    Marks::Position => s.bounds.clock_skew_ms,
                    Marks::EnqueuedAt => 0,
                };
                f.after_grace_ms
                    .push(t - (e.published + s.bounds.grace_ms + skew));
            }
            scraped = stale_count;
        }
    }
    if episode.is_some() {
        f.missed += 1;
    }
    f
}

fn offset(rng: &mut Rng, max: i64) -> i64 {
    let span = u64::try_from(2 * max + 1).unwrap_or(1);
    i64::try_from(rng.below(span)).unwrap_or(0) - max
}

/// The `q` quantile (0..=1) of `values` (nearest rank), 0 when empty.
pub fn quantile(values: &[i64], q: f64) -> i64 {
    let mut v = values.to_vec();
    v.sort_unstable();
    if v.is_empty() {
        return 0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
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
