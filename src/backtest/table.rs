//! The readings of a rehearsal, instant by instant: pure, no IO, no clock.
//!
//! Every (source, query) a plan reads gets one [`Reading`] per instant of the window, as the
//! controller would have read it live at that instant: a Prometheus `query_range` answer split
//! back into instants ([`decode_range`]), or a scrape source's recorded history evaluated at each
//! instant ([`scrape_readings`]). A reading that is not a number carries the reason a live gate
//! would have held with.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::Deserialize;

use crate::controller::evaluate::Item;
use crate::gate::Observation;
use crate::indicators::history::History;
use crate::indicators::promql::{PromError, label_set};
use crate::indicators::query::Query;

use super::error::BacktestError;

/// Most instants one rehearsal walks (a year at a 1-minute step is 525,600).
pub const MAX_INSTANTS: usize = 1_000_000;

/// One number as a source gave it at one instant, or why not (the reason a gate holds with).
pub type Reading = Result<f64, Arc<str>>;

/// One allocation for a run of equal reasons (a source down for a day is one text, not one per
/// instant).
#[derive(Default)]
struct Reasons {
    last: Option<Arc<str>>,
}

impl Reasons {
    /// `reason` through the one text rule ([`crate::outgoing::reason`]: one line, no control
    /// character, bounded), shared with the previous one when equal.
    fn share(&mut self, reason: String) -> Arc<str> {
        let reason = crate::outgoing::reason(&reason, &crate::outgoing::Secrets::none());
        match &self.last {
            Some(last) if **last == *reason => last.clone(),
            _ => {
                let shared: Arc<str> = reason.into();
                self.last = Some(shared.clone());
                shared
            }
        }
    }
}

/// The instants of a window: `from_ms`, `from_ms + step_ms`, ... up to `to_ms` included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instants {
    pub from_ms: i64,
    pub step_ms: i64,
    pub count: usize,
}

impl Instants {
    /// The instants from `from_ms` to `to_ms` (included when on a step) every `step_ms`.
    ///
    /// # Errors
    /// An empty or reversed window, a step of zero, or more than [`MAX_INSTANTS`] instants.
    pub fn new(from_ms: i64, to_ms: i64, step_ms: i64) -> Result<Instants, BacktestError> {
        if step_ms <= 0 {
            return Err(BacktestError::Window(
                "the step must be above 0 (e.g. --step 1m)".into(),
            ));
        }
        if to_ms <= from_ms {
            return Err(BacktestError::Window(format!(
                "--to ({}) must be after --from ({})",
                crate::time::rfc3339(to_ms),
                crate::time::rfc3339(from_ms)
            )));
        }
        let count = usize::try_from((to_ms - from_ms) / step_ms)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        if count > MAX_INSTANTS {
            return Err(BacktestError::Window(format!(
                "{count} instants: at most {MAX_INSTANTS} per rehearsal; use a longer --step or a shorter window"
            )));
        }
        Ok(Instants {
            from_ms,
            step_ms,
            count,
        })
    }

    /// The instant of index `i`.
    pub fn at(&self, i: usize) -> i64 {
        self.from_ms.saturating_add(
            self.step_ms
                .saturating_mul(i64::try_from(i).unwrap_or(i64::MAX)),
        )
    }

    /// The last instant.
    pub fn last(&self) -> i64 {
        self.at(self.count.saturating_sub(1))
    }
}

/// What every (source, query) read over the window.
#[derive(Debug, Clone)]
pub struct Readings {
    pub instants: Instants,
    /// By source, then by query text.
    by_query: HashMap<String, HashMap<String, Vec<Reading>>>,
    /// Sources that cannot answer for the past at all, and why (their gates hold throughout).
    pub unavailable: BTreeMap<String, String>,
    /// What a person should know of a source's readings (a scrape history that starts late).
    pub notes: Vec<String>,
    /// By source, the instants it could not be reached at (first, count), and why.
    unreachable: BTreeMap<String, Vec<(usize, usize, Arc<str>)>>,
}

/// A time a source could not be reached: its gates had no data, through no fault of the plan.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Outage {
    pub source: String,
    /// The first and last instants it could not be reached at.
    pub from_ms: i64,
    pub to_ms: i64,
    pub why: String,
}

impl Outage {
    /// `source prom unreachable from 2026-11-30T00:00:00Z to 2026-11-30T06:00:00Z (why)`.
    pub fn sentence(&self) -> String {
        format!(
            "source {} unreachable from {} to {} ({})",
            self.source,
            crate::time::rfc3339(self.from_ms),
            crate::time::rfc3339(self.to_ms),
            self.why
        )
    }
}

impl Readings {
    /// No readings yet: every query reads "not read".
    pub fn new(instants: Instants) -> Readings {
        Readings {
            instants,
            by_query: HashMap::new(),
            unavailable: BTreeMap::new(),
            notes: Vec::new(),
            unreachable: BTreeMap::new(),
        }
    }

    /// `source` could not be reached for the `count` instants from `first`.
    pub fn unreachable_at(&mut self, source: &str, first: usize, count: usize, why: &Arc<str>) {
        self.unreachable
            .entry(source.to_string())
            .or_default()
            .push((first, count, why.clone()));
    }

    /// The times each source could not be read, adjacent requests merged, in source then time
    /// order: the whole window for a source that cannot answer for the past at all.
    pub fn outages(&self) -> Vec<Outage> {
        let mut out: Vec<Outage> = self
            .unavailable
            .iter()
            .map(|(source, why)| self.outage(source, 0, self.instants.count, why))
            .collect();
        for (source, spans) in &self.unreachable {
            let mut spans = spans.clone();
            spans.sort_by_key(|(first, _, _)| *first);
            let mut current: Option<(usize, usize, Arc<str>)> = None;
            for (first, count, why) in spans {
                let end = first + count;
                current = match current {
                    Some((f, e, w)) if first <= e => Some((f, e.max(end), w)),
                    Some((f, e, w)) => {
                        out.push(self.outage(source, f, e, &w));
                        Some((first, end, why))
                    }
                    None => Some((first, end, why)),
                };
            }
            if let Some((f, e, w)) = current {
                out.push(self.outage(source, f, e, &w));
            }
        }
        out
    }

    fn outage(&self, source: &str, first: usize, end: usize, why: &str) -> Outage {
        Outage {
            source: source.to_string(),
            from_ms: self.instants.at(first),
            to_ms: self.instants.at(end.saturating_sub(1).max(first)),
            why: why.to_string(),
        }
    }

    /// The readings of the `count` instants from index `first`, as if the window were only
    /// those (what each rehearsal of `--windows` reads; the sources' notes and outages kept,
    /// the outages cut to the window).
    ///
    /// # Errors
    /// A span that does not lie within the window's instants.
    pub fn window(&self, first: usize, count: usize) -> Result<Readings, BacktestError> {
        let end = first.saturating_add(count);
        if count == 0 || end > self.instants.count {
            return Err(BacktestError::Window(format!(
                "instants {first} to {end} are not within the {} of the window",
                self.instants.count
            )));
        }
        let instants = Instants {
            from_ms: self.instants.at(first),
            step_ms: self.instants.step_ms,
            count,
        };
        let by_query = self
            .by_query
            .iter()
            .map(|(source, by_text)| {
                let cut = by_text
                    .iter()
                    .map(|(text, column)| {
                        let column = column.iter().skip(first).take(count).cloned().collect();
                        (text.clone(), column)
                    })
                    .collect();
                (source.clone(), cut)
            })
            .collect();
        let unreachable = self
            .unreachable
            .iter()
            .map(|(source, spans)| {
                let cut = spans
                    .iter()
                    .filter_map(|(f, c, why)| {
                        let (from, to) = ((*f).max(first), (f + c).min(end));
                        (from < to).then(|| (from - first, to - from, why.clone()))
                    })
                    .collect();
                (source.clone(), cut)
            })
            .collect();
        Ok(Readings {
            instants,
            by_query,
            unavailable: self.unavailable.clone(),
            notes: self.notes.clone(),
            unreachable,
        })
    }

    /// The readings of `query` on `source`, one per instant (missing ones read "not read").
    pub fn insert(&mut self, source: &str, query: &str, readings: Vec<Reading>) {
        self.by_query
            .entry(source.to_string())
            .or_default()
            .insert(query.to_string(), readings);
    }

    /// `source` cannot answer for the past: every gate on it holds with `why` (through the one
    /// text rule: a source's text cannot forge a line of the report).
    pub fn source_unavailable(&mut self, source: &str, why: String) {
        let why = crate::outgoing::reason(&why, &crate::outgoing::Secrets::none());
        self.unavailable.insert(source.to_string(), why);
    }

    /// What `query` on `source` read at instant `i`.
    pub fn get(&self, source: &str, query: &str, i: usize) -> Reading {
        self.column(source, query).at(i)
    }

    /// The column of `query` on `source`, looked up once.
    fn column<'a>(&'a self, source: &'a str, query: &'a str) -> Column<'a> {
        Column {
            source,
            query,
            unavailable: self.unavailable.get(source).map(String::as_str),
            readings: self
                .by_query
                .get(source)
                .and_then(|by_text| by_text.get(query))
                .map(Vec::as_slice),
        }
    }

    /// What `item` observed at instant `i`, as [`crate::controller::evaluate`] observes it live,
    /// in a step entered at `entered_ms`. A judge's counts are the sum of its per-interval
    /// readings (its `$step` read as the window's step) over the instants after `entered_ms`.
    pub(crate) fn observe(&self, item: &Item<'_>, i: usize, entered_ms: i64) -> Observation {
        let source = item.source();
        let queries = item.queries();
        match item {
            Item::Gate(
                crate::plan::Gate {
                    check: crate::plan::Check::Judge(j),
                    ..
                },
                _,
            ) => {
                // An interval that could not be read is left out of the sums (all of its
                // queries alike, so that both sides stay counted over the same intervals): the
                // judge weighs the intervals it can read, and only a reading whose own interval
                // is unreadable is no data.
                let mut sums = vec![0.0; queries.len()];
                // Each column looked up once, not once per instant summed.
                let columns: Vec<Column<'_>> =
                    queries.iter().map(|q| self.column(source, q)).collect();
                let mut values = vec![0.0; queries.len()];
                for k in 0..=i {
                    if self.instants.at(k) <= entered_ms {
                        continue;
                    }
                    let read = columns
                        .iter()
                        .zip(values.iter_mut())
                        .try_for_each(|(c, v)| c.at(k).map(|x| *v = x));
                    match read {
                        Ok(()) => sums.iter_mut().zip(&values).for_each(|(s, v)| *s += v),
                        Err(e) if k == i => return Observation::Unavailable(unread(&e)),
                        Err(_) => {}
                    }
                }
                Observation::of_judge(j, sums.into_iter().map(Ok))
            }
            Item::Gate(
                crate::plan::Gate {
                    check: crate::plan::Check::Compare { new, old, .. },
                    ..
                },
                _,
            ) => match (self.get(source, new, i), self.get(source, old, i)) {
                (Ok(new), Ok(old)) => Observation::Pair { new, old },
                (Err(e), _) => Observation::Unavailable(unread(&format!("new side: {e}"))),
                (_, Err(e)) => Observation::Unavailable(unread(&format!("old side: {e}"))),
            },
            _ => match self.get(source, queries.first().copied().unwrap_or_default(), i) {
                Ok(v) => Observation::Value(v),
                Err(e) => Observation::Unavailable(unread(&e)),
            },
        }
    }
}

/// One query's readings on one source, as [`Readings::get`] reads them.
struct Column<'a> {
    source: &'a str,
    query: &'a str,
    unavailable: Option<&'a str>,
    readings: Option<&'a [Reading]>,
}

impl Column<'_> {
    /// The reading at instant `i`.
    fn at(&self, i: usize) -> Reading {
        if let Some(why) = self.unavailable {
            return Err(why.into());
        }
        match self.readings.and_then(|r| r.get(i)) {
            Some(r) => r.clone(),
            None => Err(format!(
                "source {}: `{}` was not read for this instant",
                self.source, self.query
            )
            .into()),
        }
    }
}

/// A reading the backtest could not make. Its readings keep no cause (no standing reads a
/// backtest): each counts as the source's, as every no data did before causes were kept.
fn unread(why: &str) -> crate::gate::Unread {
    crate::gate::Unread::down(why)
}

/// A `query_range` answer, read into typed rows: the result stays raw text until its type is
/// known to be a matrix, then each series is read straight into its (time, value) pairs, never
/// through a generic JSON tree.
#[derive(Deserialize)]
struct RangeResponse<'a> {
    status: String,
    #[serde(default, borrow)]
    data: Option<RangeData<'a>>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct RangeData<'a> {
    #[serde(rename = "resultType")]
    result_type: String,
    #[serde(default, borrow)]
    result: Option<&'a serde_json::value::RawValue>,
}

#[derive(Deserialize)]
struct RangeSeries {
    #[serde(default)]
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(Scalar, Scalar)>,
}

/// One member of a `[time, "value"]` pair: a number, a text, or anything else (skipped).
enum Scalar {
    Number(f64),
    Text(String),
    Other,
}

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Scalar, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Scalar;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number or a string")
            }
            fn visit_f64<E>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar::Number(v as f64))
            }
            fn visit_str<E>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_string()))
            }
            fn visit_string<E>(self, v: String) -> Result<Scalar, E> {
                Ok(Scalar::Text(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar::Text(v.to_string()))
            }
            fn visit_unit<E>(self) -> Result<Scalar, E> {
                Ok(Scalar::Text("null".into()))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(Scalar::Other)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Scalar, A::Error> {
                while a
                    .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Scalar::Other)
            }
        }
        d.deserialize_any(Visit)
    }
}

/// What one instant of a range answer held: no sample, one (its value as text), or several
/// (how many).
enum Slot {
    Empty,
    One(String),
    Several(usize),
}

/// Decode a `query_range` answer (`GET /api/v1/query_range`) for the `count` instants of
/// `instants` starting at index `first`: each instant's reading as an instant query at that
/// instant would have given it (exactly one finite number; otherwise the same reason
/// [`crate::indicators::promql::decode_instant`] gives, prefixed with `source SOURCE: `).
///
/// # Errors
/// A reason that holds for every instant of the request (Prometheus refused the query, the
/// answer is not a range answer).
pub fn decode_range(
    body: &str,
    source: &str,
    instants: &Instants,
    first: usize,
    count: usize,
) -> Result<Vec<Reading>, String> {
    let whole = |e: PromError| format!("source {source}: {e}");
    let response: RangeResponse = serde_json::from_str(body).map_err(|e| {
        whole(PromError::InvalidJson {
            reason: e.to_string(),
            start: body.trim_start().chars().take(60).collect(),
        })
    })?;
    match response.status.as_str() {
        "success" => {}
        "error" => {
            return Err(whole(PromError::QueryFailed {
                error_type: response.error_type.unwrap_or_else(|| "unknown".into()),
                error: response
                    .error
                    .unwrap_or_else(|| "no error text given".into()),
            }));
        }
        other => {
            return Err(whole(PromError::UnknownStatus {
                status: other.into(),
            }));
        }
    }
    let data = response.data.ok_or_else(|| {
        whole(PromError::Malformed {
            reason: "status is success but `data` is missing".into(),
        })
    })?;
    if data.result_type != "matrix" {
        return Err(whole(PromError::Malformed {
            reason: format!(
                "a range query answers a matrix, not a `{}`",
                data.result_type
            ),
        }));
    }
    let series: Vec<RangeSeries> = match data.result {
        None => Vec::new(),
        Some(raw) if raw.get() == "null" => Vec::new(),
        Some(raw) => serde_json::from_str(raw.get()).map_err(|e| {
            whole(PromError::Malformed {
                reason: format!("matrix result: {e}"),
            })
        })?,
    };
    let mut slots: Vec<Slot> = (0..count).map(|_| Slot::Empty).collect();
    let start_ms = instants.at(first);
    for s in &series {
        for (t, v) in &s.values {
            let Scalar::Number(secs) = *t else { continue };
            let at_ms = (secs * 1000.0).round() as i64;
            let offset = at_ms - start_ms;
            if offset < 0 || offset % instants.step_ms != 0 {
                continue;
            }
            let Ok(k) = usize::try_from(offset / instants.step_ms) else {
                continue;
            };
            let Some(slot) = slots.get_mut(k) else {
                continue;
            };
            let text = match v {
                Scalar::Text(s) => s.clone(),
                Scalar::Number(n) => n.to_string(),
                Scalar::Other => "a JSON array or object".to_string(),
            };
            *slot = match std::mem::replace(slot, Slot::Empty) {
                Slot::Empty => Slot::One(text),
                Slot::One(_) => Slot::Several(2),
                Slot::Several(n) => Slot::Several(n + 1),
            };
        }
    }
    // The series of the answer, named as an instant query's answer names them.
    let all_labels: Vec<String> = series.iter().map(|s| label_set(&s.metric)).collect();
    let mut reasons = Reasons::default();
    Ok(slots
        .into_iter()
        .map(|slot| match slot {
            Slot::Empty => Err(reasons.share(whole(PromError::EmptyResult))),
            Slot::One(text) => match text.trim().parse::<f64>() {
                Ok(v) if v.is_finite() => Ok(v),
                Ok(_) => Err(reasons.share(whole(PromError::NotFinite { value: text }))),
                Err(_) => Err(reasons.share(whole(PromError::InvalidValue { value: text }))),
            },
            Slot::Several(count) => {
                let mut listed: Vec<String> = all_labels.iter().take(3).cloned().collect();
                if all_labels.len() > 3 {
                    listed.push(format!("and {} more", all_labels.len() - 3));
                }
                Err(reasons.share(whole(PromError::SeveralSeries {
                    count,
                    listed: listed.join(", "),
                })))
            }
        })
        .collect())
}

/// A scrape source's readings of `query` (its text `text`) over `instants`, from the history a
/// store kept: at each instant what the controller would have read live then (the query
/// evaluated over the scrapes up to that instant). Before `recorded_from_ms`, the first scrape
/// the store kept, the source cannot answer: its gates hold, saying so.
pub fn scrape_readings(
    history: &History,
    query: &Query,
    text: &str,
    source: &str,
    instants: &Instants,
    recorded_from_ms: i64,
) -> Vec<Reading> {
    let before: Arc<str> = format!(
        "source {source}: no scrape recorded before {} (the store keeps no older one)",
        crate::time::rfc3339(recorded_from_ms)
    )
    .into();
    let mut reasons = Reasons::default();
    (0..instants.count)
        .map(|i| {
            let at = instants.at(i);
            if at < recorded_from_ms {
                return Err(before.clone());
            }
            query.evaluate(history, at).map(|r| r.value).map_err(|e| {
                reasons.share(match e.reason.as_str() {
                    "NaN" => format!("source {source}: not a finite number: `{text}` read NaN"),
                    reason => format!("source {source}: {reason}"),
                })
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window() -> Instants {
        Instants::new(60_000, 300_000, 60_000).expect("window")
    }

    #[test]
    fn a_range_answer_reads_as_one_instant_query_per_step() {
        let body = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"a","x":"1"},"values":[[60,"1"],[120,"2"],[240,"NaN"]]},
            {"metric":{"__name__":"a","x":"2"},"values":[[120,"5"]]}]}}"#;
        let got = decode_range(body, "prom", &window(), 0, 5).expect("decodes");
        assert_eq!(got[0], Ok(1.0));
        assert!(
            got[1].as_ref().is_err_and(|e| e.contains("2 series")),
            "{got:?}"
        );
        assert!(got[2].as_ref().is_err_and(|e| e.contains("empty result")));
        assert!(
            got[3]
                .as_ref()
                .is_err_and(|e| e.contains("not a finite number"))
        );
        assert!(
            got[4]
                .as_ref()
                .is_err_and(|e| e.starts_with("source prom: "))
        );
    }

    #[test]
    fn a_refused_range_query_is_one_reason_for_every_instant() {
        let body = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        let err = decode_range(body, "prom", &window(), 0, 5).expect_err("refused");
        assert!(err.contains("parse error"), "{err}");
        assert!(decode_range("<html>", "prom", &window(), 0, 5).is_err());
    }

    #[test]
    fn a_window_of_the_readings_reads_its_own_instants_and_outages() {
        let range = Instants::new(0, 600_000, 60_000).expect("range");
        let mut all = Readings::new(range);
        all.insert("prom", "q", (0..11).map(|k| Ok(k as f64)).collect());
        let why: Arc<str> = "down".into();
        all.unreachable_at("prom", 2, 3, &why);
        let part = all.window(3, 4).expect("within");
        assert_eq!((part.instants.from_ms, part.instants.count), (180_000, 4));
        assert_eq!(part.get("prom", "q", 0), Ok(3.0));
        assert_eq!(part.get("prom", "q", 3), Ok(6.0));
        assert!(part.get("prom", "q", 4).is_err());
        // Down at instants 2 to 4: the window's 0 and 1.
        let outages = part.outages();
        assert_eq!(outages.len(), 1);
        assert_eq!((outages[0].from_ms, outages[0].to_ms), (180_000, 240_000));
        assert!(all.window(8, 4).is_err());
        assert!(all.window(0, 0).is_err());
    }

    #[test]
    fn a_window_has_bounds() {
        assert!(Instants::new(0, 0, 60_000).is_err());
        assert!(Instants::new(0, 60_000, 0).is_err());
        assert!(Instants::new(0, 10_000_000_000, 1_000).is_err());
        let w = Instants::new(0, 600_000, 60_000).expect("window");
        assert_eq!((w.count, w.last()), (11, 600_000));
    }
}
