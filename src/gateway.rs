//! The gateway as downstream transports see it: initialize a session, handle one
//! request, notification or response, end a session. Transport-independent.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tower::ServiceExt;

use crate::call::{EVENT_BUFFER, GatewayError, Link, Tagged};
use crate::client::{ClientRequest, ClientService};
use crate::errors;
use crate::jsonrpc::{self, Id, Notification, Request, Response};
use crate::mcp::{self, meta, method};
use crate::routing::Router;
use crate::session::relay::{self, ProgressMap};
use crate::session::{Scope, Session, SessionTable, Slot};
use crate::upstream::registry::Upstreams;

/// Why an `initialize` could not open a session.
#[derive(Debug, thiserror::Error)]
pub enum InitError {
    /// The request itself is wrong.
    #[error("{0}")]
    Invalid(String),
    /// The session table is full.
    #[error("too many sessions")]
    Full,
    /// The upstream behind a single-upstream endpoint cannot be reached.
    #[error(transparent)]
    Failed(GatewayError),
}

/// The gateway core.
pub struct Gateway {
    router: Arc<Router>,
    client: ClientService,
    sessions: SessionTable,
}

/// The encoded answer to one request.
#[derive(Debug)]
pub struct Answer {
    /// The JSON-RPC response.
    pub body: String,
    /// Set when the request was refused as overloaded: transports that can should answer
    /// HTTP 503 with this `Retry-After`.
    pub overloaded: Option<std::time::Duration>,
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

static NEXT_PROGRESS: AtomicU64 = AtomicU64::new(1);

impl Gateway {
    /// A gateway whose requests go through `client` (the client stack over `router`).
    pub fn new(router: Arc<Router>, client: ClientService, sessions: SessionTable) -> Gateway {
        Gateway { router, client, sessions }
    }

    /// The upstreams.
    pub fn upstreams(&self) -> &Arc<Upstreams> {
        self.router.upstreams()
    }

    /// The session table.
    pub fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// Looks a session up.
    pub fn session(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions.get(id)
    }

    /// Handles `initialize`: opens upstream sessions and answers with the merged (or, on a
    /// single-upstream endpoint, the upstream's own) result.
    pub async fn initialize(&self, scope: Scope, req: &Request) -> Result<(Arc<Session>, Box<RawValue>), InitError> {
        self.initialize_for(scope, req, None).await
    }

    /// [`Gateway::initialize`] for a client at `peer`, whose sessions count against
    /// `session.max_sessions_per_peer`. The session's place in the table is held before
    /// any upstream session opens, so a burst of `initialize` calls costs no upstream
    /// connections beyond the table's size.
    pub async fn initialize_for(
        &self,
        scope: Scope,
        req: &Request,
        peer: Option<std::net::IpAddr>,
    ) -> Result<(Arc<Session>, Box<RawValue>), InitError> {
        let params: InitializeParams = jsonrpc::view(req.params.as_deref())
            .ok_or_else(|| InitError::Invalid("initialize needs params.protocolVersion (a string)".into()))?;
        let reservation = match self.sessions.reserve(peer) {
            Ok(r) => r,
            Err(full) => {
                tracing::debug!(peer = ?peer, limit = full.0, "refused a session: the session table is full");
                return Err(InitError::Full);
            }
        };
        let version = mcp::negotiate(&params.protocol_version).to_owned();
        let capabilities = if params.capabilities.is_object() { params.capabilities } else { json!({}) };
        let session = Session::new(scope.clone(), version.clone(), capabilities, params.client_info);

        let targets: Vec<_> = match &scope {
            Scope::Aggregate => self.upstreams().iter().cloned().collect(),
            Scope::Single(name) => self.upstreams().get(name).cloned().into_iter().collect(),
        };
        let connects = targets.iter().map(|handle| {
            let init = self.router.init_params(&session, handle);
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
                    self.close_session(&session).await;
                    return Err(InitError::Failed(GatewayError::Unavailable { upstream: Arc::clone(name), reason }));
                }
            },
            Scope::Aggregate => merged_init(&session, &version),
        };
        self.sessions.insert_reserved(reservation, Arc::clone(&session));
        tracing::info!(session = session.key, scope = ?scope, version = %version, "session opened");
        crate::telemetry::metrics::sessions(self.sessions.len());
        Ok((session, result))
    }

    /// Handles one client request and returns the encoded response. Related messages
    /// (progress, logging, server requests) go to `out` when the client reads this
    /// request's stream, else to the session's GET stream.
    pub async fn handle_request(
        &self,
        session: &Arc<Session>,
        req: Request,
        out: Option<mpsc::Sender<String>>,
    ) -> Answer {
        let (related_tx, mut related_rx) = mpsc::channel::<Tagged>(EVENT_BUFFER);
        // Give the request a progress token of the gateway's own, unique across sessions.
        let mut params = req.params;
        let progress = meta::progress_token(params.as_deref()).map(|client| ProgressMap {
            upstream: Value::String(format!("seawall-progress-{}", NEXT_PROGRESS.fetch_add(1, Ordering::Relaxed))),
            client,
        });
        if let Some(p) = &progress {
            params = meta::with_progress_token(params.as_deref(), &p.upstream).or(params);
        }
        let request = ClientRequest::new(
            Arc::clone(session),
            req.id.clone(),
            &req.method,
            params,
            progress.as_ref().map(|p| p.upstream.clone()),
            related_tx,
        );
        let answered = {
            let answering = self.client.clone().oneshot(request);
            tokio::pin!(answering);
            loop {
                tokio::select! {
                    biased;
                    Some(event) = related_rx.recv() => {
                        if let Some(message) = relay::to_client(session, event, progress.as_ref()) {
                            deliver(session, out.as_ref(), message).await;
                        }
                    }
                    answered = &mut answering => break answered,
                }
            }
        };
        // Messages sent before the answer go out before it.
        while let Ok(event) = related_rx.try_recv() {
            if let Some(message) = relay::to_client(session, event, progress.as_ref()) {
                deliver(session, out.as_ref(), message).await;
            }
        }
        let Ok(answered) = answered;
        Answer { body: jsonrpc::encode_reply(Some(&req.id), &answered.reply), overloaded: answered.overloaded }
    }

    /// Handles a client notification.
    pub async fn handle_notification(&self, session: &Arc<Session>, n: Notification) {
        match n.method.as_str() {
            method::INITIALIZED => {}
            method::CANCELLED => {
                if let Some(p) = jsonrpc::view::<meta::CancelledParams>(n.params.as_deref())
                    && let Some(id) = Id::from_value(&p.request_id)
                {
                    session.cancel_request(&id);
                }
            }
            _ => {
                // Other notifications (roots/list_changed, unknown ones) go to every upstream
                // session the client owns; shared upstreams were offered no client features.
                for (name, link) in session.links() {
                    if self.upstreams().get(&name).is_some_and(|h| h.is_shared()) {
                        continue;
                    }
                    if let Err(e) = link.notify(n.clone()).await {
                        tracing::debug!(upstream = %name, error = %e, "could not forward a notification");
                    }
                }
            }
        }
    }

    /// Handles the client's answer to a server-initiated request.
    pub async fn handle_response(&self, session: &Arc<Session>, r: Response) {
        let Some(origin) = session.take_server_request(&r.id) else {
            tracing::debug!(session = session.key, id = %r.id, "ignored a response to an unknown request");
            return;
        };
        let Some(Slot::Up(link)) = session.slot(&origin.upstream) else {
            return;
        };
        if let Err(e) = link.respond(origin.endpoint, origin.id, r.body).await {
            tracing::warn!(upstream = %origin.upstream, error = %e, "could not relay the client's answer upstream");
        }
    }

    /// Ends a session (client DELETE or idle expiry): closes its own upstream sessions.
    pub async fn end_session(&self, session: &Arc<Session>) {
        self.sessions.remove(&session.id);
        crate::telemetry::metrics::sessions(self.sessions.len());
        self.close_session(session).await;
        tracing::info!(session = session.key, "session closed");
    }

    async fn close_session(&self, session: &Arc<Session>) {
        session.stop();
        let closes = session.take_slots().into_iter().filter_map(|(name, slot)| {
            let Slot::Up(link) = slot else { return None };
            link.unsubscribe(session.key);
            let shared = self.upstreams().get(&name).is_some_and(|h| h.is_shared());
            (!shared).then_some(link)
        });
        futures::future::join_all(closes.map(|link: Link| async move { link.close().await })).await;
    }

    /// The error rewriter.
    pub fn rewriter(&self) -> &Arc<errors::Rewriter> {
        self.router.rewriter()
    }

    /// The circuit breakers.
    pub fn breakers(&self) -> &Arc<crate::resilience::breaker::Breakers> {
        self.router.breakers()
    }

    /// Tells every session that reaches `upstream` that its tool list changed.
    pub fn announce_tools_changed(&self, upstream: &str) {
        let note = jsonrpc::encode_notification("notifications/tools/list_changed", None);
        for session in self.sessions.all() {
            let reaches = match &session.scope {
                Scope::Aggregate => true,
                Scope::Single(name) => &**name == upstream,
            };
            if reaches {
                session.push_outbox(note.clone());
            }
        }
    }

    /// Ends sessions idle past the configured timeout.
    pub async fn reap_idle(&self) {
        let reaped = self.sessions.reap_idle();
        if !reaped.is_empty() {
            crate::telemetry::metrics::sessions(self.sessions.len());
        }
        for session in reaped {
            tracing::info!(session = session.key, "session expired");
            self.close_session(&session).await;
        }
    }

    /// Ends every session (shutdown).
    pub async fn shutdown(&self) {
        let sessions = self.sessions.drain();
        futures::future::join_all(sessions.iter().map(|s| self.close_session(s))).await;
    }
}

async fn deliver(session: &Session, out: Option<&mpsc::Sender<String>>, message: String) {
    if message.is_empty() && out.is_none() {
        return; // a request to stream, for a client that reads JSON only
    }
    match out {
        Some(tx) => {
            if let Err(e) = tx.send(message).await {
                // The client stopped reading this request's stream: use the GET stream.
                if !e.0.is_empty() {
                    session.push_outbox(e.0);
                }
            }
        }
        None => session.push_outbox(message),
    }
}

/// An initialize result with its `protocolVersion` replaced.
fn with_version(raw: &RawValue, version: &str) -> Box<RawValue> {
    let mut map = meta::params_object(Some(raw)).unwrap_or_default();
    map.insert("protocolVersion".into(), Value::String(version.to_owned()));
    jsonrpc::to_raw(&map)
}

/// The aggregated endpoint's initialize result: capabilities merged from the upstreams.
fn merged_init(session: &Session, version: &str) -> Box<RawValue> {
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
