//! `seawall stdio` under test: the binary launched as a stdio MCP server, its stdin
//! written line by line, every stdout line kept raw (to check that nothing but JSON-RPC
//! appears there) and offered parsed.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

use super::{TestDir, seawall_bin};

/// How long one answer may take.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(20);

/// A running `seawall stdio --config FILE [ARGS...]`.
pub struct StdioSeawall {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<String>>,
    pub config_path: PathBuf,
    /// Held for its `Drop`, which removes the directory.
    _dir: TestDir,
}

impl StdioSeawall {
    /// Writes `config_yaml` to a temp dir and launches `seawall stdio` on it with `args`
    /// and the environment `env` (`RUST_LOG=info` unless given).
    pub fn start(config_yaml: &str, args: &[&str], env: &[(&str, &str)]) -> StdioSeawall {
        let dir = TestDir::new("stdio");
        let config_path = dir.write("seawall.yaml", config_yaml);
        let mut cmd = Command::new(seawall_bin());
        cmd.arg("stdio").arg("--config").arg(&config_path).args(args).current_dir(dir.path());
        cmd.env("RUST_LOG", "info").env("RUST_BACKTRACE", "1").envs(env.iter().copied());
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot spawn seawall stdio: {e}"));
        let stdin = child.stdin.take();
        let (tx, lines) = mpsc::unbounded_channel();
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let (out, kept) = (child.stdout.take().expect("stdout"), Arc::clone(&stdout));
        tokio::spawn(async move {
            let mut lines = BufReader::new(out).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                kept.lock().unwrap().push(line.clone());
                let _ = tx.send(line);
            }
        });
        let (err, kept) = (child.stderr.take().expect("stderr"), Arc::clone(&stderr));
        let echo = std::env::var_os("SEAWALL_TEST_ECHO").is_some();
        tokio::spawn(async move {
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if echo {
                    eprintln!("[seawall stdio] {line}");
                }
                let mut all = kept.lock().unwrap();
                all.push_str(&line);
                all.push('\n');
            }
        });
        StdioSeawall { child, stdin, lines, stdout, stderr, config_path, _dir: dir }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("seawall runs")
    }

    /// Everything seawall logged so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Every stdout line so far, raw.
    pub fn stdout_lines(&self) -> Vec<String> {
        self.stdout.lock().unwrap().clone()
    }

    /// Writes one line (a newline is added).
    pub async fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(format!("{line}\n").as_bytes()).await.expect("write to seawall's stdin");
        stdin.flush().await.expect("flush");
    }

    pub async fn send(&mut self, message: Value) {
        self.send_line(&message.to_string()).await;
    }

    /// The next stdout line, parsed; `None` at the end of stdout.
    pub async fn next_or_end(&mut self) -> Option<Value> {
        match tokio::time::timeout(LINE_TIMEOUT, self.lines.recv()).await {
            Ok(Some(line)) => Some(
                serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line:?}\nstderr:\n{}", self.stderr())),
            ),
            Ok(None) => None,
            Err(_) => panic!("no stdout line within {LINE_TIMEOUT:?}; stderr:\n{}", self.stderr()),
        }
    }

    pub async fn next(&mut self) -> Value {
        match self.next_or_end().await {
            Some(v) => v,
            None => panic!("stdout ended; stderr:\n{}", self.stderr()),
        }
    }

    /// Reads lines until the response with `id`; the messages before it are returned too.
    pub async fn response(&mut self, id: &Value) -> (Value, Vec<Value>) {
        let mut before = Vec::new();
        loop {
            let msg = self.next().await;
            if &msg["id"] == id && msg.get("method").is_none() {
                return (msg, before);
            }
            before.push(msg);
        }
    }

    /// Sends a request and waits for its response.
    pub async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        self.response(&id).await.0
    }

    /// `tools/call` and its result (panics on a JSON-RPC error).
    pub async fn call_tool(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        let answer = self.request(json!(id), "tools/call", json!({"name": name, "arguments": arguments})).await;
        assert!(answer.get("result").is_some(), "tools/call {name}: {answer}");
        answer["result"].clone()
    }

    /// `initialize` in `version` and `notifications/initialized`; returns the result.
    pub async fn initialize(&mut self, version: &str) -> Value {
        let init = self
            .request(
                json!(0),
                "initialize",
                json!({"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "seawall-tests", "version": "1"}}),
            )
            .await;
        assert!(init.get("result").is_some(), "initialize failed: {init}\nstderr:\n{}", self.stderr());
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        init["result"].clone()
    }

    /// Closes seawall's stdin (end of input).
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits for the process to exit; panics (with its log) after `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> ExitStatus {
        match tokio::time::timeout(timeout, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => panic!("waiting for seawall: {e}"),
            Err(_) => panic!("seawall did not exit within {timeout:?}; stderr:\n{}", self.stderr()),
        }
    }

    /// Waits until seawall's log has a line containing `text`; returns that line.
    pub async fn wait_for_log(&self, text: &str, timeout: Duration) -> String {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if let Some(line) = self.stderr().lines().find(|l| l.contains(text)) {
                return line.to_owned();
            }
            if tokio::time::Instant::now() > deadline {
                panic!("seawall never logged {text:?}; stderr:\n{}", self.stderr());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for StdioSeawall {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("----- stderr of seawall stdio -----\n{}----- end -----", self.stderr());
        }
    }
}

/// The ids of the live child processes of `pid`, from `/proc`.
pub fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|child| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else { return false };
            // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
            let Some((_, rest)) = stat.rsplit_once(')') else { return false };
            let mut fields = rest.split_whitespace();
            let state = fields.next();
            fields.next().and_then(|p| p.parse::<u32>().ok()) == Some(pid) && state != Some("Z")
        })
        .collect()
}

/// Whether a process with this id exists (and is not a zombie).
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}
