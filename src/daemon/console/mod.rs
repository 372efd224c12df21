//! The web console `migrate run` serves beside its API (docs/console.md): `/` (the fleet) and
//! `/migrations/{name}` (one migration), server-rendered HTML with one small script and one
//! style sheet, both compiled into the binary (no request leaves for anywhere else). Reading is
//! open as the API's reads are; every action the page offers is a `POST` to the API, with the
//! token the person types (kept in the page's memory only).
//!
//! Also the read endpoint the charts draw from: `GET /v1/migrations/{name}/evaluations`.

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::{Deserialize, Serialize};

use super::Shared;
use super::auth::Via;
use crate::controller::views::EntryView;
use crate::controller::{Loaded, views::StatusView};
use crate::gate::Verdict;
use crate::machine::State as Rung;
use crate::plan::{GateKind, Threshold};
use crate::store::{JournalEntry, Store};

mod actions;
mod caller;
mod gate_data;
mod html;
mod model;
mod words;

pub use model::{ChartSpec, Charts, Detail, FleetRow, Place, RungView, Serving};

pub use caller::{caller, needs_admin};
pub use words::words;

/// The journal entries one page of the console shows (the newest first; older ones behind a
/// link).
pub const JOURNAL_PAGE: u32 = 100;

const SCRIPT: &str = include_str!("console.js");
const STYLE: &str = include_str!("console.css");

/// The most evaluations one request of `/evaluations` answers.
pub const MAX_EVALUATIONS: u32 = 10_000;
/// The newest transitions `/evaluations` answers (the charts' marks).
pub const MAX_TRANSITIONS: u32 = 1000;
/// What `/evaluations` answers without `?limit=`.
pub const DEFAULT_EVALUATIONS: u32 = 2_000;

type App<S> = State<Arc<Shared<S>>>;

/// The console's routes, merged into the API's router (same listener, same state).
pub fn routes<S: Store + Clone + 'static>() -> Router<Arc<Shared<S>>> {
    Router::new()
        .route("/", get(fleet::<S>))
        .route("/migrations/{name}", get(migration::<S>))
        .route("/console/console.js", get(script))
        .route("/console/console.css", get(style))
        .route("/v1/migrations/{name}/evaluations", get(evaluations::<S>))
        .route("/v1/whoami", get(caller::whoami::<S>))
}

/// What every page and asset of the console is sent with: nothing but this origin may be
/// loaded or reached (no inline script, no inline style), never framed, never cached.
fn secured(mut r: Response, content_type: &'static str) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
             connect-src 'self'; form-action 'none'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    r
}

fn page(status: StatusCode, body: String) -> Response {
    secured((status, body).into_response(), "text/html; charset=utf-8")
}

async fn script() -> Response {
    secured(SCRIPT.into_response(), "text/javascript; charset=utf-8")
}

async fn style() -> Response {
    secured(STYLE.into_response(), "text/css; charset=utf-8")
}

fn serving<S: Store + Clone + 'static>(
    s: &Shared<S>,
    headers: &HeaderMap,
    extensions: &Extensions,
) -> Serving {
    let reader = match s.config.access.identify(headers, caller::peer(extensions)) {
        Ok((p, Via::Proxy)) => Some(p),
        _ => None,
    };
    Serving {
        holder: s.config.holder.clone(),
        leader: s.is_leader(),
        read_only: s.config.read_only_api,
        reader,
    }
}

async fn fleet<S: Store + Clone + 'static>(
    State(s): App<S>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    let c = s.controller(true);
    let records = match s.store.list().await {
        Ok(r) => r,
        Err(e) => {
            return page(
                StatusCode::INTERNAL_SERVER_ERROR,
                html::error(&e.to_string()),
            );
        }
    };
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    for r in records {
        let view = match c.load(&r.name).await {
            Ok(loaded) => c.status_view(&loaded, s.now_ms()).await,
            Err(e) => Err(e),
        };
        match view {
            Ok(view) => rows.push(FleetRow {
                breached: breached(&view),
                view,
            }),
            // One migration that cannot be shown does not hide the others.
            Err(e) => failed.push((r.name, e.to_string())),
        }
    }
    page(
        StatusCode::OK,
        html::fleet(&serving(&s, &headers, &extensions), &rows, &failed),
    )
}

/// A guard fails by its newest reading: this step's, or the round that paused it (as the
/// standing says: issue 56).
fn breached(view: &StatusView) -> bool {
    let paused_on_one = matches!(
        &view.standing.standing,
        crate::standing::Standing::NeedsPerson {
            person: crate::standing::Person::Paused {
                failing_guard: Some(_),
                ..
            }
        }
    );
    paused_on_one
        || view
            .gates
            .iter()
            .any(|g| g.kind == GateKind::Guard && g.verdict == Verdict::Fail)
}

/// What the page is asked for: the migration, what it reads, and the step chosen on the ladder.
struct Asked<'a> {
    loaded: &'a Loaded,
    journal: &'a [JournalEntry],
    now_ms: i64,
    step: Option<Rung>,
    blocked: Option<String>,
    /// The reader the proxy named, if any.
    reader: Option<&'a crate::daemon::auth::Principal>,
}

fn charts(a: &Asked<'_>, state: Rung) -> Charts {
    let plan = &a.loaded.plan;
    let current = state == a.loaded.record.state;
    let visits = if current {
        vec![(a.loaded.record.entered_at_ms, a.now_ms)]
    } else {
        gate_data::step_visits(a.journal, state, a.now_ms)
    };
    // The link to the source's UI spans every visit, as the charts do.
    let range = visits
        .first()
        .zip(visits.last())
        .map(|(first, last)| (first.0, last.1));
    let phase = state.phase().and_then(|k| plan.phase(k));
    let gates = phase
        .map(|p| {
            p.gate_keys()
                .into_iter()
                .map(|(name, kind)| ChartSpec {
                    name: name.to_string(),
                    kind,
                    threshold: p.threshold(name, kind),
                    data: gate_data::of(plan, p, name, kind, range.unwrap_or((a.now_ms, a.now_ms))),
                })
                .collect()
        })
        .unwrap_or_default();
    Charts {
        state: state.to_string(),
        current,
        visits,
        gates,
    }
}

fn detail(a: &Asked<'_>, view: StatusView) -> Detail {
    let loaded = a.loaded;
    let older = a.journal.first().filter(|e| e.seq > 1).map(|e| e.seq);
    let r = &loaded.record;
    let phase = r.state.phase().and_then(|k| loaded.plan.phase(k));
    let thresholds = view
        .gates
        .iter()
        .map(|g| phase.and_then(|p| p.threshold(&g.name, g.kind)))
        .collect();
    let range = (r.entered_at_ms, a.now_ms);
    let gate_data = view
        .gates
        .iter()
        .map(|g| phase.and_then(|p| gate_data::of(&loaded.plan, p, &g.name, g.kind, range)))
        .collect();
    let visited = |state: Rung| state == r.state || a.journal.iter().any(|e| e.to.state == state);
    let selected = a
        .step
        .filter(|s| visited(*s) && s.phase().is_some())
        .unwrap_or(r.state);
    let rungs = loaded.ladder.rungs();
    let here = rungs.iter().position(|&x| x == r.state);
    let rungs = rungs
        .iter()
        .enumerate()
        .map(|(i, &state)| RungView {
            state: state.to_string(),
            slices: loaded.ladder.routing(state).slices_migrated,
            at: match here {
                Some(h) if i < h => Place::Done,
                Some(h) if i == h => Place::Here,
                _ => Place::Ahead,
            },
            visited: visited(state) && state.phase().is_some(),
            selected: state == selected,
        })
        .collect();
    let min_left = phase.map(|p| {
        let min = i64::try_from(p.min_duration.as_millis()).unwrap_or(i64::MAX);
        // From the step's start or its last resume: time paused never counts.
        let spent = a.now_ms.saturating_sub(loaded.counting_from_ms()).max(0);
        (min.saturating_sub(spent).max(0), min)
    });
    let actions = actions::actions(&actions::Now {
        name: &r.name,
        plan: &loaded.plan,
        ladder: &loaded.ladder,
        state: r.state,
        paused: r.paused,
        gates: &view.gates,
        blocked: a.blocked.clone(),
        reader: a.reader,
        last_round: match &view.standing.standing {
            crate::standing::Standing::NeedsPerson {
                person: crate::standing::Person::Paused { last_round, .. },
            } => last_round.as_ref(),
            _ => None,
        },
    });
    Detail {
        breached: breached(&view),
        point_of_no_return: loaded.ladder.next(r.state) == Some(Rung::Complete),
        thresholds,
        gate_data,
        rungs,
        min_left,
        journal: a.journal.iter().map(EntryView::of).collect(),
        older,
        paged_back: false,
        actions,
        charts: charts(a, selected),
        view,
        producers: None,
    }
}

#[derive(Debug, Deserialize)]
struct PageQuery {
    /// The step whose charts to show (`slices[0]`), from the ladder.
    step: Option<String>,
    /// `?before=SEQ`: the page of the journal older than that entry.
    before: Option<i64>,
}

async fn migration<S: Store + Clone + 'static>(
    State(s): App<S>,
    Path(name): Path<String>,
    Query(q): Query<PageQuery>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    let c = s.controller(true);
    let loaded = match c.load(&name).await {
        Ok(l) => l,
        Err(e) => {
            let status = if matches!(
                e,
                crate::controller::ControllerError::Store(crate::store::StoreError::NotFound(_))
            ) {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            return page(status, html::error(&e.to_string()));
        }
    };
    let view = match c.status_view(&loaded, s.now_ms()).await {
        Ok(v) => v,
        Err(e) => {
            return page(
                StatusCode::INTERNAL_SERVER_ERROR,
                html::error(&e.to_string()),
            );
        }
    };
    let journal = match s.store.journal_page(&name, q.before, JOURNAL_PAGE).await {
        Ok(j) => j,
        Err(e) => {
            return page(
                StatusCode::INTERNAL_SERVER_ERROR,
                html::error(&e.to_string()),
            );
        }
    };
    let serving = serving(&s, &headers, &extensions);
    let asked = Asked {
        loaded: &loaded,
        journal: &journal,
        now_ms: s.now_ms(),
        step: q.step.as_deref().and_then(Rung::parse),
        blocked: serving.blocked(),
        reader: serving.reader.as_ref(),
    };
    let mut d = detail(&asked, view);
    d.paged_back = q.before.is_some();
    d.producers = Some(crate::daemon::followers_view::view(
        &s.views.followers,
        &loaded,
        asked.now_ms,
    ));
    page(StatusCode::OK, html::migration(&serving, &d))
}

#[derive(Debug, Deserialize)]
struct EvaluationsQuery {
    limit: Option<u32>,
}

/// `GET /v1/migrations/{name}/evaluations` (docs/api.md).
#[derive(Debug, Serialize)]
pub struct Evaluations {
    pub migration: String,
    /// The state the migration is in.
    pub state: String,
    /// The gates of the current phase, with their thresholds (`null`: none fixed).
    pub gates: Vec<ChartGate>,
    /// The stored evaluations, oldest first (the newest `limit`).
    pub evaluations: Vec<Point>,
    /// Every transition of the journal: when, and to which state.
    pub transitions: Vec<Transition>,
}

#[derive(Debug, Serialize)]
pub struct ChartGate {
    pub name: String,
    pub kind: String,
    pub threshold: Option<Threshold>,
}

#[derive(Debug, Serialize)]
pub struct Point {
    pub at_ms: i64,
    pub state: String,
    pub gate: String,
    pub kind: String,
    pub value: Option<f64>,
    pub verdict: String,
}

#[derive(Debug, Serialize)]
pub struct Transition {
    pub at_ms: i64,
    pub command: String,
    pub to: String,
}

async fn evaluations<S: Store + Clone + 'static>(
    State(s): App<S>,
    Path(name): Path<String>,
    Query(q): Query<EvaluationsQuery>,
) -> Response {
    let limit = q.limit.unwrap_or(DEFAULT_EVALUATIONS);
    if limit == 0 || limit > MAX_EVALUATIONS {
        return json_error(
            StatusCode::BAD_REQUEST,
            format!("limit: 1 to {MAX_EVALUATIONS} (e.g. ?limit=500)"),
        );
    }
    let c = s.controller(true);
    let loaded = match c.load(&name).await {
        Ok(l) => l,
        Err(e) => {
            let status = if matches!(
                e,
                crate::controller::ControllerError::Store(crate::store::StoreError::NotFound(_))
            ) {
                StatusCode::NOT_FOUND
            } else {
                StatusCode::INTERNAL_SERVER_ERROR
            };
            return json_error(status, e.to_string());
        }
    };
    let (history, journal) = match tokio::try_join!(
        s.store.evaluation_history(&name, limit),
        s.store.journal_page(&name, None, MAX_TRANSITIONS)
    ) {
        Ok(both) => both,
        Err(e) => return json_error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let phase = loaded
        .record
        .state
        .phase()
        .and_then(|k| loaded.plan.phase(k));
    let gates = phase
        .map(|p| {
            p.gate_keys()
                .into_iter()
                .map(|(name, kind)| ChartGate {
                    name: name.to_string(),
                    kind: kind.as_str().to_string(),
                    threshold: p.threshold(name, kind),
                })
                .collect()
        })
        .unwrap_or_default();
    let body = Evaluations {
        migration: name,
        state: loaded.record.state.to_string(),
        gates,
        evaluations: history
            .into_iter()
            .map(|r| Point {
                at_ms: r.at_ms,
                state: r.state.to_string(),
                gate: r.gate,
                kind: r.kind,
                value: r.value.filter(|v| v.is_finite()),
                verdict: r.verdict,
            })
            .collect(),
        transitions: journal
            .iter()
            .map(|e| Transition {
                at_ms: e.at_ms,
                command: e.command.clone(),
                to: e.to.state.to_string(),
            })
            .collect(),
    };
    let mut r = axum::Json(body).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn json_error(status: StatusCode, message: String) -> Response {
    (status, axum::Json(serde_json::json!({ "error": message }))).into_response()
}
