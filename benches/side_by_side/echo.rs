//! The fast upstream: a minimal MCP server over Streamable HTTP (legacy sessions) on one
//! thread, so that the upstream is never what limits a run. It answers `initialize`,
//! `ping`, `tools/list` (its answer serialised once at start) and `tools/call` of
//! `echo` (and of every extra tool), refuses the GET stream with 405 as a server that
//! sends nothing unprompted may, and ends sessions on DELETE.
//!
//! `side_by_side echo-server [--tools N]` prints `listening on http://IP:PORT/mcp`.

use std::borrow::Cow;
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use parking_lot::Mutex;
use serde::Deserialize;
use serde_json::json;
use serde_json::value::RawValue;

/// The one protocol version it speaks.
const VERSION: &str = "2025-11-25";

struct State {
    /// `{"tools":[…]}`, ready to splice into an answer.
    tools: String,
    sessions: Mutex<HashSet<String>>,
    next_session: AtomicU64,
    tool_count: usize,
}

/// Serves until killed, offering `tools` tools (`echo` and `tool_0002` … `tool_NNNN`).
pub fn run(tools: usize) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        println!("listening on http://{}/mcp", listener.local_addr()?);
        let tool_count = tools.max(1);
        let state = Arc::new(State {
            tools: tool_list(tool_count),
            sessions: Mutex::new(HashSet::new()),
            next_session: AtomicU64::new(1),
            tool_count,
        });
        loop {
            let (stream, _) = listener.accept().await?;
            let _ = stream.set_nodelay(true);
            let state = Arc::clone(&state);
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| answer(Arc::clone(&state), req));
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    })
}

fn tool_list(count: usize) -> String {
    let schema = json!({
        "type": "object",
        "properties": {"message": {"type": "string", "description": "Text to echo"}},
        "required": ["message"],
    });
    let tools: Vec<_> = (1..=count)
        .map(|n| {
            let name = if n == 1 { "echo".to_owned() } else { format!("tool_{n:04}") };
            json!({
                "name": name,
                "description": format!("Echo a message back (tool {n} of {count} of the bench's upstream)."),
                "inputSchema": schema,
                "annotations": {"readOnlyHint": true, "idempotentHint": true},
            })
        })
        .collect();
    json!({ "tools": tools }).to_string()
}

#[derive(Deserialize)]
struct Rpc<'a> {
    #[serde(borrow)]
    id: Option<&'a RawValue>,
    #[serde(borrow)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    arguments: Option<EchoArgs<'a>>,
}

#[derive(Deserialize)]
struct EchoArgs<'a> {
    #[serde(borrow)]
    message: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct InitParams<'a> {
    #[serde(rename = "protocolVersion", borrow)]
    protocol_version: Option<Cow<'a, str>>,
}

async fn answer(state: Arc<State>, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let session = req.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned);
    match *req.method() {
        Method::POST => {}
        Method::DELETE => {
            let known = session.is_some_and(|s| state.sessions.lock().remove(&s));
            return Ok(empty(if known { StatusCode::OK } else { StatusCode::NOT_FOUND }));
        }
        _ => return Ok(empty(StatusCode::METHOD_NOT_ALLOWED)),
    }
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(empty(StatusCode::BAD_REQUEST));
    };
    let Ok(rpc) = serde_json::from_slice::<Rpc>(&body) else {
        return Ok(json_answer(StatusCode::BAD_REQUEST, None, error("null", -32700, "parse error")));
    };
    let (Some(id), Some(method)) = (rpc.id, rpc.method.as_deref()) else {
        // A notification or a response: accepted, nothing to say.
        return Ok(empty(StatusCode::ACCEPTED));
    };
    let id = id.get();
    if method == "initialize" {
        let asked = rpc.params.and_then(|p| serde_json::from_str::<InitParams>(p.get()).ok());
        let version = asked.and_then(|a| a.protocol_version).filter(|v| v.starts_with("2025-")).map(Cow::into_owned);
        let name = format!("bench-{:016x}", state.next_session.fetch_add(1, Ordering::Relaxed));
        state.sessions.lock().insert(name.clone());
        let result = json!({
            "protocolVersion": version.as_deref().unwrap_or(VERSION),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "seawall-bench-echo", "version": "1"},
        });
        return Ok(json_answer(StatusCode::OK, Some(&name), success(id, &result.to_string())));
    }
    match session {
        None => return Ok(json_answer(StatusCode::BAD_REQUEST, None, error(id, -32600, "missing Mcp-Session-Id"))),
        Some(s) if !state.sessions.lock().contains(&s) => {
            return Ok(json_answer(StatusCode::NOT_FOUND, None, error(id, -32001, "unknown session")));
        }
        Some(_) => {}
    }
    let body = match method {
        "tools/call" => call(&state, id, rpc.params),
        "tools/list" => success(id, &state.tools),
        "ping" => success(id, "{}"),
        _ => error(id, -32601, "method not found"),
    };
    Ok(json_answer(StatusCode::OK, None, body))
}

fn call(state: &State, id: &str, params: Option<&RawValue>) -> String {
    let Some(params) = params.and_then(|p| serde_json::from_str::<CallParams>(p.get()).ok()) else {
        return error(id, -32602, "params must name a tool");
    };
    let known = params.name == "echo"
        || params
            .name
            .strip_prefix("tool_")
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| (2..=state.tool_count).contains(&n));
    if !known {
        return error(id, -32602, "unknown tool");
    }
    let Some(message) = params.arguments.and_then(|a| a.message) else {
        return error(id, -32602, "arguments.message must be a string");
    };
    let text = serde_json::to_string(&message).unwrap_or_default();
    success(id, &format!(r#"{{"content":[{{"type":"text","text":{text}}}]}}"#))
}

fn success(id: &str, result: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#)
}

fn error(id: &str, code: i64, message: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"error":{{"code":{code},"message":"{message}"}}}}"#)
}

fn json_answer(status: StatusCode, session: Option<&str>, body: String) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    if let Some(value) = session.and_then(|s| header::HeaderValue::from_str(s).ok()) {
        resp.headers_mut().insert("mcp-session-id", value);
    }
    resp
}

fn empty(status: StatusCode) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    resp
}
