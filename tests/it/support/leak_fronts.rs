//! The four client fronts of the "nothing leaks" suite, each a minimal MCP client whose
//! every received byte the suite inspects: Streamable HTTP in a legacy session
//! (2025-11-25), modern stateless POSTs (2026-07-28), HTTP+SSE (2024-11-05) and
//! `seawall stdio`. The HTTP fronts talk through a recording [`crate::support::tap::Tap`] and
//! send the client's credentials (bearer key, cookies, proxy credentials, an API-key
//! header and query-string tokens) with every request; the stdio front keeps the raw
//! bytes of seawall's stdout.

use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;

/// How long one answer may take.
const WAIT: Duration = Duration::from_secs(20);
/// The modern era's version.
const MODERN: &str = "2026-07-28";

pub const CLIENT_KEY: &str = "leaks-client-key-7Hq2ZpX9vR4mW1nB";

/// The client's credentials, as `(label, value)`: none may reach an upstream.
pub const CLIENT_SECRETS: &[(&str, &str)] = &[
    ("bearer key", CLIENT_KEY),
    ("session cookie", "cl1entC00kie-8fJ2kQ"),
    ("csrf cookie", "csrfT0k-Zx81"),
    ("proxy credentials", "cHJveHk6cHIweHlTM2NyZXQ"),
    ("x-api-key", "xapi-cl1ent-5Rk8Wq2"),
    ("query token", "qu3ryT0ken-3Jd9"),
    ("query access_token", "acc3ssT0ken-Lp0"),
    ("query api_key", "qApiK3y-77Tt"),
];

/// The client's credentials as the HTTP fronts send them, on every request.
pub fn credentials() -> Credentials {
    Credentials {
        headers: vec![
            ("authorization", format!("Bearer {CLIENT_KEY}")),
            ("cookie", "session=cl1entC00kie-8fJ2kQ; csrftoken=csrfT0k-Zx81".into()),
            ("proxy-authorization", "Basic cHJveHk6cHIweHlTM2NyZXQ=".into()),
            ("x-api-key", "xapi-cl1ent-5Rk8Wq2".into()),
        ],
        query: "token=qu3ryT0ken-3Jd9&access_token=acc3ssT0ken-Lp0&api_key=qApiK3y-77Tt".into(),
    }
}

/// What the client sends along with every HTTP request.
pub struct Credentials {
    pub headers: Vec<(&'static str, String)>,
    /// Appended to every URL (`a=b&c=d`).
    pub query: String,
}

/// A client front.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    Legacy,
    Modern,
    Sse,
    Stdio,
}

impl Front {
    pub const ALL: [Front; 4] = [Front::Legacy, Front::Modern, Front::Sse, Front::Stdio];

    pub fn name(self) -> &'static str {
        match self {
            Front::Legacy => "streamable-http 2025-11-25",
            Front::Modern => "modern 2026-07-28",
            Front::Sse => "http+sse 2024-11-05",
            Front::Stdio => "seawall stdio",
        }
    }
}

/// Raw bytes the stdio fronts received (stdout) and what seawall logged (stderr).
#[derive(Default)]
pub struct StdioCaptures {
    pub stdout: Mutex<Vec<Arc<Mutex<Vec<u8>>>>>,
    pub stderr: Mutex<Vec<Arc<Mutex<Vec<u8>>>>>,
}

/// Where a session goes: an HTTP endpoint (`http://TAP/mcp[/<upstream>]`) or a
/// `seawall stdio` run on a config file, optionally with `--upstream`.
pub enum Target<'a> {
    Http { url: String, credentials: &'a Credentials },
    Stdio { config: &'a Path, upstream: Option<&'a str>, captures: &'a StdioCaptures },
}

/// One open client session.
pub enum Session {
    Http(HttpSession),
    Sse(SseSession),
    Stdio(StdioSession),
}

impl Session {
    /// Opens a session: `initialize` (the modern front has none). `Err` holds the
    /// answer to an `initialize` that failed.
    pub async fn open(front: Front, target: Target<'_>) -> Result<Session, Value> {
        match (front, target) {
            (Front::Stdio, Target::Stdio { config, upstream, captures }) => {
                StdioSession::open(config, upstream, captures).await.map(Session::Stdio)
            }
            (Front::Sse, Target::Http { url, credentials }) => {
                SseSession::open(&url, credentials).await.map(Session::Sse)
            }
            (Front::Legacy, Target::Http { url, credentials }) => {
                HttpSession::open(&url, credentials, false).await.map(Session::Http)
            }
            (Front::Modern, Target::Http { url, credentials }) => {
                HttpSession::open(&url, credentials, true).await.map(Session::Http)
            }
            (front, _) => panic!("{front:?} needs another target"),
        }
    }

    /// Sends a request and returns its response message.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        match self {
            Session::Http(s) => s.request(method, params).await,
            Session::Sse(s) => s.request(method, params).await,
            Session::Stdio(s) => s.request(method, params).await,
        }
    }

    /// Ends the session (DELETE, closing the stream, or closing stdin and waiting).
    pub async fn close(self) {
        match self {
            Session::Http(s) => s.close().await,
            Session::Sse(s) => s.reader.abort(),
            Session::Stdio(s) => s.close().await,
        }
    }
}

fn with_query(url: &str, query: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}{query}")
}

fn http_client(credentials: &Credentials) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    for (name, value) in &credentials.headers {
        headers.insert(
            reqwest::header::HeaderName::from_static(name),
            value.parse().unwrap_or_else(|e| panic!("{name}: {e}")),
        );
    }
    reqwest::Client::builder().no_proxy().default_headers(headers).timeout(WAIT).build().expect("client")
}

fn initialize_params(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "leaks", "version": "1"}})
}

fn is_response(msg: &Value, id: &Value) -> bool {
    &msg["id"] == id && msg.get("method").is_none() && (msg.get("result").is_some() || msg.get("error").is_some())
}

// --- Streamable HTTP: legacy session and modern stateless --------------------------------

pub struct HttpSession {
    http: reqwest::Client,
    url: String,
    modern: bool,
    session: Option<String>,
    next_id: u64,
}

impl HttpSession {
    async fn open(url: &str, credentials: &Credentials, modern: bool) -> Result<HttpSession, Value> {
        let mut s = HttpSession {
            http: http_client(credentials),
            url: with_query(url, &credentials.query),
            modern,
            session: None,
            next_id: 1,
        };
        if modern {
            return Ok(s);
        }
        let (headers, init) = s.post_request("initialize", initialize_params("2025-11-25")).await;
        if init.get("result").is_none() {
            return Err(init);
        }
        s.session = headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
        assert!(s.session.is_some(), "initialize answered without Mcp-Session-Id: {init}");
        let (status, _) = s.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), None).await;
        assert_eq!(status, 202, "notifications/initialized");
        Ok(s)
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.post_request(method, params).await.1
    }

    async fn post_request(&mut self, method: &str, mut params: Value) -> (reqwest::header::HeaderMap, Value) {
        let id = json!(self.next_id);
        self.next_id += 1;
        let name = match method {
            "tools/call" | "prompts/get" => params["name"].as_str().map(str::to_owned),
            "resources/read" => params["uri"].as_str().map(str::to_owned),
            _ => None,
        };
        if self.modern {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "leaks", "version": "1"},
            });
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let resp = self.send(body, Some((method, name))).await;
        let headers = resp.headers().clone();
        let messages = read_messages(resp).await;
        let answer = messages.into_iter().find(|m| is_response(m, &id));
        (headers, answer.unwrap_or_else(|| panic!("{method} {params}: no response on {}", self.url)))
    }

    async fn post(&self, body: Value, routing: Option<(&str, Option<String>)>) -> (u16, Vec<Value>) {
        let resp = self.send(body, routing).await;
        (resp.status().as_u16(), read_messages(resp).await)
    }

    async fn send(&self, body: Value, routing: Option<(&str, Option<String>)>) -> reqwest::Response {
        let mut b = self
            .http
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if self.modern {
            b = b.header("mcp-protocol-version", MODERN);
            if let Some((method, name)) = routing {
                b = b.header("mcp-method", method);
                if let Some(name) = name {
                    b = b.header("mcp-name", name);
                }
            }
        } else if let Some(session) = &self.session {
            b = b.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
        }
        b.body(body.to_string()).send().await.unwrap_or_else(|e| panic!("POST {}: {e:?}", self.url))
    }

    async fn close(self) {
        if let Some(session) = &self.session {
            let _ = self.http.delete(&self.url).header("mcp-session-id", session).send().await;
        }
    }
}

/// The JSON-RPC messages of a response: a JSON body, or every event of an SSE one.
async fn read_messages(resp: reqwest::Response) -> Vec<Value> {
    let sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"));
    if !sse {
        let text = resp.text().await.unwrap_or_default();
        return match serde_json::from_str::<Value>(&text) {
            Ok(Value::Array(items)) => items,
            Ok(v) => vec![v],
            Err(_) => Vec::new(),
        };
    }
    let mut out = Vec::new();
    let mut events = Box::pin(seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20));
    while let Some(Ok(event)) = events.next().await {
        if let Ok(v) = serde_json::from_str::<Value>(&event.data) {
            out.push(v);
        }
    }
    out
}

// --- HTTP+SSE (2024-11-05) ----------------------------------------------------------------

pub struct SseSession {
    http: reqwest::Client,
    post_url: String,
    messages: mpsc::UnboundedReceiver<Value>,
    reader: tokio::task::JoinHandle<()>,
    next_id: u64,
}

impl SseSession {
    async fn open(url: &str, credentials: &Credentials) -> Result<SseSession, Value> {
        let http = http_client(credentials);
        let stream_url = with_query(&format!("{url}/sse"), &credentials.query);
        let resp = http
            .get(&stream_url)
            .header("accept", "text/event-stream")
            .timeout(Duration::from_secs(600))
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {stream_url}: {e:?}"));
        assert_eq!(resp.status().as_u16(), 200, "GET {stream_url}");
        let (endpoint_tx, endpoint_rx) = tokio::sync::oneshot::channel();
        let (tx, messages) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            let mut events = Box::pin(seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20));
            let mut endpoint_tx = Some(endpoint_tx);
            while let Some(Ok(event)) = events.next().await {
                if event.event.as_deref() == Some("endpoint") {
                    if let Some(t) = endpoint_tx.take() {
                        let _ = t.send(event.data);
                    }
                } else if let Ok(v) = serde_json::from_str::<Value>(&event.data)
                    && tx.send(v).is_err()
                {
                    return;
                }
            }
        });
        let endpoint = tokio::time::timeout(WAIT, endpoint_rx).await.expect("endpoint event").expect("stream ended");
        let base = reqwest::Url::parse(&stream_url).expect("url");
        let post_url = with_query(base.join(&endpoint).expect("endpoint").as_str(), &credentials.query);
        let mut s = SseSession { http, post_url, messages, reader, next_id: 1 };
        let init = s.request("initialize", initialize_params("2024-11-05")).await;
        if init.get("result").is_none() {
            return Err(init);
        }
        s.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        Ok(s)
    }

    async fn post(&self, body: Value) {
        let resp = self
            .http
            .post(&self.post_url)
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {}: {e:?}", self.post_url));
        assert_eq!(resp.status().as_u16(), 202, "POST {}: {}", self.post_url, resp.text().await.unwrap_or_default());
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        loop {
            let msg = tokio::time::timeout(WAIT, self.messages.recv())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer on the stream"))
                .unwrap_or_else(|| panic!("{method}: the stream ended"));
            if is_response(&msg, &id) {
                return msg;
            }
        }
    }
}

// --- seawall stdio ------------------------------------------------------------------------

pub struct StdioSession {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Value>,
    next_id: u64,
}

impl StdioSession {
    async fn open(config: &Path, upstream: Option<&str>, captures: &StdioCaptures) -> Result<StdioSession, Value> {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_seawall"));
        cmd.arg("stdio").arg("--config").arg(config);
        if let Some(up) = upstream {
            cmd.args(["--upstream", up]);
        }
        cmd.env("RUST_LOG", "info").stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.kill_on_drop(true).spawn().expect("spawn seawall stdio");
        let stdin = child.stdin.take();
        let (out, err) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
        captures.stdout.lock().push(Arc::clone(&out));
        captures.stderr.lock().push(Arc::clone(&err));
        let (tx, lines) = mpsc::unbounded_channel();
        let mut stdout = child.stdout.take().expect("stdout");
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            let mut pending = Vec::new();
            while let Ok(n) = stdout.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                out.lock().extend_from_slice(&buf[..n]);
                pending.extend_from_slice(&buf[..n]);
                while let Some(end) = pending.iter().position(|&b| b == b'\n') {
                    let line: Vec<u8> = pending.drain(..=end).collect();
                    let v = serde_json::from_slice::<Value>(&line)
                        .unwrap_or_else(|e| panic!("seawall stdio wrote a line that is not JSON ({e})"));
                    let _ = tx.send(v);
                }
            }
        });
        let mut stderr = child.stderr.take().expect("stderr");
        tokio::spawn(async move {
            let mut buf = vec![0u8; 16 * 1024];
            while let Ok(n) = stderr.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                err.lock().extend_from_slice(&buf[..n]);
            }
        });
        let mut s = StdioSession { child, stdin, lines, next_id: 1 };
        let init = s.request("initialize", initialize_params("2025-11-25")).await;
        if init.get("result").is_none() {
            s.close().await;
            return Err(init);
        }
        s.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        Ok(s)
    }

    async fn send(&mut self, msg: Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(format!("{msg}\n").as_bytes()).await.expect("write to seawall stdio");
        stdin.flush().await.expect("flush");
    }

    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        loop {
            let msg = tokio::time::timeout(WAIT, self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("{method}: no answer from seawall stdio"))
                .unwrap_or_else(|| panic!("{method}: seawall stdio closed its stdout"));
            if is_response(&msg, &id) {
                return msg;
            }
        }
    }

    async fn close(mut self) {
        self.stdin = None;
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}
