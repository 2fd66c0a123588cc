//! The HTTP transport against a real listener on port 0.

use std::time::Duration;

use futures::StreamExt as _;
use serde_json::{Value, json};

use super::*;
use crate::demo::DemoConfig;

struct Client {
    http: reqwest::Client,
    url: String,
    base: String,
}

impl Client {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.ok();
        let listener = listener.unwrap_or_else(|| panic!("cannot bind"));
        let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or_default();
        let app = router(DemoServer::new(DemoConfig::default(), None));
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self { http: reqwest::Client::new(), url: format!("http://{addr}/mcp"), base: format!("http://{addr}") }
    }

    async fn post(&self, session: Option<&str>, msg: &Value) -> reqwest::Response {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(msg.to_string());
        if let Some(id) = session {
            req = req.header(SESSION_HEADER, id);
        }
        req.send().await.unwrap_or_else(|err| panic!("POST failed: {err}"))
    }

    async fn initialize(&self) -> String {
        let msg = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {"sampling": {}}}});
        let resp = self.post(None, &msg).await;
        assert_eq!(resp.status(), 200);
        let id = resp.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert_eq!(id.len(), 32);
        assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
        let body: Value = serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default();
        assert_eq!(body["result"]["protocolVersion"], "2025-06-18");
        id
    }
}

fn call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// The `data:` payloads of an SSE body.
fn sse_messages(body: &str) -> Vec<Value> {
    body.lines().filter_map(|l| l.strip_prefix("data:")).filter_map(|d| serde_json::from_str(d.trim()).ok()).collect()
}

async fn json_body(resp: reqwest::Response) -> Value {
    serde_json::from_str(&resp.text().await.unwrap_or_default()).unwrap_or_default()
}

#[tokio::test]
async fn sessions_json_answers_and_errors() {
    let client = Client::start().await;
    let session = client.initialize().await;
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(client.post(Some(&session), &initialized).await.status(), 202);

    let resp = client.post(Some(&session), &call(1, "echo", json!({"message": "hi"}))).await;
    assert_eq!(resp.status(), 200);
    assert!(resp.headers()["content-type"].to_str().unwrap_or_default().starts_with("application/json"));
    assert_eq!(json_body(resp).await["result"]["content"][0]["text"], "hi");

    assert_eq!(client.post(None, &call(2, "echo", json!({"message": "x"}))).await.status(), 400);
    let resp = client.post(Some("0123"), &call(3, "echo", json!({"message": "x"}))).await;
    assert_eq!(resp.status(), 404);
    assert_eq!(json_body(resp).await["error"]["code"], -32001);

    let flaky = call(4, "flaky", json!({"key": "h", "fail_first": 1, "mode": "http_503"}));
    let resp = client.post(Some(&session), &flaky).await;
    assert_eq!(resp.status(), 503);
    assert_eq!(resp.headers()["retry-after"], "0");
    assert_eq!(client.post(Some(&session), &flaky).await.status(), 200);

    let stats: Value = client
        .http
        .get(format!("{}/admin/stats", client.base))
        .send()
        .await
        .map(|r| r.text())
        .unwrap_or_else(|err| panic!("{err}"))
        .await
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    assert_eq!(stats["calls"]["flaky"], 2);
    assert_eq!(stats["requests"]["initialize"], 1);
    assert_eq!(stats["sessions"], 1);

    let dropped = client.http.post(format!("{}/admin/drop-sessions", client.base)).send().await;
    assert!(dropped.is_ok_and(|r| r.status() == 200));
    assert_eq!(client.post(Some(&session), &call(5, "echo", json!({"message": "x"}))).await.status(), 404);

    let session = client.initialize().await;
    let deleted = client.http.delete(&client.url).header(SESSION_HEADER, &session).send().await;
    assert!(deleted.is_ok_and(|r| r.status() == 200));
    assert_eq!(client.post(Some(&session), &call(6, "echo", json!({"message": "x"}))).await.status(), 404);
}

#[tokio::test]
async fn progress_streams_as_sse() {
    let client = Client::start().await;
    let session = client.initialize().await;
    let msg = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "sleep", "arguments": {"ms": 100}, "_meta": {"progressToken": 9}}});
    let resp = client.post(Some(&session), &msg).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let body = resp.text().await.unwrap_or_default();
    assert!(body.contains("event: message"), "{body}");
    let messages = sse_messages(&body);
    let (last, notes) = messages.split_last().unwrap_or_else(|| panic!("empty stream"));
    assert_eq!(last["result"]["content"][0]["text"], "slept 100 ms");
    assert!(!notes.is_empty());
    assert!(notes.iter().all(|n| n["method"] == "notifications/progress" && n["params"]["progressToken"] == 9));
}

#[tokio::test]
async fn sampling_request_travels_on_the_post_stream() {
    let client = Client::start().await;
    let session = client.initialize().await;
    let resp = client.post(Some(&session), &call(1, "sample", json!({"prompt": "hi"}))).await;
    assert_eq!(resp.status(), 200);
    let mut stream = resp.bytes_stream();
    let mut text = String::new();
    let request = loop {
        let chunk = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
        let Ok(Some(Ok(chunk))) = chunk else { panic!("stream ended early: {text}") };
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(msg) = sse_messages(&text).into_iter().next() {
            break msg;
        }
    };
    assert_eq!(request["method"], "sampling/createMessage");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"],
        "result": {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"}});
    assert_eq!(client.post(Some(&session), &answer).await.status(), 202);
    while let Ok(Some(Ok(chunk))) = tokio::time::timeout(Duration::from_secs(5), stream.next()).await {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let messages = sse_messages(&text);
    assert_eq!(messages.len(), 2, "{text}");
    assert_eq!(messages[1]["result"]["content"][0]["text"], "sampled: yo");
}

#[tokio::test]
async fn cancelled_call_gets_no_response() {
    let client = Client::start().await;
    let session = client.initialize().await;
    let slow = {
        let (client_http, url, session) = (client.http.clone(), client.url.clone(), session.clone());
        tokio::spawn(async move {
            client_http
                .post(url)
                .header(SESSION_HEADER, session)
                .body(call(7, "sleep", json!({"ms": 10_000})).to_string())
                .send()
                .await
                .map(|r| r.status().as_u16())
        })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}});
    assert_eq!(client.post(Some(&session), &cancel).await.status(), 202);
    let status = tokio::time::timeout(Duration::from_secs(2), slow).await;
    assert!(matches!(status, Ok(Ok(Ok(202)))), "{status:?}");
}
