//! A scrape as both backends keep it: one row per (migration, source, instant), its samples as
//! the JSON text `[[bits, series, metric, labels], ...]`, the bits of each value a signed 64-bit
//! integer (see [`to_bits`]) so that every double reads back exact.
//!
//! A round writes one row per source instead of one per sample, and a reader asks the database
//! for one text per source (`[[at, samples], ...]`, the rows joined by the database) instead of
//! one row per sample or per series; [`series_of`] turns that text back into the series.
//!
//! # Guarantees
//! - [`rows_of`] writes each (migration, source, instant) once, with every sample given for it;
//!   a sample given twice for one series at one instant keeps the last.
//! - [`series_of`] answers every sample of the text once, grouped by (series, metric, labels),
//!   oldest first; of two samples of one series key at one instant (a scrape row merged from
//!   two writes), the later in the text wins, whatever their labels.

use std::collections::{BTreeMap, HashMap, HashSet};

/// Most bytes of samples one scrape row holds: what a round keeps of one source's scrape
/// (the controller holds the source's gates, naming this cap, rather than keep more; a row
/// that would hold more is written without its samples). 4 MiB is 10,000 series of ~400 bytes
/// of series key, metric and labels.
pub const MAX_SCRAPE_ROW_BYTES: usize = 4 * 1024 * 1024;

/// Most bytes of samples one read of a source's history joins into one text: past it (or past
/// a row larger than [`MAX_SCRAPE_ROW_BYTES`], written before that cap), the read is refused
/// with [`StoreError::TooLarge`] (a hold of the source's gates, not a failed tick) instead of
/// asking the database for a text it cannot build (SQLite's limit is 1e9 bytes, PostgreSQL's 1
/// GiB) or the memory to parse it.
pub const MAX_HISTORY_BYTES: i64 = 256 * 1024 * 1024;

/// The bytes `s` takes as a JSON string, quotes included: at least what serde_json writes.
fn json_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' => 2,
            b if b < 0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The bytes the samples `points` take in a scrape row (at least what [`rows_of`] writes for
/// them, each series once): what a round would keep of a scrape, for the cap
/// [`MAX_SCRAPE_ROW_BYTES`].
pub fn kept_bytes(points: &[StoredPoint]) -> usize {
    // `[` `]` and, per sample, `[bits,"series","metric","labels"],` with the bits at most 20.
    2 + points
        .iter()
        .map(|p| 25 + json_len(&p.series) + json_len(&p.metric) + json_len(&p.labels))
        .sum::<usize>()
}

use super::scrape_text::{Bad, Reader};
use super::{Result, SourceRows, StoreError, StoredPoint, StoredSeries};

/// The bits of `value` as a signed integer (the inverse of [`from_bits`]).
pub(super) fn to_bits(value: f64) -> i64 {
    i64::from_ne_bytes(value.to_bits().to_ne_bytes())
}

/// The double whose bits [`to_bits`] answered.
pub(super) fn from_bits(bits: i64) -> f64 {
    f64::from_bits(u64::from_ne_bytes(bits.to_ne_bytes()))
}

/// One scrape row to write: its migration, source, instant and samples (JSON text).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ScrapeRow<'a> {
    pub name: &'a str,
    pub source: &'a str,
    pub at_ms: i64,
    pub samples: String,
}

/// The rows that write `sources`: one per (migration, source, instant) given, as a scrape
/// instant or as a sample's instant, ordered by migration, source and time.
///
/// # Errors
/// [`StoreError::Corrupt`] if the samples cannot be written as JSON (they always can).
pub(super) fn rows_of<'a>(sources: &[SourceRows<'a>]) -> Result<Vec<ScrapeRow<'a>>> {
    let mut scrapes: BTreeMap<(&str, &str, i64), Vec<&StoredPoint>> = BTreeMap::new();
    for s in sources {
        for &at in s.scrape_times {
            scrapes.entry((s.name, s.source, at)).or_default();
        }
        for p in s.points {
            scrapes
                .entry((s.name, s.source, p.at_ms))
                .or_default()
                .push(p);
        }
    }
    scrapes
        .into_iter()
        .map(|((name, source, at_ms), given)| {
            // The last sample given for each series, in the order given.
            let mut seen = HashSet::with_capacity(given.len());
            let mut encoded: Vec<(i64, &str, &str, &str)> = given
                .iter()
                .rev()
                .filter(|p| seen.insert(p.series.as_str()))
                .map(|p| (to_bits(p.value), &*p.series, &*p.metric, &*p.labels))
                .collect();
            encoded.reverse();
            let mut samples = serde_json::to_string(&encoded).map_err(|e| {
                StoreError::Corrupt(format!("cannot write the samples of {source:?}: {e}"))
            })?;
            // Never a value a later read cannot take: the controller keeps no more than the
            // cap ([`kept_bytes`]); a row that would hold more keeps its instant only.
            if samples.len() > MAX_SCRAPE_ROW_BYTES {
                tracing::warn!(
                    migration = name,
                    source,
                    bytes = samples.len(),
                    cap = MAX_SCRAPE_ROW_BYTES,
                    "a scrape's samples are larger than the store's cap per scrape: not kept"
                );
                samples = "[]".to_string();
            }
            Ok(ScrapeRow {
                name,
                source,
                at_ms,
                samples,
            })
        })
        .collect()
}

/// Why a read of `source`'s history of `total` bytes of samples, the largest row `largest`, is
/// refused (see [`MAX_HISTORY_BYTES`]), in words naming the cap; `None` when it may be read.
pub(super) fn too_large(source: &str, total: i64, largest: i64) -> Option<String> {
    let mib = |n: i64| n as f64 / (1024.0 * 1024.0);
    let row_cap = i64::try_from(MAX_SCRAPE_ROW_BYTES).unwrap_or(i64::MAX);
    if largest > row_cap {
        Some(format!(
            "the stored history of source {source} holds a scrape of {:.1} MiB, over the store's \
             cap of {:.0} MiB per scrape (written before the cap): its gates hold until it is \
             older than what they read, and it is pruned",
            mib(largest),
            mib(row_cap)
        ))
    } else if total > MAX_HISTORY_BYTES {
        Some(format!(
            "the stored history of source {source} is {:.1} MiB, over the store's cap of {:.0} \
             MiB per source read: its gates hold; select fewer series or shorten their windows",
            mib(total),
            mib(MAX_HISTORY_BYTES)
        ))
    } else {
        None
    }
}

/// A source's history as a backend reads it: `text`, its scrapes joined by the database (NULL
/// when none is within reach), and `times`, its scrape instants in any order when they were read
/// apart, first (a read whose samples reach less far back than its instants), as
/// [`super::ScrapeStore::load_series_after`] answers them: the series of [`series_of`] and the
/// instants oldest first, each once: those of `times` and those of the scrapes in `text` (every
/// stored scrape is a row, one that kept no sample too, and one committed between the two reads).
///
/// # Errors
/// [`StoreError::Corrupt`], naming `source`, when the text is not a list of scrapes.
pub(super) fn history(
    text: Option<&str>,
    times: Option<Vec<i64>>,
    source: &str,
) -> Result<(Vec<StoredSeries>, Vec<i64>)> {
    let (series, read) = match text {
        Some(text) => series_of(text, source)?,
        None => (Vec::new(), Vec::new()),
    };
    let mut times = match times {
        // A scrape committed between the two reads is in the text: its instant too.
        Some(mut times) => {
            times.extend(read);
            times
        }
        None => read,
    };
    times.sort_unstable();
    times.dedup();
    Ok((series, times))
}

/// A series as a sample writes it: its series key, metric and labels as JSON strings.
type Written<'a> = (&'a str, &'a str, &'a str);

/// The series of a source from the text `[[at, [[bits, series, metric, labels], ...]], ...]`
/// (the scrape rows joined by the database, in any order), each series oldest first, ordered
/// by series key, then by the first instant of each set of labels, then by metric and labels;
/// and the instants of the scrapes, in the order of the text.
///
/// # Errors
/// [`StoreError::Corrupt`], naming `source`, when the text is not such a list.
pub(super) fn series_of(text: &str, source: &str) -> Result<(Vec<StoredSeries>, Vec<i64>)> {
    read_scrapes(text).map_err(|e| {
        StoreError::Corrupt(format!(
            "the stored samples of source {source:?} are not a list of scrapes ({e})"
        ))
    })
}

/// [`series_of`], or where the text stopped being a list of scrapes.
fn read_scrapes(text: &str) -> std::result::Result<(Vec<StoredSeries>, Vec<i64>), Bad> {
    let decode = |raw: &str| serde_json::from_str::<String>(raw).map_err(|e| e.to_string());
    let mut r = Reader::new(text);
    let mut instants: Vec<i64> = Vec::new();
    let mut groups: Vec<StoredSeries> = Vec::new();
    // The three strings of each group's first sample as the text holds them, commas included.
    let mut spans: Vec<&str> = Vec::new();
    // Every way each series was written (one, unless two writers escaped a string
    // differently), to its group.
    let mut index: HashMap<Written<'_>, usize> = HashMap::new();
    // The groups of each series key that more than one set of labels shares (a series
    // relabelled), by group: rare, and where a sample must replace its sibling's at one instant.
    let mut siblings: HashMap<usize, Vec<usize>> = HashMap::new();
    // The group of each position in the previous scrape: consecutive scrapes of a source list
    // the same series in the same order, so a sample most often finds its group by comparing
    // bytes, without a hash or a decode.
    let mut previous: Vec<usize> = Vec::new();
    r.expect(b'[')?;
    let mut more = !r.eat(b']');
    while more {
        r.expect(b'[')?;
        let at_ms = r.int()?;
        r.expect(b',')?;
        r.expect(b'[')?;
        instants.push(at_ms);
        let mut position = 0;
        let mut samples = !r.eat(b']');
        while samples {
            r.expect(b'[')?;
            let bits = r.int()?;
            r.expect(b',')?;
            let hinted = previous
                .get(position)
                .copied()
                .filter(|&g| r.skip(spans[g]));
            let group = match hinted {
                Some(g) => g,
                None => {
                    let mark = r.mark();
                    let series = r.string()?;
                    r.expect(b',')?;
                    let metric = r.string()?;
                    r.expect(b',')?;
                    let labels = r.string()?;
                    let span = r.since(mark);
                    let key = (series, metric, labels);
                    match index.get(&key) {
                        Some(&g) => g,
                        None => {
                            let (series, metric, labels) =
                                (decode(series)?, decode(metric)?, decode(labels)?);
                            let same = groups.iter().position(|s| {
                                s.series == series && s.metric == metric && s.labels == labels
                            });
                            let g = same.unwrap_or_else(|| {
                                spans.push(span);
                                new_group(&mut groups, &mut siblings, series, metric, labels)
                            });
                            index.insert(key, g);
                            g
                        }
                    }
                }
            };
            r.expect(b']')?;
            put_sample(&mut groups, &siblings, group, at_ms, from_bits(bits));
            match previous.get_mut(position) {
                Some(slot) => *slot = group,
                None => previous.push(group),
            }
            position += 1;
            samples = r.eat(b',');
            if !samples {
                r.expect(b']')?;
            }
        }
        r.expect(b']')?;
        more = r.eat(b',');
        if !more {
            r.expect(b']')?;
        }
    }
    r.end()?;
    Ok((in_order(groups), instants))
}

/// A new group for a series met for the first time, its index: a sibling of each group of the
/// same series key.
fn new_group(
    groups: &mut Vec<StoredSeries>,
    siblings: &mut HashMap<usize, Vec<usize>>,
    series: String,
    metric: String,
    labels: String,
) -> usize {
    let g = groups.len();
    let shared: Vec<usize> = (0..g).filter(|&h| groups[h].series == series).collect();
    for &h in &shared {
        siblings.entry(h).or_default().push(g);
    }
    if !shared.is_empty() {
        siblings.insert(g, shared);
    }
    groups.push(StoredSeries {
        series,
        metric,
        labels,
        points: Vec::new(),
    });
    g
}

/// Adds a sample to its group. A sample given again for its series key at this instant (a
/// scrape written twice) replaces the one before it, whatever its labels.
fn put_sample(
    groups: &mut [StoredSeries],
    siblings: &HashMap<usize, Vec<usize>>,
    group: usize,
    at_ms: i64,
    value: f64,
) {
    for &h in siblings.get(&group).into_iter().flatten() {
        if groups[h].points.last().is_some_and(|p| p.0 == at_ms) {
            groups[h].points.pop();
        }
    }
    match groups[group].points.last_mut() {
        Some(last) if last.0 == at_ms => last.1 = value,
        _ => groups[group].points.push((at_ms, value)),
    }
}

/// The groups that hold a sample, each in time order, by series key, first instant, metric and
/// labels.
fn in_order(mut groups: Vec<StoredSeries>) -> Vec<StoredSeries> {
    groups.retain(|s| !s.points.is_empty());
    for s in &mut groups {
        s.points.sort_unstable_by_key(|&(at_ms, _)| at_ms);
    }
    groups.sort_by(|a, b| {
        (
            &a.series,
            a.points.first().map(|p| p.0),
            &a.metric,
            &a.labels,
        )
            .cmp(&(
                &b.series,
                b.points.first().map(|p| p.0),
                &b.metric,
                &b.labels,
            ))
    });
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(series: &str, labels: &str, at_ms: i64, value: f64) -> StoredPoint {
        StoredPoint {
            series: series.into(),
            metric: "depth".into(),
            labels: labels.into(),
            at_ms,
            value,
        }
    }

    /// The text a reader is handed for `rows` (what the database's join of them writes).
    fn joined(rows: &[ScrapeRow<'_>]) -> String {
        let parts: Vec<String> = rows
            .iter()
            .map(|r| format!("[{},{}]", r.at_ms, r.samples))
            .collect();
        format!("[{}]", parts.join(","))
    }

    #[test]
    fn bits_read_back_as_the_same_double() {
        for v in [
            0.0,
            -0.0,
            -1.5,
            f64::MIN_POSITIVE,
            f64::from_bits(1),
            f64::INFINITY,
        ] {
            assert_eq!(from_bits(to_bits(v)).to_bits(), v.to_bits());
        }
    }

    #[test]
    fn a_round_writes_one_row_per_instant_with_the_last_sample_of_each_series() {
        let points = [
            point("a", "[]", 2_000, 1.0),
            point("b", r#"[["q","x"]]"#, 2_000, 2.0),
            point("a", "[]", 2_000, 3.0),
        ];
        let source = SourceRows {
            name: "m",
            source: "app",
            points: &points,
            scrape_times: &[1_000, 2_000],
            keep_from_ms: Some(0),
        };
        let rows = rows_of(&[source]).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].at_ms, rows[0].samples.as_str()), (1_000, "[]"));
        let written: Vec<serde_json::Value> = serde_json::from_str(&rows[1].samples).unwrap();
        assert_eq!(written.len(), 2, "{written:?}");
        let series = series_of(&joined(&rows), "app").unwrap().0;
        let read: Vec<_> = series
            .iter()
            .map(|s| (s.series.as_str(), s.labels.as_str(), s.points.clone()))
            .collect();
        assert_eq!(
            read,
            vec![
                ("a", "[]", vec![(2_000, 3.0)]),
                ("b", r#"[["q","x"]]"#, vec![(2_000, 2.0)]),
            ]
        );
    }

    #[test]
    fn a_history_read_has_its_instants_oldest_first_whatever_the_database_answered() {
        assert_eq!(
            history(None, Some(vec![3_000, 1_000, 2_000]), "app").unwrap(),
            (Vec::new(), vec![1_000, 2_000, 3_000])
        );
        let text = format!("[[2000,[[{},\"s\",\"m\",\"[]\"]]]]", to_bits(1.0));
        let (series, times) = history(Some(&text), Some(vec![2_000, 1_000]), "app").unwrap();
        assert_eq!(
            (series[0].points.clone(), times),
            (vec![(2_000, 1.0)], vec![1_000, 2_000])
        );
    }

    /// A read whose samples reach as far back as its instants asks the database for one text:
    /// the instants are its scrapes', a scrape that kept no sample among them.
    #[test]
    fn a_history_read_in_one_text_has_the_instants_of_its_scrapes() {
        let text = format!(
            "[[3000,[[{},\"s\",\"m\",\"[]\"]]],[1000,[]],[2000,[[{},\"s\",\"m\",\"[]\"]]]]",
            to_bits(3.0),
            to_bits(2.0)
        );
        let (series, times) = history(Some(&text), None, "app").unwrap();
        assert_eq!(
            (series[0].points.clone(), times),
            (vec![(2_000, 2.0), (3_000, 3.0)], vec![1_000, 2_000, 3_000])
        );
        assert_eq!(
            history(None, None, "app").unwrap(),
            (Vec::new(), Vec::new())
        );
    }

    /// A helper's review: a scrape that kept no sample, committed between the read of the
    /// instants and the read of the scrapes, was in the text but not among the instants.
    #[test]
    fn a_scrape_committed_between_the_two_reads_is_an_instant() {
        let text = format!("[[2000,[[{},\"s\",\"m\",\"[]\"]]],[3000,[]]]", to_bits(2.0));
        let (_, times) = history(Some(&text), Some(vec![2_000, 1_000]), "app").unwrap();
        assert_eq!(times, vec![1_000, 2_000, 3_000]);
    }

    #[test]
    fn series_read_in_the_order_of_time_whatever_the_order_of_the_rows() {
        let text = format!(
            "[[3000,[[{},\"s\",\"m\",\"[]\"]]],[1000,[[{},\"s\",\"m\",\"[]\"]]],[2000,[]]]",
            to_bits(3.0),
            to_bits(1.0)
        );
        let series = series_of(&text, "app").unwrap().0;
        assert_eq!(series.len(), 1);
        assert_eq!(series[0].points, vec![(1_000, 1.0), (3_000, 3.0)]);
    }

    #[test]
    fn of_two_samples_at_one_instant_the_later_in_the_text_wins() {
        let text = format!(
            "[[1000,[[{},\"s\",\"m\",\"[]\"],[{},\"s\",\"m\",\"[]\"]]]]",
            to_bits(1.0),
            to_bits(2.0)
        );
        assert_eq!(
            series_of(&text, "app").unwrap().0[0].points,
            vec![(1_000, 2.0)]
        );
    }

    #[test]
    fn a_series_written_with_other_escapes_is_one_series() {
        // "q" and "\u0071" are one string: a row written by the schema's upgrade (SQLite's
        // JSON) and one by the store (serde_json) may escape differently.
        let text = format!(
            "[[1000,[[{},\"q\",\"m\",\"[]\"]]],[2000,[[{},\"\\u0071\",\"m\",\"[]\"]]]]",
            to_bits(1.0),
            to_bits(2.0)
        );
        let series = series_of(&text, "app").unwrap().0;
        assert_eq!(series.len(), 1, "{series:?}");
        assert_eq!(series[0].series, "q");
        assert_eq!(series[0].points, vec![(1_000, 1.0), (2_000, 2.0)]);
    }

    #[test]
    fn a_sample_given_again_with_other_labels_replaces_the_first_at_its_instant() {
        let text = format!(
            "[[1000,[[{a},\"q\",\"m\",\"[]\"]]],\
             [2000,[[{a},\"q\",\"m\",\"[]\"],[{b},\"q\",\"m\",\"[[\\\"v\\\",\\\"/\\\"]]\"]]]]",
            a = to_bits(1.0),
            b = to_bits(2.0)
        );
        let series = series_of(&text, "app").unwrap().0;
        let read: Vec<_> = series
            .iter()
            .map(|s| (s.labels.as_str(), s.points.clone()))
            .collect();
        assert_eq!(
            read,
            vec![
                ("[]", vec![(1_000, 1.0)]),
                (r#"[["v","/"]]"#, vec![(2_000, 2.0)]),
            ]
        );
    }

    const NAMES: [&str; 5] = ["q1", "q\"2", "a\\b", "ü{k=\"v\"}", "tab\t"];

    proptest::proptest! {
        /// Whatever series each scrape lists, in whatever order, however the rows are joined and
        /// spaced: each series' samples come back once, oldest first, with the scrapes'
        /// instants (the reader skips a sample's strings by bytes only where they match).
        #[test]
        fn every_sample_reads_back_in_its_series(
            scrapes in proptest::collection::vec(
                proptest::collection::vec((0..NAMES.len(), proptest::num::f64::NORMAL | proptest::num::f64::SUBNORMAL | proptest::num::f64::ZERO), 0..6),
                1..12,
            ),
            order in proptest::collection::vec(proptest::prelude::any::<u32>(), 12),
            pretty in proptest::prelude::any::<bool>(),
        ) {
            let mut points = Vec::new();
            let mut times = Vec::new();
            let mut expected: BTreeMap<&str, BTreeMap<i64, f64>> = BTreeMap::new();
            for (i, listed) in scrapes.iter().enumerate() {
                let at = 1_000 * (i64::try_from(i).unwrap() + 1);
                times.push(at);
                for &(n, value) in listed {
                    points.push(StoredPoint {
                        series: NAMES[n].into(),
                        metric: "m".into(),
                        labels: "[]".into(),
                        at_ms: at,
                        value,
                    });
                    expected.entry(NAMES[n]).or_default().insert(at, value);
                }
            }
            let source = SourceRows {
                name: "m",
                source: "app",
                points: &points,
                scrape_times: &times,
                keep_from_ms: None,
            };
            let mut rows = rows_of(&[source]).unwrap();
            let mut keys = order.clone();
            keys.truncate(rows.len());
            let mut shuffled: Vec<(u32, ScrapeRow<'_>)> = keys.into_iter().zip(rows.drain(..)).collect();
            shuffled.sort_by_key(|(k, _)| *k);
            let rows: Vec<ScrapeRow<'_>> = shuffled.into_iter().map(|(_, r)| r).collect();
            let mut text = joined(&rows);
            if pretty {
                let value: serde_json::Value = serde_json::from_str(&text).unwrap();
                text = serde_json::to_string_pretty(&value).unwrap();
            }
            let (series, instants) = series_of(&text, "app").unwrap();
            let got: BTreeMap<String, Vec<(i64, u64)>> = series
                .into_iter()
                .map(|s| (s.series, s.points.iter().map(|p| (p.0, p.1.to_bits())).collect()))
                .collect();
            let want: BTreeMap<String, Vec<(i64, u64)>> = expected
                .into_iter()
                .map(|(n, pts)| (n.to_string(), pts.into_iter().map(|(at, v)| (at, v.to_bits())).collect()))
                .collect();
            proptest::prop_assert_eq!(got, want);
            let listed: Vec<i64> = rows.iter().map(|r| r.at_ms).collect();
            proptest::prop_assert_eq!(instants, listed);
        }
    }

    #[test]
    fn stored_samples_that_are_not_a_list_of_scrapes_are_corrupt() {
        for bad in [
            "",
            "[[1000,[[\"x\",\"s\",\"m\",\"[]\"]]]]",
            "[[1000,[[1.5,\"s\",\"m\",\"[]\"]]]]",
            "[[1000,[[1,\"s\",\"m\"]]]]",
            "[[1000,[[null,\"s\",\"m\",\"[]\"]]]]",
            "[[1000]]",
            "[[1000,[[1,2,\"m\",\"[]\"]]]]",
            "[[1000,[[1,\"s\",\"m\",\"[]\"]]]] x",
            "[[1000,[[1,\"s\",\"m\",\"[]\"],]]]",
            "[[1000,[[1,\"s\",\"m\",\"[]\"]]],[2000,[[2,\"s\",\"m\",\"[]\",3]]]]",
            "[[1000,[[1,\"s\\q\",\"m\",\"[]\"]]]]",
            "[[1000,[[1,\"s\",\"m\",\"[]\"]]]",
        ] {
            let err = series_of(bad, "app").unwrap_err();
            assert!(
                matches!(&err, StoreError::Corrupt(m) if m.contains("\"app\"")),
                "{bad}: {err}"
            );
        }
    }
}
