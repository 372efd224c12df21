//! A `judge` gate's verdict ([`crate::judge`]): both sides' counts (or, in its latency form,
//! their histograms) weighed into its ledger, and the decision in the gate's words. Pure: no IO,
//! no clock.

use std::time::Duration;

use crate::gate::{
    Evaluation, INCONCLUSIVE, Memory, Observation, Unread, Verdict, no_data, unusable,
};
use crate::judge::{Decision, Evidence, Ledger, Look};
use crate::plan::{JudgeCheck, JudgeForm, LatencyJudge};

/// A `judge` gate on both sides' counts (or, in its latency form, their histograms:
/// [`crate::judge::latency`]) at `now_ms`, counted since `counting_from_ms` (the step's start, or
/// the migration's last resume in it): FAIL when new is worse than old beyond the tolerance,
/// PASS when it is not (on `min_events` per side and `min_failures` weighed), else DECIDING, or
/// INCONCLUSIVE past `max_duration` (a person decides; the controller never advances on it).
///
/// Each reading closes an interval since the last one the ledger weighed
/// ([`crate::judge::betting`]); the ledger is the memory's `judge`. A count started again (a
/// resume) goes on to the ledger's next count: fresh wealths on a smaller share of the step's
/// budget, so no number of resumes buys more than the step's `alpha`.
///
/// # Guarantees
/// - A FAIL of the change detector ([`crate::judge::detector`]) says so, and since when new
///   has been worse.
/// - The evaluation's `value` is the estimate a person reads, new's failure rate over old's
///   (`None` while it has none), and `old_value` what it is compared with, `1 + tolerance`; the
///   memory's `peak` is the highest FAIL e-value of the count.
/// - A count that went down (a reset the source did not handle, a negative count) is NO DATA with
///   its reason, and weighs nothing; an unreadable reading keeps the ledger: the next reading's
///   interval covers it.
/// - Its reason goes through the one text rule ([`crate::outgoing::reason`]: one line, no
///   control character, at most [`crate::outgoing::REASON_MAX`] bytes).
pub fn evaluate_judge(
    check: &JudgeCheck,
    observation: &Observation,
    memory: Memory,
    now_ms: i64,
    counting_from_ms: i64,
) -> Evaluation {
    let mut eval = judge_evaluation(check, observation, memory, now_ms, counting_from_ms);
    eval.reason = crate::outgoing::reason(&eval.reason, &crate::outgoing::Secrets::none());
    eval
}

/// The memory as of this count: a count started again (a resume) moves the ledger on to its
/// next count, a FAIL before the resume not kept (the person who resumed dealt with it).
fn this_count(memory: Memory, counting_from_ms: i64) -> Memory {
    if memory.held_since_ms == Some(counting_from_ms) {
        return memory;
    }
    Memory {
        held_since_ms: Some(counting_from_ms),
        peak: None,
        judge: memory.judge.map(|l| Ledger {
            failed: false,
            ..l.next_count(l.tolerance, l.alpha)
        }),
        ..memory
    }
}

fn judge_evaluation(
    check: &JudgeCheck,
    observation: &Observation,
    memory: Memory,
    now_ms: i64,
    counting_from_ms: i64,
) -> Evaluation {
    let cfg = &check.config;
    let memory = this_count(memory, counting_from_ms);
    // A tolerance or confidence changed mid-step (`plan apply`): a new count, a FAIL kept.
    let memory = Memory {
        judge: Some(memory.judge.map_or_else(
            || Ledger::first(cfg.tolerance, cfg.alpha, cfg.alpha_pass),
            |l| l.under(cfg.tolerance, cfg.alpha, cfg.alpha_pass),
        )),
        ..memory
    };
    // No data keeps the count's mark (`held_since_ms`: since when the judge counts), so that
    // an unreadable reading neither restarts the count nor forgets its FAIL.
    let nodata = |why: Unread| no_data(why, memory.samples, seen_at(memory, now_ms));
    let elapsed =
        Duration::from_millis(u64::try_from(now_ms.saturating_sub(counting_from_ms)).unwrap_or(0));
    // The latency form weighs each side's observations beyond a boundary ([`judge::latency`]).
    let (new, old, latency) = match (&check.form, observation) {
        (JudgeForm::Counts { .. }, Observation::Counts { new, old }) => (*new, *old, None),
        (JudgeForm::Latency(l), Observation::Buckets { new, old }) => {
            if !new.iter().chain(old).all(|v| v.is_finite()) {
                return nodata(unusable("not a finite bucket count"));
            }
            let fixed = memory.judge.and_then(|l| l.le);
            match crate::judge::latency::slow_counts(&l.buckets, cfg, new, old, fixed) {
                Ok(slow) => (slow.new, slow.old, Some((l, slow))),
                Err(why) => return unweighed(check, l, why, memory, now_ms, elapsed),
            }
        }
        (_, Observation::Unavailable(why)) => return nodata(why.clone()),
        _ => {
            return nodata(unusable(
                "internal: the observation does not match the judge's form",
            ));
        }
    };
    let finite = [new.events, new.failures, old.events, old.failures]
        .iter()
        .all(|v| v.is_finite());
    if !finite {
        return nodata(unusable(format!(
            "not a finite count (new {}/{}, old {}/{})",
            new.failures, new.events, old.failures, old.events
        )));
    }
    let weighed_cfg = match latency {
        Some(_) => crate::judge::latency::counts_config(cfg),
        None => *cfg,
    };
    let (mut ledger, evidence) = crate::judge::weigh(&weighed_cfg, memory.judge, new, old, elapsed);
    if let Some((_, slow)) = &latency {
        ledger.le = Some([slow.quantile_le, slow.slow_le]);
    }
    let described = match latency {
        Some((l, slow)) => crate::judge::latency::describe(&l.buckets, cfg, &slow, &evidence),
        None => evidence.describe(cfg),
    };
    let samples = memory.samples.saturating_add(1);
    if evidence.look == Look::WentDown && evidence.decision != Decision::Fail {
        let kept = Memory {
            judge: Some(ledger),
            ..memory
        };
        return no_data(
            unusable(format!("a count went down, nothing weighed: {described}")),
            memory.samples,
            seen_at(kept, now_ms),
        );
    }
    let (verdict, reason) = match evidence.detector_fail() {
        Some(alarm) => (Verdict::Fail, detector_words(alarm, &described)),
        None => words(cfg, evidence.decision, &described),
    };
    judged(
        verdict,
        reason,
        &evidence,
        cfg.tolerance,
        ledger,
        samples,
        (now_ms, counting_from_ms),
    )
}

/// The memory after a reading that weighed nothing: only its time moves.
fn seen_at(memory: Memory, now_ms: i64) -> Memory {
    Memory {
        evaluated_at_ms: Some(now_ms),
        ..memory
    }
}

/// A decision in the gate's words: FAIL, PASS, DECIDING, INCONCLUSIVE.
fn words(cfg: &crate::judge::Config, decision: Decision, described: &str) -> (Verdict, String) {
    match decision {
        Decision::Fail => (
            Verdict::Fail,
            format!("FAIL: new is worse than old beyond the tolerance: {described}"),
        ),
        Decision::Pass => (
            Verdict::Pass,
            format!("PASS: new is not worse than old beyond the tolerance: {described}"),
        ),
        Decision::Deciding => (Verdict::Soaking, format!("DECIDING: {described}")),
        Decision::Inconclusive => (
            Verdict::Soaking,
            format!(
                "{INCONCLUSIVE} after {}: a person decides (advance or roll back): {described}",
                crate::time::human_ms(crate::time::millis(cfg.max_duration))
            ),
        ),
    }
}

/// The change detector's FAIL in words: since when new has been worse (the start of the bet
/// that won, into the count), and when it alarmed.
fn detector_words(alarm: crate::judge::detector::Alarm, described: &str) -> String {
    let at = |ms: u64| crate::time::human_ms(i64::try_from(ms).unwrap_or(i64::MAX));
    format!(
        "FAIL: the change detector: new has been worse than old beyond the tolerance since \
         about {} into the count (alarmed at {}): {described}",
        at(alarm.since_ms),
        at(alarm.at_ms)
    )
}

/// A judge's evaluation: the estimate against `1 + tolerance`, the ledger remembered.
fn judged(
    verdict: Verdict,
    reason: String,
    evidence: &Evidence,
    tolerance: f64,
    ledger: Ledger,
    samples: u32,
    (now_ms, counting_from_ms): (i64, i64),
) -> Evaluation {
    Evaluation {
        verdict,
        value: evidence.ratio,
        old_value: Some(1.0 + tolerance),
        reason,
        samples,
        soak: None,
        cause: None,
        memory: Memory {
            held_since_ms: Some(counting_from_ms),
            samples,
            peak: Some(evidence.fail_peak),
            evaluated_at_ms: Some(now_ms),
            judge: Some(ledger),
        },
    }
}

/// A latency judge's look that weighed nothing (old's quantile still settling, above the
/// buckets, or with no bucket past the tolerance): a FAIL seen earlier in the step stays, else
/// it is DECIDING (INCONCLUSIVE past `max_duration`); never a PASS.
fn unweighed(
    check: &JudgeCheck,
    l: &LatencyJudge,
    why: crate::judge::latency::Unweighed,
    memory: Memory,
    now_ms: i64,
    elapsed: Duration,
) -> Evaluation {
    let cfg = &check.config;
    let said = crate::judge::latency::describe_unweighed(&l.buckets, cfg, why);
    let failed = memory.judge.is_some_and(|l| l.failed);
    let decision = if failed {
        Decision::Fail
    } else if elapsed >= cfg.max_duration {
        Decision::Inconclusive
    } else {
        Decision::Deciding
    };
    let (verdict, reason) = words(cfg, decision, &said);
    let samples = memory.samples.saturating_add(1);
    Evaluation {
        verdict,
        value: None,
        old_value: Some(1.0 + cfg.tolerance),
        reason,
        samples,
        soak: None,
        cause: None,
        memory: Memory {
            samples,
            evaluated_at_ms: Some(now_ms),
            ..memory
        },
    }
}
