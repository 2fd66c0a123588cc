//! The admin API under `/admin/`: JSON in and out, behind [`access`](super::access).
//!
//! | method and path | what |
//! |---|---|
//! | `GET /admin/upstreams` | every upstream with its state, endpoints or process (as in `/status.json`) |
//! | `GET /admin/upstreams/{upstream}` | one upstream, its tools and its breakers |
//! | `GET /admin/breakers` | every breaker with its state and counts; `?upstream=`, `?state=` narrow it |
//! | `POST /admin/upstreams/{upstream}/breaker/{open,close,reset}` | force the upstream's breaker |
//! | `POST /admin/upstreams/{upstream}/tools/{tool}/breaker/{open,close,reset}` | force a tool's breaker |
//! | `POST /admin/upstreams/{upstream}/endpoints/{index}/{eject,restore}` | take a replica out of service, or back |
//! | `GET /admin/config` | the configuration in force, secrets masked |
//! | `POST /admin/reload` | read the configuration file again and put it in force (as SIGHUP does); answers what changed, or the file's problems |
//! | `GET /admin/schema` | the configuration's JSON Schema |
//!
//! `open` takes `{"reason": "…"}`: what clients are told while the breaker is held
//! open (at most [`MAX_REASON`] characters, escaped to printable ASCII).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::access::{AdminAccess, guard};
use super::{Admin, build, masked, status};
use crate::resilience::breaker::{Breaker, Hold};
use crate::upstream::pool::EjectError;
use crate::upstream::registry::{Connector, UpstreamHandle};

/// Longest `reason` accepted (characters).
pub(super) const MAX_REASON: usize = 200;
/// Longest request body accepted (bytes).
const MAX_BODY: usize = 4096;

/// The admin API's routes, each behind `access`.
pub(super) fn router(access: AdminAccess) -> Router<Admin> {
    Router::new()
        .route("/upstreams", get(upstreams))
        .route("/upstreams/{upstream}", get(upstream))
        .route("/upstreams/{upstream}/breaker/{action}", post(upstream_breaker))
        .route("/upstreams/{upstream}/tools/{tool}/breaker/{action}", post(tool_breaker))
        .route("/upstreams/{upstream}/endpoints/{index}/{action}", post(endpoint))
        .route("/breakers", get(breakers))
        .route("/config", get(config))
        .route("/reload", post(reload))
        .route("/schema", get(schema))
        .fallback(|| async { refuse(StatusCode::NOT_FOUND, "no such admin API path".to_owned()) })
        .layer(axum::middleware::from_fn_with_state(access, guard))
}

/// A JSON answer that is not cached.
fn answer(status: StatusCode, body: Value) -> Response {
    let mut response = (status, axum::Json(body)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A request the admin API turns down: `{"error": "…"}` with its status.
#[derive(Debug)]
struct Refusal {
    status: StatusCode,
    why: String,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        answer(self.status, json!({ "error": self.why }))
    }
}

fn refuse(status: StatusCode, why: String) -> Refusal {
    Refusal { status, why }
}

fn unknown_upstream(name: &str) -> Refusal {
    refuse(StatusCode::NOT_FOUND, format!("no upstream {name:?}"))
}

/// What the admin API's handlers answer.
type Answer = Result<Response, Refusal>;

/// The status document as JSON.
async fn document(admin: Admin, query: status::Query) -> Result<Value, Refusal> {
    match build(admin, query, |doc| serde_json::to_value(doc)).await {
        Ok(Ok(Ok(doc))) => Ok(doc),
        Ok(Err(status::UnknownUpstream)) => Err(refuse(StatusCode::NOT_FOUND, "no upstream of that name".to_owned())),
        Ok(Ok(Err(e))) => Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the status: {e}"))),
        Err(e) => Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("the status was not built: {e}"))),
    }
}

/// `GET /admin/upstreams`.
async fn upstreams(State(admin): State<Admin>) -> Answer {
    let mut doc = document(admin, status::Query::default()).await?;
    Ok(answer(StatusCode::OK, json!({ "upstreams": doc["upstreams"].take() })))
}

/// The document of `upstream` alone (its tools listed), and its entry taken out of it.
async fn upstream_document(admin: Admin, name: &str) -> Result<(Value, Value), Refusal> {
    let query = status::Query { all: false, upstream: Some(name.to_owned()) };
    let mut doc = document(admin, query).await?;
    let entry = doc["upstreams"]
        .as_array_mut()
        .and_then(|all| all.iter_mut().find(|u| u["name"] == name))
        .map(Value::take)
        .unwrap_or(Value::Null);
    Ok((doc, entry))
}

/// `GET /admin/upstreams/{upstream}`: the upstream as listed, its tools, its breakers.
async fn upstream(State(admin): State<Admin>, Path(name): Path<String>) -> Answer {
    if admin.gateway.upstreams().get(&name).is_none() {
        return Err(unknown_upstream(&name));
    }
    let breakers = status::breakers(&admin.gateway.breakers(), Some(&name));
    let (mut doc, entry) = upstream_document(admin, &name).await?;
    Ok(answer(StatusCode::OK, json!({ "upstream": entry, "tools": doc["tools"].take(), "breakers": breakers })))
}

/// The query of `GET /admin/breakers`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct BreakersQuery {
    upstream: Option<String>,
    state: Option<String>,
}

/// `GET /admin/breakers`: every breaker, not closed first.
async fn breakers(State(admin): State<Admin>, query: Result<Query<BreakersQuery>, QueryRejection>) -> Answer {
    let Query(query) = query.map_err(|e| refuse(StatusCode::BAD_REQUEST, e.body_text()))?;
    if let Some(state) = &query.state
        && !matches!(state.as_str(), "open" | "half_open" | "closed")
    {
        return Err(refuse(StatusCode::BAD_REQUEST, "state: expected open, half_open or closed".to_owned()));
    }
    if let Some(name) = &query.upstream
        && admin.gateway.upstreams().get(name).is_none()
    {
        return Err(unknown_upstream(name));
    }
    let gateway = Arc::clone(&admin.gateway);
    let listed = tokio::task::spawn_blocking(move || {
        let mut listed = status::breakers(&gateway.breakers(), query.upstream.as_deref());
        if let Some(state) = &query.state {
            listed.retain(|b| b.state() == state.as_str());
        }
        serde_json::to_value(listed)
    })
    .await;
    match listed {
        Ok(Ok(listed)) => Ok(answer(StatusCode::OK, json!({ "breakers": listed }))),
        Ok(Err(e)) => Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the breakers: {e}"))),
        Err(e) => Err(refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("the breakers were not read: {e}"))),
    }
}

/// The body of a breaker action.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ActionBody {
    reason: Option<String>,
}

/// `POST /admin/upstreams/{upstream}/breaker/{action}`.
async fn upstream_breaker(
    State(admin): State<Admin>,
    Path((name, action)): Path<(String, String)>,
    body: Bytes,
) -> Answer {
    force(&admin, &name, None, &action, &body)
}

/// `POST /admin/upstreams/{upstream}/tools/{tool}/breaker/{action}`.
async fn tool_breaker(
    State(admin): State<Admin>,
    Path((name, tool, action)): Path<(String, String, String)>,
    body: Bytes,
) -> Answer {
    force(&admin, &name, Some(&tool), &action, &body)
}

/// Holds a breaker open or closed, or resets it; answers with the breaker as listed and
/// the state it left.
fn force(admin: &Admin, name: &str, tool: Option<&str>, action: &str, body: &[u8]) -> Answer {
    let handle = admin.gateway.upstreams().get(name).cloned().ok_or_else(|| unknown_upstream(name))?;
    let hold = hold(action, body)?;
    let breaker = find_breaker(admin, &handle, tool)?;
    let previous = breaker.force(hold);
    let shown = status::breaker(breaker.key(), &breaker.snapshot());
    Ok(answer(StatusCode::OK, json!({ "breaker": shown, "previous": previous.as_str() })))
}

/// What `action` asks for; `open` needs a reason.
fn hold(action: &str, body: &[u8]) -> Result<Option<Hold>, Refusal> {
    if body.len() > MAX_BODY {
        return Err(refuse(StatusCode::PAYLOAD_TOO_LARGE, format!("the body is over {MAX_BODY} bytes")));
    }
    let body: ActionBody = if body.iter().all(u8::is_ascii_whitespace) {
        ActionBody::default()
    } else {
        serde_json::from_slice(body).map_err(|e| refuse(StatusCode::BAD_REQUEST, format!("body: {e}")))?
    };
    match action {
        "open" => {
            let reason = body.reason.as_deref().map(str::trim).unwrap_or_default();
            if reason.is_empty() {
                let why = "reason: required to isolate (clients are told it), e.g. {\"reason\": \"maintenance until 14:00 UTC\"}";
                return Err(refuse(StatusCode::BAD_REQUEST, why.to_owned()));
            }
            if reason.chars().count() > MAX_REASON {
                return Err(refuse(StatusCode::BAD_REQUEST, format!("reason: at most {MAX_REASON} characters")));
            }
            // Escaped to printable ASCII: it is quoted to every client refused.
            let reason = crate::sanitize::quote(reason, MAX_REASON * 4);
            Ok(Some(Hold::Open { reason: Arc::from(reason) }))
        }
        "close" => Ok(Some(Hold::Closed)),
        "reset" => Ok(None),
        other => Err(refuse(StatusCode::NOT_FOUND, format!("unknown action {other:?}: expected open, close or reset"))),
    }
}

/// The upstream's breaker, or its tool's (created with the upstream's settings if it
/// has none yet).
fn find_breaker(admin: &Admin, handle: &UpstreamHandle, tool: Option<&str>) -> Result<Arc<Breaker>, Refusal> {
    let breakers = admin.gateway.breakers();
    let cfg = &handle.policy.breaker;
    let Some(tool) = tool else { return Ok(breakers.upstream(&handle.name, cfg)) };
    let catalog = &handle.policy.catalog;
    if catalog.len() > 0 && catalog.get(tool).is_none() && !breakers.has_tool(&handle.name, tool) {
        let why = format!(
            "upstream {:?} lists no tool {tool:?}; name the tool as the upstream does (without the `{}{}` prefix)",
            &*handle.name,
            &*handle.name,
            admin.config.load().name_separator
        );
        return Err(refuse(StatusCode::NOT_FOUND, why));
    }
    breakers.tool(&handle.name, &Arc::from(tool), cfg).ok_or_else(|| {
        refuse(StatusCode::CONFLICT, format!("upstream {:?} has as many tool breakers as allowed", &*handle.name))
    })
}

/// `POST /admin/upstreams/{upstream}/endpoints/{index}/{action}`: `eject` or `restore`;
/// answers with the upstream's endpoints as listed.
async fn endpoint(State(admin): State<Admin>, Path((name, index, action)): Path<(String, String, String)>) -> Answer {
    let handle = admin.gateway.upstreams().get(&name).cloned().ok_or_else(|| unknown_upstream(&name))?;
    let Connector::Http(pool) = &handle.connector else {
        let why = format!("upstream {name:?} is not a Streamable HTTP upstream: it has no endpoints");
        return Err(refuse(StatusCode::CONFLICT, why));
    };
    let index: usize = index
        .parse()
        .map_err(|_| refuse(StatusCode::BAD_REQUEST, format!("endpoint {index:?}: expected its index, from 0")))?;
    let done = match action.as_str() {
        "eject" => pool.eject(index),
        "restore" => pool.restore(index),
        other => {
            let why = format!("unknown action {other:?}: expected eject or restore");
            return Err(refuse(StatusCode::NOT_FOUND, why));
        }
    };
    done.map_err(|e| match e {
        EjectError::NoSuchEndpoint(_) => refuse(StatusCode::NOT_FOUND, e.to_string()),
        EjectError::LastEndpoint(_) => refuse(StatusCode::CONFLICT, e.to_string()),
    })?;
    let (_, mut entry) = upstream_document(admin, &name).await?;
    Ok(answer(StatusCode::OK, json!({ "upstream": name, "endpoint": index, "endpoints": entry["endpoints"].take() })))
}

/// `GET /admin/config`: the configuration in force, its secrets masked.
async fn config(State(admin): State<Admin>) -> Answer {
    let config = masked::masked(&admin.config.load())
        .map_err(|e| refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the configuration: {e}")))?;
    Ok(answer(StatusCode::OK, config))
}

/// `POST /admin/reload`: reads the configuration file again; answers 200 with what
/// changed, 422 with the file's problems (one `FILE:LINE: field: message` line each), or
/// 409 when it changes what needs a restart — the configuration in force stays then.
async fn reload(State(admin): State<Admin>) -> Answer {
    let Some(reloads) = &admin.reloads else {
        return Err(refuse(StatusCode::CONFLICT, "this gateway was not started from a configuration file".to_owned()));
    };
    match reloads.reload("admin API").await {
        Some(Ok(done)) => Ok(answer(StatusCode::OK, json!({ "reloaded": done }))),
        Some(Err((outcome, why))) => {
            let status = match outcome {
                "invalid" => StatusCode::UNPROCESSABLE_ENTITY,
                "refused" => StatusCode::CONFLICT,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            let problems: Vec<&str> = why.lines().collect();
            Ok(answer(
                status,
                json!({ "error": format!("configuration reload {outcome}; the configuration in force stays"), "problems": problems }),
            ))
        }
        None => Err(refuse(StatusCode::SERVICE_UNAVAILABLE, "the gateway is shutting down".to_owned())),
    }
}

/// `GET /admin/schema`: the JSON Schema of the configuration file.
async fn schema() -> Response {
    answer(StatusCode::OK, crate::config::json_schema())
}
