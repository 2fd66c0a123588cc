//! A minimal HTTP+SSE (2024-11-05) MCP client for integration tests: it opens the event
//! stream, reads its `endpoint` event, POSTs messages there and collects what arrives on
//! the stream, raw enough to send bad input and see every event.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long a test waits for something on the stream.
pub const WAIT: Duration = Duration::from_secs(20);

/// One open event stream.
pub struct SseClient {
    pub http: reqwest::Client,
    /// The `data` of the `endpoint` event, as sent.
    pub endpoint: String,
    /// `endpoint` resolved against the stream's URL.
    pub post_url: String,
    /// The bearer token sent with every request, if any.
    pub token: Option<String>,
    events: mpsc::UnboundedReceiver<seawall::sse::Event>,
    /// Messages received but not yet asked for.
    backlog: Vec<Value>,
    reader: tokio::task::JoinHandle<()>,
}

/// What a GET of a stream URL produced when it was not a stream.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl SseClient {
    /// GETs `url` (with `Accept: text/event-stream`) and waits for the `endpoint` event,
    /// which must come first.
    pub async fn open(url: &str) -> SseClient {
        SseClient::open_with(url, None, &[]).await.unwrap_or_else(|r| panic!("GET {url} refused: {r:?}"))
    }

    /// Like [`SseClient::open`], with a bearer token and extra headers; a refusal is
    /// returned instead of a client.
    pub async fn open_with(url: &str, token: Option<&str>, headers: &[(&str, &str)]) -> Result<SseClient, Refused> {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        let mut get = reqwest::Client::new().get(url).header("accept", "text/event-stream");
        if let Some(t) = token {
            get = get.bearer_auth(t);
        }
        for (k, v) in headers {
            get = get.header(*k, *v);
        }
        let resp = get.send().await.expect("GET");
        let status = resp.status().as_u16();
        if status != 200 {
            let headers = resp.headers().clone();
            return Err(Refused { status, headers, body: resp.text().await.unwrap_or_default() });
        }
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert!(content_type.starts_with("text/event-stream"), "GET {url}: content-type {content_type}");
        let (tx, mut events) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            let mut stream = Box::pin(seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20));
            while let Some(Ok(event)) = stream.next().await {
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
        let first = tokio::time::timeout(WAIT, events.recv()).await.expect("no first event").expect("stream ended");
        assert_eq!(first.event.as_deref(), Some("endpoint"), "the first event is `endpoint`: {first:?}");
        let base = reqwest::Url::parse(url).expect("url");
        let post_url = base.join(&first.data).expect("endpoint URL").to_string();
        Ok(SseClient {
            http,
            endpoint: first.data,
            post_url,
            token: token.map(str::to_owned),
            events,
            backlog: Vec::new(),
            reader,
        })
    }

    /// POSTs raw text to `url` with this client's token; returns status and body.
    pub async fn post_to(&self, url: &str, body: String, token: Option<&str>) -> (u16, String) {
        let mut post = self.http.post(url).header("content-type", "application/json").body(body);
        if let Some(t) = token {
            post = post.bearer_auth(t);
        }
        let resp = post.send().await.expect("POST");
        let status = resp.status().as_u16();
        (status, resp.text().await.unwrap_or_default())
    }

    /// POSTs a message to the endpoint; returns the HTTP status.
    pub async fn post(&self, msg: Value) -> u16 {
        self.post_to(&self.post_url, msg.to_string(), self.token.as_deref()).await.0
    }

    /// Waits for the response with `id`; messages before it stay in the backlog.
    pub async fn response(&mut self, id: &Value) -> Value {
        if let Some(i) = self.backlog.iter().position(|m| is_response_to(m, id)) {
            return self.backlog.remove(i);
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let event = tokio::time::timeout_at(deadline, self.events.recv())
                .await
                .unwrap_or_else(|_| panic!("no response to {id} (got {:?})", self.backlog))
                .unwrap_or_else(|| panic!("the stream ended before the response to {id}"));
            let Ok(msg) = serde_json::from_str::<Value>(&event.data) else { continue };
            if is_response_to(&msg, id) {
                return msg;
            }
            self.backlog.push(msg);
        }
    }

    /// Sends a request (202 expected) and waits for its response.
    pub async fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let status = self.post(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})).await;
        assert_eq!(status, 202, "POST {method}");
        self.response(&json!(id)).await
    }

    /// `tools/call`'s result.
    pub async fn call_tool(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        let reply = self.request(id, "tools/call", json!({"name": name, "arguments": arguments})).await;
        reply.get("result").cloned().unwrap_or_else(|| panic!("tools/call {name}: {reply}"))
    }

    /// `initialize` (2024-11-05) and `notifications/initialized`; returns the result.
    pub async fn initialize(&mut self) -> Value {
        let reply = self
            .request(
                0,
                "initialize",
                json!({"protocolVersion": "2024-11-05", "capabilities": {},
                       "clientInfo": {"name": "seawall-tests", "version": "1"}}),
            )
            .await;
        let result = reply.get("result").cloned().unwrap_or_else(|| panic!("initialize: {reply}"));
        assert_eq!(self.post(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await, 202);
        result
    }

    /// Messages received so far that were not responses asked for.
    pub fn backlog(&self) -> &[Value] {
        &self.backlog
    }

    /// Closes the stream (the connection goes with it).
    pub fn close(self) {
        self.reader.abort();
    }
}

fn is_response_to(msg: &Value, id: &Value) -> bool {
    &msg["id"] == id && (msg.get("result").is_some() || msg.get("error").is_some())
}
