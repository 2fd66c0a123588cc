//! Hostile clients through the real binary: malformed, deep, huge and mistyped messages,
//! forbidden ids, duplicate ids in flight, oversized bodies declared and chunked, slow
//! bodies, abandoned streams, and requests on ended sessions. Each gets a well-formed
//! answer (an HTTP error with a JSON-RPC error body, or a JSON-RPC error) or is cut off
//! by a documented limit; after each the next good request works, and `/healthz` answers
//! throughout. The header and authority tricks are in `tests/front.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::front_wire::{addr_of, body_of, raw_exchange, status_of};
use crate::support::mcp_client::Client;
use crate::support::{Seawall, Upstream, config_yaml};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The body limit of the hostile gateway (the default is 4 MiB): room for a million
/// brackets, not for the chunked body below.
const MAX_BODY: usize = 3 << 20;

/// Polls `/healthz` every 50 ms until dropped, counting the polls and the failures.
struct Watchdog {
    stop: Arc<AtomicBool>,
    polls: Arc<AtomicUsize>,
    failures: Arc<parking_lot::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Watchdog {
    fn start(gw: &Seawall) -> Watchdog {
        let url = format!("{}/healthz", gw.admin_url);
        let (stop, polls) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
        let failures = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
        let (s, p, f) = (Arc::clone(&stop), Arc::clone(&polls), Arc::clone(&failures));
        let task = tokio::spawn(async move {
            while !s.load(Ordering::SeqCst) {
                match http.get(&url).send().await {
                    Ok(r) if r.status() == 200 => {}
                    Ok(r) => f.lock().push(format!("status {}", r.status())),
                    Err(e) => f.lock().push(e.to_string()),
                }
                p.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Watchdog { stop, polls, failures, task }
    }

    async fn finish(self) -> usize {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.task.await;
        let failures = self.failures.lock().clone();
        assert!(failures.is_empty(), "/healthz failed during the hostile run: {failures:?}");
        self.polls.load(Ordering::SeqCst)
    }
}

/// The answer to a raw POST of `body` on the session.
async fn post(c: &Client, body: impl Into<reqwest::Body>) -> (u16, String) {
    let mut b = c
        .http
        .post(&c.url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(s) = &c.session {
        b = b.header("mcp-session-id", s).header("mcp-protocol-version", &c.version);
    }
    let resp = b.body(body).send().await.expect("POST");
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap_or_default())
}

/// A JSON-RPC error answer with `code` (and the HTTP status `status`).
#[track_caller]
fn assert_error(what: &str, (status, whole): &(u16, String), want_status: u16, want_code: i64) {
    let body = whole.get(..whole.len().min(400)).unwrap_or(whole);
    assert_eq!(*status, want_status, "{what}: {body}");
    let value: Value = serde_json::from_str(whole).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {body}"));
    assert_eq!(value["jsonrpc"], "2.0", "{what}: {body}");
    assert_eq!(value["error"]["code"], want_code, "{what}: {body}");
    assert!(value["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: {body}");
}

/// The gateway still serves: a good call on the same session is answered.
async fn still_serves(c: &Client, what: &str) {
    let echoed = c.call_tool(900, "demo__echo", json!({"message": "still here"})).await;
    assert_eq!(echoed["content"][0]["text"], "still here", "after {what}: {echoed}");
}

async fn gateway() -> Seawall {
    let extra = format!("limits: {{ max_body_bytes: {MAX_BODY}, body_timeout: 2s }}\n");
    Seawall::start(&config_yaml(&[Upstream::demo_stdio("demo", false)], &extra)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_deep_huge_and_mistyped_messages_get_well_formed_errors() {
    let gw = gateway().await;
    let dog = Watchdog::start(&gw);
    let c = Client::connect(&gw.url, json!({})).await;
    let call = |id: Value, params: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});

    let cases: Vec<(&str, Vec<u8>, u16, i64)> = vec![
        ("truncated JSON", br#"{"jsonrpc":"2.0","id":1,"method":"tools/ca"#.to_vec(), 400, -32700),
        ("invalid UTF-8", b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\xfe\"}".to_vec(), 400, -32700),
        ("a lone surrogate escape", br#"{"jsonrpc":"2.0","id":1,"method":"\ud800"}"#.to_vec(), 400, -32600),
        ("an empty body", Vec::new(), 400, -32700),
        ("not an object", b"42".to_vec(), 400, -32600),
        // Taken whole as raw params (never built into a tree), and refused as not an object.
        ("10,000-deep nesting", nested(10_000), 200, -32602),
        ("1,000,000-deep nesting", nested(1_000_000), 200, -32602),
        ("an exponent past f64", br#"{"jsonrpc":"2.0","id":1e999999,"method":"ping"}"#.to_vec(), 400, -32600),
        ("a fractional id", br#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#.to_vec(), 400, -32600),
        ("an object id", br#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#.to_vec(), 400, -32600),
        ("an array id", br#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#.to_vec(), 400, -32600),
        ("a boolean id", br#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#.to_vec(), 400, -32600),
        ("a method that is a number", br#"{"jsonrpc":"2.0","id":1,"method":5}"#.to_vec(), 400, -32600),
        ("jsonrpc 1.0", br#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#.to_vec(), 400, -32600),
        ("no jsonrpc member", br#"{"id":1,"method":"ping"}"#.to_vec(), 400, -32600),
        ("a duplicate key", br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#.to_vec(), 400, -32600),
        (
            "a result and an error at once",
            br#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#.to_vec(),
            400,
            -32600,
        ),
        ("trailing garbage", br#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#.to_vec(), 400, -32700),
    ];
    for (what, body, status, code) in cases {
        let answer = post(&c, body).await;
        assert_error(what, &answer, status, code);
        still_serves(&c, what).await;
    }

    // Well-formed JSON-RPC with wrong MCP types: answered on the JSON-RPC level.
    let params = c.post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": "x"})).await;
    assert_eq!(
        (params.status, params.error()["code"].clone()),
        (400, json!(-32600)),
        "params a string: {}",
        params.raw
    );
    let typed: Vec<(&str, Value, i64)> = vec![
        ("a tool name that is a number", call(json!(3), json!({"name": 7})), -32602),
        ("no tool name", call(json!(4), json!({"arguments": {}})), -32602),
        ("an unknown method", json!({"jsonrpc": "2.0", "id": 6, "method": "x/../../etc/passwd"}), -32601),
        ("a huge tool name", call(json!(7), json!({"name": "a".repeat(200_000), "arguments": {}})), -32602),
        (
            "a cursor that is not ours",
            json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list", "params": {"cursor": "%%%"}}),
            -32602,
        ),
    ];
    for (what, body, code) in typed {
        let reply = c.post(body).await;
        assert_eq!(reply.status, 200, "{what}: {}", reply.raw);
        assert_eq!(reply.error()["code"], code, "{what}: {}", reply.raw);
        still_serves(&c, what).await;
    }

    // An integer id of a million digits is an integer: answered, with the id as sent.
    let digits = "9".repeat(1_000_000);
    let (status, answer) = post(&c, format!(r#"{{"jsonrpc":"2.0","id":{digits},"method":"ping"}}"#)).await;
    assert_eq!(status, 200);
    assert!(answer.starts_with(&format!(r#"{{"jsonrpc":"2.0","id":{digits},"result""#)), "a million-digit id");
    still_serves(&c, "a million-digit id").await;

    // Arguments of the wrong type are the tool's input error, told to the model.
    let wrong = c.call_tool(5, "demo__echo", json!([1])).await;
    assert_eq!(wrong["isError"], true, "{wrong}");
    assert!(wrong["content"][0]["text"].as_str().is_some_and(|t| t.contains("invalid arguments")), "{wrong}");

    // Deep arguments of a real tool: never built past serde's depth limit.
    let mut deep =
        br#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"demo__echo","arguments":{"message":"#
            .to_vec();
    deep.extend(std::iter::repeat_n(b'[', 100_000));
    deep.extend(std::iter::repeat_n(b']', 100_000));
    deep.extend_from_slice(b"}}}");
    assert_error("100,000-deep arguments", &post(&c, deep).await, 200, -32602);
    still_serves(&c, "deep arguments").await;

    // A huge string argument within the body limit goes through whole.
    let big = "x".repeat(MAX_BODY / 2);
    let echoed = c.call_tool(10, "demo__echo", json!({"message": big})).await;
    assert_eq!(echoed["content"][0]["text"].as_str().map(str::len), Some(big.len()));

    // A response to a request seawall never sent is accepted and dropped.
    let stray = c.post(json!({"jsonrpc": "2.0", "id": "never-asked", "result": {}})).await;
    assert_eq!(stray.status, 202, "{}", stray.raw);
    still_serves(&c, "a stray response").await;
    assert!(dog.finish().await > 0);
}

/// `[[[…]]]` as the params of a request, `depth` deep.
fn nested(depth: usize) -> Vec<u8> {
    let mut body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"#.to_vec();
    body.extend(std::iter::repeat_n(b'[', depth));
    body.extend(std::iter::repeat_n(b']', depth));
    body.push(b'}');
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_ids_oversized_and_slow_bodies_ended_sessions_and_abandoned_streams() {
    let gw = gateway().await;
    let dog = Watchdog::start(&gw);
    let addr = addr_of(&gw.url);
    let c = Client::connect(&gw.url, json!({})).await;

    // The same id twice in flight: the second is refused, the first answered.
    let first = {
        let c = c.clone();
        tokio::spawn(async move { c.call_tool(7, "demo__sleep", json!({"ms": 700})).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let second = c.request(7, "tools/call", json!({"name": "demo__echo", "arguments": {"message": "dup"}})).await;
    assert_eq!(second.error()["code"], -32600, "{}", second.raw);
    let first = first.await.expect("first");
    assert!(first.get("content").is_some(), "the first one is answered: {first}");

    // Oversized: declared (413 before the body is read) and chunked (cut at the limit).
    let declared = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n",
        MAX_BODY * 8
    );
    let answer = raw_exchange(addr, declared.as_bytes()).await;
    assert_eq!(status_of(&answer), 413, "{answer}");
    assert_eq!(body_of(&answer)["error"]["code"], -32600, "{answer}");
    // Chunked, on a client of its own: seawall answers 413 and closes the connection
    // under the upload, which the uploader sees as the answer or as the pipe breaking.
    let chunks = futures::stream::iter((0..64).map(|_| Ok::<_, std::io::Error>(vec![b' '; 64 * 1024])));
    let upload = reqwest::Client::new()
        .post(&c.url)
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .header("mcp-session-id", c.session.as_deref().expect("session"))
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await;
    match upload {
        Ok(resp) => {
            let answer = (resp.status().as_u16(), resp.text().await.unwrap_or_default());
            assert_error("a chunked body over the limit", &answer, 413, -32600);
        }
        Err(e) => assert!(e.is_request(), "a chunked body over the limit: {e}"),
    }
    still_serves(&c, "oversized bodies").await;

    // A body that trickles in slower than limits.body_timeout: 408, and the connection closes.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nMcp-Session-Id: {}\r\nContent-Length: 100\r\n\r\n{{",
        c.session.as_deref().expect("session")
    );
    slow.write_all(head.as_bytes()).await.expect("write");
    let started = Instant::now();
    let answer = crate::support::front_wire::read_until_closed(&mut slow, Duration::from_secs(10), "a slow body").await;
    assert_eq!(status_of(&answer), 408, "{answer}");
    assert!(started.elapsed() < Duration::from_secs(6), "cut off after {:?}", started.elapsed());
    still_serves(&c, "a slow body").await;

    // 200 GET streams opened and abandoned at once: each new one takes the stream over.
    for _ in 0..200 {
        let resp = c
            .http
            .get(&c.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", c.session.as_deref().expect("session"))
            .header("mcp-protocol-version", &c.version)
            .send()
            .await
            .expect("GET");
        assert_eq!(resp.status().as_u16(), 200);
        drop(resp);
    }
    still_serves(&c, "abandoned GET streams").await;

    // Sessions opened and left, up to the per-address cap (256, this client's own
    // included) and past it: the one past it is admitted, and the least recently used
    // idle session of the address (the first one left) is let go; a DELETE makes room
    // too. (Over one pooled connection: a connection per session would meet the
    // per-address connection cap first, as it should.)
    let mut left = Vec::new();
    for _ in 1..256 {
        left.push(crate::support::front_wire::session_on(&c).await);
    }
    still_serves(&c, "sessions left open").await;
    let past = crate::support::front_wire::session_on(&c).await;
    let gone = left.remove(0);
    assert_eq!(gone.request(1, "ping", json!({})).await.status, 404, "the least recently used idle session is let go");
    assert_eq!(past.request(1, "ping", json!({})).await.status, 200);
    still_serves(&c, "the session cap").await;
    let ended = left.pop().expect("a session");
    assert_eq!(ended.delete().await, 200);
    left.push(crate::support::front_wire::session_on(&c).await);
    let after = ended.request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"message": "x"}})).await;
    assert_eq!(after.status, 404, "{}", after.raw);
    assert_eq!(ended.delete().await, 404, "a session ends once");
    let forged = Client { session: Some("0".repeat(64)), ..Client::new(&gw.url) };
    assert_eq!(forged.request(1, "ping", json!({})).await.status, 404);
    still_serves(&c, "requests on ended and forged sessions").await;
    assert!(dog.finish().await > 0);
}
