//! The admin listener: liveness, readiness with upstream and breaker status, and
//! Prometheus metrics.

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{Map, Value, json};

use crate::gateway::Gateway;
use crate::session::Front;
use crate::telemetry::metrics::observed;
use crate::upstream::registry::Connector;

/// The admin routes.
pub(crate) fn router(gateway: Arc<Gateway>, metrics: Option<PrometheusHandle>) -> Router {
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
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", metrics_route)
        .with_state(gateway)
}

/// The process is up and serving.
async fn healthz() -> &'static str {
    "ok\n"
}

/// Ready when every shared stdio upstream is running; lists each upstream's state.
async fn readyz(State(gateway): State<Arc<Gateway>>) -> Response {
    let mut upstreams = Map::new();
    let mut ready = true;
    for handle in gateway.upstreams().iter() {
        let state = match &handle.connector {
            Connector::SharedStdio(link) => {
                if link.is_running() {
                    "up"
                } else {
                    ready = false;
                    "down"
                }
            }
            Connector::Http(_) | Connector::Sse(_) | Connector::PerSessionStdio(..) => "per-session",
        };
        let mut entry = json!({ "kind": handle.kind(), "state": state });
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
    let body = json!({
        "status": if ready { "ready" } else { "degraded" },
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
