//! A deliberately badly behaved Streamable HTTP MCP server for error-rewriting tests:
//! each tool fails in its own way (HTML 500 pages, leaky tracebacks, ANSI escapes, a
//! megabyte of text, invalid JSON, output that breaks its schema).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// The secrets, paths and trace lines planted in every failure; none may reach a client.
pub const PLANTED: &[&str] = &[
    "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
    "AKIAIOSFODNN7EXAMPLE",
    "ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "eyJhbGciOiJIUzI1NiJ9",
    "/home/deploy",
    "/srv/app/handlers",
    "10.0.3.7",
    "db.internal.corp",
    "File \"",
    "at com.example",
    "hunter2",
    "\u{1b}[",
    "<html",
];

const TRACE: &str = "Traceback (most recent call last):\n  File \"/srv/app/handlers/tools.py\", line 42, in call\n    conn = connect(\"postgres://admin:hunter2@db.internal.corp:5432/prod\")\n  File \"/home/deploy/.venv/lib/python3.11/site-packages/db.py\", line 7, in connect\nConnectionRefusedError: [Errno 111] Connection refused: 10.0.3.7:5432 (token sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c)";

const JAVA: &str = "java.lang.IllegalStateException: upstream failed password=hunter2\n\tat com.example.Service.call(Service.java:42)\n\tat com.example.Main.main(Main.java:7)";

/// Counts calls that reached the fake.
#[derive(Default)]
pub struct Counters {
    pub strict: AtomicUsize,
    pub calls: AtomicUsize,
}

/// Serves the fake on 127.0.0.1:0; returns its `/mcp` URL and its counters.
pub async fn start() -> (String, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let app =
        Router::new().route("/mcp", post(handle).get(not_allowed).delete(ended)).with_state(Arc::clone(&counters));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://{addr}/mcp"), counters)
}

async fn not_allowed() -> StatusCode {
    StatusCode::METHOD_NOT_ALLOWED
}

async fn ended() -> StatusCode {
    StatusCode::OK
}

fn json_body(status: StatusCode, v: Value) -> Response {
    (
        status,
        [
            (header::CONTENT_TYPE, "application/json"),
            (header::HeaderName::from_static("mcp-session-id"), "fake-session"),
        ],
        v.to_string(),
    )
        .into_response()
}

fn tools() -> Value {
    let obj = json!({"type": "object"});
    json!([
        {"name": "html500", "inputSchema": obj},
        {"name": "trace", "inputSchema": obj},
        {"name": "java", "inputSchema": obj},
        {"name": "ansi_huge", "inputSchema": obj},
        {"name": "ansi_result", "inputSchema": obj},
        {"name": "garbage", "inputSchema": obj},
        {"name": "bad_output", "inputSchema": obj,
         "outputSchema": {"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}},
        {"name": "access", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"},
            "mode": {"type": "string"}}}},
        {"name": "strict", "inputSchema": {"type": "object", "properties": {"count": {"type": "integer", "minimum": 1},
            "label": {"type": "string"}}, "required": ["count", "label"], "additionalProperties": false}},
    ])
}

async fn handle(State(counters): State<Arc<Counters>>, _headers: HeaderMap, body: Bytes) -> Response {
    let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
        return json_body(
            StatusCode::BAD_REQUEST,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse"}}),
        );
    };
    let id = msg["id"].clone();
    let method = msg["method"].as_str().unwrap_or_default();
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    let ok = |result: Value| json_body(StatusCode::OK, json!({"jsonrpc":"2.0","id":id,"result":result}));
    let err = |code: i64, message: String, data: Value| {
        json_body(StatusCode::OK, json!({"jsonrpc":"2.0","id":id,"error":{"code":code,"message":message,"data":data}}))
    };
    match method {
        "initialize" => ok(
            json!({"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}, "resources": {}},
            "serverInfo": {"name": "fake", "version": "1"}}),
        ),
        "tools/list" => ok(json!({"tools": tools()})),
        "resources/list" => ok(json!({"resources": []})),
        "resources/read" => err(
            -32002,
            format!("Resource not found: {} at /home/deploy/data", msg["params"]["uri"]),
            json!({"uri": msg["params"]["uri"]}),
        ),
        "tools/call" => {
            counters.calls.fetch_add(1, Ordering::SeqCst);
            match msg["params"]["name"].as_str().unwrap_or_default() {
                "html500" => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    [(header::CONTENT_TYPE, "text/html")],
                    format!("<html><body><h1>500</h1><pre>{TRACE}</pre></body></html>"),
                )
                    .into_response(),
                "trace" => err(-32603, TRACE.into(), json!({"trace": TRACE, "aws": "AKIAIOSFODNN7EXAMPLE"})),
                "java" => err(-32000, JAVA.into(), Value::Null),
                "ansi_huge" => {
                    let message = format!(
                        "\u{1b}[31mbad request\u{1b}[0m ghp_0123456789abcdefghijABCDEFGHIJ012345 {}",
                        "A".repeat(1 << 20)
                    );
                    err(-32602, message, json!({"detail": TRACE}))
                }
                "ansi_result" => {
                    let text = format!("\u{1b}[31mfailed\u{1b}[0m: {JAVA}\n{TRACE} {}", "B".repeat(1 << 20));
                    ok(json!({"content": [{"type": "text", "text": text}], "isError": true}))
                }
                "garbage" => {
                    (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], "{not json at all /home/deploy")
                        .into_response()
                }
                "bad_output" => ok(json!({"content": [{"type": "text", "text": "sum"}],
                    "structuredContent": {"sum": "not a number sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"}})),
                // Refuses the path the client asked for, naming it, its own directory and
                // a credential of its own.
                "access" => {
                    let path = msg["params"]["arguments"]["path"].as_str().unwrap_or_default();
                    let text = format!(
                        "Access denied - path outside allowed directories: {path} not in /srv/data (db password=hunter2)"
                    );
                    if msg["params"]["arguments"]["mode"] == "error" {
                        err(-32602, text, json!({"path": path, "allowed": ["/srv/data"]}))
                    } else {
                        ok(json!({"content": [{"type": "text", "text": text}], "isError": true}))
                    }
                }
                "strict" => {
                    counters.strict.fetch_add(1, Ordering::SeqCst);
                    ok(json!({"content": [{"type": "text", "text": "strict ok"}]}))
                }
                _ => err(-32602, "Unknown tool".into(), Value::Null),
            }
        }
        _ => err(-32601, "Method not found".into(), Value::Null),
    }
}
