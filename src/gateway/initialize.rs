//! `initialize`: opening a client session, its upstream sessions, and the answer — the
//! upstream's own on a single-upstream endpoint, capabilities merged from every upstream
//! on the aggregated one.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tracing::Instrument as _;

use super::Gateway;
use crate::call::GatewayError;
use crate::identity::Principal;
use crate::jsonrpc::{self, Request};
use crate::mcp::method;
use crate::mcp::trace_context::{self, RequestTrace, TraceContext};
use crate::mcp::{self, meta};
use crate::session::table::Holder;
use crate::session::{Front, Scope, Session, Slot};
use crate::telemetry::access::Recorded;
use crate::telemetry::trace::spans;

/// Why an `initialize` could not open a session.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InitError {
    /// The request itself is wrong.
    #[error("{0}")]
    Invalid(String),
    /// The session table is full.
    #[error("too many sessions; retry in {retry_after:?}")]
    Full {
        /// When a new try may succeed.
        retry_after: std::time::Duration,
    },
    /// The upstream behind a single-upstream endpoint cannot be reached.
    #[error(transparent)]
    Failed(GatewayError),
}

#[derive(Deserialize)]
struct InitializeParams {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
    #[serde(default)]
    capabilities: Value,
    #[serde(rename = "clientInfo", default)]
    client_info: Value,
}

impl Gateway {
    /// Handles `initialize` for a client at `peer`: opens upstream sessions and answers
    /// with the merged (or, on a single-upstream endpoint, the upstream's own) result. The
    /// client's sessions count against `session.max_sessions_per_peer` and, when clients
    /// authenticate, `session.max_sessions_per_principal`. The session's place in the
    /// table is held before any upstream session opens, so a burst of `initialize` calls
    /// costs no upstream connections beyond the table's size. The session is bound to
    /// `principal`, when clients authenticate, and remembers `peer`. `trace` is the trace
    /// context of the HTTP request that carried it; with `_meta`'s, it is continued by
    /// the span of the `initialize` (and of the upstream sessions it opens).
    pub(crate) async fn initialize(
        &self,
        scope: Scope,
        req: &Request,
        peer: Option<std::net::IpAddr>,
        principal: Option<Arc<Principal>>,
        front: Front,
        trace: Option<TraceContext>,
    ) -> Result<(Arc<Session>, Box<RawValue>), InitError> {
        let started = std::time::Instant::now();
        let asker = principal.clone();
        let meta = meta::read(req.params.as_deref());
        let mut trace =
            RequestTrace::new(trace_context::from_meta(meta.traceparent.as_ref(), meta.tracestate.as_ref()), trace);
        let span = spans::initialize(&req.id, &trace);
        trace.set_span(spans::context_of(&span));
        let opened = self.open(scope, req, peer, principal, front).instrument(span.clone()).await;
        if !span.is_none() {
            let code = |code: i64| code.to_string();
            let recorded = match &opened {
                Ok((session, _)) => Ok((session.key, session.version.as_str())),
                Err(InitError::Invalid(why)) => Err((code(jsonrpc::code::INVALID_PARAMS), why.clone())),
                Err(InitError::Full { .. }) => Err((code(jsonrpc::code::OVERLOADED), "too many sessions".to_owned())),
                Err(InitError::Failed(e)) => Err((code(jsonrpc::code::UPSTREAM_UNAVAILABLE), e.to_string())),
            };
            spans::record_initialized(&span, recorded);
        }
        let outcome = match &opened {
            Ok(_) => "ok",
            Err(InitError::Full { .. }) => "shed",
            Err(InitError::Invalid(_)) => "refused",
            Err(InitError::Failed(e)) => e.class().outcome,
        };
        crate::telemetry::metrics::client_request(method::INITIALIZE, outcome, started.elapsed());
        if let Some(log) = &self.access {
            let refused = |code, message: &str| Err(jsonrpc::error_object(code, message, None));
            let (session, reply, status) = match &opened {
                Ok((session, result)) => (session.key, Ok(result.clone()), None),
                Err(InitError::Full { .. }) => (0, refused(jsonrpc::code::OVERLOADED, "too many sessions"), Some(503)),
                Err(InitError::Invalid(why)) => (0, refused(jsonrpc::code::INVALID_PARAMS, why), Some(400)),
                Err(InitError::Failed(_)) => (0, refused(jsonrpc::code::UPSTREAM_UNAVAILABLE, "unavailable"), None),
            };
            let request = Recorded {
                started,
                session,
                principal: asker.as_deref(),
                method: method::INITIALIZE,
                tool: None,
                id: req.id.raw(),
                span: trace.span.as_deref(),
                client_trace: trace.parent(),
            };
            log.record(request, &reply, outcome, status);
        }
        opened
    }

    async fn open(
        &self,
        scope: Scope,
        req: &Request,
        peer: Option<std::net::IpAddr>,
        principal: Option<Arc<Principal>>,
        front: Front,
    ) -> Result<(Arc<Session>, Box<RawValue>), InitError> {
        let params: InitializeParams = jsonrpc::view(req.params.as_deref())
            .ok_or_else(|| InitError::Invalid("initialize needs params.protocolVersion (a string)".into()))?;
        let holder = Holder { peer, principal: principal.as_deref().map(Principal::identity) };
        let reservation = match self.reserve(holder) {
            Ok(r) => r,
            Err(full) => {
                tracing::debug!(peer = ?peer, cap = ?full.cap, limit = full.limit, "refused a session: the session table is full");
                return Err(InitError::Full { retry_after: full.retry_after });
            }
        };
        let version = mcp::negotiate(&params.protocol_version).to_owned();
        let capabilities = if params.capabilities.is_object() { params.capabilities } else { json!({}) };
        let session =
            self.new_session(scope.clone(), version.clone(), capabilities, params.client_info, principal, front);
        if let Some(peer) = peer {
            session.bind_peer(peer);
        }
        self.connect_upstreams(&session).await;

        let result = match &scope {
            Scope::Single(name) => match session.slot(name) {
                Some(Slot::Up(link)) => match link.init_result() {
                    // The upstream's own answer, unless it chose a version seawall cannot
                    // speak to the client: then seawall bridges, in the client's version.
                    Some(init) if mcp::is_supported(&init.protocol_version) => init.raw.clone(),
                    Some(init) => with_version(&init.raw, &version),
                    None => merged_init(&session, &version),
                },
                other => {
                    let reason = match other {
                        Some(Slot::Down(reason)) => reason,
                        _ => "not configured".into(),
                    };
                    self.close_session(&session, super::Leaving::Ended).await;
                    return Err(InitError::Failed(GatewayError::Unavailable { upstream: Arc::clone(name), reason }));
                }
            },
            Scope::Aggregate => merged_init(&session, &version),
        };
        self.seal_id(&session);
        self.sessions.insert_reserved(reservation, Arc::clone(&session));
        tracing::info!(session = session.key, scope = ?scope, version = %version, "session opened");
        Ok((session, result))
    }
}

impl Gateway {
    /// A new session (not yet in the table), bound to `principal`; an upstream's
    /// `list_changed` marks that upstream's tool catalog stale.
    pub(super) fn new_session(
        &self,
        scope: Scope,
        version: String,
        capabilities: Value,
        client_info: Value,
        principal: Option<Arc<Principal>>,
        front: Front,
    ) -> Arc<Session> {
        let session = Session::new(scope, version, capabilities, client_info);
        session.set_front(front);
        if let Some(principal) = principal {
            session.bind_principal(principal);
        }
        let routing = Arc::clone(&self.routing);
        session.on_tools_changed(Arc::new(move |name: &str| {
            if let Some(handle) = routing.load().router.upstreams().get(name) {
                handle.policy.catalog.mark_stale();
            }
        }));
        session
    }

    /// Opens the session's upstream sessions (every upstream on `/mcp`, the one on
    /// `/mcp/<upstream>`), at once; an upstream that cannot be reached is marked down.
    pub(super) async fn connect_upstreams(&self, session: &Arc<Session>) {
        let router = self.router();
        let upstreams = router.upstreams();
        let targets: Vec<_> = match &session.scope {
            Scope::Aggregate => upstreams.iter().cloned().collect(),
            Scope::Single(name) => upstreams.get(name).cloned().into_iter().collect(),
        };
        let connects = targets.iter().map(|handle| {
            let init = router.init_params(session, handle);
            async move { (handle, handle.connect(&init).await) }
        });
        for (handle, result) in futures::future::join_all(connects).await {
            match result {
                Ok(link) => session.set_slot(&handle.name, Slot::Up(link)),
                Err(e) => {
                    tracing::warn!(upstream = %handle.name, error = %e, "could not open an upstream session");
                    session.set_slot(&handle.name, Slot::Down(e.to_string()));
                }
            }
        }
    }
}

/// An initialize result with its `protocolVersion` replaced.
fn with_version(raw: &RawValue, version: &str) -> Box<RawValue> {
    let mut map = meta::params_object(Some(raw)).unwrap_or_default();
    map.insert("protocolVersion".into(), Value::String(version.to_owned()));
    jsonrpc::to_raw(&map)
}

/// The aggregated endpoint's initialize result: capabilities merged from the upstreams.
pub(super) fn merged_init(session: &Session, version: &str) -> Box<RawValue> {
    let mut capabilities = Value::Object(Map::new());
    let mut instructions = Vec::new();
    let mut links = session.links();
    links.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, link) in links {
        let Some(init) = link.init_result() else {
            continue;
        };
        merge_capabilities(&mut capabilities, &init.capabilities);
        if let Some(text) = init.instructions.as_deref().filter(|t| !t.trim().is_empty()) {
            instructions.push(format!("[{name}] {text}"));
        }
    }
    // Task-augmented requests (`tasks/*`) carry no name or URI to route them by.
    if let Value::Object(caps) = &mut capabilities {
        caps.remove("tasks");
    }
    let mut result = Map::new();
    result.insert("protocolVersion".into(), Value::String(version.to_owned()));
    result.insert("capabilities".into(), capabilities);
    result.insert("serverInfo".into(), json!({ "name": "seawall", "version": env!("CARGO_PKG_VERSION") }));
    if !instructions.is_empty() {
        result.insert("instructions".into(), Value::String(instructions.join("\n\n")));
    }
    jsonrpc::to_raw(&result)
}

/// Deep union: objects merge key by key, booleans are OR-ed, other values keep the first.
fn merge_capabilities(into: &mut Value, from: &Value) {
    match (into, from) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in b {
                match a.get_mut(k) {
                    Some(existing) => merge_capabilities(existing, v),
                    None => {
                        a.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Value::Bool(a), Value::Bool(b)) => *a = *a || *b,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_merge_as_a_union() {
        let mut caps = json!({"tools": {"listChanged": false}, "logging": {}});
        merge_capabilities(&mut caps, &json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}}));
        assert_eq!(caps, json!({"tools": {"listChanged": true}, "logging": {}, "resources": {"subscribe": true}}));
    }
}
