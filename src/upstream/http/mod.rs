//! Streamable HTTP upstreams: one [`HttpLink`] per client session, all sharing one
//! pooled [`UpstreamClient`] per upstream. A link speaks the session era
//! (`initialize`, `Mcp-Session-Id`) or, with a server that answers `server/discover`,
//! the stateless modern era (`modern.rs`); `protocol: auto` remembers which per
//! upstream.

mod modern;
mod stream;

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Uri};
use tokio::task::AbortHandle;

use parking_lot::Mutex;

use super::LinkShared;
use super::cancel::CancelGuard;
use super::client::{UpstreamClient, UpstreamResponse};
use super::failure::{handshake_error, refuses_era, status_error};
use super::sse_legacy::{SseLink, SseUpstream};
use crate::call::{
    AttachedSession, BoxFuture, EventSink, Link, Reply, Transport, UpstreamCall, UpstreamError, fresh_id,
};
use crate::config::UpstreamProtocol;
use crate::jsonrpc::{self, Id, Notification};
use crate::mcp::init::{InitParams, InitResult};
use crate::mcp::{meta, method};

const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
const LAST_EVENT_ID: HeaderName = HeaderName::from_static("last-event-id");
/// How long a request waits for the session's GET stream on its way (see
/// `HttpLink::get_opening`); an upstream slower than that to answer a GET is not waited
/// for.
const GET_OPEN_WAIT: Duration = Duration::from_secs(2);
/// One configured Streamable HTTP upstream: its URL, static headers and connection pool.
pub(crate) struct HttpUpstream {
    /// The upstream's name (for logs).
    pub name: Arc<str>,
    client: UpstreamClient,
    url: reqwest::Url,
    /// `url`, parsed once for requests.
    uri: Uri,
    /// The configured static headers.
    headers: HeaderMap,
    /// The static headers of a POST: the configured ones, `Content-Type` and `Accept`.
    post_headers: HeaderMap,
    /// The static headers of the GET stream: the configured ones and `Accept`.
    get_headers: HeaderMap,
    max_message_bytes: usize,
    /// The era to speak (`protocol:`).
    protocol: UpstreamProtocol,
    /// With `protocol: auto`, the era the last handshake found (`modern::UNKNOWN`,
    /// `LEGACY_ONLY`, `MODERN_ONLY`, `NEITHER` or `SSE_ONLY`).
    detected: AtomicU8,
    /// With `protocol: auto`, the same URL as an HTTP+SSE (2024-11-05) server, tried when
    /// both Streamable HTTP eras are refused.
    sse_fallback: Option<Arc<SseUpstream>>,
    /// The era of the last handshake that succeeded (`SPOKE_*`), for status pages.
    spoke: AtomicU8,
    /// Its last large results (list pages), found again in its answers rather than
    /// read again.
    known: jsonrpc::KnownResults,
}

/// No handshake has succeeded yet.
const SPOKE_NONE: u8 = 0;
/// The last handshake was `initialize` (the session era).
const SPOKE_LEGACY: u8 = 1;
/// The last handshake was `server/discover` (the modern era).
const SPOKE_MODERN: u8 = 2;
/// The last handshake was HTTP+SSE's, at the same URL (`auto` fell back to it).
const SPOKE_SSE: u8 = 3;

/// An HTTP upstream's protocol era as a status page shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EraStatus {
    /// The configured `protocol`: `auto`, `modern` or `legacy`.
    pub protocol: &'static str,
    /// With `auto`, what handshakes found: `unknown` (nothing refused yet, so both are
    /// tried), `legacy_only`, `modern_only` or `sse_only`; `None` for a pinned era.
    pub detected: Option<&'static str>,
    /// The era of the last handshake that succeeded: `legacy`, `modern` or `sse`; `None`
    /// before one.
    pub speaking: Option<&'static str>,
}

impl HttpUpstream {
    /// Builds the upstream and its pooled client, speaking the session era; see
    /// [`HttpUpstream::speaking`].
    pub(crate) fn new(
        name: &str,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
        connect_timeout: Duration,
        max_message_bytes: usize,
    ) -> anyhow::Result<HttpUpstream> {
        let map = super::header_map(headers)?;
        let client = UpstreamClient::new(connect_timeout)?;
        let url = reqwest::Url::parse(url)?;
        let uri: Uri = url.as_str().parse()?;
        let mut post_headers = map.clone();
        post_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        post_headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        let mut get_headers = map.clone();
        get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        Ok(HttpUpstream {
            name: Arc::from(name),
            client,
            url,
            uri,
            headers: map,
            post_headers,
            get_headers,
            max_message_bytes,
            protocol: UpstreamProtocol::Legacy,
            detected: AtomicU8::new(modern::UNKNOWN),
            sse_fallback: None,
            spoke: AtomicU8::new(SPOKE_NONE),
            known: jsonrpc::KnownResults::default(),
        })
    }

    /// The same upstream, speaking `protocol`.
    pub(crate) fn speaking(mut self, protocol: UpstreamProtocol) -> HttpUpstream {
        self.protocol = protocol;
        self
    }

    /// The same upstream, falling back to HTTP+SSE at its URL when it refuses both
    /// Streamable HTTP eras (only with `protocol: auto`).
    pub(crate) fn with_sse_fallback(mut self, sse: SseUpstream) -> HttpUpstream {
        if self.protocol == UpstreamProtocol::Auto {
            self.sse_fallback = Some(Arc::new(sse));
        }
        self
    }

    /// The URL of its MCP endpoint.
    pub(crate) fn url(&self) -> &reqwest::Url {
        &self.url
    }

    /// The configured era, what `auto` found, and what the last handshake spoke.
    pub(crate) fn era(&self) -> EraStatus {
        let protocol = match self.protocol {
            UpstreamProtocol::Auto => "auto",
            UpstreamProtocol::Modern => "modern",
            UpstreamProtocol::Legacy => "legacy",
        };
        let detected = (self.protocol == UpstreamProtocol::Auto).then(|| match self.detected.load(Ordering::Relaxed) {
            modern::LEGACY_ONLY => "legacy_only",
            modern::MODERN_ONLY => "modern_only",
            modern::SSE_ONLY => "sse_only",
            _ => "unknown",
        });
        let speaking = match self.spoke.load(Ordering::Relaxed) {
            SPOKE_LEGACY => Some("legacy"),
            SPOKE_MODERN => Some("modern"),
            SPOKE_SSE => Some("sse"),
            _ => None,
        };
        EraStatus { protocol, detected, speaking }
    }

    /// Remembers what handshakes found (`protocol: auto`).
    fn remember(&self, found: u8) {
        if self.protocol == UpstreamProtocol::Auto && self.detected.swap(found, Ordering::Relaxed) != found {
            let name = match found {
                modern::MODERN_ONLY => "modern only (2026-07-28)",
                modern::LEGACY_ONLY => "legacy only (initialize)",
                modern::SSE_ONLY => "HTTP+SSE only (2024-11-05)",
                // A step on the way to HTTP+SSE, which says what it found.
                modern::NEITHER => return,
                _ => "unknown: detect again",
            };
            tracing::info!(upstream = %self.name, era = name, "upstream protocol era");
        }
    }

    /// A session with the upstream in the era it speaks: Streamable HTTP (modern or
    /// legacy, see [`HttpLink::eras_to_try`]) within `connect_timeout`, or, with
    /// `protocol: auto`, HTTP+SSE at the same URL once both of those were refused —
    /// remembered, and asked again when the HTTP+SSE handshake is refused in turn.
    pub(crate) async fn connect(
        self: &Arc<Self>,
        init: &InitParams,
        connect_timeout: Duration,
    ) -> Result<Link, UpstreamError> {
        if let Some(sse) = self.sse_fallback.as_ref().filter(|_| self.detected() == modern::SSE_ONLY) {
            match SseLink::connect(Arc::clone(sse), init.clone()).await {
                Ok(link) => {
                    self.spoke.store(SPOKE_SSE, Ordering::Relaxed);
                    return Ok(link);
                }
                Err(e) if refuses_era(&e) => self.remember(modern::UNKNOWN),
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
            (Err(e), Some(sse)) if self.detected() == modern::NEITHER => {
                tracing::debug!(upstream = %self.name, error = %e, "both Streamable HTTP eras refused: trying HTTP+SSE");
                let link = SseLink::connect(Arc::clone(sse), init.clone()).await?;
                self.remember(modern::SSE_ONLY);
                self.spoke.store(SPOKE_SSE, Ordering::Relaxed);
                Ok(link)
            }
            (Err(e), _) => Err(e),
        }
    }

    fn detected(&self) -> u8 {
        self.detected.load(Ordering::Relaxed)
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
            server_info: serde_json::Value::Null,
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

    /// The handshake of the first era that works, of those [`HttpLink::eras_to_try`]
    /// names: `server/discover` (modern) or `initialize` (legacy). An era is given up for
    /// the next only when the server refused it (not when it could not be reached); a
    /// refusal followed by success is remembered, so later sessions go straight to the
    /// era that works.
    async fn handshake(self: &Arc<Self>) -> Result<(), UpstreamError> {
        let eras = self.eras_to_try();
        let mut refused = false;
        let mut last = UpstreamError::Handshake("no protocol era to try".into());
        for modern_era in eras {
            let mut attempt = self.handshake_in(modern_era).await;
            if matches!(attempt, Err(UpstreamError::Io(_))) {
                // The connection broke before the answer: most often a pooled one the
                // server closed as it went idle. A handshake opens nothing yet that
                // sending it again could duplicate: once more, on another connection.
                attempt = self.handshake_in(modern_era).await;
            }
            match attempt {
                Ok(()) => {
                    self.up.spoke.store(if modern_era { SPOKE_MODERN } else { SPOKE_LEGACY }, Ordering::Relaxed);
                    if refused {
                        self.up.remember(if modern_era { modern::MODERN_ONLY } else { modern::LEGACY_ONLY });
                    }
                    if modern_era {
                        self.ready.store(true, Ordering::SeqCst);
                    }
                    return Ok(());
                }
                // An upstream that failed (unreachable, timed out, overloaded) said nothing
                // about the era: the handshake fails as it is, and nothing is remembered.
                Err(e) if !refuses_era(&e) => return Err(handshake_error(e)),
                Err(e) => {
                    let era = if modern_era { "modern" } else { "legacy" };
                    tracing::debug!(upstream = %self.up.name, era, error = %e, "the upstream refused this era");
                    refused = true;
                    last = handshake_error(e);
                }
            }
        }
        self.up.remember(if self.up.sse_fallback.is_some() { modern::NEITHER } else { modern::UNKNOWN });
        Err(last)
    }

    /// The handshake of one era: `server/discover` (modern) or `initialize` (legacy).
    async fn handshake_in(self: &Arc<Self>, modern_era: bool) -> Result<(), UpstreamError> {
        if modern_era { self.discover().await } else { self.initialize().await }
    }

    /// The legacy handshake. Its errors are as the exchange failed, for
    /// [`refuses_era`]; the caller makes them handshake errors.
    async fn initialize(self: &Arc<Self>) -> Result<(), UpstreamError> {
        let id = fresh_id();
        let body = jsonrpc::encode_request(&id, method::INITIALIZE, Some(&self.init_params.to_raw()));
        let resp = self.post(body, &SessionState::default()).await?;
        let session_id = resp.headers().get(SESSION_HEADER).and_then(|v| shared_value(v.to_str().ok()?));
        let reply = match self.read_answer(resp, &id, None, &SessionState::default()).await? {
            Outcome::Reply(reply) => reply,
            _ => return Err(UpstreamError::Handshake("no answer to initialize".into())),
        };
        let result = reply.map_err(|err| UpstreamError::Handshake(format!("initialize refused: {}", err.get())))?;
        let init = InitResult::parse(result)
            .ok_or_else(|| UpstreamError::Handshake("initialize result lacks protocolVersion".into()))?;
        let snapshot = {
            let mut st = self.state.lock();
            st.session_id = session_id;
            st.version = shared_value(&init.protocol_version);
            st.init = Some(Arc::new(init));
            st.generation += 1;
            st.clone()
        };
        let note = jsonrpc::encode_notification(method::INITIALIZED, None);
        match self.post(note, &snapshot).await {
            Ok(resp) if resp.status().is_success() => {}
            Ok(resp) => {
                tracing::warn!(upstream = %self.up.name, status = %resp.status(), "upstream refused notifications/initialized")
            }
            Err(e) => return Err(e),
        }
        self.ready.store(true, Ordering::SeqCst);
        // A client that may be asked something gets the stream it will be asked on before
        // its first request reaches the upstream; others get one when they listen.
        if self.init_params.may_be_asked() {
            self.get_wanted.store(true, Ordering::SeqCst);
        }
        if self.get_wanted.load(Ordering::SeqCst) {
            self.start_get_stream();
        }
        Ok(())
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

    /// Re-initialises after the upstream forgot our session, unless another caller already did.
    async fn reinitialize(self: &Arc<Self>, seen_generation: u64) -> Result<(), UpstreamError> {
        let _guard = self.reinit.lock().await;
        if self.snapshot().generation != seen_generation {
            return Ok(());
        }
        tracing::info!(upstream = %self.up.name, "upstream session expired; re-initialising");
        self.handshake().await.map_err(|e| UpstreamError::SessionLost(e.to_string()))
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
        for (name, value) in extra {
            match (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str())) {
                (Ok(name), Ok(value)) => {
                    headers.push((name, value));
                }
                _ => {
                    tracing::debug!(upstream = %self.up.name, header = %name, "header not sent: not a valid HTTP header")
                }
            }
        }
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
