//! stdio upstreams: a supervised child process speaking newline-delimited JSON.
//!
//! The supervisor starts the process, performs the initialize handshake, restarts it with
//! exponential backoff when it dies (failing in-flight calls at once), and stops it the
//! polite way: close stdin, wait, SIGTERM, wait, SIGKILL. stderr is logged (without
//! credentials, at a bounded rate), never treated as an error; lines on stdout that are
//! not JSON-RPC are logged and skipped.
//!
//! This file holds the link calls use; `process` runs the child (spawn, handshake,
//! restarts, shutdown), `pipes` reads and writes its stdin and stdout, and `stderr`
//! logs its stderr, scrubbed and bounded.

mod pipes;
mod process;
mod stderr;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};

use parking_lot::Mutex;

use super::LinkShared;
use super::cancel::CancelGuard;
use crate::call::{BoxFuture, EventSink, Reply, Transport, UpstreamCall, UpstreamError, fresh_id};
use crate::jsonrpc::{self, Id, Notification};
use crate::mcp::init::{InitParams, InitResult};
use crate::mcp::{meta, method};
use process::supervise;

/// How to run one configured stdio upstream.
#[derive(Debug, Clone)]
pub(crate) struct StdioUpstream {
    /// The upstream's name (for logs).
    pub name: Arc<str>,
    /// Program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Variables of the gateway's environment passed on besides the baseline (`*`: all).
    pub inherit_env: Vec<String>,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// First restart delay.
    pub restart_base: Duration,
    /// Longest restart delay.
    pub restart_max: Duration,
    /// Wait after closing stdin before SIGTERM, and after SIGTERM before SIGKILL.
    pub shutdown_grace: Duration,
    /// Longest line accepted on stdout.
    pub max_line_bytes: usize,
    /// Time allowed for spawn + initialize, and for a call to wait for a restart.
    pub connect_timeout: Duration,
}

/// The state of the child process as calls see it.
#[derive(Clone)]
enum ProcState {
    Starting,
    Ready(Arc<Proc>),
    Down(String),
    Closed,
}

/// How much sooner than its attempt a call stops waiting for a process.
const READY_MARGIN: std::time::Duration = std::time::Duration::from_millis(5);

/// One running child process.
struct Proc {
    stdin: mpsc::Sender<String>,
    pending: Mutex<HashMap<Id, Pending>>,
    init: Arc<InitResult>,
}

struct Pending {
    /// Its answer, or how the process's death reads for it.
    tx: oneshot::Sender<Result<Reply, UpstreamError>>,
    related: EventSink,
    /// The tool called, for a `tools/call`.
    tool: Option<Arc<str>>,
}

/// A supervised stdio upstream.
pub(crate) struct StdioLink {
    up: Arc<StdioUpstream>,
    pub(crate) shared: LinkShared,
    init_params: InitParams,
    /// Whether client features (sampling, elicitation, roots) may be relayed: false when
    /// the process is shared by several client sessions.
    offers_client_features: bool,
    state: watch::Sender<ProcState>,
    closing: AtomicBool,
    /// The process that served crashed and its supervisor brings another up: waiting for
    /// it is not the upstream failing (a process that cannot start clears this).
    restarting: AtomicBool,
    closed_tx: watch::Sender<bool>,
    /// A slot of the upstream's process budget, released when the link goes.
    permit: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    /// The initialize result of the last process that completed its handshake.
    last_init: Mutex<Option<Arc<InitResult>>>,
    /// Times the process died and was restarted.
    restarts: AtomicU64,
    /// How the last process that failed to start ended, until one is ready.
    last_end: Mutex<Option<ProcessEnd>>,
    /// Why the last attempt to start a process failed, until one is ready: waiting for
    /// the next attempt would only wait (a command that does not exist, a handshake
    /// refused), so calls and sessions are answered at once meanwhile.
    start_failed: Mutex<Option<String>>,
    /// The tools that had a call in flight when the process last died: one in flight at
    /// the next death too is implicated in it.
    in_flight_at_death: Mutex<HashSet<Arc<str>>>,
}

/// The child process as a status page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProcessStatus {
    /// `starting`, `running`, `down` (waiting to restart) or `stopped`.
    pub state: &'static str,
    /// Why it is down, in seawall's own words (the exit status, a spawn error).
    pub reason: Option<String>,
    /// Times it died and was restarted.
    pub restarts: u64,
    /// While down after a failed start: the exit status of that process, when it
    /// exited by itself.
    pub exit_status: Option<String>,
    /// While down after a failed start: the last lines it wrote on stderr, sanitised.
    pub stderr: Vec<String>,
}

/// How a process that failed to start ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ProcessEnd {
    /// Its exit status (`exit status: 3`, `signal: 9 (SIGKILL)`), when it exited by
    /// itself; `None` when it had to be killed or never ran.
    pub status: Option<String>,
    /// The last lines it wrote on stderr, as written (bounded).
    pub stderr: Vec<String>,
}

/// Longest stderr line in a start failure's warning (bytes, escapes counted).
const END_LOG_LINE: usize = 256;

impl ProcessEnd {
    /// The stderr lines for seawall's own log: credentials removed, escaped, capped,
    /// joined by ` | ` (empty when it said nothing).
    pub(crate) fn for_log(&self) -> String {
        let lines: Vec<String> =
            self.stderr.iter().map(|l| crate::sanitize::redact_credentials(l, END_LOG_LINE)).collect();
        lines.join(" | ")
    }

    /// The stderr lines for views outside the log (`/readyz`, the status page, the
    /// admin API): sanitised as any upstream text that leaves the gateway.
    pub(crate) fn shown(&self) -> Vec<String> {
        self.stderr.iter().map(|l| crate::sanitize::text(l)).filter(|l| !l.is_empty()).collect()
    }
}

impl StdioLink {
    /// Starts the supervisor; the process starts and restarts in the background.
    pub(crate) fn spawn(
        up: Arc<StdioUpstream>,
        init_params: InitParams,
        offers_client_features: bool,
    ) -> Arc<StdioLink> {
        let link = Arc::new(StdioLink {
            up,
            shared: LinkShared::default(),
            init_params,
            offers_client_features,
            state: watch::channel(ProcState::Starting).0,
            closing: AtomicBool::new(false),
            restarting: AtomicBool::new(false),
            closed_tx: watch::channel(false).0,
            permit: Mutex::new(None),
            last_init: Mutex::new(None),
            restarts: AtomicU64::new(0),
            last_end: Mutex::new(None),
            start_failed: Mutex::new(None),
            in_flight_at_death: Mutex::new(HashSet::new()),
        });
        tokio::spawn(supervise(Arc::downgrade(&link)));
        link
    }

    /// Starts the supervisor and waits for the first successful handshake (up to the
    /// connect timeout); on failure the process is stopped again.
    pub(crate) async fn start(
        up: Arc<StdioUpstream>,
        init_params: InitParams,
        offers_client_features: bool,
    ) -> Result<Arc<StdioLink>, UpstreamError> {
        let link = StdioLink::spawn(up, init_params, offers_client_features);
        match link.ready(link.up.connect_timeout).await {
            Ok(_) => Ok(link),
            Err(e) => {
                link.close().await;
                Err(e)
            }
        }
    }

    /// Keeps a slot of the upstream's process budget until the link is closed.
    pub(crate) fn hold(&self, permit: tokio::sync::OwnedSemaphorePermit) {
        *self.permit.lock() = Some(permit);
    }

    /// Waits until the process is running and initialised (up to the connect timeout).
    pub(crate) async fn wait_ready(&self) -> Result<(), UpstreamError> {
        self.ready(self.up.connect_timeout).await.map(|_| ())
    }

    /// The initialize result of the running process, or while it is being restarted, of
    /// the last one: what the upstream serves does not go away with a crash.
    pub(crate) fn init_result(&self) -> Option<Arc<InitResult>> {
        if let ProcState::Ready(p) = &*self.state.borrow() {
            return Some(Arc::clone(&p.init));
        }
        self.last_init.lock().clone()
    }

    /// The process's state, and how often it was restarted.
    pub(crate) fn status(&self) -> ProcessStatus {
        let (state, reason) = match &*self.state.borrow() {
            ProcState::Starting => ("starting", None),
            ProcState::Ready(_) => ("running", None),
            // The reason may quote what the process said, JSON escapes and all: shown
            // sanitised like any upstream text that leaves the gateway, its escaped line
            // breaks made real first so that traces are recognised line by line.
            ProcState::Down(why) => {
                let lines = why.replace("\\r\\n", "\n").replace("\\n", "\n").replace("\\t", "\t").replace("\\\"", "\"");
                ("down", Some(crate::sanitize::text(&lines)))
            }
            ProcState::Closed => ("stopped", None),
        };
        let end = if state == "down" { self.last_end.lock().clone() } else { None };
        let (exit_status, stderr) = end.map(|end| (end.status.clone(), end.shown())).unwrap_or_default();
        ProcessStatus { state, reason, restarts: self.restarts.load(Ordering::Relaxed), exit_status, stderr }
    }

    /// Records the outcome of an attempt to start a process: `Some(why)` it failed.
    pub(super) fn started(&self, failure: Option<String>) {
        *self.start_failed.lock() = failure;
    }

    /// Whether the process is running and initialised now.
    pub(crate) fn is_running(&self) -> bool {
        matches!(&*self.state.borrow(), ProcState::Ready(_))
    }

    /// Waits for a running, initialised process, at most `limit` (a process being
    /// restarted is waited for, so a crash costs the calls that arrive meanwhile only time).
    async fn ready(&self, limit: Duration) -> Result<Arc<Proc>, UpstreamError> {
        let mut rx = self.state.subscribe();
        let wait = async {
            loop {
                match &*rx.borrow_and_update() {
                    ProcState::Ready(p) => return Ok(Arc::clone(p)),
                    ProcState::Closed => {
                        return Err(UpstreamError::NotRunning("the upstream is shut down".into()));
                    }
                    ProcState::Starting | ProcState::Down(_) => {
                        if let Some(why) = self.start_failed.lock().clone() {
                            return Err(UpstreamError::NotRunning(why));
                        }
                    }
                }
                if rx.changed().await.is_err() {
                    return Err(UpstreamError::NotRunning("the upstream supervisor stopped".into()));
                }
            }
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(r) => r,
            // A healthy process that crashed is on its way back: the wait said nothing
            // new about the upstream (the call that met the crash counted it).
            Err(_) if self.restarting.load(Ordering::Relaxed) => Err(UpstreamError::Restarting),
            Err(_) => Err(UpstreamError::NotRunning(match &*self.state.borrow() {
                ProcState::Down(why) => why.clone(),
                _ => "the upstream process did not become ready in time".into(),
            })),
        }
    }

    /// Sends a request and waits for its answer.
    pub(crate) async fn call(&self, call: &UpstreamCall) -> Result<Reply, UpstreamError> {
        // The wait for a process ends just before the attempt's time does, so that an
        // attempt that never reached a process fails as such, not as an unanswered one.
        let wait = call.attempt_deadline.unwrap_or_else(|| call.clock.deadline());
        let left = wait.saturating_duration_since(tokio::time::Instant::now()).saturating_sub(READY_MARGIN);
        let proc = self.ready(left).await?;
        let _progress = call.progress_token.as_ref().map(|t| self.shared.progress.register(t, call.events.clone()));
        let id = fresh_id();
        let (tx, rx) = oneshot::channel();
        let pending = Pending { tx, related: call.events.clone(), tool: call.tool.clone() };
        proc.pending.lock().insert(id.clone(), pending);
        let line = jsonrpc::encode_request(&id, &call.method, call.params.as_deref());
        if proc.stdin.send(line).await.is_err() {
            proc.pending.lock().remove(&id);
            return Err(UpstreamError::Restarting);
        }
        let weak = Arc::downgrade(&proc);
        let mut guard = CancelGuard::new(move |abandoned| end_call(&weak, &id, abandoned));
        let reply = rx.await.unwrap_or(Err(UpstreamError::ProcessExited { implicated: false }));
        guard.disarm();
        reply
    }

    /// Sends a notification.
    pub(crate) async fn notify(&self, n: Notification) -> Result<(), UpstreamError> {
        let proc = self.ready(self.up.connect_timeout).await?;
        let line = jsonrpc::encode_notification(&n.method, n.params.as_deref());
        proc.stdin.send(line).await.map_err(|_| UpstreamError::ProcessExited { implicated: false })
    }

    /// Answers a server-initiated request.
    pub(crate) async fn respond(&self, id: Id, body: Reply) -> Result<(), UpstreamError> {
        let proc = self.ready(self.up.connect_timeout).await?;
        let line = jsonrpc::encode_reply(Some(&id), &body);
        proc.stdin.send(line).await.map_err(|_| UpstreamError::ProcessExited { implicated: false })
    }

    /// Stops the process (close stdin, SIGTERM, SIGKILL) and the supervisor.
    pub(crate) async fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        self.closed_tx.send_replace(true);
        let mut rx = self.state.subscribe();
        let grace = self.up.shutdown_grace * 2 + Duration::from_secs(1);
        let _ = tokio::time::timeout(grace, rx.wait_for(|s| matches!(s, ProcState::Closed))).await;
        self.permit.lock().take();
    }

    fn set_state(&self, state: ProcState) {
        self.state.send_replace(state);
    }
}

impl Transport for StdioLink {
    fn send<'a>(&'a self, call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>> {
        Box::pin(self.call(call))
    }

    fn is_process(&self) -> bool {
        true
    }

    fn notify(&self, n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(StdioLink::notify(self, n))
    }

    fn respond(&self, _endpoint: Option<u16>, id: Id, body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(StdioLink::respond(self, id, body))
    }

    fn init_result(&self) -> Option<Arc<InitResult>> {
        StdioLink::init_result(self)
    }

    fn subscribe(&self, key: u64, sink: EventSink) {
        self.shared.fanout.subscribe(key, sink);
    }

    fn unsubscribe(&self, key: u64) {
        self.shared.fanout.unsubscribe(key);
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(StdioLink::close(self))
    }
}

/// Forgets a call that is over; sends `notifications/cancelled` for one abandoned
/// before its answer.
fn end_call(proc: &Weak<Proc>, id: &Id, abandoned: bool) {
    let Some(proc) = proc.upgrade() else {
        return;
    };
    proc.pending.lock().remove(id);
    if abandoned {
        let params = meta::cancelled_params(id, "cancelled by the gateway");
        let line = jsonrpc::encode_notification(method::CANCELLED, Some(&params));
        if proc.stdin.try_send(line).is_err() {
            tracing::debug!("could not deliver a cancellation: stdin is busy or closed");
        }
    }
}
