//! The daemon's HTTP API (JSON; see docs/api.md).
//!
//! Reads: `GET /v1/migrations`, `/v1/migrations/{name}`, `/v1/migrations/{name}/history`,
//! `/v1/migrations/{name}/routing` (ETag, long-poll with `If-None-Match` and `?wait=30s`),
//! `/metrics`, `/healthz`. Mutations: `POST /v1/migrations/{name}/{advance|rollback|pause|resume|abort}`
//! with `{"reason": "...", "force": false, "confirm": "NAME"}` and `Authorization: Bearer <token>`,
//! answered only by the active controller.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::Shared;
use super::hub::{Published, etag};
use crate::controller::views::EntryView;
use crate::controller::{Actor, AdvanceOptions, ControllerError};
use crate::machine::Command;
use crate::store::{Store, StoreError};

/// The longest a long-poll may wait.
pub const MAX_WAIT: Duration = Duration::from_secs(120);

type App<S> = State<Arc<Shared<S>>>;

/// The API's routes.
pub fn router<S: Store + Clone + 'static>(shared: Arc<Shared<S>>) -> Router {
    Router::new()
        .route("/healthz", get(healthz::<S>))
        .route("/metrics", get(metrics::<S>))
        .route("/v1/migrations", get(list::<S>))
        .route("/v1/migrations/{name}", get(one::<S>))
        .route("/v1/migrations/{name}/history", get(history::<S>))
        .route("/v1/migrations/{name}/routing", get(routing::<S>))
        .route("/v1/migrations/{name}/{action}", post(mutate::<S>))
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
        ControllerError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
        ControllerError::Illegal(_) => StatusCode::CONFLICT,
        ControllerError::ReasonRequired(_) | ControllerError::UnknownState { .. } => {
            StatusCode::BAD_REQUEST
        }
        ControllerError::Plan(_)
        | ControllerError::StoredPlan { .. }
        | ControllerError::PlanFile { .. } => StatusCode::UNPROCESSABLE_ENTITY,
    };
    error(status, e.to_string())
}

async fn healthz<S: Store + Clone + 'static>(State(s): App<S>) -> Response {
    Json(json!({
        "ok": true,
        "leader": s.is_leader(),
        "holder": s.config.holder,
        "ticks": s.metrics.ticks(),
    }))
    .into_response()
}

fn render_metrics<S: Store + Clone + 'static>(s: &Shared<S>) -> String {
    #[allow(unused_mut)]
    let mut text = s.metrics.render();
    #[cfg(feature = "brokers")]
    text.push_str(&s.probes.render());
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
            Ok(loaded) => match c.status_view(&loaded).await {
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
    match c.status_view(&loaded).await {
        Ok(v) => Json(v).into_response(),
        Err(e) => controller_error(&e),
    }
}

async fn history<S: Store + Clone + 'static>(
    State(s): App<S>,
    Path(name): Path<String>,
) -> Response {
    match s.store.journal(&name).await {
        Ok(j) => Json(j.iter().map(EntryView::of).collect::<Vec<_>>()).into_response(),
        Err(e) => controller_error(&e.into()),
    }
}

#[derive(Debug, Deserialize)]
struct WaitQuery {
    wait: Option<String>,
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
            return error(
                StatusCode::NOT_FOUND,
                format!("no migration named {name:?} in this store"),
            );
        };
        let published = rx.borrow().clone();
        return doc_response(&published);
    };
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
    let mut stopping = s.stopping.subscribe();
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
}

/// Constant-time comparison of the presented token with ours.
fn token_matches(presented: &str, ours: &str) -> bool {
    let (a, b) = (presented.as_bytes(), ours.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn mutate<S: Store + Clone + 'static>(
    State(s): App<S>,
    Path((name, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Option<Json<MutationBody>>,
) -> Response {
    if s.config.read_only_api {
        return error(StatusCode::FORBIDDEN, "this API is read-only (--read-only)");
    }
    if let Some(token) = &s.config.token {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match presented {
            None => {
                return error(
                    StatusCode::UNAUTHORIZED,
                    "missing `Authorization: Bearer <token>`",
                );
            }
            Some(p) if !token_matches(p.trim(), token) => {
                return error(StatusCode::FORBIDDEN, "wrong token");
            }
            Some(_) => {}
        }
    }
    if !s.is_leader() {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "this controller is standing by; send mutations to the active one (see /healthz)",
        );
    }
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let actor = Actor {
        name: format!("api:{}", s.config.holder),
        reason: body.reason.clone(),
    };
    let c = s.controller(false);
    let now = s.now_ms();
    let command = match action.as_str() {
        "advance" => {
            let opts = AdvanceOptions {
                dry_run: false,
                force: body.force,
                confirm: body.confirm.clone(),
                from: body.from.clone(),
            };
            return match c.advance(&name, &opts, &actor, now).await {
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
        "rollback" => Command::Rollback { then_pause: false },
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
