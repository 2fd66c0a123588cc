//! Upstreams to put behind the gateway: the demo server and the reference server.

use std::path::PathBuf;

use tokio::process::Command;

use super::interop::Interop;
use super::process::{Proc, Stream};
use super::{START_TIMEOUT, TestDir, seawall_bin};

/// `seawall demo-upstream --listen 127.0.0.1:0 [--record FILE] [ARGS...]`: Streamable HTTP
/// at `/mcp`, HTTP+SSE at `/sse`.
pub struct DemoUpstream {
    pub proc: Proc,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// The `--record` file (JSON lines), if asked for.
    pub record: Option<PathBuf>,
    /// Held for its `Drop`, which removes the directory.
    _dir: TestDir,
}

impl DemoUpstream {
    /// Starts the demo server over HTTP; `record` adds `--record FILE` in a temp dir.
    pub async fn start(record: bool, extra_args: &[&str]) -> DemoUpstream {
        DemoUpstream::start_at("127.0.0.1:0", record, extra_args).await
    }

    /// Like [`DemoUpstream::start`], listening on `addr` (to bring one back on its port).
    pub async fn start_at(addr: &str, record: bool, extra_args: &[&str]) -> DemoUpstream {
        let dir = TestDir::new("demo");
        let record = record.then(|| dir.join("record.jsonl"));
        let mut cmd = Command::new(seawall_bin());
        cmd.args(["demo-upstream", "--listen", addr]).args(extra_args).current_dir(dir.path());
        if let Some(r) = &record {
            cmd.arg("--record").arg(r);
        }
        let mut proc = Proc::spawn("demo-upstream", cmd);
        let url = proc
            .wait_for_line(Stream::Stdout, START_TIMEOUT, "`listening on http://...`", |l| {
                l.trim().strip_prefix("listening on ").map(|u| u.trim().to_owned())
            })
            .await;
        DemoUpstream { proc, url, record, _dir: dir }
    }

    /// `http://127.0.0.1:PORT/sse`: the same server over HTTP+SSE (2024-11-05).
    pub fn sse_url(&self) -> String {
        self.url.replace("/mcp", "/sse")
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

    /// How many calls of `tool` the demo recorded (with `record` on).
    pub fn calls(&self, tool: &str) -> usize {
        self.recorded().iter().filter(|e| e["event"] == "call" && e["tool"] == tool).count()
    }
}

/// `@modelcontextprotocol/server-everything` in streamableHttp mode, on 127.0.0.1 and a
/// free port (through `loopback.cjs`).
pub struct Everything {
    /// Held for its `Drop`, which stops the process.
    _proc: Proc,
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
        Everything { _proc: proc, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

/// `tests/interop/python/sse_server.py`: an MCP server on the official Python SDK's
/// HTTP+SSE transport (2024-11-05), on 127.0.0.1 and a free port.
pub struct PythonSseServer {
    /// Held for its `Drop`, which stops the process.
    _proc: Proc,
    /// `http://127.0.0.1:PORT/sse`.
    pub url: String,
}

impl PythonSseServer {
    pub async fn start(interop: &Interop) -> PythonSseServer {
        let cmd = interop.python_command([interop.path("python/sse_server.py")]);
        let mut proc = Proc::spawn("python-sse-server", cmd);
        let port: u16 = proc
            .wait_for_line(Stream::Stderr, START_TIMEOUT, "`LISTENING <port>`", |l| {
                l.trim().strip_prefix("LISTENING ").and_then(|p| p.trim().parse().ok())
            })
            .await;
        PythonSseServer { _proc: proc, url: format!("http://127.0.0.1:{port}/sse") }
    }
}
