//! The life of the child process: spawn and handshake, supervised restarts with
//! exponential backoff, and the polite shutdown (close stdin, SIGTERM, SIGKILL).

use std::collections::{HashMap, HashSet};
use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use parking_lot::Mutex;

use super::pipes::{read_stdout, write_lines};
use super::stderr::{StderrTail, log_stderr};
use super::{Pending, Proc, ProcState, ProcessEnd, StdioLink, StdioUpstream};
use crate::call::{UpstreamError, fresh_id};
use crate::jsonrpc::{self, Id, Message};
use crate::mcp::init::InitResult;
use crate::mcp::method;
use crate::ndjson::{Line, read_line_bounded};
use crate::telemetry::trace::spans;
use tracing::Instrument as _;

/// A process that served this long after its handshake was healthy: the next restart
/// comes after the base delay, not a longer one. Only a process that keeps dying before
/// or right after its handshake backs off further.
const HEALTHY_AFTER: Duration = Duration::from_secs(1);

/// How long a process that failed its handshake is given to exit by itself (so that
/// its exit status can be told) before it is killed.
const EXIT_WAIT: Duration = Duration::from_millis(500);
/// How long the last of its stderr is waited for once it is gone.
const STDERR_WAIT: Duration = Duration::from_millis(500);

/// Restarts the process whenever it dies, until the link is closed or dropped.
pub(super) async fn supervise(weak: Weak<StdioLink>) {
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
    // A shared process belongs to no client request: with tracing on, its handshake is
    // a trace of its own (a per-session one's is inside the session's `initialize` span).
    let spawned = {
        let span = if link.offers_client_features { tracing::Span::none() } else { spans::connect(&up.name, true) };
        let spawned = spawn(link).instrument(span.clone()).await;
        let connected = spawned.as_ref().map(|(_, proc)| Some(proc.init.protocol_version.as_str()));
        spans::record_connected(&span, connected.map_err(|failure| &failure.error));
        spawned
    };
    let (mut child, proc) = match spawned {
        Ok(v) => v,
        Err(failure) => {
            let (e, end) = failure.end().await;
            tracing::warn!(
                upstream = %up.name,
                error = %e,
                exit_status = end.status.as_deref(),
                stderr = %end.for_log(),
                "stdio upstream failed to start"
            );
            link.restarting.store(false, Ordering::Relaxed);
            *link.last_end.lock() = Some(end);
            link.started(Some(e.to_string()));
            link.set_state(ProcState::Down(e.to_string()));
            *quick_restarts = quick_restarts.saturating_add(1);
            return;
        }
    };
    let pid = child.id();
    tracing::info!(upstream = %up.name, pid, "stdio upstream ready");
    *link.last_init.lock() = Some(Arc::clone(&proc.init));
    *link.last_end.lock() = None;
    link.restarting.store(false, Ordering::Relaxed);
    link.started(None);
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
            fail_pending(&proc, None);
            shutdown(up, child, proc).await;
            link.set_state(ProcState::Closed);
        }
        Some(status) => {
            let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
            tracing::warn!(upstream = %up.name, pid, %status, "stdio upstream exited; restarting");
            crate::telemetry::metrics::upstream_restart(&up.name);
            let healthy = started.elapsed() >= HEALTHY_AFTER;
            link.restarting.store(healthy, Ordering::Relaxed);
            link.restarts.fetch_add(1, Ordering::Relaxed);
            link.set_state(ProcState::Down(format!("the upstream process exited ({status})")));
            fail_pending(&proc, Some(&link.in_flight_at_death));
            *quick_restarts = if healthy { 1 } else { quick_restarts.saturating_add(1) };
        }
    }
}

/// Fails every in-flight call of a process that died (`previous`: the tools in flight
/// at its previous death, updated here) or was stopped (`None`). A death with several
/// calls in flight says little about any one of them, so it is laid at a call's door
/// only on evidence that points at its tool: the call was alone in flight, or its tool
/// had a call in flight at the previous death too. A stop implicates nobody.
fn fail_pending(proc: &Proc, previous: Option<&Mutex<HashSet<Arc<str>>>>) {
    let pending: Vec<Pending> = proc.pending.lock().drain().map(|(_, p)| p).collect();
    let Some(previous) = previous else {
        for p in pending {
            let _ = p.tx.send(Err(UpstreamError::ProcessExited { implicated: false }));
        }
        return;
    };
    let alone = pending.len() == 1;
    let now: HashSet<Arc<str>> = pending.iter().filter_map(|p| p.tool.clone()).collect();
    let before = std::mem::replace(&mut *previous.lock(), now);
    for p in pending {
        let implicated = alone || p.tool.as_ref().is_some_and(|tool| before.contains(tool));
        let _ = p.tx.send(Err(UpstreamError::ProcessExited { implicated }));
    }
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

/// A process that did not start: why, and what is left of it to say more.
pub(super) struct StartFailure {
    error: UpstreamError,
    /// The child, when it was spawned.
    child: Option<Child>,
    /// Its stderr reader and the lines it kept.
    stderr: Option<(tokio::task::JoinHandle<()>, Arc<StderrTail>)>,
}

impl StartFailure {
    fn before_spawn(error: UpstreamError) -> StartFailure {
        StartFailure { error, child: None, stderr: None }
    }

    /// The error, with the child's exit status (when it exited by itself soon enough;
    /// otherwise it is killed) and its last stderr lines.
    async fn end(self) -> (UpstreamError, ProcessEnd) {
        let status = match self.child {
            Some(mut child) => match tokio::time::timeout(EXIT_WAIT, child.wait()).await {
                Ok(Ok(status)) => Some(status.to_string()),
                _ => {
                    let _ = child.kill().await;
                    None
                }
            },
            None => None,
        };
        let stderr = match self.stderr {
            Some((reader, tail)) => {
                // A grandchild may hold the pipe open: the lines so far do then.
                let _ = tokio::time::timeout(STDERR_WAIT, reader).await;
                tail.lines()
            }
            None => Vec::new(),
        };
        (self.error, ProcessEnd { status, stderr })
    }
}

/// Spawns the process, wires its pipes and performs the initialize handshake.
async fn spawn(link: &Arc<StdioLink>) -> Result<(Child, Arc<Proc>), StartFailure> {
    let up = &link.up;
    let mut cmd = Command::new(&up.program);
    cmd.args(&up.args)
        .env_clear()
        .envs(inherited(&up.inherit_env))
        .envs(&up.env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &up.cwd {
        cmd.current_dir(cwd);
    }
    let mut child = cmd.spawn().map_err(|e| {
        StartFailure::before_spawn(UpstreamError::NotRunning(format!("cannot start {}: {e}", up.program.display())))
    })?;
    let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let error = UpstreamError::NotRunning("the process has no stdio pipes".into());
        return Err(StartFailure { error, child: Some(child), stderr: None });
    };
    let tail = Arc::new(StderrTail::default());
    let reader = tokio::spawn(log_stderr(Arc::clone(&up.name), BufReader::new(stderr), Arc::clone(&tail)));
    match handshake(link, stdin, stdout).await {
        Ok(proc) => Ok((child, proc)),
        Err(error) => Err(StartFailure { error, child: Some(child), stderr: Some((reader, tail)) }),
    }
}

/// Sends `initialize` on the child's stdin and reads its answer.
async fn handshake(
    link: &Arc<StdioLink>,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::process::ChildStdout,
) -> Result<Arc<Proc>, UpstreamError> {
    let up = &link.up;
    let (stdin_tx, stdin_rx) = mpsc::channel::<String>(256);
    tokio::spawn(write_lines(stdin, stdin_rx));

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
    proc.stdin.send(initialized).await.map_err(|_| UpstreamError::ProcessExited { implicated: false })?;
    tokio::spawn(read_stdout(Arc::downgrade(link), Arc::downgrade(&proc), stdout));
    Ok(proc)
}

/// Variables of the gateway's environment every stdio process gets when they are set:
/// what programs need to run (finding others, a home, a locale, a time zone, a place for
/// temporary files), none of which carries a credential.
const BASELINE_ENV: [&str; 9] = ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TMPDIR", "TZ", "LANG"];

/// The part of the gateway's own environment a process gets: the baseline, the `LC_*`
/// locale variables, and those named in `inherit_env` (`*`: all of it).
fn inherited(names: &[String]) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let all = names.iter().any(|n| n == "*");
    std::env::vars_os()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else { return all };
            all || BASELINE_ENV.contains(&name) || name.starts_with("LC_") || names.iter().any(|n| n == name)
        })
        .collect()
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
