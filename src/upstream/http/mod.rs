//! Streamable HTTP upstreams: one [`HttpLink`] per client session, all sharing one
//! pooled [`UpstreamClient`](super::client::UpstreamClient) per upstream
//! ([`HttpUpstream`]). A link speaks the session era (`initialize`, `Mcp-Session-Id`)
//! or, with a server that answers `server/discover`, the stateless modern era
//! (`modern.rs`); `protocol: auto` remembers which per upstream.

mod handshake;
mod modern;
mod stream;
mod upstream;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use http::Method;
use http::header::{HeaderName, HeaderValue};
use tokio::task::AbortHandle;

use parking_lot::Mutex;

use super::LinkShared;
use super::cancel::CancelGuard;
use super::client::UpstreamResponse;
use super::failure::{refuses_era, status_error};
use super::sse_legacy::SseLink;
use crate::call::{
    AttachedSession, BoxFuture, EventSink, Link, Reply, Transport, UpstreamCall, UpstreamError, fresh_id,
};
use crate::jsonrpc::{self, Id, Notification};
use crate::mcp::init::{InitParams, InitResult};
use crate::mcp::{meta, method};
use upstream::SPOKE_SSE;
pub(crate) use upstream::{EraStatus, HttpUpstream};

const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// How long a request waits for the session's GET stream on its way (see
/// `HttpLink::get_opening`); an upstream slower than that to answer a GET is not waited
/// for.
const GET_OPEN_WAIT: Duration = Duration::from_secs(2);

impl HttpUpstream {
    /// A session with the upstream in the era it speaks: Streamable HTTP (modern or
    /// legacy, see [`HttpLink::eras_to_try`]) within `connect_timeout`, or, with
    /// `protocol: auto`, HTTP+SSE at the same URL once both of those were refused —
    /// remembered, and asked again when the HTTP+SSE handshake is refused in turn.
    pub(crate) async fn connect(
        self: &Arc<Self>,
        init: &InitParams,
        connect_timeout: Duration,
    ) -> Result<Link, UpstreamError> {
        if let Some(sse) = self.sse_fallback.as_ref().filter(|_| self.detected() == upstream::SSE_ONLY) {
            match SseLink::connect(Arc::clone(sse), init.clone()).await {
                Ok(link) => {
                    self.spoke.store(SPOKE_SSE, Ordering::Relaxed);
                    return Ok(link);
                }
                Err(e) if refuses_era(&e) => self.remember(upstream::UNKNOWN),
                Err(e) => return Err(e),
            }
        }
        let link = match tokio::time::timeout(connect_timeout, HttpLink::connect(Arc::clone(self), init.clone())).await
        {
            Ok(link) => link,
            Err(_) => return Err(UpstreamError::Handshake("no answer to initialize in time".into())),
        };
        match (link, &self.sse_fallback) {
            (Ok(link), _) => Ok(link),
            (Err(e), Some(sse)) if self.detected() == upstream::NEITHER => {
                tracing::debug!(upstream = %self.name, error = %e, "both Streamable HTTP eras refused: trying HTTP+SSE");
                let link = SseLink::connect(Arc::clone(sse), init.clone()).await?;
                self.remember(upstream::SSE_ONLY);
                self.spoke.store(SPOKE_SSE, Ordering::Relaxed);
                Ok(link)
            }
            (Err(e), _) => Err(e),
        }
    }
}

#[derive(Default, Clone)]
struct SessionState {
    /// `Mcp-Session-Id` and `MCP-Protocol-Version` as sent on every request, made once:
    /// a snapshot of the state copies no text.
    session_id: Option<HeaderValue>,
    version: Option<HeaderValue>,
    init: Option<Arc<InitResult>>,
    /// Bumped on every successful handshake, so concurrent callers re-initialise once.
    generation: u64,
    /// The link speaks the modern era: no session, one self-contained POST per request.
    modern: bool,
}

/// One MCP session with a Streamable HTTP upstream.
pub(crate) struct HttpLink {
    me: Weak<HttpLink>,
    up: Arc<HttpUpstream>,
    pub(crate) shared: LinkShared,
    init_params: InitParams,
    state: Mutex<SessionState>,
    reinit: tokio::sync::Mutex<()>,
    get_stream: Mutex<Option<AbortHandle>>,
    /// The client wants messages not tied to a request: keep a GET stream open. Until
    /// then the session holds no connection of its own.
    get_wanted: AtomicBool,
    /// True while the first GET stream of the session is on its way. Requests wait for it
    /// (at most [`GET_OPEN_WAIT`]): a server sends what it asks the client while a call
    /// runs on that stream, and drops it when the stream is not there yet, so a call must
    /// not overtake the stream the client opened before it.
    get_opening: tokio::sync::watch::Sender<bool>,
    /// The handshake is complete, so a GET stream may open.
    ready: AtomicBool,
    closed: AtomicBool,
    /// The envelope of modern requests (the client's capabilities and info).
    envelope: serde_json::Map<String, serde_json::Value>,
    /// Input requests of modern calls waiting for a legacy client's answer.
    inputs: modern::Inputs,
    /// Modern: the log level a legacy client set (`logging/setLevel`), sent in the
    /// envelope of every later request.
    log_level: Mutex<Option<String>>,
    /// Modern: the resources a legacy client subscribed to, listened for.
    subscriptions: Mutex<std::collections::BTreeSet<String>>,
    /// Modern: the generation of the latest listen stream, and the latest acknowledged.
    listen_generation: std::sync::atomic::AtomicU64,
    listen_acked: tokio::sync::watch::Sender<u64>,
}

/// What a POST produced.
enum Outcome {
    /// 202: the upstream accepted a notification or response.
    Accepted,
    /// The answer to our request.
    Reply(Reply),
    /// 404 on a request that carried a session id.
    SessionExpired,
}

impl HttpLink {
    /// Opens a session: initialize handshake, then the standalone GET stream.
    pub(crate) async fn connect(
        up: Arc<HttpUpstream>,
        init_params: InitParams,
    ) -> Result<Arc<HttpLink>, UpstreamError> {
        let link = HttpLink::with_state(up, init_params, SessionState::default());
        link.handshake().await?;
        Ok(link)
    }

    /// Re-attaches to an upstream session another process opened, by its id, without a
    /// handshake: requests carry its `Mcp-Session-Id` and `MCP-Protocol-Version` at once.
    /// An upstream that no longer knows it answers 404, and the link re-initialises as
    /// for any session the upstream forgot.
    pub(crate) fn attach(up: Arc<HttpUpstream>, init_params: InitParams, session: &AttachedSession) -> Arc<HttpLink> {
        let capabilities: serde_json::Map<String, serde_json::Value> =
            session.capabilities.iter().map(|name| (name.clone(), serde_json::json!({}))).collect();
        let raw = jsonrpc::to_raw(&serde_json::json!({
            "protocolVersion": session.version,
            "capabilities": capabilities,
        }));
        let init = InitResult {
            protocol_version: session.version.clone(),
            capabilities: serde_json::Value::Object(capabilities),
            instructions: None,
            raw,
        };
        let state = SessionState {
            session_id: shared_value(&session.session_id),
            version: shared_value(&session.version),
            init: Some(Arc::new(init)),
            generation: 1,
            modern: false,
        };
        let link = HttpLink::with_state(up, init_params, state);
        link.ready.store(true, Ordering::SeqCst);
        if link.init_params.may_be_asked() {
            link.get_wanted.store(true, Ordering::SeqCst);
            link.start_get_stream();
        }
        link
    }

    fn with_state(up: Arc<HttpUpstream>, init_params: InitParams, state: SessionState) -> Arc<HttpLink> {
        let envelope = modern::envelope(&init_params);
        Arc::new_cyclic(|me| HttpLink {
            me: me.clone(),
            up,
            shared: LinkShared::default(),
            envelope,
            inputs: modern::Inputs::default(),
            log_level: Mutex::new(None),
            subscriptions: Mutex::new(std::collections::BTreeSet::new()),
            listen_generation: std::sync::atomic::AtomicU64::new(0),
            listen_acked: tokio::sync::watch::channel(0).0,
            init_params,
            state: Mutex::new(state),
            reinit: tokio::sync::Mutex::new(()),
            get_stream: Mutex::new(None),
            get_wanted: AtomicBool::new(false),
            get_opening: tokio::sync::watch::channel(false).0,
            ready: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        })
    }

    /// The upstream session, as another process re-attaches to it; `None` for a modern
    /// link (no session) or one the upstream gave no id.
    pub(crate) fn attached(&self, endpoint: Option<u16>) -> Option<AttachedSession> {
        let state = self.snapshot();
        if state.modern {
            return None;
        }
        let capabilities =
            state.init.as_ref().and_then(|init| init.capabilities.as_object()).map_or_else(Vec::new, |caps| {
                caps.iter().filter(|(_, v)| !v.is_null()).map(|(name, _)| name.clone()).collect()
            });
        let text = |v: Option<HeaderValue>| Some(v?.to_str().ok()?.to_owned());
        Some(AttachedSession {
            endpoint,
            session_id: text(state.session_id)?,
            version: text(state.version)?,
            capabilities,
        })
    }

    /// The upstream's initialize result.
    pub(crate) fn init_result(&self) -> Option<Arc<InitResult>> {
        self.state.lock().init.clone()
    }

    fn snapshot(&self) -> SessionState {
        self.state.lock().clone()
    }

    /// Waits until the session's first GET stream is open, refused or failed, or
    /// [`GET_OPEN_WAIT`] has passed.
    async fn await_get_stream(&self) {
        let mut opening = self.get_opening.subscribe();
        let _ = tokio::time::timeout(GET_OPEN_WAIT, opening.wait_for(|on_its_way| !on_its_way)).await;
    }

    /// Opens the standalone GET stream, once: called when the client opens its own.
    pub(crate) async fn want_get_stream(self: &Arc<Self>) {
        if self.snapshot().modern {
            if !self.get_wanted.swap(true, Ordering::SeqCst) {
                let generation = self.relisten();
                self.listening(generation).await;
            }
            return;
        }
        if !self.get_wanted.swap(true, Ordering::SeqCst) && self.ready.load(Ordering::SeqCst) {
            self.start_get_stream();
        }
    }

    /// Sends a request and waits for its answer.
    pub(crate) async fn call(self: &Arc<Self>, call: &UpstreamCall) -> Result<Reply, UpstreamError> {
        let _progress = call.progress_token.as_ref().map(|t| self.shared.progress.register(t, call.events.clone()));
        let state = self.snapshot();
        // The rarer paths (a modern-era upstream, a session to open again, an answer on
        // an event stream) are boxed: a call's future holds only the one it takes.
        if state.modern {
            return Box::pin(self.call_modern(call, &state)).await;
        }
        if *self.get_opening.borrow() {
            self.await_get_stream().await;
        }
        let mut reinitialised = false;
        let trace = super::trace_headers(call);
        loop {
            let state = self.snapshot();
            let id = fresh_id();
            let body = jsonrpc::encode_request(&id, &call.method, call.params.as_deref());
            let (link, sent) = (Arc::downgrade(self), id.clone());
            let mut guard = CancelGuard::new(move |abandoned| {
                if abandoned {
                    send_cancel(&link, sent);
                }
            });
            let outcome = async {
                let resp = self.post_with(body, &state, &trace).await?;
                self.read_answer(resp, &id, Some(&call.events), &state).await
            }
            .await;
            match outcome {
                Ok(Outcome::Reply(reply)) => {
                    guard.disarm();
                    return Ok(reply);
                }
                Ok(Outcome::SessionExpired) if !reinitialised => {
                    guard.disarm();
                    reinitialised = true;
                    Box::pin(self.reinitialize(state.generation)).await?;
                }
                Ok(Outcome::SessionExpired) => {
                    guard.disarm();
                    return Err(UpstreamError::SessionLost("the upstream rejected a fresh session".into()));
                }
                Ok(Outcome::Accepted) => {
                    guard.disarm();
                    return Err(UpstreamError::Protocol("the upstream accepted a request without answering it".into()));
                }
                Err(e) => {
                    if !e.may_have_reached() {
                        guard.disarm();
                    }
                    return Err(e);
                }
            }
        }
    }

    /// Sends a notification. A modern upstream takes none (a call is cancelled by
    /// closing its stream): nothing is sent.
    pub(crate) async fn notify(self: &Arc<Self>, n: Notification) -> Result<(), UpstreamError> {
        if self.snapshot().modern {
            return Ok(());
        }
        let body = jsonrpc::encode_notification(&n.method, n.params.as_deref());
        self.send_one_way(body).await
    }

    /// Answers a server-initiated request (for a modern upstream: an input request of
    /// one of its calls).
    pub(crate) async fn respond(self: &Arc<Self>, id: Id, body: Reply) -> Result<(), UpstreamError> {
        if self.snapshot().modern {
            if !self.answer_input(&id, body) {
                tracing::debug!(upstream = %self.up.name, %id, "ignored an answer to an input request nobody waits for");
            }
            return Ok(());
        }
        let body = jsonrpc::encode_reply(Some(&id), &body);
        self.send_one_way(body).await
    }

    async fn send_one_way(self: &Arc<Self>, body: String) -> Result<(), UpstreamError> {
        let state = self.snapshot();
        let resp = self.post(body, &state).await?;
        let status = resp.status();
        if status.is_success() {
            Ok(())
        } else if status == http::StatusCode::NOT_FOUND && state.session_id.is_some() {
            Err(UpstreamError::SessionLost("the upstream no longer knows this session".into()))
        } else {
            Err(status_error(resp.status(), resp.headers()))
        }
    }

    /// Ends the upstream session and stops the GET stream.
    pub(crate) async fn close(&self) {
        if !self.stop() {
            return;
        }
        let state = self.snapshot();
        if state.session_id.is_some() {
            let headers = session_headers(&state, 0);
            let delete = self.up.client.send(Method::DELETE, &self.up.uri, &self.up.headers, &headers, String::new());
            if let Err(e) = tokio::time::timeout(Duration::from_secs(2), delete).await {
                tracing::debug!(upstream = %self.up.name, error = %e, "DELETE of the upstream session timed out");
            }
        }
    }

    /// Stops the GET stream and marks the link closed, leaving the upstream session to
    /// the replicas that still use it; whether it was open.
    pub(crate) fn stop(&self) -> bool {
        if self.closed.swap(true, Ordering::SeqCst) {
            return false;
        }
        if let Some(handle) = self.get_stream.lock().take() {
            handle.abort();
        }
        self.get_opening.send_replace(false);
        true
    }

    async fn post(&self, body: String, state: &SessionState) -> Result<UpstreamResponse, UpstreamError> {
        self.post_with(body, state, &[]).await
    }

    async fn post_with(
        &self,
        body: String,
        state: &SessionState,
        extra: &[(String, String)],
    ) -> Result<UpstreamResponse, UpstreamError> {
        let mut headers = session_headers(state, extra.len());
        super::push_headers(&mut headers, extra, &self.up.name);
        self.up.client.send(Method::POST, &self.up.uri, &self.up.post_headers, &headers, body).await
    }

    async fn get(&self, state: &SessionState, last_event_id: Option<&str>) -> Result<UpstreamResponse, UpstreamError> {
        let mut headers = session_headers(state, 1);
        if let Some(last) = last_event_id.and_then(|l| HeaderValue::try_from(l).ok()) {
            headers.push((LAST_EVENT_ID, last));
        }
        self.up.client.send(Method::GET, &self.up.uri, &self.up.get_headers, &headers, String::new()).await
    }
}

/// The session's `Mcp-Session-Id` and `MCP-Protocol-Version`, once it has them, with
/// room for `room` more fields.
fn session_headers(state: &SessionState, room: usize) -> Vec<(HeaderName, HeaderValue)> {
    let mut fields = Vec::with_capacity(2 + room);
    if let Some(sid) = &state.session_id {
        fields.push((SESSION_HEADER, sid.clone()));
    }
    if let Some(version) = &state.version {
        fields.push((VERSION_HEADER, version.clone()));
    }
    fields
}

/// `text` as a header value whose copies share its bytes; `None` when it cannot be one.
fn shared_value(text: &str) -> Option<HeaderValue> {
    HeaderValue::from_maybe_shared(bytes::Bytes::copy_from_slice(text.as_bytes())).ok()
}

impl Transport for HttpLink {
    fn send<'a>(&'a self, call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>> {
        Box::pin(async move {
            let me = self.me.upgrade().ok_or_else(|| UpstreamError::SessionLost("the session is closed".into()))?;
            me.call(call).await
        })
    }

    fn notify(&self, n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(async move {
            let me = self.me.upgrade().ok_or_else(|| UpstreamError::SessionLost("the session is closed".into()))?;
            me.notify(n).await
        })
    }

    fn respond(&self, _endpoint: Option<u16>, id: Id, body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(async move {
            let me = self.me.upgrade().ok_or_else(|| UpstreamError::SessionLost("the session is closed".into()))?;
            me.respond(id, body).await
        })
    }

    fn init_result(&self) -> Option<Arc<InitResult>> {
        HttpLink::init_result(self)
    }

    fn subscribe(&self, key: u64, sink: EventSink) {
        self.shared.fanout.subscribe(key, sink);
    }

    fn unsubscribe(&self, key: u64) {
        self.shared.fanout.unsubscribe(key);
    }

    fn want_unrelated_stream(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if let Some(me) = self.me.upgrade() {
                me.want_get_stream().await;
            }
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(HttpLink::close(self))
    }

    fn attached(&self) -> Vec<AttachedSession> {
        HttpLink::attached(self, None).into_iter().collect()
    }

    fn detach(&self) -> BoxFuture<'_, ()> {
        self.stop();
        Box::pin(async {})
    }
}

/// Sends `notifications/cancelled` upstream for a call abandoned before its answer.
fn send_cancel(link: &Weak<HttpLink>, id: Id) {
    let Some(link) = link.upgrade() else {
        return;
    };
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            let params = meta::cancelled_params(&id, "cancelled by the gateway");
            let n = Notification { method: method::CANCELLED.into(), params: Some(params) };
            if let Err(e) = link.notify(n).await {
                tracing::debug!(upstream = %link.up.name, error = %e, "could not deliver a cancellation");
            }
        });
    }
}
