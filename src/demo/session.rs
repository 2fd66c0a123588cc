//! Per-client state of the demo server: what the client declared at
//! `initialize`, its logging level and subscriptions, the calls it may cancel,
//! and the requests the server is waiting for it to answer.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::{AbortHandle, JoinHandle};

use super::rpc::{self, RpcError, id_key};

/// How long a server-to-client request may wait for its answer.
const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

/// Which transport a session lives on; a few failures look different on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// Newline-delimited JSON over stdin/stdout.
    Stdio,
    /// Streamable HTTP.
    Http,
    /// HTTP+SSE (2024-11-05): every answer travels on the session's one event stream.
    Sse,
}

/// Where messages to the client go: a stdio writer, a POST's SSE stream or a
/// session's standalone GET stream. Sending to a closed sink drops the message.
#[derive(Debug, Clone)]
pub(crate) struct Outbound(mpsc::UnboundedSender<Value>);

impl Outbound {
    /// A new sink and the receiver that drains it.
    pub(crate) fn channel() -> (Self, mpsc::UnboundedReceiver<Value>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self(tx), rx)
    }

    /// Queue `msg`; returns false if nobody is listening any more.
    pub(crate) fn send(&self, msg: Value) -> bool {
        self.0.send(msg).is_ok()
    }

    /// True once the receiving side is gone.
    pub(crate) fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// MCP logging levels, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum LogLevel {
    /// `debug`
    Debug,
    /// `info`
    Info,
    /// `notice`
    Notice,
    /// `warning`
    Warning,
    /// `error`
    Error,
    /// `critical`
    Critical,
    /// `alert`
    Alert,
    /// `emergency`
    Emergency,
}

impl LogLevel {
    /// Parse a level name as used on the wire.
    pub(crate) fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "debug" => Self::Debug,
            "info" => Self::Info,
            "notice" => Self::Notice,
            "warning" => Self::Warning,
            "error" => Self::Error,
            "critical" => Self::Critical,
            "alert" => Self::Alert,
            "emergency" => Self::Emergency,
            _ => return None,
        })
    }
}

/// One client connection (stdio) or one `Mcp-Session-Id` (HTTP).
#[derive(Debug)]
pub(crate) struct Session {
    id: Option<String>,
    transport: Transport,
    next_request: AtomicU64,
    next_generation: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    client_capabilities: Value,
    log_level: LogLevel,
    subscriptions: HashSet<String>,
    /// Server-to-client requests awaiting an answer, by id key.
    pending: HashMap<String, oneshot::Sender<Result<Value, RpcError>>>,
    /// Requests being handled, by id key, with a generation so a finished task
    /// never removes a newer entry that reused its id.
    in_flight: HashMap<String, (u64, AbortHandle)>,
    standalone: Option<Outbound>,
}

impl Session {
    /// A fresh session; `id` is the HTTP session id (None on stdio).
    pub(crate) fn new(id: Option<String>, transport: Transport) -> Arc<Self> {
        Arc::new(Self {
            id,
            transport,
            next_request: AtomicU64::new(1),
            next_generation: AtomicU64::new(1),
            state: Mutex::new(State {
                client_capabilities: json!({}),
                log_level: LogLevel::Debug,
                subscriptions: HashSet::new(),
                pending: HashMap::new(),
                in_flight: HashMap::new(),
                standalone: None,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poison| poison.into_inner())
    }

    /// The HTTP session id, if any.
    pub(crate) fn id(&self) -> Option<&str> {
        self.id.as_deref()
    }

    /// The transport this session lives on.
    pub(crate) fn transport(&self) -> Transport {
        self.transport
    }

    /// Remember the capabilities the client declared at `initialize`.
    pub(crate) fn set_client_capabilities(&self, caps: Value) {
        self.state().client_capabilities = caps;
    }

    /// Whether the client declared capability `name` (e.g. `sampling`, `roots`).
    pub(crate) fn client_supports(&self, name: &str) -> bool {
        self.state().client_capabilities.get(name).is_some_and(|v| !v.is_null())
    }

    /// Set the minimum level of `notifications/message` sent to this client.
    pub(crate) fn set_log_level(&self, level: LogLevel) {
        self.state().log_level = level;
    }

    /// Whether a log message at `level` should be sent.
    pub(crate) fn wants_log(&self, level: LogLevel) -> bool {
        level >= self.state().log_level
    }

    /// Subscribe to updates of `uri`.
    pub(crate) fn subscribe(&self, uri: &str) {
        self.state().subscriptions.insert(uri.to_owned());
    }

    /// Drop a subscription.
    pub(crate) fn unsubscribe(&self, uri: &str) {
        self.state().subscriptions.remove(uri);
    }

    /// Whether the client is subscribed to `uri`.
    pub(crate) fn is_subscribed(&self, uri: &str) -> bool {
        self.state().subscriptions.contains(uri)
    }

    /// Install the standalone stream (HTTP GET). Refused (false) while another
    /// one is still open.
    pub(crate) fn open_standalone(&self, out: Outbound) -> bool {
        let mut state = self.state();
        if state.standalone.as_ref().is_some_and(|o| !o.is_closed()) {
            return false;
        }
        state.standalone = Some(out);
        true
    }

    /// Replace (or remove) the sink for messages not tied to a request.
    pub(crate) fn set_standalone(&self, out: Option<Outbound>) {
        self.state().standalone = out;
    }

    /// The sink for messages not tied to a request, if one is open.
    pub(crate) fn standalone(&self) -> Option<Outbound> {
        self.state().standalone.clone().filter(|out| !out.is_closed())
    }

    /// Send a request to the client through `out` and wait for its answer.
    /// Ids are `"demo-1"`, `"demo-2"`, ... within the session.
    pub(crate) async fn request(&self, out: &Outbound, method: &str, params: Value) -> Result<Value, RpcError> {
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        let id = json!(format!("demo-{n}"));
        let key = id_key(&id);
        let (tx, rx) = oneshot::channel();
        self.state().pending.insert(key.clone(), tx);
        // Forget the pending entry however this future ends (answer, timeout, abort).
        let _cleanup = PendingGuard { session: self, key: key.clone() };
        if !out.send(rpc::request(&id, method, params)) {
            return Err(RpcError::internal("client stream is closed"));
        }
        match tokio::time::timeout(CLIENT_ANSWER_TIMEOUT, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => Err(RpcError::internal("client went away before answering")),
            Err(_) => Err(RpcError::internal(format!("client did not answer {method} in time"))),
        }
    }

    /// Deliver the client's answer to a server request. False if no request
    /// with that id is waiting (late or unknown answers are ignored).
    pub(crate) fn complete(&self, id: &Value, outcome: Result<Value, RpcError>) -> bool {
        let Some(tx) = self.state().pending.remove(&id_key(id)) else {
            return false;
        };
        tx.send(outcome).is_ok()
    }

    /// Fail every server request still waiting (the client is gone).
    pub(crate) fn fail_pending(&self) {
        self.state().pending.clear();
    }

    /// Spawn the handling of request `id` so `notifications/cancelled` can abort it.
    pub(crate) fn spawn_cancellable<F>(self: &Arc<Self>, id: &Value, task: F) -> JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let key = id_key(id);
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        let guard = InFlightGuard { session: Arc::clone(self), key: key.clone(), generation };
        // Hold the lock across spawn so the task cannot finish (and untrack
        // itself) before it is tracked.
        let mut state = self.state();
        let handle = tokio::spawn(async move {
            let _guard = guard;
            task.await
        });
        state.in_flight.insert(key, (generation, handle.abort_handle()));
        handle
    }

    /// Abort the handling of request `id`. False if it is not running.
    pub(crate) fn cancel(&self, id: &Value) -> bool {
        // Take the handle out first: aborting happens outside the lock.
        let entry = self.state().in_flight.remove(&id_key(id));
        match entry {
            Some((_, handle)) => {
                handle.abort();
                true
            }
            None => false,
        }
    }

    /// Abort everything in flight and fail pending server requests (session end).
    pub(crate) fn close(&self) {
        let handles: Vec<AbortHandle> = {
            let mut state = self.state();
            state.pending.clear();
            state.standalone = None;
            state.in_flight.drain().map(|(_, (_, h))| h).collect()
        };
        for handle in handles {
            handle.abort();
        }
    }
}

struct PendingGuard<'a> {
    session: &'a Session,
    key: String,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.session.state().pending.remove(&self.key);
    }
}

struct InFlightGuard {
    session: Arc<Session>,
    key: String,
    generation: u64,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        let mut state = self.session.state();
        if state.in_flight.get(&self.key).is_some_and(|(g, _)| *g == self.generation) {
            state.in_flight.remove(&self.key);
        }
    }
}
