//! The admin listener: liveness, readiness with upstream and breaker status, Prometheus
//! metrics, the live status page (`/`, over `/status.json`; see `status.rs`), and the
//! admin API under `/admin/` (`api.rs`), guarded by a token or to loopback clients
//! (`access.rs`).
//!
//! The page is one HTML file with its stylesheet and script, compiled into the binary
//! and served from here with a content security policy that allows nothing from
//! elsewhere, so it works offline and cannot load what a name it shows might smuggle in.

mod access;
mod api;
mod masked;
mod status;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::Router;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{Map, Value, json};

use arc_swap::ArcSwap;

use crate::config::{AdminConfig, Config};
use crate::control::Reloads;
use crate::gateway::Gateway;
use crate::session::Front;
use crate::signals::Drain;
use crate::telemetry::metrics::observed;
use crate::upstream::registry::Connector;

const PAGE_HTML: &str = include_str!("page.html");
const PAGE_CSS: &str = include_str!("page.css");
const PAGE_JS: &str = include_str!("page.js");

/// Only this origin's own files and fetches; no inline script, no frames, no forms.
const PAGE_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                           connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// What the admin listener needs beyond the gateway.
pub(crate) struct AdminOptions {
    /// The configuration in force (a reload replaces it): its `admin.token` guards the
    /// admin API, which shows it with its secrets masked.
    pub config: Arc<ArcSwap<Config>>,
    /// A graceful shutdown's progress: readiness fails while it drains.
    pub drain: Drain,
    /// Asks for configuration reloads (`POST /admin/reload`), when the gateway serves them.
    pub reloads: Option<Reloads>,
}

/// What the admin routes share.
#[derive(Clone)]
struct Admin {
    gateway: Arc<Gateway>,
    started: Instant,
    started_wall: SystemTime,
    config: Arc<ArcSwap<Config>>,
    drain: Drain,
    reloads: Option<Reloads>,
}

/// Logs, at start, who may use the admin API on `local`.
pub(crate) fn log_access(config: &AdminConfig, local: SocketAddr) {
    match (&config.token, access::is_loopback(local.ip())) {
        (Some(_), _) => tracing::info!(%local, "admin API: every request needs the bearer token of admin.token"),
        (None, true) => tracing::info!(%local, "admin API: loopback clients only (no admin.token)"),
        (None, false) => tracing::warn!(
            %local,
            "admin API: no admin.token, so it answers loopback clients only; requests from other \
             addresses are refused with 403 (health, readiness, metrics and the status page stay open)"
        ),
    }
}

/// The admin routes.
pub(crate) fn router(gateway: Arc<Gateway>, metrics: Option<PrometheusHandle>, options: AdminOptions) -> Router {
    let observed = Arc::clone(&gateway);
    let metrics_route = get(move || {
        let metrics = metrics.clone();
        let gateway = Arc::clone(&observed);
        async move {
            match metrics {
                Some(m) => {
                    observe(&gateway);
                    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], m.render()).into_response()
                }
                None => (StatusCode::NOT_FOUND, "metrics are not enabled\n").into_response(),
            }
        }
    });
    let access = access::AdminAccess::new(&options.config.load().admin);
    let admin = Admin {
        gateway,
        started: Instant::now(),
        started_wall: SystemTime::now(),
        config: options.config,
        drain: options.drain,
        reloads: options.reloads,
    };
    // The recent buckets count from here, in step with the uptime the page shows.
    crate::telemetry::recent::global();
    Router::new()
        .route("/", get(|| async { page(PAGE_HTML, "text/html; charset=utf-8") }))
        .route("/status.css", get(|| async { page(PAGE_CSS, "text/css; charset=utf-8") }))
        .route("/status.js", get(|| async { page(PAGE_JS, "text/javascript; charset=utf-8") }))
        .route("/status.json", get(status_json))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", metrics_route)
        .nest("/admin", api::router(access))
        .with_state(admin)
}

/// One of the page's files, with the headers that keep it self-contained.
fn page(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(PAGE_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The status document; `?all=1` lists closed breakers too, `?upstream=NAME` adds that
/// upstream's tools.
async fn status_json(State(admin): State<Admin>, query: Result<Query<status::RawQuery>, QueryRejection>) -> Response {
    let refuse = |status: StatusCode, error: String| (status, axum::Json(json!({ "error": error }))).into_response();
    let query = match query.map_err(|e| e.body_text()).and_then(|Query(raw)| status::Query::try_from(raw)) {
        Ok(query) => query,
        Err(why) => return refuse(StatusCode::BAD_REQUEST, why),
    };
    let built = build(admin, query, serde_json::to_vec::<status::Status>).await;
    match built {
        Ok(Ok(Ok(body))) => {
            let headers = [(header::CONTENT_TYPE, "application/json"), (header::CACHE_CONTROL, "no-store")];
            (headers, body).into_response()
        }
        Ok(Err(status::UnknownUpstream)) => {
            refuse(StatusCode::NOT_FOUND, "upstream: no upstream of that name".to_owned())
        }
        Ok(Ok(Err(e))) => refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the status: {e}")),
        Err(e) => refuse(StatusCode::INTERNAL_SERVER_ERROR, format!("the status was not built: {e}")),
    }
}

/// Builds the status document and `encode`s it, off the async workers: reading a
/// hundred thousand breakers takes a while.
async fn build<T: Send + 'static>(
    admin: Admin,
    query: status::Query,
    encode: impl FnOnce(&status::Status) -> T + Send + 'static,
) -> Result<Result<T, status::UnknownUpstream>, tokio::task::JoinError> {
    tokio::task::spawn_blocking(move || {
        let gateway = &admin.gateway;
        let (upstreams, breakers) = (gateway.upstreams(), gateway.breakers());
        let sources = status::Sources {
            upstreams: &upstreams,
            breakers: &breakers,
            sessions: gateway.sessions().all(),
            recent: crate::telemetry::recent::global(),
            started: admin.started,
            started_wall: admin.started_wall,
        };
        status::document(&sources, &query, Instant::now()).map(|doc| encode(&doc))
    })
    .await
}

/// The process is up and serving.
async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready when every shared stdio upstream is running and no shutdown is under way; lists
/// each upstream's state.
async fn readyz(State(admin): State<Admin>) -> Response {
    let gateway = &admin.gateway;
    let mut upstreams = Map::new();
    let draining = admin.drain.is_draining();
    let mut ready = !draining;
    for handle in gateway.upstreams().iter() {
        let mut why = None;
        let state = match &handle.connector {
            Connector::SharedStdio(link) => {
                if link.is_running() {
                    "up"
                } else {
                    ready = false;
                    why = Some(link.status());
                    "down"
                }
            }
            Connector::Http(_) | Connector::Sse(_) | Connector::PerSessionStdio(..) => "per-session",
        };
        let mut entry = json!({ "kind": handle.kind(), "state": state });
        // A process that is not up says why: seawall's reason, and what the last one
        // that failed to start said.
        if let Some(status) = why {
            if let Some(reason) = status.reason {
                entry["reason"] = json!(reason);
            }
            if let Some(exit_status) = status.exit_status {
                entry["exit_status"] = json!(exit_status);
            }
            if !status.stderr.is_empty() {
                entry["stderr"] = json!(status.stderr);
            }
        }
        if let Connector::Http(pool) = &handle.connector
            && pool.len() > 1
        {
            entry["endpoints_ejected"] = json!(pool.ejections());
        }
        upstreams.insert(handle.name.to_string(), entry);
    }
    let breakers: Vec<Value> = gateway
        .breakers()
        .states()
        .into_iter()
        .map(|(key, state)| json!({ "upstream": &*key.upstream, "tool": key.tool.as_deref(), "state": state.as_str() }))
        .collect();
    let state = match (draining, ready) {
        (true, _) => "draining",
        (false, true) => "ready",
        (false, false) => "degraded",
    };
    let body = json!({
        "status": state,
        "sessions": gateway.sessions().len(),
        "upstreams": Value::Object(upstreams),
        "breakers": breakers,
    });
    let status = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(body)).into_response()
}

/// Sets the gauges read at scrape time rather than kept on the request path: sessions
/// by front, requests in flight (per upstream, and the clients' in the gateway), and
/// every breaker's state.
fn observe(gateway: &Gateway) {
    let mut sessions = [0usize; Front::ALL.len()];
    let mut client_in_flight = 0;
    for session in gateway.sessions().all() {
        if let Some(i) = Front::ALL.iter().position(|f| *f == session.front()) {
            sessions[i] += 1;
        }
        client_in_flight += session.inflight();
    }
    for (front, n) in Front::ALL.iter().zip(sessions) {
        observed::sessions(front.as_str(), n);
    }
    observed::client_in_flight(client_in_flight);
    for handle in gateway.upstreams().iter() {
        observed::in_flight(&handle.name, handle.slots.in_flight());
    }
    for (key, state) in gateway.breakers().states() {
        observed::breaker_state(&key.upstream, key.tool.as_deref(), state.as_str());
    }
}
