//! The protocol-era matrix, through the real binary: every client era seawall serves ×
//! every upstream kind it speaks to, sixteen cells, one scenario each.
//!
//! Client eras: modern (2026-07-28: stateless POSTs with the `_meta` envelope), Streamable
//! HTTP with a session (2025-11-25), HTTP+SSE (2024-11-05: `GET …/sse`, the `endpoint`
//! event, answers on the stream) and stdio (`seawall stdio --upstream NAME`). Upstream
//! kinds, each played by the demo: HTTP in the modern era (`protocol: modern`), HTTP in
//! the session era (`protocol: legacy`), HTTP+SSE (`transport: sse`) and a stdio child
//! (`share: per_session`, so that it may ask the client for sampling).
//!
//! Each cell runs on its own gateway and its own demo upstream, so each `--record` file
//! (the stdio demo writes one too) holds one cell's events; it uses the single-upstream
//! endpoint `/mcp/<kind>` or `--upstream`, so names stay plain. The scenario:
//! (1) discover or initialize; (2) find `echo`, `sleep` and `sample` in `tools/list`;
//! (3) call `echo`; (4) call `sleep` with a progress token and see increasing progress
//! before the answer; (5) call `sample`, whose sampling request the client answers in its
//! era (a server request it answers, or an `input_required` result it retries with
//! `inputResponses` and the `requestState`) to get `sampled: <its text>`; (6) read
//! `demo://readme` and get the `greet` prompt; (7) cancel a long `sleep` the way the era
//! cancels (`notifications/cancelled`, or closing the response stream), find the
//! cancellation in the upstream's record, call `echo` again, and see no answer to the
//! cancelled request. Every result is checked for its era's shape: `resultType` (and
//! caching hints where cacheable) for a modern client, none of the modern era's
//! `resultType`, `inputRequests`, `requestState` or envelope for the others.
//!
//! The client of each era is a few lines below over raw HTTP, SSE or stdio lines; the SDK
//! interop tests cover the SDKs. Cells run concurrently; a table of the results, and the
//! reasons of the cells listed in [`EXPECTED_FAILURES`], is printed (`-- --nocapture`).

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{DemoUpstream, Seawall, StdioSeawall, TestDir, Upstream, config_yaml, text_of};
use futures::StreamExt;
use futures::stream::BoxStream;
use serde_json::{Map, Value, json};

const MODERN: &str = "2026-07-28";
const STREAMABLE: &str = "2025-11-25";
const SSE: &str = "2024-11-05";

/// The `ms` of the sleep that is cancelled: long enough never to end on its own.
const LONG_SLEEP_MS: u64 = 30_000;
/// How long one message, or one recorded event, may take.
const WAIT: Duration = Duration::from_secs(20);
/// How long one cell may take, start to end.
const CELL_TIMEOUT: Duration = Duration::from_secs(50);
/// Cells running at once (each is a gateway and one or two demo processes).
const CONCURRENT_CELLS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Era {
    Modern,
    Streamable,
    Sse,
    Stdio,
}

impl Era {
    const ALL: [Era; 4] = [Era::Modern, Era::Streamable, Era::Sse, Era::Stdio];

    fn label(self) -> &'static str {
        match self {
            Era::Modern => "modern 2026-07-28",
            Era::Streamable => "streamable 2025-11-25",
            Era::Sse => "http+sse 2024-11-05",
            Era::Stdio => "stdio 2025-11-25",
        }
    }

    fn version(self) -> &'static str {
        match self {
            Era::Modern => MODERN,
            Era::Streamable | Era::Stdio => STREAMABLE,
            Era::Sse => SSE,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Modern,
    Legacy,
    Sse,
    Stdio,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Modern, Kind::Legacy, Kind::Sse, Kind::Stdio];

    /// The upstream's name in the cell's configuration (and its endpoint `/mcp/<name>`).
    fn name(self) -> &'static str {
        match self {
            Kind::Modern => "modern",
            Kind::Legacy => "legacy",
            Kind::Sse => "sse",
            Kind::Stdio => "stdio",
        }
    }
}

/// The last step: a session-era client's cancelled request gets no answer.
const NOT_ANSWERED: &str = "7 the cancelled request not answered";

/// Cells known to fail at one step, and why (printed with the table). A listed cell that
/// passes, or that fails at another step, fails the test: the list cannot hide another
/// failure, nor outlive the bug.
const EXPECTED_FAILURES: &[(Era, &[Kind], &str, &str)] = &[];

/// Where a cell stopped, and why.
#[derive(Debug)]
struct Failure {
    step: &'static str,
    why: String,
}

// ---------------------------------------------------------------------------------------
// The scenario
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_era_meets_every_upstream_kind() {
    let _alone = crate::support::one_at_a_time().await;
    let started = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(CONCURRENT_CELLS));
    let mut cells = Vec::new();
    for era in Era::ALL {
        for kind in Kind::ALL {
            let slots = Arc::clone(&slots);
            let step = Step::default();
            let task = tokio::spawn({
                let step = step.clone();
                async move {
                    let _slot = slots.acquire_owned().await.expect("semaphore");
                    let t0 = Instant::now();
                    tokio::time::timeout(CELL_TIMEOUT, run_cell(era, kind, &step))
                        .await
                        .map(|()| t0.elapsed())
                        .map_err(|_| format!("no end within {CELL_TIMEOUT:?}"))
                }
            });
            cells.push((era, kind, step, task));
        }
    }
    let mut outcomes = Vec::new();
    for (era, kind, step, task) in cells {
        let outcome = match task.await {
            Ok(Ok(took)) => Ok(took),
            Ok(Err(why)) => Err(Failure { step: step.get(), why }),
            Err(join) => Err(Failure { step: step.get(), why: panic_text(join) }),
        };
        outcomes.push((era, kind, outcome));
    }
    let unexpected = report(&outcomes);
    println!("matrix: {} cells in {:.1} s", outcomes.len(), started.elapsed().as_secs_f64());
    assert!(unexpected.is_empty(), "cells not as expected:\n{}", unexpected.join("\n"));
}

/// One cell: its upstream, its gateway, its client, the scenario.
async fn run_cell(era: Era, kind: Kind, step: &Step) {
    step.set("start");
    let upstream = CellUpstream::start(kind).await;
    let mut client = Client::start(era, kind, &upstream.yaml).await;
    let record = &upstream.record;

    step.set("1 discover/initialize");
    let hello = client.handshake().await;
    let server_info = match era {
        Era::Modern => {
            assert!(hello["supportedVersions"].as_array().is_some_and(|v| v.contains(&json!(MODERN))), "{hello}");
            assert_era_shape(era, "server/discover", &hello, true);
            &hello["_meta"]["io.modelcontextprotocol/serverInfo"]
        }
        _ => {
            assert_eq!(hello["protocolVersion"], era.version(), "{hello}");
            &hello["serverInfo"]
        }
    };
    assert!(hello["capabilities"]["tools"].is_object(), "{hello}");
    assert_eq!(server_info["name"], "seawall-demo", "the upstream's own info on its own endpoint: {hello}");

    step.set("2 tools/list");
    let listed = client.request("tools/list", json!({})).await.result();
    assert_era_shape(era, "tools/list", &listed, true);
    let names: Vec<&str> =
        listed["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    for tool in ["echo", "sleep", "sample"] {
        assert!(names.contains(&tool), "{tool} missing from {names:?}");
    }

    step.set("3 echo");
    let echoed = client.call("echo", json!({"message": "across the matrix"})).await.result();
    assert_eq!(text_of(&echoed), "across the matrix", "{echoed}");
    assert_era_shape(era, "echo", &echoed, false);

    step.set("4 progress");
    let params = json!({"name": "sleep", "arguments": {"ms": 300}, "_meta": {"progressToken": "matrix-progress"}});
    let slept = client.request("tools/call", params).await;
    assert_eq!(text_of(&slept.result()), "slept 300 ms", "{:?}", slept.answer);
    assert_era_shape(era, "sleep", &slept.result(), false);
    let progress: Vec<&Value> = slept.before.iter().filter(|m| m["method"] == "notifications/progress").collect();
    assert!(!progress.is_empty(), "no progress before the answer: {:?}", slept.before);
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "matrix-progress"), "{progress:?}");
    let values: Vec<f64> = progress.iter().filter_map(|p| p["params"]["progress"].as_f64()).collect();
    assert!(values.len() == progress.len() && values.is_sorted_by(|a, b| a < b), "progress increases: {progress:?}");

    step.set("5 sampling");
    let sampled = client.call("sample", json!({"prompt": "say something"})).await;
    assert_eq!(text_of(&sampled.result()), format!("sampled: {}", client.sampling_text()), "{:?}", sampled.answer);
    assert_era_shape(era, "sample", &sampled.result(), false);
    assert_eq!(sampled.asked.len(), 1, "one sampling request answered: {:?}", sampled.asked);
    assert_eq!(sampled.asked[0]["method"], "sampling/createMessage", "{:?}", sampled.asked);
    assert_eq!(sampled.asked[0]["params"]["messages"][0]["content"]["text"], "say something");

    step.set("6 resource and prompt");
    let read = client.request("resources/read", json!({"uri": "demo://readme"})).await.result();
    assert!(read["contents"][0]["text"].as_str().is_some_and(|t| !t.is_empty()), "{read}");
    assert_era_shape(era, "resources/read", &read, true);
    let prompt = client.request("prompts/get", json!({"name": "greet", "arguments": {"name": "Ada"}})).await.result();
    assert_eq!(prompt["messages"][0]["content"]["text"], "Please greet Ada.", "{prompt}");
    assert_era_shape(era, "prompts/get", &prompt, false);

    step.set("7 cancellation");
    let long = json!({"name": "sleep", "arguments": {"ms": LONG_SLEEP_MS}});
    let reached = record.wait("the long sleep's call", |e| {
        e["event"] == "call" && e["tool"] == "sleep" && e["arguments"]["ms"] == LONG_SLEEP_MS
    });
    let (cancelled_id, call) = client.cancel_once(long, reached).await;
    assert!(call["id"].is_number() || call["id"].is_string(), "{call}");
    record
        .wait("its cancellation", |e| {
            e["event"] == "cancelled" && e["requestId"] == call["id"] && e.get("session") == call.get("session")
        })
        .await;
    let after = client.call("echo", json!({"message": "still here"})).await;
    assert_eq!(text_of(&after.result()), "still here", "{:?}", after.answer);
    step.set(NOT_ANSWERED);
    let late = after.before.iter().find(|m| is_answer_to(m, &json!(cancelled_id)));
    assert!(late.is_none(), "the cancelled request was answered on the shared channel: {late:?}");
    if let Some(rest) = client.cancelled_stream().await {
        let late = rest.iter().find(|m| is_answer_to(m, &json!(cancelled_id)));
        assert!(late.is_none(), "the cancelled request was answered on its own stream: {late:?}");
    }
    step.set("done");
}

/// The members of a result that belong to one era only: a modern client's results say
/// `resultType` and the cacheable ones carry caching hints; a session-era client's carry
/// no `resultType` nor what `input_required` takes, nor the modern envelope.
fn assert_era_shape(era: Era, what: &str, result: &Value, cacheable: bool) {
    if era == Era::Modern {
        assert_eq!(result["resultType"], "complete", "{what}: {result}");
        if cacheable {
            assert!(result["ttlMs"].is_u64(), "{what}: {result}");
            assert!(matches!(result["cacheScope"].as_str(), Some("public" | "private")), "{what}: {result}");
        }
        return;
    }
    // `ttlMs` and `cacheScope` may pass: to a session-era client they are unknown
    // members, which pass through untouched.
    for member in ["resultType", "inputRequests", "requestState"] {
        assert!(result.get(member).is_none(), "{what}: `{member}` reached a {} client: {result}", era.label());
    }
    let meta = result["_meta"].as_object().into_iter().flatten();
    let modern: Vec<&String> = meta.map(|(k, _)| k).filter(|k| k.starts_with("io.modelcontextprotocol/")).collect();
    assert!(modern.is_empty(), "{what}: {modern:?} reached a {} client: {result}", era.label());
}

/// Where a cell is in the scenario, for the table when it fails.
#[derive(Clone, Default)]
struct Step(Arc<parking_lot::Mutex<&'static str>>);

impl Step {
    fn set(&self, step: &'static str) {
        *self.0.lock() = step;
    }

    fn get(&self) -> &'static str {
        *self.0.lock()
    }
}

fn panic_text(join: tokio::task::JoinError) -> String {
    if !join.is_panic() {
        return join.to_string();
    }
    let payload = join.into_panic();
    let text = payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_else(|| "a panic".to_owned());
    text.lines().next().unwrap_or_default().chars().take(300).collect()
}

/// Prints the table and each failure; returns the cells that are not as expected (a
/// failure not listed in [`EXPECTED_FAILURES`], a listed one that passed or failed at
/// another step).
fn report(outcomes: &[(Era, Kind, Result<Duration, Failure>)]) -> Vec<String> {
    let expected = |era: Era, kind: Kind| {
        EXPECTED_FAILURES
            .iter()
            .find(|(e, kinds, _, _)| *e == era && kinds.contains(&kind))
            .map(|(_, _, s, w)| (*s, *w))
    };
    let mut table = format!("{:<24}", "client \\ upstream");
    for kind in Kind::ALL {
        table.push_str(&format!("| {:<16}", kind.name()));
    }
    table.push('\n');
    let mut notes = Vec::new();
    let mut unexpected = Vec::new();
    for era in Era::ALL {
        table.push_str(&format!("{:<24}", era.label()));
        for kind in Kind::ALL {
            let outcome = outcomes.iter().find(|(e, k, _)| *e == era && *k == kind).map(|(_, _, o)| o);
            let cell = format!("{} × {}", era.label(), kind.name());
            let mark = match (outcome, expected(era, kind)) {
                (Some(Ok(took)), None) => format!("ok {:.1} s", took.as_secs_f64()),
                (Some(Ok(_)), Some((step, _))) => {
                    unexpected
                        .push(format!("{cell}: passes, but is listed as failing at {step:?}; take it off the list"));
                    "PASSES (listed)".to_owned()
                }
                (Some(Err(f)), Some((step, why))) if f.step == step => {
                    notes.push(format!("{cell}: expected failure at {step:?}: {why}\n    {}", f.why));
                    "expected fail".to_owned()
                }
                (Some(Err(f)), _) => {
                    unexpected.push(format!("{cell}: at {:?}: {}", f.step, f.why));
                    "FAIL".to_owned()
                }
                (None, _) => "not run".to_owned(),
            };
            table.push_str(&format!("| {mark:<16}"));
        }
        table.push('\n');
    }
    println!("\n{table}");
    for line in notes.iter().chain(&unexpected) {
        println!("{line}");
    }
    unexpected
}

// ---------------------------------------------------------------------------------------
// The upstream side and the gateway
// ---------------------------------------------------------------------------------------

/// A cell's upstream: a demo over HTTP, or the stdio demo the gateway launches; either
/// way recording to one file.
struct CellUpstream {
    _demo: Option<DemoUpstream>,
    yaml: String,
    record: Record,
    _dir: TestDir,
}

impl CellUpstream {
    async fn start(kind: Kind) -> CellUpstream {
        let dir = TestDir::new("matrix");
        let name = kind.name();
        let (demo, entry, record) = if kind == Kind::Stdio {
            let record = dir.join("stdio-record.jsonl");
            let extra_args = vec!["--record".to_owned(), record.display().to_string()];
            (None, Upstream::DemoStdio { name: name.to_owned(), per_session: true, extra_args }, record)
        } else {
            let demo = DemoUpstream::start(true, &[]).await;
            let entry = match kind {
                Kind::Sse => Upstream::sse(name, &demo.sse_url()),
                _ => Upstream::http(name, &demo.url),
            };
            let record = demo.record.clone().expect("record file");
            (Some(demo), entry, record)
        };
        let mut yaml = config_yaml(&[entry], "");
        let protocol = match kind {
            Kind::Modern => Some("modern"),
            Kind::Legacy => Some("legacy"),
            _ => None,
        };
        if let (Some(protocol), Some(demo)) = (protocol, &demo) {
            let url = format!("    url: \"{}\"\n", demo.url);
            yaml = yaml.replace(&url, &format!("{url}    protocol: {protocol}\n"));
            assert!(yaml.contains("protocol:"), "{yaml}");
        }
        CellUpstream { _demo: demo, yaml, record: Record(record), _dir: dir }
    }
}

/// An upstream's `--record` file.
struct Record(PathBuf);

impl Record {
    fn events(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }

    /// Waits for the first recorded event that `pick` accepts.
    fn wait<P: Fn(&Value) -> bool>(&self, what: &str, pick: P) -> impl Future<Output = Value> + use<P> {
        let (path, what) = (self.0.clone(), what.to_owned());
        async move {
            let deadline = Instant::now() + WAIT;
            loop {
                if let Some(event) = Record::events(&path).into_iter().find(&pick) {
                    return event;
                }
                assert!(Instant::now() < deadline, "the upstream never recorded {what}: {:#?}", Record::events(&path));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The clients, one per era
// ---------------------------------------------------------------------------------------

/// What one request produced.
#[derive(Debug, Default)]
struct Exchange {
    /// Messages that arrived before the answer (notifications, other answers).
    before: Vec<Value>,
    /// Requests of the server's that the client answered on the way (for the modern era:
    /// the `inputRequests` of `input_required` results).
    asked: Vec<Value>,
    /// The answer.
    answer: Value,
}

impl Exchange {
    fn result(&self) -> Value {
        match self.answer.get("result") {
            Some(result) => result.clone(),
            None => panic!("expected a result, got {}", self.answer),
        }
    }
}

/// A sampling result carrying `text`.
fn sampling_answer(request: &Value, text: &str) -> Value {
    assert_eq!(request["method"], "sampling/createMessage", "only sampling is expected: {request}");
    json!({"role": "assistant", "model": "matrix", "content": {"type": "text", "text": text}})
}

fn is_answer_to(message: &Value, id: &Value) -> bool {
    &message["id"] == id && message.get("method").is_none()
}

/// One client in its era, with the gateway it talks to (for stdio, its child).
struct Client {
    wire: Wire,
    _gateway: Option<Seawall>,
}

/// How the client of each era reaches seawall.
enum Wire {
    Modern(ModernClient),
    Streamable(StreamableClient),
    Sse(SseClient),
    Stdio(Box<StdioClient>),
}

impl Client {
    async fn start(era: Era, kind: Kind, yaml: &str) -> Client {
        if era == Era::Stdio {
            let proc = StdioSeawall::start(yaml, &["--upstream", kind.name()], &[]);
            return Client { wire: Wire::Stdio(Box::new(StdioClient { proc, ids: 0 })), _gateway: None };
        }
        let gw = Seawall::start(yaml).await;
        let url = gw.upstream_url(kind.name());
        let wire = match era {
            Era::Modern => Wire::Modern(ModernClient::new(&url)),
            Era::Streamable => Wire::Streamable(StreamableClient::new(&url)),
            _ => Wire::Sse(SseClient::open(&format!("{url}/sse")).await),
        };
        Client { wire, _gateway: Some(gw) }
    }

    /// The text this client's sampling answers carry.
    fn sampling_text(&self) -> &'static str {
        match &self.wire {
            Wire::Modern(..) => "modern client's answer",
            Wire::Streamable(..) => "streamable client's answer",
            Wire::Sse(..) => "sse client's answer",
            Wire::Stdio(..) => "stdio client's answer",
        }
    }

    /// `server/discover` for the modern era, else `initialize` and
    /// `notifications/initialized`; the result.
    async fn handshake(&mut self) -> Value {
        if let Wire::Modern(c) = &mut self.wire {
            return c.request("server/discover", json!({}), "").await.result();
        }
        let version = match &mut self.wire {
            Wire::Sse(..) => SSE,
            _ => STREAMABLE,
        };
        let params = json!({"protocolVersion": version, "capabilities": {"sampling": {}},
                            "clientInfo": {"name": "seawall-matrix", "version": "1"}});
        let result = self.request("initialize", params).await.result();
        self.notify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        result
    }

    async fn request(&mut self, method: &str, params: Value) -> Exchange {
        let text = self.sampling_text();
        match &mut self.wire {
            Wire::Modern(c) => c.request(method, params, text).await,
            Wire::Streamable(c) => c.request(method, params, text).await,
            Wire::Sse(c) => c.request(method, params, text).await,
            Wire::Stdio(c) => c.request(method, params, text).await,
        }
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Exchange {
        self.request("tools/call", json!({"name": tool, "arguments": arguments})).await
    }

    async fn notify(&mut self, message: Value) {
        match &mut self.wire {
            Wire::Modern(..) => unreachable!("a modern client sends no notifications here"),
            Wire::Streamable(c) => c.notify(message).await,
            Wire::Sse(c) => c.send(message).await,
            Wire::Stdio(c) => c.proc.send(message).await,
        }
    }

    /// Starts `tools/call params`, waits for `reached` (the upstream saw the call) and
    /// cancels it as the era does; returns the request's id and what `reached` gave.
    async fn cancel_once(&mut self, params: Value, reached: impl Future<Output = Value>) -> (u64, Value) {
        match &mut self.wire {
            Wire::Modern(c) => {
                let id = c.next_id();
                let post = c.post(id, "tools/call", &with_envelope(params));
                let call =
                    tokio::spawn(async move { messages(post.send().await.expect("POST")).collect::<Vec<_>>().await });
                let seen = reached.await;
                assert!(!call.is_finished(), "answered before it was cancelled: {:?}", call.await);
                // Closing the response stream is the modern era's cancellation.
                call.abort();
                let _ = call.await;
                (id, seen)
            }
            _ => {
                let id = self.start_call(params).await;
                let seen = reached.await;
                let reason = "the matrix cancels it";
                let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                                    "params": {"requestId": id, "reason": reason}});
                self.notify(cancel).await;
                (id, seen)
            }
        }
    }

    /// Streamable HTTP: what the cancelled request's own answer stream carried until it
    /// ended (a few seconds at most).
    async fn cancelled_stream(&mut self) -> Option<Vec<Value>> {
        let Wire::Streamable(c) = &mut self.wire else { return None };
        let stream = c.cancelled.take().expect("a request was cancelled");
        let rest = tokio::time::timeout(Duration::from_secs(5), stream).await;
        Some(rest.expect("the cancelled request's stream ends").expect("read"))
    }

    /// Sends `tools/call params` without waiting for its answer; the request's id.
    async fn start_call(&mut self, params: Value) -> u64 {
        let message = |id: u64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
        match &mut self.wire {
            Wire::Modern(..) => unreachable!("the modern era cancels by closing the stream"),
            Wire::Streamable(c) => {
                let id = c.next_id();
                let post = c.post(&message(id));
                let stream = async move { messages(post.send().await.expect("POST")).collect::<Vec<_>>().await };
                c.cancelled = Some(tokio::spawn(stream));
                id
            }
            Wire::Sse(c) => {
                let id = c.next_id();
                c.send(message(id)).await;
                id
            }
            Wire::Stdio(c) => {
                c.ids += 1;
                c.proc.send(message(c.ids)).await;
                c.ids
            }
        }
    }
}

/// The JSON-RPC messages of an HTTP answer: its JSON body, or each event of its stream.
fn messages(resp: reqwest::Response) -> BoxStream<'static, Value> {
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
    if content_type.starts_with("text/event-stream") {
        return seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20)
            .filter_map(|event| async move { serde_json::from_str(&event.ok()?.data).ok() })
            .boxed();
    }
    let status = resp.status();
    futures::stream::once(async move {
        let body = resp.text().await.unwrap_or_default();
        serde_json::from_str(&body).unwrap_or_else(|_| json!({"http_status": status.as_u16(), "body": body}))
    })
    .boxed()
}

/// A client's side of one request in a session era: read messages until the answer,
/// answering the server's requests on the way.
trait Conversation {
    /// The next message for this request.
    async fn next(&mut self) -> Value;
    /// Sends the client's answer to a server request.
    async fn answer(&mut self, message: Value);
}

async fn converse(c: &mut impl Conversation, id: u64, sampling_text: &str) -> Exchange {
    let id = json!(id);
    let mut exchange = Exchange::default();
    loop {
        let message = c.next().await;
        if is_answer_to(&message, &id) {
            exchange.answer = message;
            return exchange;
        }
        if message.get("method").is_some() && message.get("id").is_some() {
            let result = sampling_answer(&message, sampling_text);
            c.answer(json!({"jsonrpc": "2.0", "id": message["id"], "result": result})).await;
            exchange.asked.push(message);
        } else {
            exchange.before.push(message);
        }
    }
}

// --- modern (2026-07-28) -----------------------------------------------------------------

struct ModernClient {
    http: reqwest::Client,
    url: String,
    ids: u64,
}

/// `params` with the era's envelope in `_meta` (a client that can sample).
fn with_envelope(mut params: Value) -> Value {
    let meta = params.as_object_mut().expect("params object").entry("_meta").or_insert_with(|| json!({}));
    meta["io.modelcontextprotocol/protocolVersion"] = json!(MODERN);
    meta["io.modelcontextprotocol/clientCapabilities"] = json!({"sampling": {}});
    meta["io.modelcontextprotocol/clientInfo"] = json!({"name": "seawall-matrix", "version": "1"});
    params
}

impl ModernClient {
    fn new(url: &str) -> ModernClient {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        ModernClient { http, url: url.to_owned(), ids: 0 }
    }

    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
    }

    /// A POST as the era sends it: the headers mirror the body.
    fn post(&self, id: u64, method: &str, params: &Value) -> reqwest::RequestBuilder {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut post = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", method);
        let name = match method {
            "tools/call" | "prompts/get" => params["name"].as_str(),
            "resources/read" => params["uri"].as_str(),
            _ => None,
        };
        if let Some(name) = name {
            post = post.header("mcp-name", name);
        }
        post.body(body.to_string())
    }

    /// Sends the request; an `input_required` answer is answered by a retry under a new
    /// id with `inputResponses` and the `requestState`, until the request completes.
    async fn request(&mut self, method: &str, params: Value, sampling_text: &str) -> Exchange {
        let mut params = with_envelope(params);
        let mut exchange = Exchange::default();
        for _round in 0..4 {
            let id = self.next_id();
            let mut stream = messages(self.post(id, method, &params).send().await.expect("POST"));
            let answer = loop {
                let message = tokio::time::timeout(WAIT, stream.next())
                    .await
                    .unwrap_or_else(|_| panic!("no answer to {method} within {WAIT:?}"))
                    .unwrap_or_else(|| panic!("the answer's stream ended before the answer to {method}"));
                if is_answer_to(&message, &json!(id)) {
                    break message;
                }
                exchange.before.push(message);
            };
            let result = &answer["result"];
            if result["resultType"] != "input_required" {
                exchange.answer = answer;
                return exchange;
            }
            let mut responses = Map::new();
            for (key, request) in result["inputRequests"].as_object().into_iter().flatten() {
                responses.insert(key.clone(), sampling_answer(request, sampling_text));
                exchange.asked.push(request.clone());
            }
            params["inputResponses"] = Value::Object(responses);
            params["requestState"] = result["requestState"].clone();
        }
        panic!("{method} still asks for input after 4 rounds: {exchange:?}")
    }
}

// --- Streamable HTTP with a session (2025-11-25) ----------------------------------------

struct StreamableClient {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    ids: u64,
    /// The answer stream of the request cancelled, read in the background.
    cancelled: Option<tokio::task::JoinHandle<Vec<Value>>>,
}

impl StreamableClient {
    fn new(url: &str) -> StreamableClient {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        StreamableClient { http, url: url.to_owned(), session: None, ids: 0, cancelled: None }
    }

    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
    }

    fn post(&self, message: &Value) -> reqwest::RequestBuilder {
        let mut post = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = &self.session {
            post = post.header("mcp-session-id", session).header("mcp-protocol-version", STREAMABLE);
        }
        post.body(message.to_string())
    }

    async fn request(&mut self, method: &str, params: Value, sampling_text: &str) -> Exchange {
        let id = self.next_id();
        let resp = self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).send().await;
        let resp = resp.expect("POST");
        if method == "initialize" {
            let session = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
            self.session = Some(session.expect("the initialize answer names the session").to_owned());
        }
        let mut answer_stream = PostStream { client: self, stream: messages(resp) };
        converse(&mut answer_stream, id, sampling_text).await
    }

    async fn notify(&self, message: Value) {
        let status = self.post(&message).send().await.expect("POST").status();
        assert_eq!(status.as_u16(), 202, "POST of {message}");
    }
}

/// One POST's answer stream; the client's answers are POSTs of their own.
struct PostStream<'c> {
    client: &'c StreamableClient,
    stream: BoxStream<'static, Value>,
}

impl Conversation for PostStream<'_> {
    async fn next(&mut self) -> Value {
        tokio::time::timeout(WAIT, self.stream.next())
            .await
            .unwrap_or_else(|_| panic!("no message within {WAIT:?}"))
            .expect("the answer's stream ended before the answer")
    }

    async fn answer(&mut self, message: Value) {
        self.client.notify(message).await;
    }
}

// --- HTTP+SSE (2024-11-05) ---------------------------------------------------------------

struct SseClient {
    http: reqwest::Client,
    /// The `endpoint` event's URL, resolved against the stream's.
    post_url: String,
    events: tokio::sync::mpsc::UnboundedReceiver<Value>,
    reader: tokio::task::JoinHandle<()>,
    ids: u64,
}

impl SseClient {
    /// GETs the event stream and reads its first event, `endpoint`.
    async fn open(url: &str) -> SseClient {
        let http = reqwest::Client::builder().build().expect("client");
        let resp = http.get(url).header("accept", "text/event-stream").send().await.expect("GET");
        assert_eq!(resp.status().as_u16(), 200, "GET {url}");
        let mut stream = Box::pin(seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20));
        let first =
            tokio::time::timeout(WAIT, stream.next()).await.expect("a first event").expect("open").expect("SSE");
        assert_eq!(first.event.as_deref(), Some("endpoint"), "{first:?}");
        let post_url = reqwest::Url::parse(url).expect("url").join(&first.data).expect("endpoint").to_string();
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            while let Some(Ok(event)) = stream.next().await {
                if let Ok(message) = serde_json::from_str(&event.data)
                    && tx.send(message).is_err()
                {
                    return;
                }
            }
        });
        SseClient { http, post_url, events, reader, ids: 0 }
    }

    fn next_id(&mut self) -> u64 {
        self.ids += 1;
        self.ids
    }

    /// POSTs a message to the endpoint: accepted (202), its answer on the stream.
    async fn send(&self, message: Value) {
        let post = self.http.post(&self.post_url).header("content-type", "application/json");
        let status = post.body(message.to_string()).send().await.expect("POST").status();
        assert_eq!(status.as_u16(), 202, "POST of {message}");
    }

    async fn request(&mut self, method: &str, params: Value, sampling_text: &str) -> Exchange {
        let id = self.next_id();
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        converse(self, id, sampling_text).await
    }
}

impl Conversation for SseClient {
    async fn next(&mut self) -> Value {
        tokio::time::timeout(WAIT, self.events.recv())
            .await
            .unwrap_or_else(|_| panic!("no message on the stream within {WAIT:?}"))
            .expect("the event stream ended")
    }

    async fn answer(&mut self, message: Value) {
        self.send(message).await;
    }
}

impl Drop for SseClient {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

// --- stdio ---------------------------------------------------------------------------------

struct StdioClient {
    proc: StdioSeawall,
    ids: u64,
}

impl StdioClient {
    async fn request(&mut self, method: &str, params: Value, sampling_text: &str) -> Exchange {
        self.ids += 1;
        let id = self.ids;
        self.proc.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        converse(self, id, sampling_text).await
    }
}

impl Conversation for StdioClient {
    async fn next(&mut self) -> Value {
        self.proc.next().await
    }

    async fn answer(&mut self, message: Value) {
        self.proc.send(message).await;
    }
}
