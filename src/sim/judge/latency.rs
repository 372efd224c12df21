//! The latency form simulated: both sides' histograms drawn per interval, judged by
//! [`crate::judge_verdict::evaluate_judge`] on the counts since the start (interval by
//! interval, its ledger carried) and by a threshold gate on the last minute's
//! `histogram_quantile` of each side.

use std::collections::VecDeque;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Binomial, Distribution, Poisson};

use super::scenario::{
    Report, Scenario, SimulateError, THRESHOLD_FOR, Track, report, threshold_gate,
};
use crate::gate::Observation;
use crate::plan::{JudgeCheck, JudgeForm, LatencyJudge};

/// Old's median latency, in seconds, and the spread of its logarithm.
const MEDIAN_S: f64 = 0.1;
const SIGMA: f64 = 0.5;

/// The histogram's finite boundaries: 10 ms × 1.1^k.
fn boundaries() -> Vec<f64> {
    (0..=60).map(|k| 0.01 * 1.1f64.powi(k)).collect()
}

/// The complementary error function (Abramowitz & Stegun 7.1.26, error below 1.5e-7).
fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    poly * (-x * x).exp()
}

/// Each bucket's share (not cumulative; the last is above the last boundary) of a lognormal
/// latency with median `MEDIAN_S × scale`.
fn shares(le: &[f64], scale: f64) -> Vec<f64> {
    let cdf =
        |x: f64| 0.5 * erfc(-(x / (MEDIAN_S * scale)).ln() / SIGMA / std::f64::consts::SQRT_2);
    let mut out = Vec::with_capacity(le.len() + 1);
    let mut below = 0.0;
    for &b in le {
        let c = cdf(b).max(below);
        out.push(c - below);
        below = c;
    }
    out.push((1.0 - below).max(0.0));
    out
}

/// `n` observations spread over the buckets by successive binomials, added to `into`.
fn draw(
    rng: &mut Xoshiro256PlusPlus,
    n: u64,
    shares: &[f64],
    into: &mut [u64],
) -> Result<(), SimulateError> {
    let (mut left, mut mass) = (n, 1.0);
    let last = shares.len() - 1;
    for (i, p) in shares.iter().enumerate() {
        if left == 0 {
            break;
        }
        let k = if i == last {
            left
        } else {
            let q = if mass > 0.0 {
                (p / mass).clamp(0.0, 1.0)
            } else {
                1.0
            };
            Binomial::new(left, q)
                .map_err(|e| SimulateError::Invalid(format!("bucket share {q}: {e}")))?
                .sample(rng)
        };
        into[i] += k;
        left -= k;
        mass -= p;
    }
    Ok(())
}

/// Cumulative counts at each boundary, then `+Inf`.
fn cumulative(counts: &[u64]) -> Vec<f64> {
    let mut sum = 0.0;
    counts
        .iter()
        .map(|c| {
            sum += *c as f64;
            sum
        })
        .collect()
}

/// Prometheus's `histogram_quantile`: linear within the bucket holding the rank; the highest
/// finite boundary when it is in `+Inf`.
fn histogram_quantile(q: f64, le: &[f64], cum: &[f64]) -> Option<f64> {
    let total = *cum.last()?;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let i = cum.iter().position(|c| *c >= rank)?;
    if i >= le.len() {
        return le.last().copied();
    }
    let (lower, below) = if i == 0 {
        (0.0, 0.0)
    } else {
        (le[i - 1], cum[i - 1])
    };
    let inside = cum[i] - below;
    Some(if inside > 0.0 {
        lower + (le[i] - lower) * (rank - below) / inside
    } else {
        le[i]
    })
}

pub(super) fn simulate(s: &Scenario, quantile: f64) -> Result<Report, SimulateError> {
    let le = boundaries();
    let labelled: Vec<(f64, String)> = le.iter().map(|b| (*b, format!("{b}"))).collect();
    let judge = JudgeCheck {
        form: JudgeForm::Latency(LatencyJudge::new(
            quantile,
            &labelled,
            "sum(increase(latency_seconds_bucket{route=\"new\",le=\"$le\"}[$step]))".into(),
            "sum(increase(latency_seconds_bucket{route=\"old\",le=\"$le\"}[$step]))".into(),
        )),
        config: s.config,
    };
    let threshold = threshold_gate(s.config.tolerance);
    let every_ms = crate::time::millis(s.every);
    let checks = (s.duration.as_millis() / s.every.as_millis()) as u64;
    let window = (THRESHOLD_FOR.as_millis() / s.every.as_millis()).max(1) as usize;
    let events = Poisson::new(s.traffic * s.every.as_secs_f64()).ok();
    let (old_shares, new_shares) = (shares(&le, 1.0), shares(&le, s.ratio.max(1e-9)));
    let worse = s.ratio > 1.0 + s.config.tolerance;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(s.seed);
    let (mut judged, mut thresholded) = (Vec::new(), Vec::new());
    let slots = le.len() + 1;
    for _ in 0..s.runs {
        let (mut j, mut t) = (Track::default(), Track::default());
        let (mut new, mut old) = (vec![0u64; slots], vec![0u64; slots]);
        let mut recent: VecDeque<(Vec<u64>, Vec<u64>)> = VecDeque::with_capacity(window + 1);
        for k in 1..=checks {
            let (mut dn, mut dold) = (vec![0u64; slots], vec![0u64; slots]);
            let n = events.as_ref().map_or(0.0, |d| d.sample(&mut rng)) as u64;
            draw(&mut rng, n, &new_shares, &mut dn)?;
            let n = events.as_ref().map_or(0.0, |d| d.sample(&mut rng)) as u64;
            draw(&mut rng, n, &old_shares, &mut dold)?;
            for (total, d) in [(&mut new, &dn), (&mut old, &dold)] {
                for (a, b) in total.iter_mut().zip(d) {
                    *a += b;
                }
            }
            recent.push_back((dn, dold));
            if recent.len() > window {
                recent.pop_front();
            }
            let now_ms = k as i64 * every_ms;
            let at_s = now_ms as f64 / 1000.0;
            let (cn, co) = (cumulative(&new), cumulative(&old));
            let min = s.config.min_events as f64;
            let early = cn[slots - 1] < min || co[slots - 1] < min;
            let e = crate::judge_verdict::evaluate_judge(
                &judge,
                &Observation::Buckets { new: cn, old: co },
                j.memory,
                now_ms,
                0,
            );
            j.memory = e.memory;
            j.see(e.verdict, at_s, early);
            let sum = |new_side: bool| {
                let mut acc = vec![0u64; slots];
                for (n, o) in &recent {
                    for (a, b) in acc.iter_mut().zip(if new_side { n } else { o }) {
                        *a += b;
                    }
                }
                cumulative(&acc)
            };
            let (wn, wo) = (sum(true), sum(false));
            let observation = match (
                histogram_quantile(quantile, &le, &wn),
                histogram_quantile(quantile, &le, &wo),
            ) {
                (Some(new), Some(old)) => Observation::Pair { new, old },
                _ => Observation::Unavailable(crate::gate::Unread::new(
                    crate::gate::NoDataCause::Empty,
                    "no observations in the window",
                )),
            };
            t.threshold(&threshold, &observation, now_ms, early);
        }
        judged.push(j);
        thresholded.push(t);
    }
    Ok(report(
        s,
        &super::World::default(),
        &judged,
        &thresholded,
        worse,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lognormal_shares_add_up_and_the_quantile_reads_as_prometheus_does() {
        let le = boundaries();
        let sh = shares(&le, 1.0);
        assert!((sh.iter().sum::<f64>() - 1.0).abs() < 1e-9);
        // Median 100 ms: half the mass at or below it.
        let cum = cumulative(&sh.iter().map(|p| (p * 1e6) as u64).collect::<Vec<_>>());
        let median = histogram_quantile(0.5, &le, &cum).expect("a median");
        assert!((median - 0.1).abs() < 0.005, "{median}");
        assert_eq!(histogram_quantile(0.5, &le, &vec![0.0; le.len() + 1]), None);
        assert!((erfc(0.0) - 1.0).abs() < 1e-6 && (erfc(1.0) - 0.157_299).abs() < 1e-6);
    }
}
