use super::*;

/// A detector fed `edges` one interval every 10 s at a fixed boundary.
fn run(edges: &[f64], boundary: f64) -> Detector {
    edges
        .iter()
        .enumerate()
        .fold(Detector::default(), |d, (i, x)| {
            d.step(Some(*x), (i as u64 + 1) * 10_000, boundary)
        })
}

#[test]
fn the_start_weights_add_up_to_at_most_one() {
    let total: f64 = (1..=1_000_000).map(weight).sum();
    assert!(total <= 1.0 && total > 0.99, "{total}");
    // The first t add up to t / (t + K).
    let first: f64 = (1..=240).map(weight).sum();
    assert!((first - 240.0 / (240.0 + HORIZON)).abs() < 1e-12, "{first}");
}

#[test]
fn a_shift_at_interval_240_is_alarmed_and_dated_from_there() {
    // Equal routes at an even split and a 1.2 tolerance: new's share of the failures about 0.5
    // against 0.545 allowed (an edge of about -0.083, with noise), then new twice old's rate
    // (a share of 2/3: an edge of +0.22, with noise).
    let noise = |i: usize| [0.15, -0.12, 0.05, -0.1, 0.02][i % 5];
    let mut edges: Vec<f64> = (0..240).map(|i| -0.083 + noise(i)).collect();
    edges.extend((0..120).map(|i| 0.222 + noise(i)));
    let boundary = 1.0 / (0.25 * 0.002 * 0.75);
    let d = run(&edges, boundary);
    let alarm = d.alarm.expect("the shift is alarmed");
    // Not before the shift: the sum of the starts' wealths stays near their weights.
    let before = run(&edges[..240], boundary);
    assert!(before.alarm.is_none() && before.wealth < 2.0, "{before:?}");
    // Within 60 intervals of it, and dated within a minute of its start (240 × 10 s).
    assert!(alarm.at_ms <= 3_000_000, "{alarm:?}");
    assert!(
        (2_340_000..=2_460_000).contains(&alarm.since_ms),
        "{alarm:?}"
    );
}

#[test]
fn the_bet_is_nothing_without_evidence_and_never_loses_everything() {
    let d = Detector::default();
    assert_eq!(d.bet(), 0.0);
    // A run of the worst outcome (no failure on new): the bet falls back to 0, and a factor is
    // never below 1 - MAX_BET.
    let worse = run(&[0.5; 20], f64::INFINITY);
    assert!(worse.bet() > 0.0 && worse.bet() <= MAX_BET);
    let after = worse.step(Some(-1.0), 210_000, f64::INFINITY);
    assert!(after.wealth >= (worse.wealth + weight(21)) * (1.0 - MAX_BET) - 1e-12);
    let down = run(&[-0.5; 40], f64::INFINITY);
    assert_eq!(down.bet(), 0.0);
    // An interval without failures moves the clock, not the wealth.
    let idle = worse.step(None, 999_000, f64::INFINITY);
    assert_eq!(
        (idle.wealth, idle.starts, idle.last_ms),
        (worse.wealth, 20, 999_000)
    );
}

#[test]
fn a_stored_ledger_without_a_detector_reads_as_a_fresh_one() {
    let mut stored = serde_json::to_value(crate::judge::Ledger::first(0.2, 0.01, 0.01))
        .expect("a ledger serialises");
    stored
        .as_object_mut()
        .expect("an object")
        .remove("detector");
    let ledger: crate::judge::Ledger = serde_json::from_value(stored).expect("it reads");
    assert_eq!(ledger.detector, Detector::default());
}

/// Each interval's share of failures under `H0` at its boundary, in bursts: `clusters`
/// clusters (Poisson), each new's with probability `p`, of a size drawn alike on both sides
/// (1 or 50). Returns `None` without a failure.
#[cfg(feature = "cli")]
fn burst_share(rng: &mut rand::rngs::Xoshiro256PlusPlus, p: f64) -> Option<f64> {
    use rand_distr::{Bernoulli, Distribution, Poisson};
    let clusters = Poisson::new(3.0).expect("a rate").sample(rng) as u32;
    let (big, on_new) = (
        Bernoulli::new(0.1).expect("a probability"),
        Bernoulli::new(p).expect("a probability"),
    );
    let (mut new, mut all) = (0.0, 0.0);
    for _ in 0..clusters {
        let size = if big.sample(rng) { 50.0 } else { 1.0 };
        all += size;
        if on_new.sample(rng) {
            new += size;
        }
    }
    (all > 0.0).then(|| new / all)
}

/// Under `H0` at its boundary, with bursts, the alarm rate over runs of 720 intervals (two
/// hours of 10 s readings) at a loose `alpha_d` of 5% is within that bound (plus three standard
/// errors of 2,000 runs).
#[cfg(feature = "cli")]
#[test]
fn under_h0_with_bursts_the_alarm_rate_is_bounded() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::Xoshiro256PlusPlus::seed_from_u64(55);
    let alpha_d = 0.05;
    let runs = 2_000;
    let mut alarms = 0;
    for _ in 0..runs {
        let mut d = Detector::default();
        for i in 0..720u64 {
            // A moving split: p from 0.35 to 0.75 and back.
            let p = 0.55 + 0.2 * ((i as f64) / 40.0).sin();
            let edge = burst_share(&mut rng, p).map(|s| (s - p) / p);
            d = d.step(edge, i * 10_000, 1.0 / alpha_d);
        }
        alarms += usize::from(d.alarm.is_some());
    }
    let rate = alarms as f64 / runs as f64;
    let se = (alpha_d * (1.0 - alpha_d) / runs as f64).sqrt();
    assert!(rate <= alpha_d + 3.0 * se, "{alarms} alarms in {runs} runs");
}
