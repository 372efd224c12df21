//! The world `judge simulate` can depart into (issue 55), beyond the model the judge's test is
//! proven on: bursts of failed messages, a random failure rate (overdispersion), new's share of
//! the traffic moving in stretches while a shared dependency is slow, counters seen only at
//! scrape times (read raw, or through Prometheus's `increase()` for comparison), and a regression
//! that starts mid-step. All off by default ([`World::default`]): the runs are then drawn per
//! check exactly as before (the same runs for a seed).
//!
//! With any departure on, both routes are drawn second by second ([`Truth`]): each side's events
//! (Poisson), failures (binomial at that second's rate), then its bursts; the counters are seen
//! at the checks exactly, or at each side's scrapes ([`Scraper`]).

use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Binomial, Distribution, Exp, Gamma, Poisson};

use super::scenario::{GAP_STRETCHES, Read, Scenario, SimulateError, World};
use crate::judge::Counts;

/// A scenario's distributions, drawn from in every run.
pub(super) struct Draws {
    base_rate: f64,
    ratio: f64,
    /// Events per second, `[new, old]`, outside and inside a stretch.
    even: [Option<Poisson<f64>>; 2],
    heavy: [Option<Poisson<f64>>; 2],
    slowdown: f64,
    gamma: Option<Gamma<f64>>,
    shared: bool,
    burst_gap: Option<Exp<f64>>,
    burst_size: f64,
    stretch: Option<(Exp<f64>, Exp<f64>)>,
    regression_at_s: f64,
}

fn poisson(lambda: f64) -> Option<Poisson<f64>> {
    Poisson::new(lambda).ok()
}

/// The gamma of mean 1 whose product with the rate `p` gives a failure count over `n` events
/// `k` times the binomial's variance: `n·p·(1 − p) + n²·p²/a = k·n·p·(1 − p)`.
pub(super) fn dispersion(k: f64, n: f64, p: f64) -> Option<Gamma<f64>> {
    if k <= 1.0 || n <= 0.0 || p <= 0.0 || p >= 1.0 {
        return None;
    }
    let shape = n * p / ((k - 1.0) * (1.0 - p));
    Gamma::new(shape, 1.0 / shape).ok()
}

impl Draws {
    pub(super) fn new(s: &Scenario, w: &World) -> Draws {
        let t = s.traffic;
        let heavy = w.share_moves.map_or(0.5, |m| m.share);
        let exp = |mean: f64| Exp::new(1.0 / mean).ok();
        Draws {
            base_rate: s.base_rate,
            ratio: s.ratio,
            even: [poisson(t), poisson(t)],
            heavy: [poisson(2.0 * t * heavy), poisson(2.0 * t * (1.0 - heavy))],
            slowdown: w.share_moves.map_or(1.0, |m| m.slowdown),
            gamma: dispersion(w.dispersion, t, s.base_rate),
            shared: w.dispersion_shared,
            burst_gap: (w.bursts_per_hour > 0.0)
                .then(|| exp(3600.0 / w.bursts_per_hour))
                .flatten(),
            burst_size: w.burst_size as f64,
            stretch: w.share_moves.and_then(|m| {
                let mean = m.stretch.as_secs_f64();
                Some((exp(mean)?, exp(GAP_STRETCHES * mean)?))
            }),
            regression_at_s: w.regression_at.map_or(0.0, |r| r.as_secs_f64()),
        }
    }
}

/// One run's routes, second by second: both sides' counts since the step began, exact.
pub(super) struct Truth {
    /// Seconds drawn so far.
    pub(super) at_s: u64,
    /// `[new, old]`.
    pub(super) counts: [Counts; 2],
    next_burst: [f64; 2],
    /// The current or next stretch, `[start, end)` in seconds.
    stretch: (f64, f64),
}

impl Truth {
    pub(super) fn new(rng: &mut Xoshiro256PlusPlus, d: &Draws) -> Truth {
        let next_burst = match &d.burst_gap {
            Some(gap) => [gap.sample(rng), gap.sample(rng)],
            None => [f64::INFINITY; 2],
        };
        let stretch = match &d.stretch {
            Some((length, gap)) => {
                let start = gap.sample(rng);
                (start, start + length.sample(rng))
            }
            None => (f64::INFINITY, f64::INFINITY),
        };
        Truth {
            at_s: 0,
            counts: [Counts::default(); 2],
            next_burst,
            stretch,
        }
    }

    /// Whether second `t` is in a stretch (moving on to the next stretch past this one's end).
    fn in_stretch(&mut self, rng: &mut Xoshiro256PlusPlus, d: &Draws, t: f64) -> bool {
        if let Some((length, gap)) = &d.stretch {
            while t >= self.stretch.1 {
                let start = self.stretch.1 + gap.sample(rng);
                self.stretch = (start, start + length.sample(rng));
            }
        }
        t >= self.stretch.0
    }

    /// Draw the next second.
    pub(super) fn second(
        &mut self,
        rng: &mut Xoshiro256PlusPlus,
        d: &Draws,
    ) -> Result<(), SimulateError> {
        let t = self.at_s as f64;
        let heavy = self.in_stretch(rng, d, t);
        let ratio = if t >= d.regression_at_s { d.ratio } else { 1.0 };
        let shared = match (&d.gamma, d.shared) {
            (Some(g), true) => Some(g.sample(rng)),
            _ => None,
        };
        for side in 0..2 {
            let events = if heavy { &d.heavy[side] } else { &d.even[side] };
            let n = events.as_ref().map_or(0.0, |p| p.sample(rng));
            let g = match (shared, &d.gamma) {
                (Some(g), _) => g,
                (None, Some(gamma)) => gamma.sample(rng),
                (None, None) => 1.0,
            };
            let side_ratio = if side == 0 { ratio } else { 1.0 };
            let slow = if heavy { d.slowdown } else { 1.0 };
            let rate = (d.base_rate * side_ratio * slow * g).clamp(0.0, 1.0);
            let failures = Binomial::new(n as u64, rate)
                .map_err(|e| SimulateError::Invalid(format!("failure rate {rate}: {e}")))?
                .sample(rng) as f64;
            let c = &mut self.counts[side];
            c.events += n;
            c.failures += failures;
            if let Some(gap) = &d.burst_gap {
                while self.next_burst[side] < t + 1.0 {
                    c.events += d.burst_size;
                    c.failures += d.burst_size;
                    self.next_burst[side] += gap.sample(rng);
                }
            }
        }
        self.at_s += 1;
        Ok(())
    }
}

/// What a reader sees of both sides' counters: at each check exactly, or at each side's
/// scrapes.
pub(super) struct Scraper {
    every_s: Option<u64>,
    phase: [u64; 2],
    /// `[new, old]` as of the last scrape.
    pub(super) seen: [Counts; 2],
    /// Each side's scrapes `(second, counts)`, kept for `increase()`.
    samples: [Vec<(u64, Counts)>; 2],
    keep: bool,
}

impl Scraper {
    pub(super) fn new(rng: &mut Xoshiro256PlusPlus, w: &World) -> Scraper {
        let every_s = w.scrape.map(|d| d.as_secs().max(1));
        let phase = match every_s {
            Some(e) => [rng.random_range(0..e), rng.random_range(0..e)],
            None => [0, 0],
        };
        Scraper {
            every_s,
            phase,
            seen: [Counts::default(); 2],
            samples: [Vec::new(), Vec::new()],
            keep: w.read == Read::Increase,
        }
    }

    /// The counters as they are at the end of second `tau` (its end, in seconds since the
    /// step began).
    pub(super) fn after(&mut self, tau: u64, counts: [Counts; 2]) {
        for (side, now) in counts.into_iter().enumerate() {
            let scraped = match self.every_s {
                Some(e) => tau >= self.phase[side] && (tau - self.phase[side]).is_multiple_of(e),
                None => true,
            };
            if scraped {
                self.seen[side] = now;
                if self.keep {
                    self.samples[side].push((tau, now));
                }
            }
        }
    }

    /// `increase()` of both sides since the step began, read at second `now` (`None`: a side
    /// has fewer than two scrapes in the step, Prometheus returns nothing).
    pub(super) fn increase(&self, now: u64) -> Option<[Counts; 2]> {
        let one = |side: usize| increase(&self.samples[side], 0.0, now as f64);
        Some([one(0)?, one(1)?])
    }
}

/// Prometheus's `increase()` of a counter's samples over the range `(start, end]`: the
/// difference between its last and first samples inside, extrapolated to each edge when the
/// edge is within 1.1 average sample intervals of a sample, else by half an interval. The
/// counters ran long before the step, so the extrapolation towards zero never binds.
pub(super) fn increase(samples: &[(u64, Counts)], start: f64, end: f64) -> Option<Counts> {
    let inside: Vec<&(u64, Counts)> = samples
        .iter()
        .filter(|(t, _)| (*t as f64) > start && (*t as f64) <= end)
        .collect();
    let (first, last) = (inside.first()?, inside.last()?);
    if inside.len() < 2 {
        return None;
    }
    let sampled = (last.0 - first.0) as f64;
    let average = sampled / (inside.len() - 1) as f64;
    let edge = |gap: f64| {
        if gap >= 1.1 * average {
            average / 2.0
        } else {
            gap
        }
    };
    let factor = (sampled + edge(first.0 as f64 - start) + edge(end - last.0 as f64)) / sampled;
    Some(Counts {
        events: (last.1.events - first.1.events) * factor,
        failures: (last.1.failures - first.1.failures) * factor,
    })
}

#[cfg(test)]
mod tests;
