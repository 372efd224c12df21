//! What a round reads for a phase's gates (IO: sources and store): each scrape source scraped
//! once and folded into its history, the Prometheus queries asked a few per request, a
//! dead-letter export triaged, and the step's stored evaluations when they were not read with
//! the record.

use std::collections::HashMap;

use crate::controller::histories::{Histories, Taken, prune_from};
use crate::controller::loaded::Loaded;
use crate::gate::{NoDataCause, Observation, Unread};
use crate::indicators::exposition::Exposition;
use crate::indicators::fetch::{FetchError, Fetcher};
use crate::indicators::history::{History, Point};
use crate::indicators::kafka_lag::LargestPartition;
use crate::indicators::query::{Query, parse_query};
use crate::plan::{Check, Gate, Plan, Source};
use crate::store::{
    GateKey, GateRecord, MAX_SCRAPE_ROW_BYTES, MigrationRecord, SourcePoints, Store, StoreError,
    StoredPoint, StoredSeries, kept_bytes,
};

use super::judge::{Item, Reading};

/// History kept for scrape sources when no query needs a range window.
const MIN_KEEP_MS: i64 = 10 * 60 * 1000;

/// What a scrape source gave this round: its history, or why it is unusable.
pub(super) type Scraped = Result<History, Unread>;

/// A scrape source whose history may be kept for the next round.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct KeptSource {
    pub source: String,
    /// How many rounds its history has served from memory (0: read whole).
    pub rounds: u32,
    /// From which instant it holds every sample.
    pub samples_from_ms: i64,
}

/// What [`scrape_sources`] gives.
#[derive(Debug)]
pub(super) struct Scrapes {
    /// Each source's history, or why it is unusable.
    pub histories: HashMap<String, Scraped>,
    /// What to store of each scrape (kept with the round's evaluations).
    pub taken: Vec<SourcePoints>,
    /// The sources scraped, whose histories may be kept.
    pub kept: Vec<KeptSource>,
}

/// What a round read for a phase's items.
#[derive(Debug)]
pub(super) struct Gathered {
    /// One per item, in the items' order.
    pub readings: Vec<Reading>,
    /// The step's stored evaluations of the items, read when [`Loaded::memory`] was not.
    pub memory: Option<Vec<GateRecord>>,
    pub scrapes: Scrapes,
}

/// Read what `items` (the current phase's, of `loaded`) need at `now_ms`: the Prometheus
/// queries are asked while the store is read; then each item's observation, in order.
///
/// # Errors
/// Only store failures: a source that fails makes its observation unavailable.
pub(super) async fn gather<S: Store>(
    store: &S,
    fetcher: &Fetcher,
    loaded: &Loaded,
    items: &[Item<'_>],
    now_ms: i64,
    histories: Option<&Histories>,
) -> Result<Gathered, StoreError> {
    let (plan, rec) = (&loaded.plan, &loaded.record);
    let since_ms = crate::judge::counting_from(rec.entered_at_ms, rec.updated_at_ms);
    let keys: Vec<GateKey<'_>> = items
        .iter()
        .map(|i| (i.name(), i.kind().as_str()))
        .collect();
    let reads = async {
        let scrapes = scrape_sources(store, fetcher, plan, rec, items, now_ms, histories).await?;
        let memory = match loaded.memory {
            Some(_) => None,
            None => Some(
                store
                    .latest_evaluations(&rec.name, rec.entered_at_ms, &keys)
                    .await?,
            ),
        };
        Ok::<_, StoreError>((scrapes, memory))
    };
    let (reads, ()) = tokio::join!(reads, prefetch(fetcher, plan, items, now_ms, since_ms));
    let (scrapes, memory) = reads?;
    let mut readings = Vec::with_capacity(items.len());
    // A source's text (an error page, a line it served) goes through the one text rule before
    // it becomes a reason: the plan's secrets in every form masked, one line, at most
    // SOURCE_TEXT_MAX bytes (stored every round: its size is the store's growth).
    let known = plan.known_secrets();
    for item in items {
        let mut reading = match dead_letters(store, plan, item).await {
            Some(reading) => reading,
            None => {
                let (observation, largest) = observe(
                    fetcher,
                    rec,
                    plan,
                    item,
                    &scrapes.histories,
                    now_ms,
                    since_ms,
                )
                .await;
                Reading {
                    observation,
                    note: stale_note(plan, item, &scrapes.histories, now_ms),
                    largest,
                }
            }
        };
        if let Observation::Unavailable(Unread { why, .. }) = &mut reading.observation {
            *why = crate::outgoing::text(
                why,
                &known,
                crate::outgoing::Shape::Line,
                crate::outgoing::SOURCE_TEXT_MAX,
            );
        }
        readings.push(reading);
    }
    Ok(Gathered {
        readings,
        memory,
        scrapes,
    })
}

/// The built-in stale-producer guard's note naming the producers (from its source's history).
fn stale_note(
    plan: &Plan,
    item: &Item<'_>,
    histories: &HashMap<String, Scraped>,
    now_ms: i64,
) -> Option<String> {
    if !super::stale::is_stale_guard(item) {
        return None;
    }
    let window = plan.stale_producers.as_ref()?.window;
    let history = histories.get(item.source())?.as_ref().ok()?;
    let found = super::stale::offenders(history, now_ms, crate::time::millis(window));
    super::stale::note(&found)
}

/// Scrape each scrape source the items use, once, and fold the samples into its history (read
/// from `histories` plus what the store holds since, or whole from the store).
async fn scrape_sources<S: Store>(
    store: &S,
    fetcher: &Fetcher,
    plan: &Plan,
    rec: &MigrationRecord,
    items: &[Item<'_>],
    now_ms: i64,
    histories: Option<&Histories>,
) -> Result<Scrapes, StoreError> {
    let queries = scrape_queries(plan, rec, items, now_ms);
    let mut out = HashMap::new();
    let mut taken = Vec::new();
    let mut kept = Vec::new();
    for (source, qs) in queries {
        let Some(Source::Scrape { url: secret }) = plan.sources.get(source) else {
            continue;
        };
        // A URL not resolvable on this machine (a stored plan read where its variable is not
        // set): the source's gates hold, saying which; no history is taken out or kept.
        let url = match secret.value() {
            Ok(url) => url,
            Err(why) => {
                out.insert(
                    source.to_string(),
                    Err(Unread::down(format!(
                        "source {source} ({}): {why}",
                        secret.redacted()
                    ))),
                );
                continue;
            }
        };
        // What this round's queries can reach: a history read whole leaves out the older
        // samples the store keeps (up to twice `keep_ms`) and keeps every instant (what the
        // check compares); a kept one that lacks some of them (read for queries of shorter
        // windows) is read whole again.
        let reach_ms = qs
            .iter()
            .map(|q| i64::try_from(q.retention().as_millis()).unwrap_or(i64::MAX))
            .max()
            .unwrap_or(0);
        let samples_from_ms = now_ms.saturating_sub(reach_ms);
        let kept_history = kept_history(store, histories, rec, source, samples_from_ms).await?;
        let (history, after_ms, rounds, holds_from_ms) = match kept_history {
            Some(t) => (t.history, t.through_ms, t.rounds + 1, t.samples_from_ms),
            None => (History::new(), i64::MIN, 0, samples_from_ms),
        };
        let keep_ms = reach_ms.max(MIN_KEEP_MS);
        let (stored, times) = match store
            .load_series_after(&rec.name, source, after_ms, holds_from_ms)
            .await
        {
            Ok(read) => read,
            // A history too large to read (the store's cap, named in the reason) holds the
            // source's gates, not the tick; what is older than the source keeps is pruned, so
            // that a legacy oversized scrape ages out.
            Err(StoreError::TooLarge(why)) => {
                out.insert(source.to_string(), Err(Unread::down(why)));
                taken.push(SourcePoints {
                    source: source.to_string(),
                    points: Vec::new(),
                    scrape_times: Vec::new(),
                    keep_from_ms: Some(prune_from(
                        &rec.name,
                        source,
                        now_ms.saturating_sub(keep_ms.saturating_mul(2)),
                    )),
                });
                continue;
            }
            Err(e) => return Err(e),
        };
        // The instants first: then a sample's instant is a scrape of the history already (but
        // for a scrape stored between the two reads), and adding the samples moves no values.
        let mut history = history.with_scrape_times(times);
        add_stored(&mut history, stored);
        let reading = fetcher.scrape_parsed(url).await;
        let scraped = match &*reading {
            // The fetcher's reason shows the URL redacted; the plan's reference (`${VAR}`)
            // next to it names what to check.
            Err(why) => Err(Unread::new(
                scrape_cause(why),
                format!("source {}: {why}", named(source, secret)),
            )),
            Ok(parsed) => fold_scrape(history, parsed, &qs, rec, source, now_ms, keep_ms).map(
                |(history, points)| {
                    taken.push(points);
                    history
                },
            ),
        };
        // A line of the scraped text quoted in the reason may echo a credential of the URL. A
        // scrape that gave no usable metrics at all leaves every gate of the source without
        // data: the source could not be read for them (unreachable, an HTTP error, or an
        // answer that could not be parsed, as its cause says).
        let scraped = scraped
            .map_err(|why| why.map(|why| crate::redact::known(&why, crate::outgoing::forms(url))));
        out.insert(source.to_string(), scraped);
        kept.push(KeptSource {
            source: source.to_string(),
            rounds,
            samples_from_ms: holds_from_ms,
        });
    }
    Ok(Scrapes {
        histories: out,
        taken,
        kept,
    })
}

/// Each scrape source the items use, with the queries its items ask this round.
fn scrape_queries<'i>(
    plan: &Plan,
    rec: &MigrationRecord,
    items: &'i [Item<'_>],
    now_ms: i64,
) -> HashMap<&'i str, Vec<Query>> {
    let mut queries: HashMap<&str, Vec<Query>> = HashMap::new();
    for item in items {
        if let Some(Source::Scrape { .. }) = plan.sources.get(item.source()) {
            let entry = queries.entry(item.source()).or_default();
            entry.extend(
                step_queries(
                    item,
                    now_ms,
                    crate::judge::counting_from(rec.entered_at_ms, rec.updated_at_ms),
                )
                .iter()
                .filter_map(|q| parse_query(q).ok()),
            );
            if super::stale::is_stale_guard(item) {
                entry.extend(super::stale::offender_query());
            }
        }
    }
    queries
}

/// The source's history kept from the last round, when it holds every sample from
/// `samples_from_ms` on; a due one is checked: kept on when the store holds no scrape through
/// its instant that it lacks (another process's, stored late), else read whole (`None`).
async fn kept_history<S: Store>(
    store: &S,
    histories: Option<&Histories>,
    rec: &MigrationRecord,
    source: &str,
    samples_from_ms: i64,
) -> Result<Option<Taken>, StoreError> {
    let taken_history = histories
        .and_then(|h| h.take(&rec.name, source))
        .filter(|t| t.samples_from_ms <= samples_from_ms);
    Ok(match taken_history {
        Some(t) if t.due(&rec.name, source) => {
            let stored = store
                .scrape_instants_through(&rec.name, source, t.through_ms)
                .await?;
            (stored == t.history.instants_through(t.through_ms)).then_some(Taken { rounds: 0, ..t })
        }
        kept => kept,
    })
}

/// Folds a scrape that parsed into the source's history: the samples the queries select
/// recorded at `now_ms`, what is older than twice `keep_ms` pruned, and the points to store;
/// an unreadable line makes the whole scrape an error.
fn fold_scrape(
    mut history: History,
    parsed: &Exposition,
    qs: &[Query],
    rec: &MigrationRecord,
    source: &str,
    now_ms: i64,
    keep_ms: i64,
) -> Result<(History, SourcePoints), Unread> {
    let unparsable = |why: String| Unread::new(NoDataCause::SourceUnparsable, why);
    if let Some(first) = parsed.errors.first() {
        let more = parsed.errors.len() - 1;
        return Err(unparsable(format!(
            "source {source}: unreadable metrics, {first}{}",
            if more > 0 {
                format!(" (and {more} more lines)")
            } else {
                String::new()
            }
        )));
    }
    let selectors: Vec<_> = qs.iter().flat_map(Query::selectors).collect();
    history.record(now_ms, &parsed.samples, &selectors);
    let keep_from = prune_from(
        &rec.name,
        source,
        now_ms.saturating_sub(keep_ms.saturating_mul(2)),
    );
    // The store holds the instants the history holds (a history read whole holds every stored
    // instant), so it has something to delete only when the history dropped something.
    let pruned = history.prune(keep_from) > 0;
    // A NaN sample (legal in the exposition: a summary with no observations) is read this round
    // from memory, where a query makes it "no data"; it is not kept (a query reads a missing
    // sample the same way).
    let points: Vec<StoredPoint> = history
        .points_at(now_ms)
        .filter(|p| !p.value.is_nan())
        .map(to_stored)
        .collect();
    // What a round keeps of a scrape is capped in bytes, not only in series: past the cap the
    // source's gates hold, saying so, and nothing of this scrape is kept.
    let bytes = kept_bytes(&points);
    if bytes > MAX_SCRAPE_ROW_BYTES {
        return Err(unparsable(format!(
            "source {source}: the series its gates select take {:.1} MiB in this scrape, over \
             the store's cap of {:.0} MiB per scrape (MAX_SCRAPE_ROW_BYTES): nothing of it is \
             kept; select fewer series or shorter labels",
            bytes as f64 / (1024.0 * 1024.0),
            MAX_SCRAPE_ROW_BYTES as f64 / (1024.0 * 1024.0)
        )));
    }
    let points = SourcePoints {
        source: source.to_string(),
        points,
        scrape_times: vec![now_ms],
        keep_from_ms: pruned.then_some(keep_from),
    };
    Ok((history, points))
}

/// Ask the phase's Prometheus queries ahead of its gates, a few per request, and (on a round's
/// fetcher) scrape its `/metrics` sources, all at once: a round's fetcher keeps the answers for
/// [`read_one`] and [`scrape_sources`] (see [`Fetcher::prefetch_prometheus`]).
async fn prefetch(
    fetcher: &Fetcher,
    plan: &Plan,
    items: &[Item<'_>],
    now_ms: i64,
    entered_ms: i64,
) {
    let mut by_url: Vec<(&str, Vec<String>)> = Vec::new();
    for item in items {
        // A judge reads its raw counters itself (`judge_counters`), not these queries.
        if matches!(
            item,
            Item::Gate(
                Gate {
                    check: Check::Judge(_),
                    ..
                },
                _
            )
        ) {
            continue;
        }
        if let Some(Source::Prometheus { url, .. }) = plan.sources.get(item.source()) {
            // An unresolved URL is not asked: read_one says why.
            let Ok(url) = url.value() else {
                continue;
            };
            let queries = step_queries(item, now_ms, entered_ms);
            match by_url.iter_mut().find(|(u, _)| *u == url) {
                Some((_, known)) => known.extend(queries),
                None => by_url.push((url, queries)),
            }
        }
    }
    let by_url: Vec<(&str, Vec<&str>)> = by_url
        .iter()
        .map(|(url, queries)| (*url, queries.iter().map(String::as_str).collect()))
        .collect();
    let prometheus = futures_util::future::join_all(
        by_url
            .iter()
            .map(|(url, queries)| fetcher.prefetch_prometheus(url, queries, now_ms)),
    );
    // A round's fetcher keeps each scrape too: the scrape sources are asked at once, all
    // together (issue 54: one after the other, a silent one made the next wait its timeout).
    let mut scrapes: Vec<&str> = Vec::new();
    if fetcher.is_round() {
        for item in items {
            if let Some(Source::Scrape { url }) = plan.sources.get(item.source())
                && let Ok(url) = url.value()
                && !scrapes.contains(&url)
            {
                scrapes.push(url);
            }
        }
    }
    let scrapes =
        futures_util::future::join_all(scrapes.into_iter().map(|url| fetcher.scrape_parsed(url)));
    tokio::join!(prometheus, scrapes);
}

/// An item's queries as asked at `now_ms` in a step a judge counts in from `entered_ms` (see
/// [`crate::judge::counting_from`]): a `judge` gate's `$step` is the time since
/// ([`crate::judge::at_step`]).
fn step_queries(item: &Item<'_>, now_ms: i64, entered_ms: i64) -> Vec<String> {
    item.queries()
        .into_iter()
        .map(|q| crate::judge::at_step(q, now_ms.saturating_sub(entered_ms)))
        .collect()
}

/// What an item's source gave, and (a single-query gate on a `kafka_lag` source) the largest
/// partition's lag among those its query selects.
async fn observe(
    fetcher: &Fetcher,
    rec: &MigrationRecord,
    plan: &Plan,
    item: &Item<'_>,
    scraped: &HashMap<String, Scraped>,
    now_ms: i64,
    entered_ms: i64,
) -> (Observation, Option<LargestPartition>) {
    let read = |query| async move {
        read_one(fetcher, plan, item.source(), scraped, query, now_ms)
            .await
            .map(|(value, _)| value)
    };
    match item {
        Item::Gate(
            Gate {
                check: Check::RoutingApplied { .. },
                ..
            },
            _,
        ) => (followers(fetcher, rec), None),
        Item::Gate(
            Gate {
                check: Check::Judge(j),
                ..
            },
            _,
        ) => {
            // On Prometheus the raw counters underneath, never `increase()`'s extrapolation.
            let reads = match plan.sources.get(item.source()) {
                Some(Source::Prometheus { url, .. }) => match url.value() {
                    Ok(value) => {
                        let shown = named(item.source(), url);
                        let qs = item.queries();
                        super::judge_counters::read(fetcher, value, &shown, &qs, entered_ms, now_ms)
                            .await
                    }
                    Err(why) => {
                        let why = format!("source {} ({}): {why}", item.source(), url.redacted());
                        vec![Err(Unread::down(why)); item.queries().len()]
                    }
                },
                _ => {
                    let queries = step_queries(item, now_ms, entered_ms);
                    futures_util::future::join_all(queries.iter().map(|q| read(q))).await
                }
            };
            (Observation::of_judge(j, reads), None)
        }
        Item::Gate(
            Gate {
                check: Check::Compare { new, old, .. },
                ..
            },
            _,
        ) => {
            let observation = match tokio::join!(read(new), read(old)) {
                (Ok(new), Ok(old)) => Observation::Pair { new, old },
                (Err(e), _) => Observation::Unavailable(e.map(|e| format!("new side: {e}"))),
                (_, Err(e)) => Observation::Unavailable(e.map(|e| format!("old side: {e}"))),
            };
            (observation, None)
        }
        other => {
            let query = other.queries().first().copied().unwrap_or_default();
            match read_one(fetcher, plan, item.source(), scraped, query, now_ms).await {
                Ok((v, largest)) => (Observation::Value(v), largest),
                Err(e) => (Observation::Unavailable(e), None),
            }
        }
    }
}

/// What a `routing_applied` gate reads: the daemon's followers of this migration and the
/// generation its current step published; unavailable where nobody answers the long-poll (a CLI
/// command evaluates without the daemon's knowledge).
fn followers(fetcher: &Fetcher, rec: &MigrationRecord) -> Observation {
    match fetcher.followers() {
        Some(f) => Observation::Followers {
            need: u64::try_from(rec.generation).unwrap_or(0),
            followers: f.of(&rec.name),
            evicted_at_ms: f.evicted_at_ms(),
        },
        None => Observation::Unavailable(Unread::down(
            "only the daemon that serves the routing long-poll (`migrate run`) knows which \
             generation each producer applied: this command cannot read it",
        )),
    }
}

/// A source's name, with the plan's reference of its URL where it came from one
/// (`prom (${PROM_URL})`).
fn named(source: &str, url: &crate::plan::Secret) -> String {
    match url.reference_shown() {
        Some(reference) => format!("{source} ({reference})"),
        None => source.to_string(),
    }
}

/// Why a scrape gave no text: as [`FetchError::cause`] says, but a `/metrics` answer that is not
/// UTF-8 or was cut off could not be parsed (for a Prometheus query such an answer is a number
/// that is not usable).
fn scrape_cause(why: &FetchError) -> NoDataCause {
    match why {
        FetchError::Answer(_) => NoDataCause::SourceUnparsable,
        other => other.cause(),
    }
}

/// One number from one source, or why not: the source down (unreachable, an HTTP error, a URL
/// not resolvable here), or its answer with no series, too few samples or no usable number.
/// A `kafka_lag` source's number comes with the largest partition's lag the query selects.
async fn read_one(
    fetcher: &Fetcher,
    plan: &Plan,
    source: &str,
    scraped: &HashMap<String, Scraped>,
    query: &str,
    now_ms: i64,
) -> Result<(f64, Option<LargestPartition>), Unread> {
    let unusable = |why: String| Unread::new(NoDataCause::Unusable, why);
    let unresolved =
        |url: &crate::plan::Secret, why| format!("source {source} ({}): {why}", url.redacted());
    match plan.sources.get(source) {
        None => Err(unusable(format!("unknown source {source}"))),
        Some(Source::Prometheus { url, .. }) => {
            let value = url
                .value()
                .map_err(|why| Unread::down(unresolved(url, why)))?;
            fetcher
                .prometheus(value, query, now_ms)
                .await
                .map(|v| (v, None))
                .map_err(|e| Unread::new(e.cause(), format!("source {}: {e}", named(source, url))))
        }
        Some(Source::DeadLetters { .. }) => Err(unusable(format!(
            "source {source}: a dead-letter export is read by its own gate"
        ))),
        Some(Source::KafkaLag { url, group, topics }) => {
            use crate::indicators::kafka_lag;
            let value = url
                .value()
                .map_err(|why| Unread::down(unresolved(url, why)))?;
            let lags = kafka_lag::read(value, group, topics)
                .await
                .map_err(|e| Unread::down(format!("source {}: {e}", named(source, url))))?;
            kafka_lag::evaluate(query, &kafka_lag::samples(group, &lags), now_ms)
                .map(|v| (v, kafka_lag::largest(query, group, &lags)))
                .map_err(|e| e.map(|why| format!("source {source}: {why}")))
        }
        Some(Source::Scrape { .. }) => {
            let history = scraped
                .get(source)
                .ok_or_else(|| Unread::down(format!("source {source} was not scraped")))?
                .as_ref()
                .map_err(Clone::clone)?;
            let text = query;
            let query = parse_query(text).map_err(|e| unusable(e.to_string()))?;
            query
                .evaluate(history, now_ms)
                .map(|r| (r.value, None))
                .map_err(|e| {
                    let why = match e.reason.as_str() {
                        // The query language says only "NaN": say what it is and where it came
                        // from.
                        "NaN" => format!("source {source}: not a finite number: `{text}` read NaN"),
                        reason => format!("source {source}: {reason}"),
                    };
                    Unread::new(e.cause, why)
                })
        }
    }
}

/// A gate on a `dead_letters` source: triage the export in one streaming pass and weigh it
/// against the decisions recorded in the store. `None` when the item reads another kind of source.
async fn dead_letters<S: Store>(store: &S, plan: &Plan, item: &Item<'_>) -> Option<Reading> {
    let Some(Source::DeadLetters { export }) = plan.sources.get(item.source()) else {
        return None;
    };
    let query = item
        .queries()
        .first()
        .map(|q| q.trim().to_string())
        .unwrap_or_default();
    let source = item.source();
    let file = match std::fs::File::open(export) {
        Ok(f) => f,
        Err(e) => {
            return Some(Reading::unavailable(Unread::down(format!(
                "source {source}: cannot read the dead-letter export {}: {e}",
                export.display()
            ))));
        }
    };
    let report = match crate::dlq::triage::triage_reader(
        std::io::BufReader::new(file),
        crate::dlq::triage::TriageOptions::default(),
    ) {
        Ok(r) => r,
        Err(e) => {
            return Some(Reading::unavailable(Unread::down(format!(
                "source {source}: {e}"
            ))));
        }
    };
    let queue = plan.brokers.old.dead_letter.as_deref();
    let decisions: Vec<_> = match store.dlq_decisions().await {
        Ok(all) => all
            .into_iter()
            .filter(|d| queue.is_none_or(|q| d.queue == q))
            .collect(),
        Err(e) => {
            return Some(Reading::unavailable(Unread::down(format!(
                "source {source}: decisions: {e}"
            ))));
        }
    };
    let reading = crate::dlq::gate::evaluate(&report, &decisions);
    let value = match query.as_str() {
        "entries" => reading.entries as f64,
        _ => reading.value(),
    };
    Some(Reading {
        observation: Observation::Value(value),
        note: Some(reading.reason(5)),
        largest: None,
    })
}

/// Add stored series to `history` (the store returns a source's samples series by series),
/// each series' labels parsed once. A series whose labels cannot be read is left out (the
/// history is a cache of observations, and a missing point only delays a rate).
fn add_stored(history: &mut History, stored: Vec<StoredSeries>) {
    for series in stored {
        if let Ok(labels) = serde_json::from_str::<Vec<(String, String)>>(&series.labels) {
            history.add_series_points(series.metric, &labels, &series.points);
        }
    }
}

fn to_stored(p: Point) -> StoredPoint {
    StoredPoint {
        labels: serde_json::to_string(&p.labels).unwrap_or_else(|_| "[]".into()),
        series: p.series_key,
        metric: p.metric,
        at_ms: p.at_ms,
        value: p.value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(series: &str, labels: &str, at_ms: i64, value: f64) -> StoredPoint {
        StoredPoint {
            series: series.into(),
            metric: "depth".into(),
            labels: labels.into(),
            at_ms,
            value,
        }
    }

    #[test]
    fn stored_rows_read_series_by_series_are_the_history_of_their_points() {
        let a = r#"[["queue","a"]]"#;
        let b = r#"[["queue","b"]]"#;
        let rows = vec![
            stored("a", a, 1_000, 1.0),
            stored("a", a, 2_000, 2.0),
            stored("b", b, 1_000, 5.0),
            stored("x", "not json", 1_000, 9.0),
            // Out of the store's order: still its series' point.
            stored("a", a, 3_000, 3.0),
        ];
        let mut series = Vec::new();
        for p in &rows {
            StoredSeries::push_row(
                &mut series,
                (&p.series, &p.metric, &p.labels),
                p.at_ms,
                p.value,
            );
        }
        assert_eq!(series.len(), 4, "a row of another series starts a group");
        assert_eq!(StoredSeries::into_points(series.clone()), rows);
        let mut history = History::new();
        add_stored(&mut history, series);
        let expected = History::from_points(rows.into_iter().filter_map(|p| {
            let labels = serde_json::from_str(&p.labels).ok()?;
            Some(Point {
                series_key: p.series,
                metric: p.metric,
                labels,
                at_ms: p.at_ms,
                value: p.value,
            })
        }));
        assert_eq!(history, expected);
        assert_eq!(
            history.points().count(),
            4,
            "the unreadable row is left out"
        );
    }
}
