//! The samples a `scrape:` source's queries need between scrapes (pure: no IO, no clock).
//!
//! A [`History`] holds the instants of the scrapes once, and each series only its values,
//! one per scrape from its first to its last: a series present in every scrape costs 8 bytes a
//! sample, where a `(time, value)` pair costs 16. A scrape a series missed holds a marker that is
//! never a value (a NaN read from a scrape is kept as the ordinary NaN).
//!
//! # Guarantees
//! - A history is the set of its scrape instants and of its `(series, instant, value)` points:
//!   two histories holding the same ones are equal, whatever order they were added in (a NaN
//!   equals a NaN here: every NaN is kept as the same one).
//! - Adding the scrape that follows the newest, and pruning the oldest, cost a constant per
//!   series; an instant older than the newest costs a step per series, and moves the values of
//!   the series that span it.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use crate::indicators::exposition::Sample;
use crate::indicators::selector::Selector;

/// One stored sample of one series, for persistence.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Stable key of the series: `metric{a="x",b="y"}` with labels sorted by name
    /// (values escaped as in PromQL); just `metric` without labels.
    pub series_key: String,
    pub metric: String,
    /// Labels sorted by name (then value).
    pub labels: Vec<(String, String)>,
    /// When the scrape that produced it was taken (Unix ms).
    pub at_ms: i64,
    pub value: f64,
}

/// What a series holds at a scrape it was missing from: a NaN no value is stored as (values
/// are stored with [`stored`], which makes every NaN the ordinary one).
const MISSING: u64 = 0x7ff0_0000_0000_0002;

fn stored(value: f64) -> f64 {
    if value.is_nan() { f64::NAN } else { value }
}

fn present(value: f64) -> Option<f64> {
    (value.to_bits() != MISSING).then_some(value)
}

/// One series: its name, labels, and its values at the history's scrapes.
#[derive(Debug, Clone)]
pub struct Series {
    metric: String,
    labels: Vec<(String, String)>,
    /// The index, among the history's scrapes, of `values[0]`.
    first: usize,
    /// One value per scrape from `first` on; the first and the last are never [`MISSING`].
    values: VecDeque<f64>,
}

impl Series {
    fn new(metric: String, labels: Vec<(String, String)>) -> Self {
        Series {
            metric,
            labels,
            first: 0,
            values: VecDeque::new(),
        }
    }

    pub(crate) fn metric(&self) -> &str {
        &self.metric
    }

    pub(crate) fn labels(&self) -> &[(String, String)] {
        &self.labels
    }

    /// Its value at the scrape of index `scrape`, if it was in that scrape.
    pub(crate) fn value(&self, scrape: usize) -> Option<f64> {
        let i = scrape.checked_sub(self.first)?;
        self.values.get(i).copied().and_then(present)
    }

    /// The scrapes it spans, as indices of the history's scrapes.
    fn span(&self) -> Range<usize> {
        self.first..self.first + self.values.len()
    }

    /// Make room for `more` values: all of them when asked for at once, else an eighth more
    /// than it holds, not twice as much (a series gains one value per scrape for as long as
    /// its history is kept, and doubling would leave up to half of a long history unused).
    fn make_room(&mut self, more: usize) {
        let spare = self.values.capacity() - self.values.len();
        if more > spare {
            self.values
                .reserve_exact(more.max(self.values.len() / 8).max(4));
        }
    }

    /// Set its value at the scrape of index `scrape`.
    fn set(&mut self, scrape: usize, value: f64) {
        let value = stored(value);
        if self.values.is_empty() {
            self.make_room(1);
            self.first = scrape;
            self.values.push_back(value);
        } else if scrape < self.first {
            let gap = self.first - scrape;
            self.make_room(gap);
            for _ in 1..gap {
                self.values.push_front(f64::from_bits(MISSING));
            }
            self.values.push_front(value);
            self.first = scrape;
        } else if let Some(v) = self.values.get_mut(scrape - self.first) {
            *v = value;
        } else {
            let gap = scrape - self.first - self.values.len();
            self.make_room(gap + 1);
            self.values
                .extend(std::iter::repeat_n(f64::from_bits(MISSING), gap));
            self.values.push_back(value);
        }
    }

    /// A scrape was added at index `scrape` of the history, before the ones from there on.
    fn scrape_inserted(&mut self, scrape: usize) {
        if self.values.is_empty() {
            return;
        }
        if scrape <= self.first {
            self.first += 1;
        } else if scrape < self.first + self.values.len() {
            self.make_room(1);
            self.values
                .insert(scrape - self.first, f64::from_bits(MISSING));
        }
    }

    /// The history's first `dropped` scrapes were pruned.
    fn scrapes_pruned(&mut self, dropped: usize) {
        let gone = dropped.saturating_sub(self.first).min(self.values.len());
        self.values.drain(..gone);
        self.first = self.first.saturating_sub(dropped);
        while self.values.front().is_some_and(|v| present(*v).is_none()) {
            self.values.pop_front();
            self.first += 1;
        }
        let len = self.values.len();
        if self.values.capacity() > 2 * len + 8 {
            self.values.shrink_to(len + len / 8);
        }
    }
}

/// Values compare as numbers, except that a NaN equals a NaN (every NaN is stored as the same
/// one) and a missed scrape equals a missed scrape.
impl PartialEq for Series {
    fn eq(&self, other: &Self) -> bool {
        let same = |(a, b): (&f64, &f64)| a == b || a.to_bits() == b.to_bits();
        self.metric == other.metric
            && self.labels == other.labels
            && self.first == other.first
            && self.values.len() == other.values.len()
            && self.values.iter().zip(&other.values).all(same)
    }
}

/// The stable key of a series; `labels` must already be sorted. A name that is not a legacy
/// one (Prometheus 3's UTF-8 names: `http.server.duration`, `service.name`) is written quoted,
/// the metric name first inside the braces (`{"http.server.duration","service.name"="x"}`), so
/// that no two series share a key: a quoted name may hold `{`, `=` or `"`. Legacy names are
/// written as they always were (keys stored by older versions stay valid).
pub fn series_key(metric: &str, labels: &[(String, String)]) -> String {
    use crate::indicators::exposition::{is_legacy_label_name, is_legacy_metric_name, write_name};
    let legacy = is_legacy_metric_name(metric);
    if labels.is_empty() && legacy {
        return metric.to_owned();
    }
    let mut key = String::with_capacity(metric.len() + 2 + labels.len() * 16);
    if legacy {
        key.push_str(metric);
        key.push('{');
    } else {
        key.push('{');
        write_name(&mut key, metric, is_legacy_metric_name);
    }
    for (i, (k, v)) in labels.iter().enumerate() {
        if i > 0 || !legacy {
            key.push(',');
        }
        write_name(&mut key, k, is_legacy_label_name);
        key.push_str("=\"");
        crate::metrics_text::escape_label(&mut key, v);
        key.push('"');
    }
    key.push('}');
    key
}

fn sorted_labels(labels: &[(String, String)]) -> Vec<(String, String)> {
    let mut labels = labels.to_vec();
    labels.sort();
    labels
}

/// Samples kept between scrapes: the instants of the scrapes, and per series (metric name +
/// sorted labels rendered as a stable string key) its value at each of them, so that a series
/// missing from the latest scrape counts as gone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct History {
    series: BTreeMap<String, Series>,
    /// Oldest first, each once.
    scrapes: VecDeque<i64>,
}

impl History {
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one scrape taken at `at_ms`: keeps only samples of series matching one of
    /// `selectors`. The samples' own timestamps are ignored; the scrape time is used. A
    /// series appearing twice in one scrape keeps its last value. Recording the same
    /// `at_ms` again overwrites that scrape's values.
    pub fn record(&mut self, at_ms: i64, samples: &[Sample], selectors: &[&Selector]) {
        let scrape = self.add_scrape(at_ms);
        for s in samples {
            if !selectors.iter().any(|sel| sel.matches(s)) {
                continue;
            }
            let labels = sorted_labels(&s.labels);
            let key = series_key(&s.name, &labels);
            self.series
                .entry(key)
                .or_insert_with(|| Series::new(s.name.clone(), labels))
                .set(scrape, s.value);
        }
    }

    /// Drop points (and scrape times) older than `keep_from_ms`; answer how many scrape
    /// instants went.
    pub fn prune(&mut self, keep_from_ms: i64) -> usize {
        let dropped = self.scrapes.partition_point(|t| *t < keep_from_ms);
        if dropped == 0 {
            return 0;
        }
        self.scrapes.drain(..dropped);
        let len = self.scrapes.len();
        if self.scrapes.capacity() > 2 * len + 8 {
            self.scrapes.shrink_to(len + len / 8);
        }
        self.series.retain(|_, s| {
            s.scrapes_pruned(dropped);
            !s.values.is_empty()
        });
        dropped
    }

    /// Flat rows for persistence, ordered by series key then time.
    pub fn points(&self) -> impl Iterator<Item = Point> + '_ {
        self.series.iter().flat_map(move |(key, s)| {
            s.span().filter_map(move |i| {
                s.value(i).map(|value| Point {
                    series_key: key.clone(),
                    metric: s.metric.clone(),
                    labels: s.labels.clone(),
                    at_ms: self.scrapes[i],
                    value,
                })
            })
        })
    }

    /// The rows of the scrape taken at `at_ms` only: what [`History::points`] yields for that
    /// time, without building the others.
    pub fn points_at(&self, at_ms: i64) -> impl Iterator<Item = Point> + '_ {
        let scrape = self.scrape_index(at_ms);
        self.series.iter().filter_map(move |(key, s)| {
            s.value(scrape?).map(|value| Point {
                series_key: key.clone(),
                metric: s.metric.clone(),
                labels: s.labels.clone(),
                at_ms,
                value,
            })
        })
    }

    /// Rebuild from rows. The series key is recomputed from `metric` and `labels` (the
    /// stored `series_key` is not trusted); scrape times are taken from the points'
    /// times, so a scrape that kept no sample is not restored — add those with
    /// [`History::with_scrape_times`] if they were saved from [`History::scrape_times`].
    /// Of two rows for the same series and time, the later one wins.
    pub fn from_points(points: impl IntoIterator<Item = Point>) -> Self {
        let mut h = History::new();
        h.add_points(points);
        h
    }

    /// Add rows to what is kept, as [`History::from_points`] reads them (a row for a series and
    /// time already kept replaces it).
    pub fn add_points(&mut self, points: impl IntoIterator<Item = Point>) {
        for p in points {
            let scrape = self.add_scrape(p.at_ms);
            let labels = sorted_labels(&p.labels);
            let key = series_key(&p.metric, &labels);
            self.series
                .entry(key)
                .or_insert_with(|| Series::new(p.metric, labels))
                .set(scrape, p.value);
        }
    }

    /// Add the rows of one series, as [`History::add_points`] adds each: its labels sorted and
    /// its key built once for all of them, and room made for them at once (a history read whole
    /// from the store comes series by series). Cheapest when their instants are already scrapes
    /// of the history ([`History::with_scrape_times`] first).
    pub fn add_series_points(
        &mut self,
        metric: String,
        labels: &[(String, String)],
        points: &[(i64, f64)],
    ) {
        if points.is_empty() {
            return;
        }
        for (at_ms, _) in points {
            self.add_scrape(*at_ms);
        }
        let labels = sorted_labels(labels);
        let key = series_key(&metric, &labels);
        let scrapes = &self.scrapes;
        let series = self
            .series
            .entry(key)
            .or_insert_with(|| Series::new(metric, labels));
        let index = |at_ms: i64| scrapes.partition_point(|t| *t < at_ms);
        if let (Some(lo), Some(hi)) = (
            points.iter().map(|p| index(p.0)).min(),
            points.iter().map(|p| index(p.0)).max(),
        ) {
            let span = series.span();
            let (from, to) = if series.values.is_empty() {
                (lo, hi + 1)
            } else {
                (span.start.min(lo), span.end.max(hi + 1))
            };
            series.make_room((to - from).saturating_sub(series.values.len()));
        }
        for (at_ms, value) in points {
            series.set(index(*at_ms), *value);
        }
    }

    /// The times of all recorded scrapes, oldest first (including scrapes that kept no sample).
    pub fn scrape_times(&self) -> impl Iterator<Item = i64> + '_ {
        self.scrapes.iter().copied()
    }

    /// Add scrape times (e.g. restored next to [`History::from_points`]).
    pub fn with_scrape_times(mut self, times: impl IntoIterator<Item = i64>) -> Self {
        for at_ms in times {
            self.add_scrape(at_ms);
        }
        self
    }

    /// How many scrape instants at or before `through_ms` the history holds, and their sum:
    /// compared with a store's to learn whether it holds a scrape the history lacks. The sum
    /// wraps where a database's would overflow, past about 5 million instants of today's.
    pub fn instants_through(&self, through_ms: i64) -> (i64, i64) {
        let held = self.scrapes.partition_point(|t| *t <= through_ms);
        let sum = self
            .scrapes
            .range(..held)
            .fold(0i64, |sum, t| sum.wrapping_add(*t));
        (i64::try_from(held).unwrap_or(i64::MAX), sum)
    }

    /// Whether nothing at all is recorded.
    pub fn is_empty(&self) -> bool {
        self.scrapes.is_empty() && self.series.is_empty()
    }

    /// The newest scrape at or before `now_ms`, and its index.
    pub(crate) fn latest_scrape(&self, now_ms: i64) -> Option<(usize, i64)> {
        let i = self
            .scrapes
            .partition_point(|t| *t <= now_ms)
            .checked_sub(1)?;
        Some((i, self.scrapes[i]))
    }

    /// The series kept, by key.
    pub(crate) fn series(&self) -> impl Iterator<Item = &Series> + '_ {
        self.series.values()
    }

    /// The scrapes taken in `(after_ms, through_ms]`, as indices.
    pub(crate) fn scrapes_between(&self, after_ms: i64, through_ms: i64) -> Range<usize> {
        let from = self.scrapes.partition_point(|t| *t <= after_ms);
        let to = self.scrapes.partition_point(|t| *t <= through_ms);
        from..to.max(from)
    }

    /// The points of `series` at the scrapes of indices `scrapes`, oldest first.
    pub(crate) fn points_of<'a>(
        &'a self,
        series: &'a Series,
        scrapes: Range<usize>,
    ) -> impl Iterator<Item = (i64, f64)> + 'a {
        let span = series.span();
        (scrapes.start.max(span.start)..scrapes.end.min(span.end))
            .filter_map(move |i| series.value(i).map(|v| (self.scrapes[i], v)))
    }

    /// The index of the scrape taken at `at_ms`, if there was one.
    fn scrape_index(&self, at_ms: i64) -> Option<usize> {
        self.scrapes.binary_search(&at_ms).ok()
    }

    /// The index of the scrape taken at `at_ms`, added if there was none.
    fn add_scrape(&mut self, at_ms: i64) -> usize {
        match self.scrapes.binary_search(&at_ms) {
            Ok(i) => i,
            Err(i) => {
                if i < self.scrapes.len() {
                    for s in self.series.values_mut() {
                        s.scrape_inserted(i);
                    }
                }
                self.scrapes.insert(i, at_ms);
                i
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Issue 32: a quoted UTF-8 name may hold `{`, `=` or `"`; keys written the legacy way
    /// would give two series one key (one's samples read as the other's). Legacy names keep
    /// their keys.
    #[test]
    fn utf8_names_never_share_a_series_key() {
        let l = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert_eq!(series_key("up", &[]), "up");
        assert_eq!(series_key("up", &l(&[("job", "a")])), "up{job=\"a\"}");
        let keys = [
            series_key("x{y=\"1\"}", &[]),
            series_key("x", &l(&[("y", "1")])),
            series_key("x", &l(&[("y=\"1\"", "")])),
            series_key("http.server.duration", &l(&[("service.name", "x")])),
            series_key(
                "http.server.duration",
                &l(&[("service.name", "x"), ("a", "b")]),
            ),
        ];
        assert_eq!(keys[0], "{\"x{y=\\\"1\\\"}\"}");
        assert_eq!(keys[3], "{\"http.server.duration\",\"service.name\"=\"x\"}");
        let distinct: std::collections::HashSet<&String> = keys.iter().collect();
        assert_eq!(distinct.len(), keys.len(), "{keys:?}");
    }

    use super::*;
    use crate::indicators::query::tests::{q, sample};
    use proptest::prelude::*;

    const MIN: i64 = 60_000;

    #[test]
    fn record_keeps_only_selected_series() {
        let query = q("rate(a_total{k=\"1\"}[5m]) / b");
        let mut h = History::new();
        h.record(
            1000,
            &[
                sample("a_total", &[("k", "1")], 1.0),
                sample("a_total", &[("k", "2")], 2.0),
                sample("b", &[("z", "1"), ("a", "2")], 3.0),
                sample("c", &[], 4.0),
            ],
            &query.selectors(),
        );
        let keys: Vec<String> = h.points().map(|p| p.series_key).collect();
        assert_eq!(keys, ["a_total{k=\"1\"}", "b{a=\"2\",z=\"1\"}"]);
        let b = h.points().find(|p| p.metric == "b");
        assert_eq!(
            b.map(|p| p.labels),
            Some(vec![
                ("a".to_owned(), "2".to_owned()),
                ("z".to_owned(), "1".to_owned())
            ])
        );
    }

    #[test]
    fn history_prune_and_points_round_trip() {
        let query = q("x");
        let mut h = History::new();
        for (i, at) in [0, MIN, 2 * MIN, 3 * MIN].into_iter().enumerate() {
            let v = i as f64;
            h.record(
                at,
                &[
                    sample("x", &[("s", "a")], v),
                    sample("x", &[("s", "we\"ird\\\nval")], v * 10.0),
                ],
                &query.selectors(),
            );
        }
        // A scrape where the series were absent.
        h.record(4 * MIN, &[], &query.selectors());
        assert_eq!(h.points().count(), 8);

        h.prune(2 * MIN);
        let pts: Vec<Point> = h.points().collect();
        assert_eq!(pts.len(), 4);
        assert!(pts.iter().all(|p| p.at_ms >= 2 * MIN));
        assert_eq!(
            h.scrape_times().collect::<Vec<_>>(),
            [2 * MIN, 3 * MIN, 4 * MIN]
        );

        // Points alone lose the empty scrape; with scrape times it is exact.
        let restored = History::from_points(pts.clone());
        assert_eq!(restored.points().collect::<Vec<_>>(), pts);
        assert_ne!(restored, h);
        let exact = History::from_points(pts.clone()).with_scrape_times(h.scrape_times());
        assert_eq!(exact, h);
        assert_eq!(query.evaluate(&exact, 4 * MIN), query.evaluate(&h, 4 * MIN));

        // Row order and a wrong stored key do not matter.
        let mut shuffled = pts.clone();
        shuffled.reverse();
        for p in &mut shuffled {
            p.series_key = "garbage".into();
            p.labels.reverse();
        }
        assert_eq!(
            History::from_points(shuffled).points().collect::<Vec<_>>(),
            pts
        );

        // Rows added in two parts (what was kept, then what was stored since) rebuild the same.
        let mut parts = History::from_points(pts.iter().filter(|p| p.at_ms < 3 * MIN).cloned());
        parts.add_points(pts.iter().filter(|p| p.at_ms >= 3 * MIN).cloned());
        assert_eq!(parts, History::from_points(pts.clone()));

        // One scrape's rows alone are the rows of that time.
        for at in [2 * MIN, 3 * MIN, 4 * MIN, 5 * MIN] {
            let at_time: Vec<Point> = pts.iter().filter(|p| p.at_ms == at).cloned().collect();
            assert_eq!(h.points_at(at).collect::<Vec<_>>(), at_time, "at {at}");
        }

        // Pruning everything empties the history.
        h.prune(i64::MAX);
        assert!(h.is_empty());
        assert_eq!(h.points().count(), 0);
    }

    #[test]
    fn instants_through_count_and_sum_the_scrapes_up_to_an_instant() {
        let query = q("x");
        let mut h = History::new();
        assert_eq!(h.instants_through(i64::MAX), (0, 0));
        for at in [3_000, 1_000, 2_000] {
            h.record(at, &[], &query.selectors());
        }
        assert_eq!(h.instants_through(999), (0, 0));
        assert_eq!(h.instants_through(2_000), (2, 3_000));
        assert_eq!(h.instants_through(i64::MAX), (3, 6_000));
        assert_eq!(h.prune(2_000), 1, "the instants dropped");
        assert_eq!(h.instants_through(i64::MAX), (2, 5_000));
        assert_eq!(h.prune(2_000), 0, "nothing older left");
    }

    #[test]
    fn record_same_time_overwrites() {
        let query = q("x");
        let mut h = History::new();
        h.record(0, &[sample("x", &[], 1.0)], &query.selectors());
        h.record(0, &[sample("x", &[], 2.0)], &query.selectors());
        assert_eq!(h.points().count(), 1);
        assert_eq!(query.evaluate(&h, 0).map(|r| r.value), Ok(2.0));
    }

    #[test]
    fn a_nan_sample_is_kept_as_a_value_not_as_a_missed_scrape() {
        let query = q("x");
        let mut h = History::new();
        let odd_nan = f64::from_bits(MISSING);
        assert!(odd_nan.is_nan());
        h.record(0, &[sample("x", &[], 1.0)], &query.selectors());
        h.record(MIN, &[sample("x", &[], odd_nan)], &query.selectors());
        h.record(2 * MIN, &[sample("x", &[], 3.0)], &query.selectors());
        let values: Vec<(i64, bool)> = h.points().map(|p| (p.at_ms, p.value.is_nan())).collect();
        assert_eq!(values, [(0, false), (MIN, true), (2 * MIN, false)]);
        assert_eq!(
            query.evaluate(&h, MIN).map_err(|e| e.reason),
            Err("NaN".to_owned())
        );
    }

    fn point_of(series: &str, at_ms: i64, value: f64) -> Point {
        Point {
            series_key: String::new(),
            metric: "depth".into(),
            labels: vec![("z".into(), "1".into()), ("queue".into(), series.into())],
            at_ms,
            value,
        }
    }

    #[test]
    fn a_series_added_at_once_is_what_its_points_added_one_by_one_give() {
        let points: Vec<Point> = (0..50)
            .flat_map(|i| {
                [
                    point_of("a", i * 1_000, i as f64),
                    point_of("b", i * 1_000, 1.0),
                ]
            })
            .collect();
        let one_by_one = History::from_points(points.clone());
        let mut at_once = History::new();
        for series in ["a", "b"] {
            let of: Vec<(i64, f64)> = points
                .iter()
                .filter(|p| p.labels[1].1 == series)
                .map(|p| (p.at_ms, p.value))
                .collect();
            let labels = [("z".into(), "1".into()), ("queue".into(), series.into())];
            at_once.add_series_points("depth".into(), &labels, &of);
        }
        assert_eq!(at_once, one_by_one);
        at_once.add_series_points("depth".into(), &[], &[]);
        assert_eq!(at_once, one_by_one, "a series of no point is none");
        // Added again over a history holding them: the later value of a time replaces it.
        at_once.add_series_points(
            "depth".into(),
            &points[0].labels,
            &[(49_000, -1.0), (50_000, 50.0)],
        );
        let a: Vec<(i64, f64)> = at_once
            .points()
            .filter(|p| p.series_key == "depth{queue=\"a\",z=\"1\"}")
            .map(|p| (p.at_ms, p.value))
            .skip(48)
            .collect();
        assert_eq!(a, [(48_000, 48.0), (49_000, -1.0), (50_000, 50.0)]);
        assert_eq!(at_once.scrape_times().last(), Some(50_000));
    }

    /// Regression: a series' points grew by doubling, so a long history held up to twice the
    /// room its points need: a daemon holding 17 minutes of scrapes of 1,000 sources (3.5 M
    /// samples) went from 143 to 197 MiB once its series passed 512 points.
    #[test]
    fn a_series_keeps_little_spare_room_as_it_grows_and_after_a_prune() {
        let query = q("depth");
        let mut h = History::new();
        let room = |h: &History| {
            let s = h.series().next().expect("one series");
            (s.values.len(), s.values.capacity())
        };
        for at in 0..10_000 {
            h.record(at, &[sample("depth", &[], 0.0)], &query.selectors());
            let (len, capacity) = room(&h);
            assert!(capacity <= len + len / 8 + 4, "{len}: {capacity}");
        }
        h.prune(9_000);
        assert_eq!(room(&h).0, 1_000);
        assert!(room(&h).1 <= 2 * 1_000 + 8, "{}", room(&h).1);
        h.prune(9_990);
        assert_eq!(
            h.points().next().map(|p| (p.at_ms, p.value)),
            Some((9_990, 0.0))
        );
    }

    /// An operation on a history, for the model test below.
    #[derive(Debug, Clone)]
    enum Op {
        Add(u8, i64, f64),
        AddSeries(u8, Vec<(i64, f64)>),
        Scrape(i64),
        Prune(i64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u8..4, 0i64..40, -5.0f64..5.0).prop_map(|(s, t, v)| Op::Add(s, t, v)),
            1 => (0u8..4, prop::collection::vec((0i64..40, -5.0f64..5.0), 0..6))
                .prop_map(|(s, points)| Op::AddSeries(s, points)),
            1 => (0i64..40).prop_map(Op::Scrape),
            1 => (0i64..40).prop_map(Op::Prune),
        ]
    }

    proptest! {
        /// Any sequence of additions (in any order of time) and prunes holds what a plain map
        /// of `(series, instant) -> value` and a set of instants hold.
        #[test]
        fn a_history_holds_what_a_map_of_points_holds(ops in prop::collection::vec(op(), 0..80)) {
            let mut h = History::new();
            let mut points: BTreeMap<(String, i64), f64> = BTreeMap::new();
            let mut scrapes = std::collections::BTreeSet::new();
            for op in &ops {
                match *op {
                    Op::Add(s, t, v) => {
                        let p = point_of(&s.to_string(), t, v);
                        let key = series_key("depth", &sorted_labels(&p.labels));
                        h.add_points([p]);
                        points.insert((key, t), v);
                        scrapes.insert(t);
                    }
                    Op::AddSeries(s, ref added) => {
                        let labels = point_of(&s.to_string(), 0, 0.0).labels;
                        let key = series_key("depth", &sorted_labels(&labels));
                        h.add_series_points("depth".into(), &labels, added);
                        for (t, v) in added {
                            points.insert((key.clone(), *t), *v);
                            scrapes.insert(*t);
                        }
                    }
                    Op::Scrape(t) => {
                        h = h.with_scrape_times([t]);
                        scrapes.insert(t);
                    }
                    Op::Prune(t) => {
                        h.prune(t);
                        points.retain(|(_, at), _| *at >= t);
                        scrapes.retain(|at| *at >= t);
                    }
                }
                let held: Vec<(String, i64, f64)> =
                    h.points().map(|p| (p.series_key, p.at_ms, p.value)).collect();
                let model: Vec<(String, i64, f64)> =
                    points.iter().map(|((k, t), v)| (k.clone(), *t, *v)).collect();
                prop_assert_eq!(held, model);
                prop_assert_eq!(h.scrape_times().collect::<Vec<_>>(), scrapes.iter().copied().collect::<Vec<_>>());
                // A window `(after, through]` reads what the model holds in it.
                for (after, through) in [(-1, 40), (5, 20), (12, 12), (30, 8), (i64::MIN, 39)] {
                    let window = h.scrapes_between(after, through);
                    let read: Vec<(String, i64, f64)> = h
                        .series()
                        .flat_map(|s| {
                            let key = series_key(s.metric(), s.labels());
                            h.points_of(s, window.clone()).map(move |(t, v)| (key.clone(), t, v))
                        })
                        .collect();
                    let model: Vec<(String, i64, f64)> = points
                        .iter()
                        .filter(|((_, t), _)| after < *t && *t <= through)
                        .map(|((k, t), v)| (k.clone(), *t, *v))
                        .collect();
                    prop_assert_eq!(read, model, "window ({}, {}]", after, through);
                }
                for s in h.series() {
                    prop_assert!(s.values.front().is_some_and(|v| present(*v).is_some()));
                    prop_assert!(s.values.back().is_some_and(|v| present(*v).is_some()));
                    prop_assert!(s.span().end <= h.scrapes.len());
                }
                // The same points added in time order make an equal history.
                let mut ordered: Vec<Point> = h.points().collect();
                ordered.sort_by_key(|p| p.at_ms);
                let mut rebuilt = History::new().with_scrape_times(h.scrape_times());
                rebuilt.add_points(ordered);
                prop_assert_eq!(&rebuilt, &h);
            }
        }
    }
}
