//! Helpers shared by seawall's integration tests: real processes on port 0.
//!
//! * [`Interop`]: Node 22, the venv Python and `tests/interop/`, found through the
//!   variables that `tests/run` exports (`SEAWALL_TEST_NODE`, `SEAWALL_TEST_PYTHON`,
//!   `SEAWALL_TEST_INTEROP_DIR`). Missing ones fail the test, never skip it.
//! * [`Seawall`]: the gateway binary with a generated config, started on port 0.
//! * [`StdioSeawall`]: `seawall stdio` launched as a stdio MCP server, its stdout kept raw.
//! * [`DemoUpstream`]: `seawall demo-upstream --listen 127.0.0.1:0` (Streamable HTTP at
//!   `/mcp`, HTTP+SSE at `/sse`).
//! * [`Everything`]: the reference server `@modelcontextprotocol/server-everything`.
//! * [`PythonSseServer`]: an MCP server on the Python SDK's HTTP+SSE transport.
//! * [`run_script`]: runs a client script to completion, streaming its output.
//! * [`RedisServer`]: a real `redis-server` on a free loopback port.
//! * [`Nginx`]: nginx sending each request to the next of several gateways.
//! * [`Prometheus`]: a real Prometheus scraping a target, with its rules and HTTP API.
//! * [`Chromium`]: headless Chromium, for the status page's DOM and screenshots.
//! * [`TestDir`]: a temporary directory removed on drop.
//! * [`one_at_a_time`]: the lock the heaviest and the timing-sensitive tests take.
//! * Clients: [`mcp_client`] (Streamable HTTP), [`sse_client`] (HTTP+SSE), [`front_wire`]
//!   and [`h1_vectors`] (raw bytes over TCP).
//! * Upstreams and receivers inside the test: [`fake_upstream`], [`leaky_upstream`] with
//!   [`planted`] secrets, [`otlp`] (a trace receiver), [`tap`] (a recording TCP relay);
//!   [`leak_fronts`] and [`leak_findings`] drive and judge the leak tests.
//!
//! Every wait has a timeout. Every spawned process is SIGTERMed, then SIGKILLed, when
//! its handle drops (and `kill_on_drop` backs that up); on a panic each process's
//! captured output is printed so a failing test shows what the servers said
//! (`SEAWALL_TEST_ECHO=1` prints server output live instead, to stderr).

mod chromium;
mod conformance;
mod interop;
mod nginx;
mod process;
mod prometheus;
mod redis_server;
mod seawall;
mod stdio;
mod upstreams;

pub mod fake_upstream;
pub mod front_wire;
pub mod h1_vectors;
pub mod leak_findings;
pub mod leak_fronts;
pub mod leaky_upstream;
pub mod mcp_client;
pub mod otlp;
pub mod planted;
pub mod sse_client;
pub mod tap;

pub use self::{
    chromium::*, conformance::*, interop::*, nginx::*, process::*, prometheus::*, redis_server::*, seawall::*,
    stdio::*, upstreams::*,
};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Taken first by the tests that load the machine most, or that measure availability and
/// latency a loaded machine would distort: every test shares one process and the test
/// harness runs a few at a time, and two of these at once on a small machine would
/// measure the machine. Held until the test ends.
pub async fn one_at_a_time() -> tokio::sync::MutexGuard<'static, ()> {
    static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    HEAVY.lock().await
}

/// How long a server may take to print its `listening` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The seawall binary under test.
pub fn seawall_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_seawall"))
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

/// Whether `stream` (a session's GET stream) carries `notifications/tools/list_changed`
/// within 5 s.
pub async fn tools_list_changed(stream: &mut tokio::sync::mpsc::UnboundedReceiver<serde_json::Value>) -> bool {
    tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(message) = stream.recv().await {
            if message["method"] == "notifications/tools/list_changed" {
                return;
            }
        }
    })
    .await
    .is_ok()
}

/// Waits until `gw`'s output holds every one of `texts` (its output is read by a task of
/// its own, so a line may come in a little after what it logs), 5 s at most.
pub async fn until_logged(gw: &Seawall, texts: &[&str]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !texts.iter().all(|t| gw.proc.output().contains(t)) {
        assert!(std::time::Instant::now() < deadline, "the log lacks one of {texts:?}:\n{}", gw.proc.output());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The text of a tool result's first content item (empty when there is none).
pub fn text_of(result: &serde_json::Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// Asserts the overload answer of request `id`: -32012, HTTP 503 with `Retry-After`, the
/// same number of seconds in the error's data, and a correlation id.
#[track_caller]
pub fn assert_overloaded(reply: &mcp_client::Reply, id: serde_json::Value) {
    assert_eq!(reply.status, 503, "{}", reply.raw);
    let retry = reply.header("retry-after").expect("Retry-After");
    let body = reply.response();
    assert_eq!(body["id"], id, "{}", reply.raw);
    assert_eq!(body["error"]["code"], -32012, "{}", reply.raw);
    assert_eq!(body["error"]["data"]["retryAfterSeconds"].to_string(), retry, "{}", reply.raw);
    assert!(body["error"]["data"]["correlationId"].as_str().is_some_and(|c| !c.is_empty()), "{}", reply.raw);
}
