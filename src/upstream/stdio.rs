//! stdio upstreams: a supervised child process speaking newline-delimited JSON.
//!
//! The supervisor starts the process, performs the initialize handshake, restarts it with
//! exponential backoff when it dies (failing in-flight calls at once), and stops it the
//! polite way: close stdin, wait, SIGTERM, wait, SIGKILL. stderr is logged, never treated
//! as an error; lines on stdout that are not JSON-RPC are logged and skipped.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

use parking_lot::Mutex;

use super::LinkShared;
use crate::call::{BoxFuture, EventSink, Reply, Transport, UpstreamCall, UpstreamError, UpstreamEvent, fresh_id};
use crate::jsonrpc::{self, Id, Message, Notification};
use crate::mcp::init::{InitParams, InitResult};
use crate::mcp::{meta, method};

/// A process that served this long after its handshake was healthy: the next restart
/// comes after the base delay, not a longer one. Only a process that keeps dying before
/// or right after its handshake backs off further.
const HEALTHY_AFTER: Duration = Duration::from_secs(1);
/// Longest stderr line logged; the rest is cut.
const MAX_STDERR_LINE: usize = 8 * 1024;

/// How to run one configured stdio upstream.
#[derive(Debug, Clone)]
pub struct StdioUpstream {
    /// The upstream's name (for logs).
    pub name: Arc<str>,
    /// Program to run.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
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

/// One running child process.
struct Proc {
    stdin: mpsc::Sender<String>,
    pending: Mutex<HashMap<Id, Pending>>,
    init: Arc<InitResult>,
}

struct Pending {
    tx: oneshot::Sender<Reply>,
    related: EventSink,
}

/// A supervised stdio upstream.
pub struct StdioLink {
    up: Arc<StdioUpstream>,
    pub(crate) shared: LinkShared,
    init_params: InitParams,
    /// Whether client features (sampling, elicitation, roots) may be relayed: false when
    /// the process is shared by several client sessions.
    offers_client_features: bool,
    state: watch::Sender<ProcState>,
    closing: AtomicBool,
    closed_tx: watch::Sender<bool>,
    /// A slot of the upstream's process budget, released when the link goes.
    permit: Mutex<Option<tokio::sync::OwnedSemaphorePermit>>,
    /// The initialize result of the last process that completed its handshake.
    last_init: Mutex<Option<Arc<InitResult>>>,
}

impl StdioLink {
    /// Starts the supervisor; the process starts and restarts in the background.
    pub fn spawn(up: Arc<StdioUpstream>, init_params: InitParams, offers_client_features: bool) -> Arc<StdioLink> {
        let link = Arc::new(StdioLink {
            up,
            shared: LinkShared::default(),
            init_params,
            offers_client_features,
            state: watch::channel(ProcState::Starting).0,
            closing: AtomicBool::new(false),
            closed_tx: watch::channel(false).0,
            permit: Mutex::new(None),
            last_init: Mutex::new(None),
        });
        tokio::spawn(supervise(Arc::downgrade(&link)));
        link
    }

    /// Starts the supervisor and waits for the first successful handshake (up to the
    /// connect timeout); on failure the process is stopped again.
    pub async fn start(
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
    pub fn hold(&self, permit: tokio::sync::OwnedSemaphorePermit) {
        *self.permit.lock() = Some(permit);
    }

    /// Waits until the process is running and initialised (up to the connect timeout).
    pub async fn wait_ready(&self) -> Result<(), UpstreamError> {
        self.ready(self.up.connect_timeout).await.map(|_| ())
    }

    /// The initialize result of the running process, or while it is being restarted, of
    /// the last one: what the upstream serves does not go away with a crash.
    pub fn init_result(&self) -> Option<Arc<InitResult>> {
        if let ProcState::Ready(p) = &*self.state.borrow() {
            return Some(Arc::clone(&p.init));
        }
        self.last_init.lock().clone()
    }

    /// Whether the process is running and initialised now.
    pub fn is_running(&self) -> bool {
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
                    ProcState::Starting | ProcState::Down(_) => {}
                }
                if rx.changed().await.is_err() {
                    return Err(UpstreamError::NotRunning("the upstream supervisor stopped".into()));
                }
            }
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(r) => r,
            Err(_) => Err(UpstreamError::NotRunning(match &*self.state.borrow() {
                ProcState::Down(why) => why.clone(),
                _ => "the upstream process did not become ready in time".into(),
            })),
        }
    }

    /// Sends a request and waits for its answer.
    pub async fn call(&self, call: &UpstreamCall) -> Result<Reply, UpstreamError> {
        let wait = call.attempt_deadline.unwrap_or_else(|| call.clock.deadline());
        let proc = self.ready(wait.saturating_duration_since(tokio::time::Instant::now())).await?;
        let _progress = call.progress_token.as_ref().map(|t| self.shared.progress.register(t, call.events.clone()));
        let id = fresh_id();
        let (tx, rx) = oneshot::channel();
        proc.pending.lock().insert(id.clone(), Pending { tx, related: call.events.clone() });
        let line = jsonrpc::encode_request(&id, &call.method, call.params.as_deref());
        if proc.stdin.send(line).await.is_err() {
            proc.pending.lock().remove(&id);
            return Err(UpstreamError::NotRunning("the upstream process is exiting".into()));
        }
        let mut guard = CancelGuard { proc: Arc::downgrade(&proc), id, armed: true };
        let reply = rx.await.map_err(|_| UpstreamError::ProcessExited);
        guard.armed = false;
        reply
    }

    /// Sends a notification.
    pub async fn notify(&self, n: Notification) -> Result<(), UpstreamError> {
        let proc = self.ready(self.up.connect_timeout).await?;
        let line = jsonrpc::encode_notification(&n.method, n.params.as_deref());
        proc.stdin.send(line).await.map_err(|_| UpstreamError::ProcessExited)
    }

    /// Answers a server-initiated request.
    pub async fn respond(&self, id: Id, body: Reply) -> Result<(), UpstreamError> {
        let proc = self.ready(self.up.connect_timeout).await?;
        let line = jsonrpc::encode_reply(Some(&id), &body);
        proc.stdin.send(line).await.map_err(|_| UpstreamError::ProcessExited)
    }

    /// Stops the process (close stdin, SIGTERM, SIGKILL) and the supervisor.
    pub async fn close(&self) {
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

/// Restarts the process whenever it dies, until the link is closed or dropped.
async fn supervise(weak: Weak<StdioLink>) {
    // Restarts in a row that came too soon after the previous one; 0 before the first spawn.
    let mut quick_restarts: u32 = 0;
    loop {
        if let Some(n) = quick_restarts.checked_sub(1) {
            let Some((d, mut closed)) = weak
                .upgrade()
                .map(|l| (crate::backoff::doubling(l.up.restart_base, l.up.restart_max, n), l.closed_tx.subscribe()))
            else {
                return;
            };
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = closed.wait_for(|c| *c) => {}
            }
        }
        let Some(link) = weak.upgrade() else { return };
        if link.closing.load(Ordering::SeqCst) {
            link.set_state(ProcState::Closed);
            return;
        }
        run_once(&link, &mut quick_restarts).await;
    }
}

/// Runs one process from spawn to exit; updates the count of quick restarts.
async fn run_once(link: &Arc<StdioLink>, quick_restarts: &mut u32) {
    link.set_state(ProcState::Starting);
    let up = &link.up;
    let (mut child, proc) = match spawn(link).await {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(upstream = %up.name, error = %e, "stdio upstream failed to start");
            link.set_state(ProcState::Down(e.to_string()));
            *quick_restarts = quick_restarts.saturating_add(1);
            return;
        }
    };
    let pid = child.id();
    tracing::info!(upstream = %up.name, pid, "stdio upstream ready");
    *link.last_init.lock() = Some(Arc::clone(&proc.init));
    link.set_state(ProcState::Ready(Arc::clone(&proc)));
    let started = Instant::now();
    let mut closed = link.closed_tx.subscribe();
    let status = tokio::select! {
        status = child.wait() => Some(status),
        _ = closed.wait_for(|c| *c) => None,
    };
    match status {
        None => {
            link.set_state(ProcState::Down("shutting down".into()));
            fail_pending(&proc);
            shutdown(up, child, proc).await;
            link.set_state(ProcState::Closed);
        }
        Some(status) => {
            let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
            tracing::warn!(upstream = %up.name, pid, %status, "stdio upstream exited; restarting");
            crate::telemetry::metrics::upstream_restart(&up.name);
            link.set_state(ProcState::Down(format!("the upstream process exited ({status})")));
            fail_pending(&proc);
            *quick_restarts = if started.elapsed() >= HEALTHY_AFTER { 1 } else { quick_restarts.saturating_add(1) };
        }
    }
}

/// Fails every in-flight call of a dead process (their senders are dropped).
fn fail_pending(proc: &Proc) {
    proc.pending.lock().clear();
}

/// Close stdin, wait; SIGTERM, wait; SIGKILL.
async fn shutdown(up: &StdioUpstream, mut child: Child, proc: Arc<Proc>) {
    drop(proc); // the writer task ends when the last sender goes, closing stdin
    if tokio::time::timeout(up.shutdown_grace, child.wait()).await.is_ok() {
        return;
    }
    if let Some(pid) = child.id().and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGTERM);
        if tokio::time::timeout(up.shutdown_grace, child.wait()).await.is_ok() {
            return;
        }
    }
    tracing::warn!(upstream = %up.name, "stdio upstream ignored SIGTERM; killing it");
    let _ = child.kill().await;
}

/// Spawns the process, wires its pipes and performs the initialize handshake.
async fn spawn(link: &Arc<StdioLink>) -> Result<(Child, Arc<Proc>), UpstreamError> {
    let up = &link.up;
    let mut cmd = Command::new(&up.program);
    cmd.args(&up.args)
        .envs(&up.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &up.cwd {
        cmd.current_dir(cwd);
    }
    let mut child =
        cmd.spawn().map_err(|e| UpstreamError::NotRunning(format!("cannot start {}: {e}", up.program.display())))?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(UpstreamError::NotRunning("the process has no stdio pipes".into()));
    };
    let (stdin_tx, stdin_rx) = mpsc::channel::<String>(256);
    tokio::spawn(write_lines(stdin, stdin_rx));
    tokio::spawn(log_stderr(Arc::clone(&up.name), BufReader::new(stderr)));

    // Handshake: the reader task is not running yet, so read the answer here.
    let mut stdout = BufReader::with_capacity(64 * 1024, stdout);
    let id = fresh_id();
    let hello = jsonrpc::encode_request(&id, method::INITIALIZE, Some(&link.init_params.to_raw()));
    stdin_tx.send(hello).await.map_err(|_| UpstreamError::NotRunning("stdin closed at once".into()))?;
    let init = tokio::time::timeout(up.connect_timeout, read_init_answer(up, &mut stdout, &id))
        .await
        .map_err(|_| UpstreamError::Handshake("no answer to initialize in time".into()))??;
    let proc = Arc::new(Proc { stdin: stdin_tx, pending: Mutex::new(HashMap::new()), init: Arc::new(init) });
    let initialized = jsonrpc::encode_notification(method::INITIALIZED, None);
    proc.stdin.send(initialized).await.map_err(|_| UpstreamError::ProcessExited)?;
    tokio::spawn(read_stdout(Arc::downgrade(link), Arc::downgrade(&proc), stdout));
    Ok((child, proc))
}

async fn read_init_answer(
    up: &StdioUpstream,
    stdout: &mut (impl AsyncBufRead + Unpin),
    id: &Id,
) -> Result<InitResult, UpstreamError> {
    let mut buf = Vec::new();
    loop {
        match read_line_bounded(stdout, &mut buf, up.max_line_bytes).await {
            Line::Eof => {
                return Err(UpstreamError::Handshake("the process exited during initialize".into()));
            }
            Line::TooLong => {
                tracing::warn!(upstream = %up.name, "skipped an over-long line during initialize")
            }
            Line::Text => match jsonrpc::decode(&String::from_utf8_lossy(&buf)) {
                Ok(Message::Response(r)) if &r.id == id => {
                    let result =
                        r.body.map_err(|e| UpstreamError::Handshake(format!("initialize refused: {}", e.get())))?;
                    return InitResult::parse(result)
                        .ok_or_else(|| UpstreamError::Handshake("initialize result lacks protocolVersion".into()));
                }
                Ok(_) => {}
                Err(_) => {
                    tracing::warn!(upstream = %up.name, "skipped a non-JSON-RPC line on stdout")
                }
            },
        }
    }
}

/// Reads stdout until EOF, routing each message.
async fn read_stdout(link: Weak<StdioLink>, proc: Weak<Proc>, mut stdout: impl AsyncBufRead + Unpin) {
    let mut buf = Vec::new();
    loop {
        let outcome = read_line_bounded(&mut stdout, &mut buf, max_line(&link)).await;
        let (Some(link), Some(proc)) = (link.upgrade(), proc.upgrade()) else {
            return;
        };
        match outcome {
            Line::Eof => return,
            Line::TooLong => {
                tracing::warn!(upstream = %link.up.name, limit = link.up.max_line_bytes, "skipped an over-long line on stdout");
            }
            Line::Text => match jsonrpc::decode(&String::from_utf8_lossy(&buf)) {
                Ok(msg) => route(&link, &proc, msg),
                Err(e) => {
                    tracing::warn!(upstream = %link.up.name, error = %e, "skipped a line on stdout that is not JSON-RPC")
                }
            },
        }
    }
}

fn max_line(link: &Weak<StdioLink>) -> usize {
    link.upgrade().map_or(1024 * 1024, |l| l.up.max_line_bytes)
}

fn route(link: &Arc<StdioLink>, proc: &Arc<Proc>, msg: Message) {
    match msg {
        Message::Response(r) => match proc.pending.lock().remove(&r.id) {
            Some(p) => {
                let _ = p.tx.send(r.body);
            }
            None => {
                tracing::debug!(upstream = %link.up.name, id = %r.id, "ignored a response to an unknown request")
            }
        },
        Message::Notification(n) => link.shared.deliver_unrelated(UpstreamEvent::Notification(n)),
        Message::Request(r) if r.method == method::PING => {
            answer(proc, &r.id, Ok(jsonrpc::to_raw(&serde_json::json!({}))))
        }
        Message::Request(r) if !link.offers_client_features => {
            let err = jsonrpc::error_object(
                jsonrpc::code::METHOD_NOT_FOUND,
                "client features are not available through a shared upstream",
                None,
            );
            answer(proc, &r.id, Err(err));
        }
        Message::Request(r) => {
            // stdio has no per-request streams: a request made while exactly one call is
            // in flight belongs with that call; otherwise it goes to the session.
            let sole: Option<EventSink> = {
                let pending = proc.pending.lock();
                if pending.len() == 1 { pending.values().next().map(|p| p.related.clone()) } else { None }
            };
            let event = UpstreamEvent::Request(r);
            match sole {
                Some(sink) => link.shared.deliver_related(&sink, event),
                None => link.shared.deliver_unrelated(event),
            }
        }
    }
}

fn answer(proc: &Proc, id: &Id, body: Reply) {
    let line = jsonrpc::encode_reply(Some(id), &body);
    if proc.stdin.try_send(line).is_err() {
        tracing::debug!("could not answer an upstream request: stdin is busy or closed");
    }
}

async fn write_lines(mut stdin: tokio::process::ChildStdin, mut rx: mpsc::Receiver<String>) {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}

async fn log_stderr(name: Arc<str>, mut stderr: impl AsyncBufRead + Unpin) {
    let mut buf = Vec::new();
    loop {
        match read_line_bounded(&mut stderr, &mut buf, MAX_STDERR_LINE).await {
            Line::Eof => return,
            Line::TooLong => {
                tracing::info!(target: "seawall::upstream::stderr", upstream = %name, "(over-long stderr line skipped)")
            }
            Line::Text => {
                let text = String::from_utf8_lossy(&buf);
                tracing::info!(target: "seawall::upstream::stderr", upstream = %name, "{}", text.trim_end());
            }
        }
    }
}

/// The outcome of reading one line.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A complete line (without its terminator) is in the buffer.
    Text,
    /// The line exceeded the limit; it was read and discarded.
    TooLong,
    /// End of input.
    Eof,
}

/// Reads one `\n`-terminated line into `buf` without ever holding more than `limit` bytes.
async fn read_line_bounded(reader: &mut (impl AsyncBufRead + Unpin), buf: &mut Vec<u8>, limit: usize) -> Line {
    buf.clear();
    let mut too_long = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(c) => c,
            Err(_) => return Line::Eof,
        };
        if chunk.is_empty() {
            return if buf.is_empty() && !too_long {
                Line::Eof
            } else if too_long {
                Line::TooLong
            } else {
                Line::Text
            };
        }
        let (part, done) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (&chunk[..i], Some(i + 1)),
            None => (chunk, None),
        };
        if !too_long {
            if buf.len() + part.len() > limit {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(part);
            }
        }
        let consumed = done.unwrap_or(chunk.len());
        reader.consume(consumed);
        if done.is_some() {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return if too_long { Line::TooLong } else { Line::Text };
        }
    }
}

/// Sends `notifications/cancelled` when a call is abandoned before its answer.
struct CancelGuard {
    proc: Weak<Proc>,
    id: Id,
    armed: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        let Some(proc) = self.proc.upgrade() else {
            return;
        };
        proc.pending.lock().remove(&self.id);
        if self.armed {
            let params = meta::cancelled_params(&self.id, "cancelled by the gateway");
            let line = jsonrpc::encode_notification(method::CANCELLED, Some(&params));
            if proc.stdin.try_send(line).is_err() {
                tracing::debug!("could not deliver a cancellation: stdin is busy or closed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn bounded_lines_skip_over_long_ones_and_keep_going() {
        let data: &[u8] = b"short\r\n0123456789abcdef\nnext\nlast";
        let mut reader = BufReader::with_capacity(4, data);
        let mut buf = Vec::new();
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Text);
        assert_eq!(buf, b"short");
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::TooLong);
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Text);
        assert_eq!(buf, b"next");
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Text);
        assert_eq!(buf, b"last");
        assert_eq!(read_line_bounded(&mut reader, &mut buf, 8).await, Line::Eof);
    }
}
