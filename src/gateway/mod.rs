//! The gateway as downstream transports see it: initialize a session, handle one
//! request, notification or response, end a session. Transport-independent.

mod context;
mod initialize;
mod listen;
mod modern;
mod resume;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arc_swap::ArcSwap;
use futures::FutureExt as _;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::call::{EVENT_BUFFER, Link, events};
use crate::client::{Answered, ClientRequest, ClientService};
use crate::errors;
use crate::jsonrpc::{self, Id, Notification, Request, Response};
use crate::mcp::trace_context::{self, RequestTrace, TraceContext};
use crate::mcp::{meta, method};
use crate::routing::Router;
use crate::session::relay::{self, ProgressMap};
use crate::session::table::{Holder, Reservation, TableFull};
use crate::session::{Scope, Session, SessionTable, Slot};
use crate::upstream::registry::Upstreams;
use crate::workers::PerWorker;

pub(crate) use initialize::InitError;
pub(crate) use modern::{ModernAnswer, ModernRequest};
use resume::Leaving;
pub(crate) use resume::NoSession;

/// The gateway core.
pub(crate) struct Gateway {
    /// The router and the client stack in force; a reload swaps in new ones, and each
    /// request keeps the ones it started with.
    routing: Arc<ArcSwap<Routing>>,
    sessions: SessionTable,
    /// The contexts of modern-era clients, by what they share (see `context.rs`).
    contexts: context::Contexts,
    /// Modern requests' calls waiting for the client's input.
    parked: modern::Parked,
    /// The access log, for the requests the gateway answers outside the client stack
    /// (`initialize`).
    access: Option<crate::telemetry::access::AccessLog>,
}

/// What a configuration reload replaces: the router over the upstreams and the client
/// stack over the router.
pub(crate) struct Routing {
    /// The router, with the upstreams and their stacks.
    pub router: Arc<Router>,
    /// The rewriter of every answer, which the client stack's rewrite layer holds too.
    pub rewriter: Arc<errors::Rewriter>,
    /// The client stack over it, kept once per worker.
    pub client: PerWorker<ClientService>,
}

/// The encoded answer to one request.
#[derive(Debug)]
pub(crate) struct EncodedAnswer {
    /// The JSON-RPC response.
    pub body: String,
    /// Set when the request was refused as overloaded or rate limited: transports that
    /// can should answer with this HTTP status and `Retry-After`.
    pub http: Option<crate::client::HttpHint>,
}

static NEXT_PROGRESS: AtomicU64 = AtomicU64::new(1);

/// What a modern client's request carries of its caller beyond the context it runs in.
#[derive(Debug, Clone)]
pub(crate) struct ModernCaller {
    /// Its `Mcp-Param-*` headers (lowercase names, in order).
    pub(crate) param_headers: Arc<[(String, String)]>,
    /// Its address, when the transport knows it.
    pub(crate) peer: Option<std::net::IpAddr>,
}

impl Gateway {
    /// A gateway whose requests go through `routing`.
    pub(crate) fn with_routing(routing: Routing, sessions: SessionTable) -> Gateway {
        let routing = Arc::new(ArcSwap::from_pointee(routing));
        Gateway {
            routing,
            sessions,
            contexts: context::Contexts::default(),
            parked: modern::Parked::default(),
            access: None,
        }
    }

    /// Puts `routing` in force for the requests that start from now on (those in flight
    /// finish with what they started with); returns what it replaces.
    pub(crate) fn install(&self, routing: Routing) -> Arc<Routing> {
        self.routing.swap(Arc::new(routing))
    }

    /// The router in force.
    pub(crate) fn router(&self) -> Arc<Router> {
        Arc::clone(&self.routing.load().router)
    }

    /// The same gateway, writing `initialize` to `access` too.
    pub(crate) fn with_access_log(mut self, access: Option<crate::telemetry::access::AccessLog>) -> Gateway {
        self.access = access;
        self
    }

    /// The upstreams in force.
    pub(crate) fn upstreams(&self) -> Arc<Upstreams> {
        Arc::clone(self.routing.load().router.upstreams())
    }

    /// The session table.
    pub(crate) fn sessions(&self) -> &SessionTable {
        &self.sessions
    }

    /// Handles one client request and returns the encoded response. Related messages
    /// (progress, logging, server requests) go to `out` when the client reads this
    /// request's stream, else to the session's GET stream. `trace` is the trace context
    /// of the HTTP request that carried it, if any.
    pub(crate) async fn handle_request(
        &self,
        session: &Arc<Session>,
        req: Request,
        out: Option<mpsc::Sender<String>>,
        trace: Option<TraceContext>,
    ) -> EncodedAnswer {
        let id = req.id.clone();
        let answered = self.answer_request_with(session, req, out, None, trace).await;
        EncodedAnswer { body: jsonrpc::encode_reply(Some(&id), &answered.reply), http: answered.http }
    }

    /// [`Gateway::handle_request`], with the answer not yet encoded.
    pub(crate) async fn answer_request(
        &self,
        session: &Arc<Session>,
        req: Request,
        out: Option<mpsc::Sender<String>>,
    ) -> Answered {
        self.answer_request_with(session, req, out, None, None).await
    }

    /// [`Gateway::answer_request`] with what the transport knows of the caller: for a
    /// modern client its `Mcp-Param-*` headers and its own address (the context it runs
    /// in may have been opened by another); the trace context of its HTTP request.
    pub(crate) async fn answer_request_with(
        &self,
        session: &Arc<Session>,
        req: Request,
        out: Option<mpsc::Sender<String>>,
        modern: Option<ModernCaller>,
        trace: Option<TraceContext>,
    ) -> Answered {
        let (related_tx, mut related_rx) = events(EVENT_BUFFER);
        // Give the request a progress token of the gateway's own, unique across sessions.
        let mut params = req.params;
        let (meta, called) = meta::read_with_name(params.as_deref());
        let trace =
            RequestTrace::new(trace_context::from_meta(meta.traceparent.as_ref(), meta.tracestate.as_ref()), trace);
        let progress = meta.progress().map(|client| ProgressMap {
            upstream: Value::String(format!("seawall-progress-{}", NEXT_PROGRESS.fetch_add(1, Ordering::Relaxed))),
            client,
        });
        if let Some(p) = &progress {
            params = meta::with_progress_token(params.as_deref(), &p.upstream).or(params);
        }
        let mut request = ClientRequest::named(
            Arc::clone(session),
            req.id.clone(),
            &req.method,
            params,
            called,
            progress.as_ref().map(|p| p.upstream.clone()),
            related_tx,
        );
        request.trace = trace;
        if let Some(caller) = modern {
            request.param_headers = Some(caller.param_headers);
            request.peer = caller.peer.or(request.peer);
        }
        let answered = {
            let answering = self.routing.load().client.call(request);
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
        while let Some(event) = related_rx.try_recv() {
            if let Some(message) = relay::to_client(session, event, progress.as_ref()) {
                deliver(session, out.as_ref(), message).await;
            }
        }
        let Ok(answered) = answered;
        answered
    }

    /// Handles a client notification.
    pub(crate) async fn handle_notification(&self, session: &Arc<Session>, n: Notification) {
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
    pub(crate) async fn handle_response(&self, session: &Arc<Session>, r: Response) {
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
    pub(crate) async fn end_session(&self, session: &Arc<Session>) {
        self.sessions.end(session.id());
        self.close_session(session, Leaving::Ended).await;
        tracing::info!(session = session.key, "session closed");
    }

    async fn close_session(&self, session: &Arc<Session>, leaving: Leaving) {
        self.closing(session, leaving).await;
    }

    /// Stops `session` now and returns what is left to do of its end: closing (or, when
    /// it only leaves this replica, detaching) its own upstream sessions.
    fn closing(&self, session: &Arc<Session>, leaving: Leaving) -> impl Future<Output = ()> + Send + 'static {
        session.stop();
        let keep = self.keeps_upstream_sessions(session, leaving);
        let upstreams = self.upstreams();
        let links: Vec<Link> = session
            .take_slots()
            .into_iter()
            .filter_map(|(name, slot)| {
                let Slot::Up(link) = slot else { return None };
                link.unsubscribe(session.key);
                let shared = upstreams.get(&name).is_some_and(|h| h.is_shared());
                (!shared).then_some(link)
            })
            .collect();
        let closing = links
            .into_iter()
            .map(move |link| async move { if keep { link.detach().await } else { link.close().await } });
        futures::future::join_all(closing).map(drop)
    }

    /// Holds a place in the session table for a session `holder` opens; a session of
    /// the same caller let go to make room ends as idle expiry ends it (its upstream
    /// sessions deleted; a sealed one only leaves this replica), in the background.
    pub(crate) fn reserve(&self, holder: Holder) -> Result<Reservation<'_>, TableFull> {
        let (reservation, let_go) = self.sessions.reserve(holder)?;
        self.end_let_go(let_go);
        Ok(reservation)
    }

    /// Ends a session the table let go to make room for a newcomer of its caller.
    fn end_let_go(&self, let_go: Option<Arc<Session>>) {
        if let Some(session) = let_go {
            tracing::info!(
                session = session.key,
                "session closed: its caller's sessions were at their cap and it was the least recently used idle one"
            );
            tokio::spawn(self.closing(&session, Leaving::Left));
        }
    }

    /// The error rewriter in force.
    pub(crate) fn rewriter(&self) -> Arc<errors::Rewriter> {
        Arc::clone(&self.routing.load().rewriter)
    }

    /// The circuit breakers (one registry for the gateway's life: reloads keep them).
    pub(crate) fn breakers(&self) -> Arc<crate::resilience::breaker::Breakers> {
        Arc::clone(self.routing.load().router.breakers())
    }

    /// Tells every session that reaches `upstream` that its tool list changed.
    pub(crate) fn announce_tools_changed(&self, upstream: &str) {
        self.announce(upstream, method::TOOLS_LIST_CHANGED);
    }

    /// Tells every session that reaches `upstream` that its prompt list changed.
    pub(crate) fn announce_prompts_changed(&self, upstream: &str) {
        self.announce(upstream, method::PROMPTS_LIST_CHANGED);
    }

    /// Sends the notification `changed` to every session that reaches `upstream`.
    fn announce(&self, upstream: &str, changed: &str) {
        let note = jsonrpc::encode_notification(changed, None);
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
    pub(crate) async fn reap_idle(&self) {
        let reaped = self.sessions.reap_idle();
        for session in reaped {
            tracing::info!(session = session.key, "session expired");
            self.close_session(&session, Leaving::Left).await;
        }
    }

    /// Ends every session (shutdown).
    pub(crate) async fn shutdown(&self) {
        let sessions = self.sessions.drain();
        futures::future::join_all(sessions.iter().map(|s| self.close_session(s, Leaving::Left))).await;
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
