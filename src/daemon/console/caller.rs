//! Who calls, for the API's mutations and the console: the caller's [`Principal`] from
//! [`Access`], the role an action needs, and `GET /v1/whoami` (what the page asks once a
//! token is typed, to show a viewer no action buttons).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Json;
use axum::extract::{ConnectInfo, State};
use axum::http::{Extensions, HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::super::Shared;
use super::super::auth::{Access, Principal, Refusal, Role, Via, is_json};
use crate::controller::Controller;
use crate::store::traits::*;

fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// The peer address the HTTP server recorded for the request.
pub fn peer(extensions: &Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// Log a refused call: who (the peer, and the name when one was recognised), what (the
/// request's path, never a header nor the query string), and why; never the token.
fn say_refused(extensions: &Extensions, path: &str, who: Option<&Principal>, why: &str) {
    let peer = peer(extensions).map(|p| p.to_string()).unwrap_or_default();
    let caller = who.map(Principal::describe).unwrap_or_default();
    tracing::warn!(
        %peer,
        caller = %caller,
        path = %crate::outgoing::line(path),
        "refused an API call: {why}"
    );
}

fn refusal(r: Refusal) -> Response {
    match r {
        Refusal::Missing => refuse(
            StatusCode::UNAUTHORIZED,
            "missing `Authorization: Bearer <token>`",
        ),
        Refusal::Wrong => refuse(StatusCode::FORBIDDEN, "wrong token"),
        Refusal::BadIdentity => refuse(
            StatusCode::FORBIDDEN,
            "the proxy's identity header does not hold a name (letters, digits and `._@+-`)",
        ),
        Refusal::RepeatedIdentity => refuse(
            StatusCode::FORBIDDEN,
            "the proxy's identity header came more than once: the proxy must set it, not append to it",
        ),
        Refusal::File(why) => super::super::http::unavailable(&format!(
            "{why}: every action is refused until the token file is fixed"
        )),
    }
}

/// Who may mutate: the caller, unless unknown (`401`/`403`), a viewer (`403`), or vouched for
/// by the proxy without a JSON body type (`415`: a browser's cookie behind the proxy must not
/// let another site's page act).
///
/// # Errors
/// The refusal to answer.
pub fn caller(
    access: &Access,
    headers: &HeaderMap,
    extensions: &Extensions,
    path: &str,
) -> Result<Principal, Box<Response>> {
    let (principal, via) = access.identify(headers, peer(extensions)).map_err(|r| {
        say_refused(extensions, path, None, r.reason());
        Box::new(refusal(r))
    })?;
    if principal.role == Role::Viewer {
        say_refused(
            extensions,
            path,
            Some(&principal),
            "a viewer may read, not act",
        );
        return Err(Box::new(refuse(
            StatusCode::FORBIDDEN,
            format!("{} may read, not act", principal.describe()),
        )));
    }
    if via == Via::Proxy && !is_json(headers) {
        say_refused(
            extensions,
            path,
            Some(&principal),
            "a mutation through the proxy without a JSON body type",
        );
        return Err(Box::new(refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "through the proxy, a mutation must be sent with `Content-Type: application/json`",
        )));
    }
    Ok(principal)
}

/// `403` when `action` needs a role the caller does not have: entering a point of no return
/// (`complete`) and the caller is not an admin ([`super::actions::role_needed`], the rule the
/// console's buttons follow too); `None` otherwise (the command itself decides the rest).
pub async fn needs_admin<S: Store + Clone + 'static>(
    c: &Controller<'_, S>,
    name: &str,
    action: &str,
    principal: &Principal,
) -> Option<Response> {
    if principal.role >= Role::Admin {
        return None;
    }
    let loaded = c.load(name).await.ok()?;
    let needs = super::actions::role_needed(&loaded.ladder, loaded.record.state, action);
    (principal.role < needs).then(|| {
        tracing::warn!(
            migration = %name,
            caller = %principal.describe(),
            "refused an API call: entering complete needs an admin"
        );
        refuse(
            StatusCode::FORBIDDEN,
            format!(
                "advancing {name} enters complete, the point of no return: an admin does it; {} is not one",
                principal.describe()
            ),
        )
    })
}

/// `GET /v1/whoami`: who the credential presented is, and whether they may act here.
pub async fn whoami<S: Store + Clone + 'static>(
    State(s): State<Arc<Shared<S>>>,
    headers: HeaderMap,
    extensions: Extensions,
) -> Response {
    let (p, via) = match s.config.access.identify(&headers, peer(&extensions)) {
        Ok(found) => found,
        Err(r) => {
            say_refused(&extensions, "/v1/whoami", None, r.reason());
            return refusal(r);
        }
    };
    let mut r = Json(json!({
        "name": p.name,
        "role": p.role.as_str(),
        "via": match via { Via::Open => "open", Via::Token => "token", Via::Proxy => "proxy" },
        "may_act": p.role >= Role::Operator && !s.config.read_only_api,
        "may_complete": p.role >= Role::Admin && !s.config.read_only_api,
    }))
    .into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
