//! Client sessions (legacy Streamable HTTP era): the gateway session a client holds, the
//! upstream links behind it, and the mapping of everything that flows back to the client.

pub(crate) mod asking;
pub(crate) mod cancelled;
pub(crate) mod relay;
pub(crate) mod replay;
mod resume;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub, dead_code))]
pub mod sealed;
mod server_request;
pub(crate) mod signal;
pub(crate) mod table;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) use table::{SessionTable, mint_id};

use crate::catalog::ResourceCatalog;
use crate::hashing::Map as HashMap;
use crate::identity::Principal;
use crate::jsonrpc::Id;
use parking_lot::Mutex;
use signal::CancelSignal;

use crate::call::{EVENT_BUFFER, EventSink, EventTx, Link};

/// Capacity of the queue of messages waiting for the client's GET stream.
pub(crate) const OUTBOX_BUFFER: usize = 1024;

/// Which upstreams a session reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Scope {
    /// `/mcp`: every upstream, names prefixed.
    Aggregate,
    /// `/mcp/<upstream>`: one upstream, names unchanged.
    Single(Arc<str>),
}

/// The client front that opened a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Front {
    /// Streamable HTTP with `Mcp-Session-Id` (2025-03-26 … 2025-11-25).
    StreamableHttp,
    /// HTTP+SSE (2024-11-05): an event stream and its POST endpoint.
    Sse,
    /// `seawall stdio`: the one client on stdin and stdout.
    Stdio,
    /// A context of modern (2026-07-28) clients, which open no sessions of their own.
    Modern,
}

impl Front {
    /// Every front, in the order the metrics list them.
    pub(crate) const ALL: [Front; 4] = [Front::StreamableHttp, Front::Sse, Front::Stdio, Front::Modern];

    /// Its name in metrics and the status page.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Front::StreamableHttp => "streamable_http",
            Front::Sse => "sse",
            Front::Stdio => "stdio",
            Front::Modern => "modern",
        }
    }
}

/// The state of one upstream for one session.
#[derive(Clone)]
pub(crate) enum Slot {
    /// Connected.
    Up(Link),
    /// Not connected; the next request that needs it tries again.
    Down(String),
}

/// A server-initiated request relayed to the client, remembered until it is answered.
#[derive(Debug, Clone)]
pub(crate) struct ServerRequest {
    /// The upstream that asked.
    pub upstream: Arc<str>,
    /// Which of its endpoints, for pooled upstreams.
    pub endpoint: Option<u16>,
    /// The upstream's id for it.
    pub id: Id,
}

/// One client session.
pub(crate) struct Session {
    /// The id the client sends in `Mcp-Session-Id`: set once (sealed, see
    /// [`Session::assign_id`]), else random on first use.
    id: std::sync::OnceLock<String>,
    /// The keys that seal the gateway's ids for server requests, when the session's own
    /// id is sealed.
    keys: std::sync::OnceLock<Arc<sealed::SessionKeys>>,
    /// A small number identifying the session in subscriptions and logs.
    pub key: u64,
    /// Which upstreams it reaches.
    pub scope: Scope,
    /// The negotiated protocol version.
    pub version: String,
    /// The client's `initialize` params (capabilities and info), forwarded to new upstream sessions.
    pub client_capabilities: Value,
    /// The client's info.
    pub client_info: Value,
    /// Per-upstream links.
    slots: Mutex<HashMap<Arc<str>, Slot>>,
    /// Serialises reconnection attempts.
    pub(crate) reconnect: tokio::sync::Mutex<()>,
    /// Where resources and templates live, learnt from list results.
    pub resources: Mutex<ResourceCatalog>,
    events_tx: EventTx,
    outbox_tx: mpsc::Sender<String>,
    outbox_rx: Mutex<Option<mpsc::Receiver<String>>>,
    /// Server-initiated requests relayed to the client: gateway id → where they came from.
    server_requests: Mutex<HashMap<Id, ServerRequest>>,
    next_server_request: AtomicU64,
    /// In-flight client requests, by client id.
    inflight: Mutex<HashMap<Id, CancelSignal>>,
    last_seen: Mutex<Instant>,
    pump: Mutex<Option<tokio::task::AbortHandle>>,
    /// Fired when the session ends, so that streams tied to it close.
    ended: CancellationToken,
    /// The client has opened its GET stream: upstream links open theirs too.
    streaming: std::sync::atomic::AtomicBool,
    /// Told the name of an upstream that announced its tools changed.
    tools_changed: std::sync::OnceLock<ToolsChanged>,
    /// The principal that opened the session, when clients authenticate: requests of the
    /// session must come from the same one.
    principal: std::sync::OnceLock<Arc<Principal>>,
    /// The session stands for modern-era (stateless) clients: no client reads its GET
    /// stream; messages for it go to its `subscriptions/listen` streams (or nowhere).
    stateless: std::sync::atomic::AtomicBool,
    /// The messages not tied to a request of a stateless session, for its listeners.
    listeners: tokio::sync::broadcast::Sender<String>,
    /// The client's address when it opened the session, if the transport has one.
    peer: std::sync::OnceLock<IpAddr>,
    /// The resumable SSE streams towards a Streamable HTTP client.
    streams: replay::Streams,
    /// A Streamable HTTP client's requests in flight, with whether it cancelled them.
    cancels: cancelled::InFlight,
    /// The front that opened the session, set once by the gateway as it opens it.
    front: std::sync::OnceLock<Front>,
    /// A stateless session's requests that its upstreams may ask the client something for.
    pub askers: Arc<asking::Askers>,
}

/// What a session does when an upstream announces `notifications/tools/list_changed`.
pub(crate) type ToolsChanged = Arc<dyn Fn(&str) + Send + Sync>;

static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

/// Messages buffered per `subscriptions/listen` stream; a listener that lags loses the
/// oldest (list changes are hints to refetch, so losing some is safe).
const LISTEN_BUFFER: usize = 64;

impl Session {
    /// A new session (with a fresh unguessable id unless one is assigned before first
    /// use); starts the task that relays upstream events not tied to a request into the
    /// client's GET stream.
    pub(crate) fn new(scope: Scope, version: String, client_capabilities: Value, client_info: Value) -> Arc<Session> {
        let (events_tx, events_rx) = crate::call::events(EVENT_BUFFER);
        let (outbox_tx, outbox_rx) = mpsc::channel(OUTBOX_BUFFER);
        let session = Arc::new(Session {
            id: std::sync::OnceLock::new(),
            keys: std::sync::OnceLock::new(),
            key: NEXT_KEY.fetch_add(1, Ordering::Relaxed),
            scope,
            version,
            client_capabilities,
            client_info,
            slots: Mutex::new(HashMap::default()),
            reconnect: tokio::sync::Mutex::new(()),
            resources: Mutex::new(ResourceCatalog::default()),
            events_tx,
            outbox_tx,
            outbox_rx: Mutex::new(Some(outbox_rx)),
            server_requests: Mutex::new(HashMap::default()),
            next_server_request: AtomicU64::new(1),
            inflight: Mutex::new(HashMap::default()),
            last_seen: Mutex::new(Instant::now()),
            pump: Mutex::new(None),
            ended: CancellationToken::new(),
            streaming: std::sync::atomic::AtomicBool::new(false),
            tools_changed: std::sync::OnceLock::new(),
            principal: std::sync::OnceLock::new(),
            stateless: std::sync::atomic::AtomicBool::new(false),
            listeners: tokio::sync::broadcast::channel(LISTEN_BUFFER).0,
            peer: std::sync::OnceLock::new(),
            streams: replay::Streams::default(),
            cancels: cancelled::InFlight::default(),
            front: std::sync::OnceLock::new(),
            askers: Arc::default(),
        });
        let pump = tokio::spawn(relay::pump_unrelated(Arc::downgrade(&session), events_rx));
        *session.pump.lock() = Some(pump.abort_handle());
        session
    }

    /// The id the client sends in `Mcp-Session-Id`.
    pub(crate) fn id(&self) -> &str {
        self.id.get_or_init(table::mint_id)
    }

    /// Gives the session its id (a sealed one), unless it already has one; whether it
    /// took it.
    pub(crate) fn assign_id(&self, id: String) -> bool {
        self.id.set(id).is_ok()
    }

    /// Seals the gateway's ids for the session's server requests with `keys`, so that
    /// the client's answer finds its upstream from any replica (once).
    pub(crate) fn seal_requests_with(&self, keys: Arc<sealed::SessionKeys>) {
        let _ = self.keys.set(keys);
    }

    /// Whether the session's id is sealed (other replicas sharing the key may resume it).
    pub(crate) fn is_sealed(&self) -> bool {
        self.keys.get().is_some()
    }

    /// A sink for events of `upstream` that are not tied to a request.
    pub(crate) fn event_sink(&self, upstream: &Arc<str>) -> EventSink {
        EventSink::new(Arc::clone(upstream), self.events_tx.clone())
    }

    /// Records a link (or its failure) for an upstream, subscribing to its events.
    pub(crate) fn set_slot(&self, upstream: &Arc<str>, slot: Slot) {
        if let Slot::Up(link) = &slot {
            link.subscribe(self.key, self.event_sink(upstream));
            if self.streaming.load(Ordering::SeqCst) {
                let link = link.clone();
                tokio::spawn(async move { link.want_unrelated_stream().await });
            }
        }
        self.slots.lock().insert(Arc::clone(upstream), slot);
    }

    /// The slot of an upstream.
    pub(crate) fn slot(&self, upstream: &str) -> Option<Slot> {
        self.slots.lock().get(upstream).cloned()
    }

    /// Takes the slot of an upstream: the next request that needs it opens a new link.
    pub(crate) fn take_slot(&self, upstream: &str) -> Option<Slot> {
        self.slots.lock().remove(upstream)
    }

    /// All connected links with their upstream names.
    pub(crate) fn links(&self) -> Vec<(Arc<str>, Link)> {
        self.slots
            .lock()
            .iter()
            .filter_map(|(name, slot)| match slot {
                Slot::Up(link) => Some((Arc::clone(name), link.clone())),
                Slot::Down(_) => None,
            })
            .collect()
    }

    /// Takes every slot (the session is ending).
    pub(crate) fn take_slots(&self) -> Vec<(Arc<str>, Slot)> {
        self.slots.lock().drain().collect()
    }

    /// Marks the session as used now.
    pub(crate) fn touch(&self) {
        *self.last_seen.lock() = Instant::now();
    }

    /// When the session was last used.
    pub(crate) fn last_seen(&self) -> Instant {
        *self.last_seen.lock()
    }

    /// Registers an in-flight client request; `None` if the id is already in flight.
    pub(crate) fn begin_request(&self, id: &Id) -> Option<CancelSignal> {
        let mut inflight = self.inflight.lock();
        if inflight.contains_key(id) {
            return None;
        }
        let signal = CancelSignal::new();
        inflight.insert(id.clone(), signal.clone());
        Some(signal)
    }

    /// Forgets an in-flight request.
    pub(crate) fn end_request(&self, id: &Id) {
        self.inflight.lock().remove(id);
    }

    /// Cancels an in-flight client request (the client sent `notifications/cancelled`).
    pub(crate) fn cancel_request(&self, id: &Id) -> bool {
        match self.inflight.lock().get(id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// How many client requests are in flight.
    pub(crate) fn inflight(&self) -> usize {
        self.inflight.lock().len()
    }

    /// Queues a message for the client's GET stream; dropped (with a log line) when the
    /// queue is full, so a client that never reads cannot grow memory.
    pub(crate) fn push_outbox(&self, message: String) {
        if self.is_stateless() {
            if self.listeners.send(message).is_err() {
                tracing::debug!(session = self.key, "dropped a message not tied to a request: nobody listens");
            }
            return;
        }
        if self.outbox_tx.try_send(message).is_err() {
            tracing::warn!(session = self.key, "dropped a message for the client: its GET stream queue is full");
        }
    }

    /// Takes the GET stream's queue; `None` when a GET stream is already open.
    pub(crate) fn take_outbox(&self) -> Option<mpsc::Receiver<String>> {
        self.outbox_rx.lock().take()
    }

    /// The client opened its GET stream: from now on every upstream link keeps its own
    /// stream for messages not tied to a request (opened lazily, so a session whose
    /// client never listens holds no upstream connection).
    pub(crate) async fn open_upstream_streams(&self) {
        self.streaming.store(true, Ordering::SeqCst);
        for (_, link) in self.links() {
            link.want_unrelated_stream().await;
        }
    }

    /// Records the front that opened the session (once; later calls change nothing).
    pub(crate) fn set_front(&self, front: Front) {
        let _ = self.front.set(front);
    }

    /// The front that opened the session (Streamable HTTP unless the gateway said
    /// otherwise).
    pub(crate) fn front(&self) -> Front {
        self.front.get().copied().unwrap_or(Front::StreamableHttp)
    }

    /// A Streamable HTTP client's requests in flight, with whether it cancelled them.
    pub(crate) fn cancels(&self) -> &cancelled::InFlight {
        &self.cancels
    }

    /// The resumable SSE streams of a Streamable HTTP client.
    pub(crate) fn streams(&self) -> &replay::Streams {
        &self.streams
    }

    /// The resumable GET stream of a Streamable HTTP client. Made on first use, when it
    /// takes the GET stream's queue for good: a task moves the queued messages into the
    /// stream, whose buffer then holds them for whichever connection reads it.
    pub(crate) fn get_stream(&self, limits: crate::config::ReplayBufferConfig) -> Arc<replay::ResumableStream> {
        let (stream, made) = self.streams.get_stream(limits);
        if made {
            match self.take_outbox() {
                Some(rx) => {
                    tokio::spawn(relay::pump_outbox(rx, Arc::clone(&stream), self.ended()));
                }
                None => tracing::warn!(session = self.key, "the GET stream's queue was taken: its messages are lost"),
            }
        }
        stream
    }

    /// Binds the session to the principal that opens it (once).
    pub(crate) fn bind_principal(&self, principal: Arc<Principal>) {
        let _ = self.principal.set(principal);
    }

    /// A listener for the messages of a stateless session not tied to a request.
    pub(crate) fn listen(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.listeners.subscribe()
    }

    /// Whether a `subscriptions/listen` stream reads the session (then it is not idle).
    pub(crate) fn is_listened(&self) -> bool {
        self.listeners.receiver_count() > 0
    }

    /// Whether the session may be let go to make room for a newcomer of its address or
    /// principal: nothing of it is under way — no request in flight (a modern context's
    /// call waiting for its client's input is one), no GET or `subscriptions/listen`
    /// stream read — and its client holds it by id alone (Streamable HTTP, or a modern
    /// context). An HTTP+SSE session lives as long as its stream and the stdio one as
    /// long as the process: neither is ever idle in this sense.
    pub(crate) fn is_idle(&self) -> bool {
        matches!(self.front(), Front::StreamableHttp | Front::Modern)
            && self.inflight() == 0
            && !self.is_listened()
            && !self.streams.get_stream_read()
    }

    /// Marks the session as standing for modern-era (stateless) clients.
    pub(crate) fn mark_stateless(&self) {
        self.stateless.store(true, Ordering::Relaxed);
    }

    /// Whether the session stands for modern-era clients (never addressed by an id).
    pub(crate) fn is_stateless(&self) -> bool {
        self.stateless.load(Ordering::Relaxed)
    }

    /// The principal the session is bound to, if clients authenticate.
    pub(crate) fn principal(&self) -> Option<&Arc<Principal>> {
        self.principal.get()
    }

    /// Records the address the client opened the session from (once).
    pub(crate) fn bind_peer(&self, peer: IpAddr) {
        let _ = self.peer.set(peer);
    }

    /// The address the client opened the session from, when the transport has one.
    pub(crate) fn peer(&self) -> Option<IpAddr> {
        self.peer.get().copied()
    }

    /// Whether a request made as `principal` may use this session: the same principal
    /// that opened it (or none, when neither authenticated). Identity is the credential
    /// kind and name, so a client that renews its JWT keeps its session.
    pub(crate) fn admits(&self, principal: Option<&Principal>) -> bool {
        crate::identity::same_caller(self.principal.get().map(|p| &**p), principal)
    }

    /// Sets what happens when an upstream announces that its tools changed (once).
    pub(crate) fn on_tools_changed(&self, hook: ToolsChanged) {
        let _ = self.tools_changed.set(hook);
    }

    /// An upstream announced that its tools changed.
    pub(crate) fn tools_changed(&self, upstream: &str) {
        if let Some(hook) = self.tools_changed.get() {
            hook(upstream);
        }
    }

    /// Fires when the session ends (DELETE, idle expiry, shutdown).
    pub(crate) fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// Stops relaying events and ends the streams tied to the session (it is ending).
    pub(crate) fn stop(&self) {
        self.ended.cancel();
        self.streams.clear();
        if let Some(pump) = self.pump.lock().take() {
            pump.abort();
        }
        self.cancel_requests();
    }

    /// Ends every client request in flight at once, as if each had been cancelled (the
    /// end of a shutdown's grace period).
    pub(crate) fn cancel_requests(&self) {
        for token in self.inflight.lock().values() {
            token.cancel();
        }
    }
}
