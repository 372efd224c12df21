//! The daemon's HTTP API (JSON; see docs/api.md).
//!
//! Reads: `GET /v1/migrations`, `/v1/migrations/{name}`, `/v1/migrations/{name}/history`,
//! `/v1/migrations/{name}/routing` (ETag, long-poll with `If-None-Match` and `?wait=30s`),
//! `/metrics`, `/healthz` (liveness), `/readyz` (the active controller with a working store).
//! Mutations: `POST /v1/migrations/{name}/{advance|rollback|pause|resume|abort}` with
//! `{"reason": "...", "force": false, "confirm": "NAME"}` and `Authorization: Bearer <token>`,
//! answered only by the active controller. Without a token a mutation must also come from this
//! machine and not from a web page (`cross_site`).

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::Shared;
use super::auth::{Role, is_json};
use super::guard::{host_part, is_loopback};
use super::hub::{Published, etag};
use crate::controller::views::EntryView;
use crate::controller::{Actor, AdvanceOptions, ControllerError};
use crate::machine::Command;
use crate::store::{Store, StoreError};

pub use super::http::MAX_WAIT;

/// The largest mutation body read (`413` beyond).
pub const MAX_BODY: usize = 64 * 1024;

type App<S> = State<Arc<Shared<S>>>;

/// The API's routes.
pub fn router<S: Store + Clone + 'static>(shared: Arc<Shared<S>>) -> Router {
    Router::new()
        .route("/healthz", get(healthz::<S>))
        .route("/readyz", get(readyz::<S>))
        .route("/metrics", get(metrics::<S>))
        .route("/v1/migrations", get(list::<S>))
        .route("/v1/migrations/{name}", get(one::<S>))
        .route("/v1/migrations/{name}/history", get(history::<S>))
        .route("/v1/migrations/{name}/routing", get(routing::<S>))
        .route(
            "/v1/migrations/{name}/{action}",
            post(mutate::<S>).layer(axum::extract::DefaultBodyLimit::max(MAX_BODY)),
        )
        // The web console (`/`, `/migrations/{name}`) and the evaluations its charts read.
        .merge(super::console::routes::<S>())
        .with_state(shared)
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

fn controller_error(e: &ControllerError) -> Response {
    let status = match e {
        ControllerError::Store(StoreError::NotFound(_))
        | ControllerError::NotInitialized { .. } => StatusCode::NOT_FOUND,
        ControllerError::Store(StoreError::Conflict { .. } | StoreError::StaleMemory { .. }) => {
            StatusCode::CONFLICT
        }
        ControllerError::NotInState { .. } => StatusCode::PRECONDITION_FAILED,
        ControllerError::Forbidden(_) => StatusCode::FORBIDDEN,
        ControllerError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        ControllerError::Illegal(_) => StatusCode::CONFLICT,
        ControllerError::ReasonRequired(_) | ControllerError::UnknownState { .. } => {
            StatusCode::BAD_REQUEST
        }
        ControllerError::Plan(_)
        | ControllerError::StoredPlan { .. }
        | ControllerError::PlanFile { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    let mut body = json!({ "error": e.to_string() });
    // The same refusal as the console writes it (its buttons and fields, not CLI flags).
    if let Some(words) = super::console::words(e) {
        body["console"] = json!(words);
    }
    (status, Json(body)).into_response()
}

async fn healthz<S: Store + Clone + 'static>(State(s): App<S>) -> Response {
    Json(json!({
        "ok": true,
        "leader": s.is_leader(),
        "holder": s.config.holder,
        "instance": s.config.instance,
        "epoch": s.store.fence().epoch(),
        "ticks": s.metrics.ticks(),
        "ticks_running": s.rounds.lanes.running(),
    }))
    .into_response()
}

/// `200` only on the active controller (it holds the lease) whose store answered within the
/// last lease period; `?standby=true` also on a standby whose store answers (a replica that may
/// serve reads). `503` otherwise, with the reason.
async fn readyz<S: Store + Clone + 'static>(
    State(s): App<S>,
    Query(q): Query<ReadyQuery>,
) -> Response {
    let leader = s.is_leader();
    let store = s.store_works();
    let ready = store && (leader || q.standby.unwrap_or(false));
    let why = if !ready && s.rounds.lanes.progress.gave_up() {
        Some(
            "this controller gave its lease up: no round completed within the lease TTL (a store call or a connection does not answer)",
        )
    } else if !store {
        Some("the store did not answer within the last lease period")
    } else if !ready {
        Some("this controller is standing by (another one holds the lease)")
    } else {
        None
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut body = json!({
        "ready": ready,
        "leader": leader,
        "store": store,
        "holder": s.config.holder,
        "instance": s.config.instance,
        "epoch": s.store.fence().epoch(),
    });
    if let Some(why) = why {
        body["error"] = json!(why);
    }
    (status, Json(body)).into_response()
}

#[derive(Debug, Deserialize)]
struct ReadyQuery {
    standby: Option<bool>,
}

fn render_metrics<S: Store + Clone + 'static>(s: &Shared<S>) -> String {
    s.metrics.fenced(s.store.fence().refused());
    #[allow(unused_mut)]
    let mut text = s.metrics.render();
    super::metrics::render_followers(&mut text, &s.views.followers);
    #[cfg(feature = "brokers")]
    text.push_str(&s.rounds.probes.render());
    text
}

async fn metrics<S: Store + Clone + 'static>(State(s): App<S>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        render_metrics(&s),
    )
        .into_response()
}

async fn list<S: Store + Clone + 'static>(State(s): App<S>) -> Response {
    let c = s.controller(true);
    let records = match s.store.list().await {
        Ok(r) => r,
        Err(e) => return controller_error(&e.into()),
    };
    let mut views = Vec::new();
    for r in records {
        match c.load(&r.name).await {
            Ok(loaded) => match c.status_view(&loaded, s.now_ms()).await {
                Ok(v) => views.push(v),
                Err(e) => return controller_error(&e),
            },
            Err(e) => return controller_error(&e),
        }
    }
    Json(views).into_response()
}

async fn one<S: Store + Clone + 'static>(State(s): App<S>, Path(name): Path<String>) -> Response {
    let c = s.controller(true);
    let loaded = match c.load(&name).await {
        Ok(l) => l,
        Err(e) => return controller_error(&e),
    };
    let now_ms = s.now_ms();
    match c.status_view(&loaded, now_ms).await {
        Ok(v) => {
            let mut body = serde_json::to_value(v).unwrap_or_else(|_| json!({}));
            // Who follows the routing document, and who lags (this daemon's knowledge).
            let producers = super::followers_view::view(&s.views.followers, &loaded, now_ms);
            if let Some(o) = body.as_object_mut() {
                o.insert("producers".into(), json!(producers));
            }
            Json(body).into_response()
        }
        Err(e) => controller_error(&e),
    }
}

/// What `/history` answers without `?limit=`: the newest entries.
pub const DEFAULT_HISTORY: u32 = 100;
/// The most journal entries one request of `/history` answers.
pub const MAX_HISTORY: u32 = 1000;

#[derive(Debug, Deserialize)]
struct HistoryQuery {
    before: Option<i64>,
    limit: Option<u32>,
}

/// One page of the journal, oldest first: the newest `?limit=` (default [`DEFAULT_HISTORY`])
/// entries below `?before=SEQ`; a `Link: <...?before=N&limit=M>; rel="next"` header names the
/// older page while there is one.
async fn history<S: Store + Clone + 'static>(
    State(s): App<S>,
    Path(name): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Response {
    let limit = q.limit.unwrap_or(DEFAULT_HISTORY);
    if limit == 0 || limit > MAX_HISTORY {
        return error(
            StatusCode::BAD_REQUEST,
            format!("limit: 1 to {MAX_HISTORY} (e.g. ?limit=100)"),
        );
    }
    match s.store.journal_page(&name, q.before, limit).await {
        Ok(j) => {
            let older = j.first().filter(|e| e.seq > 1).map(|e| e.seq);
            let mut r = Json(j.iter().map(EntryView::of).collect::<Vec<_>>()).into_response();
            if let Some(seq) = older
                && let Ok(link) = HeaderValue::from_str(&format!(
                    "</v1/migrations/{}/history?before={seq}&limit={limit}>; rel=\"next\"",
                    percent_encoding::utf8_percent_encode(
                        &name,
                        percent_encoding::NON_ALPHANUMERIC
                    )
                ))
            {
                r.headers_mut().insert(header::LINK, link);
            }
            r
        }
        Err(e) => controller_error(&e.into()),
    }
}

#[derive(Debug, Deserialize)]
struct WaitQuery {
    wait: Option<String>,
    /// The polling producer's id (`?producer=`): the daemon learns who follows.
    producer: Option<String>,
    /// The generation that producer applied (`?applied=`; 0 or absent: none yet).
    applied: Option<String>,
}

/// A poll that names its producer: remembered with the generation it applied, as of now. An
/// `applied` that is not a number counts as 0 (nothing proven applied).
fn note_follower<S: Store + Clone + 'static>(s: &Shared<S>, name: &str, q: &WaitQuery) {
    if let Some(producer) = q.producer.as_deref() {
        let applied = q
            .applied
            .as_deref()
            .and_then(|a| a.trim().parse::<u64>().ok())
            .unwrap_or(0);
        s.views
            .followers
            .record(name, producer, applied, s.now_ms());
    }
}

/// The generation named by an `If-None-Match` header (`"7"`, `W/"7"` or `7`).
fn if_none_match(headers: &HeaderMap) -> Option<u64> {
    let raw = headers.get(header::IF_NONE_MATCH)?.to_str().ok()?.trim();
    raw.trim_start_matches("W/").trim_matches('"').parse().ok()
}

async fn routing<S: Store + Clone + 'static>(
    State(s): App<S>,
    Path(name): Path<String>,
    Query(q): Query<WaitQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(mut rx) = s.hub.subscribe(&name) else {
        // Not seen yet: maybe created a moment ago.
        s.watch_once().await;
        let Some(rx) = s.hub.subscribe(&name) else {
            // In the store but not loadable here (its plan does not compile in this daemon's
            // environment): say why; producers keep their routing and retry.
            if let Some(why) = s.views.load_error(&name) {
                return super::http::unavailable(&format!(
                    "{name}: this daemon cannot load the migration: {why}"
                ));
            }
            return error(
                StatusCode::NOT_FOUND,
                format!("no migration named {name:?} in this store"),
            );
        };
        note_follower(&s, &name, &q);
        let published = rx.borrow().clone();
        return doc_response(&published);
    };
    note_follower(&s, &name, &q);
    let wait = match q.wait.as_deref().map(humantime::parse_duration).transpose() {
        Ok(w) => w.map(|w| w.min(MAX_WAIT)),
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                format!("wait: {e} (e.g. ?wait=30s)"),
            );
        }
    };
    let known = if_none_match(&headers);
    let published = rx.borrow_and_update().clone();
    let current = published.generation();
    // A reader ahead of us (it saw a newer generation from another controller) waits too: this
    // daemon never hands back a document older than the one the reader has.
    if known.is_none_or(|k| k < current) {
        return doc_response(&published);
    }
    drop(published);
    let Some(wait) = wait else {
        return not_modified(current);
    };
    // Parked long-polls are capped: one more is told to come back.
    let Ok(_parked) = s.views.long_polls.clone().try_acquire_owned() else {
        return super::http::unavailable(&format!(
            "this daemon parks at most {} long-polls at once (--http-max-long-polls): retry shortly",
            s.config.http.max_long_polls
        ));
    };
    let mut stopping = s.views.stopping.subscribe();
    tokio::select! {
        changed = tokio::time::timeout(wait, rx.changed()) => {
            // The shared, already encoded generation: no per-reader work but the response.
            let latest = rx.borrow_and_update().clone();
            match changed {
                Ok(Ok(())) if known.is_none_or(|k| k < latest.generation()) => {
                    doc_response(&latest)
                }
                _ => not_modified(current),
            }
        }
        // Shutting down: answer now, the reader asks again (maybe the other controller).
        _ = stopping.wait_for(|s| *s) => not_modified(current),
    }
}

/// The published body and `ETag`, shared with every other reader of this generation.
fn doc_response(published: &Published) -> Response {
    let mut r = Response::new(Body::from(published.body.clone()));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(header::ETAG, published.etag.clone());
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

fn not_modified(generation: u64) -> Response {
    let mut r = StatusCode::NOT_MODIFIED.into_response();
    r.headers_mut().insert(header::ETAG, etag(generation));
    r
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MutationBody {
    reason: Option<String>,
    #[serde(default)]
    force: bool,
    confirm: Option<String>,
    /// Act only if the migration is in this state (`"slices[2]"`), else 409.
    from: Option<String>,
    /// `rollback`: pause at the step below (the daemon does not advance again by itself).
    #[serde(default)]
    pause: bool,
}

/// Why a mutation that a web page could have sent is refused, if it is: a foreign `Origin` (one
/// that is not the `Host` the request was sent to) or `Sec-Fetch-Site: cross-site` always; and
/// when the daemon has no token, a `Host` that is not loopback (DNS rebinding: a name the
/// attacker controls that resolves to 127.0.0.1) and a body type other than JSON (a page can
/// send a form or `text/plain` without asking the browser's leave; JSON it cannot).
fn cross_site(headers: &HeaderMap, has_token: bool) -> Option<Response> {
    let text = |name: header::HeaderName| headers.get(name).map(|v| v.to_str().unwrap_or("?"));
    let host = text(header::HOST);
    if let Some(origin) = text(header::ORIGIN) {
        let origin_authority = origin
            .split_once("://")
            .map(|(_, rest)| rest.trim_end_matches('/'));
        let same = match (origin_authority, host) {
            (Some(o), Some(h)) => o.eq_ignore_ascii_case(h.trim()),
            _ => false,
        };
        if !same {
            return Some(error(
                StatusCode::FORBIDDEN,
                format!(
                    "cross-site request refused: Origin {origin:?} is not this daemon; send mutations from the CLI or a script, not a web page"
                ),
            ));
        }
    }
    if text(header::HeaderName::from_static("sec-fetch-site")) == Some("cross-site") {
        return Some(error(
            StatusCode::FORBIDDEN,
            "cross-site request refused (Sec-Fetch-Site: cross-site)",
        ));
    }
    if has_token {
        return None;
    }
    if !host.is_some_and(|h| is_loopback(host_part(h))) {
        return Some(error(
            StatusCode::FORBIDDEN,
            format!(
                "without a token, mutations are accepted only for a loopback Host (127.0.0.1, localhost, [::1]), not {}; or set MIGRATE_API_TOKEN",
                host.map_or_else(|| "none".to_string(), |h| format!("{h:?}"))
            ),
        ));
    }
    if !is_json(headers) {
        return Some(error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "without a token, a mutation must be sent with `Content-Type: application/json` (a body is optional)",
        ));
    }
    None
}

/// The mutation's body: none (or empty) is `{}`; else JSON, checked only once the caller may
/// mutate (an unauthenticated caller learns nothing of the fields).
fn mutation_body(headers: &HeaderMap, body: &Bytes) -> Result<MutationBody, (StatusCode, String)> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(MutationBody::default());
    }
    if !is_json(headers) {
        return Err((
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a body must be sent with `Content-Type: application/json`".into(),
        ));
    }
    serde_json::from_slice(body).map_err(|e| {
        let status = if e.is_data() {
            StatusCode::UNPROCESSABLE_ENTITY
        } else {
            StatusCode::BAD_REQUEST
        };
        (status, format!("the request body: {e}"))
    })
}

async fn mutate<S: Store + Clone + 'static>(
    State(s): App<S>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    request: Request,
) -> Response {
    if s.config.read_only_api {
        return error(StatusCode::FORBIDDEN, "this API is read-only (--read-only)");
    }
    if let Some(refused) = cross_site(&headers, s.config.access.required()) {
        return refused;
    }
    let principal = match super::console::caller(
        &s.config.access,
        &headers,
        request.extensions(),
        request.uri().path(),
    ) {
        Ok(p) => p,
        Err(refused) => return *refused,
    };
    if !s.is_leader() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "this controller is standing by; send mutations to the active one (see /healthz)",
        );
    }
    // Read only now, once the caller may mutate (docs/api.md): an unauthenticated caller gets
    // its answer without sending a byte of its body.
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_BODY).await else {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the request body is larger than {} KiB (or broke off)",
                MAX_BODY / 1024
            ),
        );
    };
    let body = match mutation_body(&headers, &body) {
        Ok(b) => b,
        Err((status, why)) => return error(status, why),
    };
    let actor = Actor {
        name: principal.actor(&s.config.holder),
        reason: body.reason.clone(),
    };
    let c = s.controller(false);
    if let Some(refused) = super::console::needs_admin(&c, &name, &action, &principal).await {
        return refused;
    }
    let now = s.now_ms();
    let command = match action.as_str() {
        "advance" => {
            let opts = AdvanceOptions {
                dry_run: false,
                force: body.force,
                confirm: body.confirm.clone(),
                from: body.from.clone(),
                preflight: None,
            };
            // The role is checked again on the state the commit moves from (the check above
            // read it before: a concurrent advance may have moved it since).
            let not_admin = (principal.role < Role::Admin).then(|| principal.describe());
            return match c
                .advance_as(&name, &opts, &actor, now, not_admin.as_deref())
                .await
            {
                Ok(out) if !out.blockers.is_empty() && !out.forced => {
                    (StatusCode::CONFLICT, Json(out)).into_response()
                }
                Ok(out) => {
                    if out.applied.is_some() {
                        s.metrics.transition(&name, "advance");
                    }
                    s.refresh(&c, &name).await;
                    Json(out).into_response()
                }
                Err(e) => controller_error(&e),
            };
        }
        "rollback" => Command::Rollback {
            then_pause: body.pause,
        },
        "pause" => Command::Pause,
        "resume" => Command::Resume,
        "abort" => Command::Abort,
        other => {
            return error(
                StatusCode::NOT_FOUND,
                format!("unknown action {other:?}: advance, rollback, pause, resume or abort"),
            );
        }
    };
    let result = c
        .command_from(
            &name,
            &command,
            body.from.as_deref(),
            &actor,
            json!({}),
            now,
        )
        .await;
    match result {
        Ok(applied) => {
            s.metrics.transition(&name, &applied.command);
            s.refresh(&c, &name).await;
            Json(applied).into_response()
        }
        Err(e) => controller_error(&e),
    }
}
