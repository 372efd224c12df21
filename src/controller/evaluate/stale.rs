//! The built-in stale-producer guard's note: which producers wrote which moved slices to the old
//! broker within the guard's window, read from the same scrape history as its number (the
//! consumers' `queue_migrate_stale_producer_messages_total{producer, slice}`), so that the
//! journal, the notice and the standing name the producer (issue 58). Pure over the history.

use crate::indicators::history::History;
use crate::indicators::query::{Query, parse_query};
use crate::plan::{Gate, GateKind, STALE_GUARD};

use super::judge::Item;

/// Whether `item` is the built-in stale-producer guard.
pub(super) fn is_stale_guard(item: &Item<'_>) -> bool {
    matches!(item, Item::Gate(Gate { name, .. }, GateKind::Guard) if name == STALE_GUARD)
}

/// The query whose selector keeps the labelled series in the source's history.
pub(super) fn offender_query() -> Option<Query> {
    parse_query(crate::stale::STALE_METRIC).ok()
}

/// One producer's stale messages on one slice within the window.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Offender {
    pub producer: String,
    pub slice: String,
    pub count: f64,
}

/// The (producer, slice) series whose count grew in `(now_ms - window_ms, now_ms]` (a series
/// that appeared in the window grew from 0), largest first.
pub(super) fn offenders(history: &History, now_ms: i64, window_ms: i64) -> Vec<Offender> {
    let from = now_ms.saturating_sub(window_ms);
    let in_window = history.scrapes_between(from, now_ms);
    let before = history.scrapes_between(i64::MIN, from);
    let mut out = Vec::new();
    for s in history
        .series()
        .filter(|s| s.metric() == crate::stale::STALE_METRIC)
    {
        let Some((_, last)) = history.points_of(s, in_window.clone()).last() else {
            continue;
        };
        let base = history
            .points_of(s, before.clone())
            .last()
            .map_or(0.0, |(_, v)| v);
        let count = if last < base { last } else { last - base };
        if count <= 0.0 || !count.is_finite() {
            continue;
        }
        let label = |name: &str| {
            s.labels()
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_default()
        };
        out.push(Offender {
            producer: label("producer"),
            slice: label("slice"),
            count,
        });
    }
    out.sort_by(|a, b| {
        b.count
            .total_cmp(&a.count)
            .then_with(|| a.producer.cmp(&b.producer))
    });
    out
}

/// The note naming them: `producer refunds on slices 12, 40 (7 messages); producer ...`; `None`
/// without any. At most 5 producers and 8 slices each are named.
pub(super) fn note(offenders: &[Offender]) -> Option<String> {
    if offenders.is_empty() {
        return None;
    }
    let mut producers: Vec<(&str, Vec<&str>, f64)> = Vec::new();
    for o in offenders {
        match producers.iter_mut().find(|(p, _, _)| *p == o.producer) {
            Some((_, slices, n)) => {
                slices.push(&o.slice);
                *n += o.count;
            }
            None => producers.push((&o.producer, vec![&o.slice], o.count)),
        }
    }
    let shown: Vec<String> = producers
        .iter()
        .take(5)
        .map(|(p, slices, n)| {
            let more = slices.len().saturating_sub(8);
            let mut list = slices
                .iter()
                .take(8)
                .copied()
                .collect::<Vec<_>>()
                .join(", ");
            if more > 0 {
                list.push_str(&format!(" and {more} more"));
            }
            format!(
                "producer {p} on slice{} {list} ({} message{})",
                if slices.len() == 1 { "" } else { "s" },
                crate::gate::fmt_num(*n),
                if *n == 1.0 { "" } else { "s" }
            )
        })
        .collect();
    let mut text = format!(
        "still writing moved slices to the old broker: {}",
        shown.join("; ")
    );
    if producers.len() > 5 {
        text.push_str(&format!("; and {} more producers", producers.len() - 5));
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::indicators::exposition::Sample;

    fn sample(producer: &str, slice: &str, v: f64) -> Sample {
        crate::indicators::query::tests::sample(
            crate::stale::STALE_METRIC,
            &[("producer", producer), ("slice", slice)],
            v,
        )
    }

    #[test]
    fn the_note_names_the_producers_whose_counts_grew_in_the_window() {
        let q = offender_query().unwrap();
        let mut h = History::new();
        // billing tripped long before the window, and not since; refunds in it, on two slices.
        h.record(0, &[sample("billing", "3", 4.0)], &q.selectors());
        h.record(60_000, &[sample("billing", "3", 4.0)], &q.selectors());
        h.record(
            120_000,
            &[
                sample("billing", "3", 4.0),
                sample("refunds", "12", 2.0),
                sample("refunds", "40", 1.0),
            ],
            &q.selectors(),
        );
        let found = offenders(&h, 120_000, 60_000);
        assert_eq!(
            found
                .iter()
                .map(|o| (o.producer.as_str(), o.slice.as_str()))
                .collect::<Vec<_>>(),
            [("refunds", "12"), ("refunds", "40")]
        );
        assert_eq!(
            note(&found).unwrap(),
            "still writing moved slices to the old broker: producer refunds on slices 12, 40 (3 messages)"
        );
        assert_eq!(note(&offenders(&h, 60_000, 30_000)), None);
    }
}
