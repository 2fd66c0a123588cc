//! A minimal Streamable HTTP MCP client for integration tests: raw enough to send bad
//! input and to see every message of a response stream, typed enough to keep tests short.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

/// What one POST produced.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Response headers.
    pub headers: reqwest::header::HeaderMap,
    /// The raw body (for SSE, the whole stream).
    pub raw: String,
    /// Every JSON-RPC message received, in order (one for a JSON body).
    pub messages: Vec<Value>,
    /// Whether the answer came as SSE.
    pub sse: bool,
}

impl Reply {
    /// The final response message (the last one with an id and a result or error).
    pub fn response(&self) -> &Value {
        self.messages
            .iter()
            .rev()
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .unwrap_or_else(|| panic!("no response in {:?}", self.raw))
    }

    /// `result`, panicking with the body when it is an error.
    pub fn result(&self) -> &Value {
        let r = self.response();
        r.get("result").unwrap_or_else(|| panic!("expected a result, got {r}"))
    }

    /// `error`, panicking when it is a result.
    pub fn error(&self) -> &Value {
        let r = self.response();
        r.get("error").unwrap_or_else(|| panic!("expected an error, got {r}"))
    }

    /// Notifications received before the response.
    pub fn notifications(&self, method: &str) -> Vec<&Value> {
        self.messages.iter().filter(|m| m["method"] == method && m.get("id").is_none()).collect()
    }

    /// The names in a `tools/list` result.
    pub fn tool_names(&self) -> Vec<String> {
        let tools = self.result()["tools"].as_array().cloned().unwrap_or_default();
        tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
    }
}

/// A test client bound to one MCP endpoint.
#[derive(Clone)]
pub struct Client {
    pub http: reqwest::Client,
    pub url: String,
    pub session: Option<String>,
    pub version: String,
}

impl Client {
    /// A client sending `headers` on every request, and from the local address `local`
    /// when given (another loopback address stands for another client).
    pub fn with(url: &str, headers: &[(&str, &str)], local: Option<std::net::IpAddr>) -> Client {
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes()).expect("header name");
            map.insert(name, value.parse().expect("header value"));
        }
        let http = reqwest::Client::builder()
            .default_headers(map)
            .local_address(local)
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        Client { http, ..Client::new(url) }
    }

    /// This client after `initialize` (2025-11-25) and `notifications/initialized`, with
    /// its session.
    pub async fn open(mut self) -> Client {
        let reply = self.post(initialize_body(json!(0))).await;
        assert_eq!(reply.status, 200, "initialize failed: {}", reply.raw);
        self.session = Some(reply.header("mcp-session-id").expect("Mcp-Session-Id"));
        assert_eq!(self.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status, 202);
        self
    }

    pub fn new(url: &str) -> Client {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        Client { http, url: url.to_owned(), session: None, version: "2025-11-25".into() }
    }

    /// `initialize` + `notifications/initialized`, with the given client capabilities.
    pub async fn connect(url: &str, capabilities: Value) -> Client {
        Client::new(url).initialize(capabilities).await
    }

    /// A client that sends `Authorization: Bearer <token>` on every request.
    pub fn with_bearer(url: &str, token: &str) -> Client {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(reqwest::header::AUTHORIZATION, format!("Bearer {token}").parse().expect("header value"));
        let http = reqwest::Client::builder()
            .default_headers(headers)
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        Client { http, ..Client::new(url) }
    }

    /// Opens this client's session: `initialize` + `notifications/initialized`.
    pub async fn initialize(mut self, capabilities: Value) -> Client {
        let reply = self
            .post(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion": self.version, "capabilities": capabilities,
                "clientInfo": {"name":"seawall-tests","version":"1"}}}))
            .await;
        assert_eq!(reply.status, 200, "initialize failed: {}", reply.raw);
        self.session =
            Some(reply.header("mcp-session-id").unwrap_or_else(|| panic!("no Mcp-Session-Id: {}", reply.raw)));
        let status = self.post(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await.status;
        assert_eq!(status, 202);
        self
    }

    fn builder(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut b = self
            .http
            .request(method, &self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if let Some(s) = &self.session {
            b = b.header("mcp-session-id", s).header("mcp-protocol-version", &self.version);
        }
        b
    }

    /// POSTs a JSON value.
    pub async fn post(&self, body: Value) -> Reply {
        self.post_raw(body.to_string(), &[]).await
    }

    /// POSTs raw text with extra headers (later headers replace earlier ones).
    pub async fn post_raw(&self, body: String, headers: &[(&str, &str)]) -> Reply {
        let mut extra = reqwest::header::HeaderMap::new();
        for (k, v) in headers {
            extra.insert(
                reqwest::header::HeaderName::from_bytes(k.as_bytes()).expect("name"),
                v.parse().expect("value"),
            );
        }
        let b = self.builder(reqwest::Method::POST).headers(extra);
        read(b.body(body).send().await.expect("POST"), |_| None, self).await
    }

    /// Sends a request; `on_server_request` may answer server-initiated requests seen on
    /// the response stream (its return value is POSTed back as the result).
    pub async fn request_with(
        &self,
        id: Value,
        method: &str,
        params: Value,
        on_server_request: impl FnMut(&Value) -> Option<Value>,
    ) -> Reply {
        let body = json!({"jsonrpc":"2.0","id":id,"method":method,"params":params});
        let resp = self.builder(reqwest::Method::POST).body(body.to_string()).send().await.expect("POST");
        read(resp, on_server_request, self).await
    }

    /// Sends a request with a numeric id.
    pub async fn request(&self, id: u64, method: &str, params: Value) -> Reply {
        self.request_with(json!(id), method, params, |_| None).await
    }

    /// `tools/call` and its result.
    pub async fn call_tool(&self, id: u64, name: &str, arguments: Value) -> Value {
        self.request(id, "tools/call", json!({"name": name, "arguments": arguments})).await.result().clone()
    }

    /// Sends a notification; returns the HTTP status.
    pub async fn notify(&self, method: &str, params: Value) -> u16 {
        self.post(json!({"jsonrpc":"2.0","method":method,"params":params})).await.status
    }

    /// GETs a URL and parses its JSON body.
    pub async fn get_json(url: &str) -> Value {
        let text = reqwest::get(url).await.expect("GET").text().await.expect("body");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: {e}: {text}"))
    }

    /// DELETE the session; returns the HTTP status.
    pub async fn delete(&self) -> u16 {
        self.builder(reqwest::Method::DELETE).send().await.expect("DELETE").status().as_u16()
    }

    /// Opens the GET stream; messages arrive on the returned channel.
    pub async fn open_stream(&self) -> (u16, tokio::sync::mpsc::UnboundedReceiver<Value>) {
        let resp = self
            .builder(reqwest::Method::GET)
            .header("accept", "text/event-stream")
            .timeout(Duration::from_secs(3600))
            .send()
            .await
            .expect("GET");
        let status = resp.status().as_u16();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        if status == 200 {
            tokio::spawn(async move {
                let mut events = Box::pin(seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20));
                while let Some(Ok(ev)) = events.next().await {
                    if let Ok(v) = serde_json::from_str::<Value>(&ev.data)
                        && tx.send(v).is_err()
                    {
                        return;
                    }
                }
            });
        }
        (status, rx)
    }
}

async fn read(
    resp: reqwest::Response,
    mut on_server_request: impl FnMut(&Value) -> Option<Value>,
    client: &Client,
) -> Reply {
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let sse =
        headers.get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"));
    if !sse {
        let raw = resp.text().await.unwrap_or_default();
        let messages = match serde_json::from_str::<Value>(&raw) {
            Ok(Value::Array(items)) => items,
            Ok(v) => vec![v],
            Err(_) => Vec::new(),
        };
        return Reply { status, headers, raw, messages, sse };
    }
    let mut raw = String::new();
    let mut messages = Vec::new();
    let mut events = Box::pin(seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20));
    while let Some(ev) = events.next().await {
        let ev = ev.expect("SSE");
        raw.push_str(&ev.data);
        raw.push('\n');
        let Ok(msg) = serde_json::from_str::<Value>(&ev.data) else { continue };
        if msg.get("method").is_some()
            && msg.get("id").is_some()
            && let Some(result) = on_server_request(&msg)
        {
            let answer = json!({"jsonrpc":"2.0","id":msg["id"],"result":result});
            let post = client.builder(reqwest::Method::POST).body(answer.to_string());
            tokio::spawn(async move {
                let status = post.send().await.expect("POST").status().as_u16();
                assert_eq!(status, 202, "answer to a server request");
            });
        }
        messages.push(msg);
    }
    Reply { status, headers, raw, messages, sse }
}

/// An `initialize` request (2025-11-25) with this `id`.
pub fn initialize_body(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "seawall-tests", "version": "1"}}})
}
