//! Child processes: long-running servers drained line by line, and scripts run to completion.

use std::fmt::Write as _;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A long-running child (a server). Its stdout and stderr are drained continuously (so
/// it never blocks on a full pipe), kept in memory, and offered line by line to
/// [`Proc::wait_for_line`]. Dropping it stops the process.
pub struct Proc {
    name: String,
    child: Child,
    log: Arc<Mutex<Vec<(Stream, String)>>>,
    lines: mpsc::UnboundedReceiver<(Stream, String)>,
    echo: bool,
}

impl Proc {
    /// Spawns `cmd` with piped stdout/stderr and null stdin.
    pub fn spawn(name: &str, mut cmd: Command) -> Proc {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot spawn {name} ({cmd:?}): {e}"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, lines) = mpsc::unbounded_channel();
        let echo = std::env::var_os("SEAWALL_TEST_ECHO").is_some();
        let prefix = format!("[{name}]");
        pump(
            child.stdout.take().expect("stdout"),
            Stream::Stdout,
            log.clone(),
            tx.clone(),
            echo.then(|| prefix.clone()),
        );
        pump(child.stderr.take().expect("stderr"), Stream::Stderr, log.clone(), tx, echo.then_some(prefix));
        Proc { name: name.to_owned(), child, log, lines, echo }
    }

    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// Waits until a line on `stream` makes `pick` return `Some`, and returns that value.
    /// Panics (showing the output so far) on timeout or when the process exits first.
    pub async fn wait_for_line<T>(
        &mut self,
        stream: Stream,
        timeout: Duration,
        what: &str,
        mut pick: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.lines.recv()).await {
                Ok(Some((s, line))) if s == stream => {
                    if let Some(v) = pick(&line) {
                        return v;
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    let status = match tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await {
                        Ok(Ok(st)) => st.to_string(),
                        Ok(Err(e)) => format!("wait failed: {e}"),
                        Err(_) => "still running, pipes closed".to_owned(),
                    };
                    panic!("{} exited ({status}) before printing {what}; its output:\n{}", self.name, self.output());
                }
                Err(_) => {
                    panic!("{} did not print {what} within {timeout:?}; its output:\n{}", self.name, self.output())
                }
            }
        }
    }

    /// Everything the process printed so far, stderr and stdout interleaved.
    pub fn output(&self) -> String {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = String::new();
        for (stream, line) in log.iter() {
            let tag = if *stream == Stream::Stdout { "out" } else { "err" };
            let _ = writeln!(s, "  {tag}| {line}");
        }
        s
    }

    /// The exit status if the process has ended.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM, then wait up to `grace`, then SIGKILL. Returns the exit status if known.
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(st) = self.try_status() {
            return Some(st);
        }
        self.signal_term();
        if let Ok(Ok(st)) = tokio::time::timeout(grace, self.child.wait()).await {
            return Some(st);
        }
        let _ = self.child.start_kill();
        tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await.ok().and_then(Result::ok)
    }

    fn signal_term(&self) {
        if let Some(pid) = self.child.id() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGTERM);
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if std::thread::panicking() && !self.echo {
            eprintln!("----- output of {} -----\n{}----- end of {} -----", self.name, self.output(), self.name);
        }
        if self.try_status().is_some() {
            return;
        }
        // SIGTERM first so seawall can stop its own stdio children, then SIGKILL.
        self.signal_term();
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if self.try_status().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.start_kill();
    }
}

fn pump<R: AsyncRead + Unpin + Send + 'static>(
    reader: R,
    stream: Stream,
    log: Arc<Mutex<Vec<(Stream, String)>>>,
    tx: mpsc::UnboundedSender<(Stream, String)>,
    echo: Option<String>,
) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(reader).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(prefix) = &echo {
                eprintln!("{prefix} {line}");
            }
            log.lock().unwrap_or_else(|e| e.into_inner()).push((stream, line.clone()));
            let _ = tx.send((stream, line));
        }
    });
}

/// What a finished script printed.
#[derive(Debug)]
pub struct ScriptOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl ScriptOutput {
    /// Panics with the script's output unless it exited 0.
    pub fn assert_success(&self, name: &str) {
        if self.status.success() {
            return;
        }
        let fail: Vec<&str> =
            self.stderr.lines().chain(self.stdout.lines()).filter(|l| l.starts_with("FAIL")).collect();
        let why = if fail.is_empty() {
            self.stderr.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
        } else {
            fail.join("\n")
        };
        panic!("{name} failed ({}):\n{why}\n(its whole output is above)", self.status);
    }
}

/// Runs `cmd` to completion (stdin closed), printing each output line as it arrives
/// (libtest shows it for failing tests, or with `--nocapture`). Panics after `timeout`,
/// killing the script.
pub async fn run_script(name: &str, mut cmd: Command, timeout: Duration) -> ScriptOutput {
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    println!("$ {name}: {cmd:?}");
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot spawn {name} ({cmd:?}): {e}"));
    let out = tokio::spawn(collect(child.stdout.take().expect("stdout"), format!("[{name}]")));
    let err = tokio::spawn(collect(child.stderr.take().expect("stderr"), format!("[{name} stderr]")));
    let status = match tokio::time::timeout(timeout, child.wait()).await {
        Ok(Ok(st)) => st,
        Ok(Err(e)) => panic!("waiting for {name}: {e}"),
        Err(_) => {
            let _ = child.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
            let stdout = tokio::time::timeout(Duration::from_secs(2), out).await;
            let stderr = tokio::time::timeout(Duration::from_secs(2), err).await;
            panic!(
                "{name} did not finish within {timeout:?} and was killed.\n--- stdout ---\n{}--- stderr ---\n{}",
                stdout.ok().and_then(Result::ok).unwrap_or_default(),
                stderr.ok().and_then(Result::ok).unwrap_or_default()
            );
        }
    };
    // A grandchild holding the pipes open must not hang the test.
    let stdout = tokio::time::timeout(Duration::from_secs(5), out).await.ok().and_then(Result::ok).unwrap_or_default();
    let stderr = tokio::time::timeout(Duration::from_secs(5), err).await.ok().and_then(Result::ok).unwrap_or_default();
    println!("$ {name}: {status}");
    ScriptOutput { status, stdout, stderr }
}

async fn collect<R: AsyncRead + Unpin>(reader: R, prefix: String) -> String {
    let mut lines = BufReader::new(reader).lines();
    let mut all = String::new();
    while let Ok(Some(line)) = lines.next_line().await {
        println!("{prefix} {line}");
        all.push_str(&line);
        all.push('\n');
    }
    all
}
