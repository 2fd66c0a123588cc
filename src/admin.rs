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
use crate::upstream::registry::Connector;

/// The admin routes.
pub(crate) fn router(gateway: Arc<Gateway>, metrics: Option<PrometheusHandle>) -> Router {
    let metrics_route = get(move || {
        let metrics = metrics.clone();
        async move {
            match metrics {
                Some(m) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], m.render()).into_response(),
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
