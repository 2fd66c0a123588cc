//! The demo tools: their definitions (`tools/list`) and what each does when
//! called. Every tool exists to exercise one gateway behaviour: latency,
//! failures that leak secrets, retries, crashes, large payloads, progress,
//! cancellation and server-to-client requests.

use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::time::{Instant, MissedTickBehavior};

use super::handler::{CallContext, DemoConfig, Failure, Handled};
use super::rpc::{self, RpcError, optional_bool, optional_str, optional_u64, params_object, required_str};
use super::session::LogLevel;

/// Largest `big` payload, in bytes.
pub(crate) const MAX_BIG_BYTES: u64 = 64 * 1024 * 1024;

/// Longest `sleep`, in milliseconds (one hour).
const MAX_SLEEP_MS: u64 = 60 * 60 * 1000;

/// `maxTokens` sent by `sample` when the caller gives none.
const DEFAULT_MAX_TOKENS: u64 = 100;

/// Process exit code of `crash` and `flaky` with mode `exit`.
const CRASH_EXIT_CODE: i32 = 3;

/// A realistic raw upstream failure, full of things a gateway must not leak.
pub(crate) const LEAKY_FAILURE: &str = "Traceback (most recent call last):
  File \"/srv/app/handlers/tools.py\", line 42, in call
    result = await backend.query(arguments)
  File \"/srv/app/backend/db.py\", line 118, in query
    conn = await connect(\"http://10.0.3.7:5432/db\", api_key=\"sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c\")
  File \"/srv/app/backend/config.py\", line 27, in load_secrets
    with open(\"/home/deploy/.config/app/secrets.yaml\") as fh:
ConnectionRefusedError: [Errno 111] Connection refused: http://10.0.3.7:5432/db
request headers: Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vIn0.c2VjcmV0";

fn schema(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// Prefix of the `--extra-tools` names.
const EXTRA_PREFIX: &str = "extra_";

/// The name of the `n`th extra tool (from 1).
fn extra_name(n: usize) -> String {
    format!("{EXTRA_PREFIX}{n:04}")
}

/// Whether `name` is one of the first `extra` extra tools.
fn is_extra(name: &str, extra: usize) -> bool {
    name.strip_prefix(EXTRA_PREFIX)
        .and_then(|n| n.parse::<usize>().ok())
        .is_some_and(|n| (1..=extra).contains(&n) && name == extra_name(n))
}

/// The definitions of all demo tools, in listing order: the demo's own, then `extra`
/// more.
pub(crate) fn definitions(extra: usize) -> Vec<Value> {
    let mut tools = own_definitions();
    // As small as a tool can be listed: thousands of them are the point.
    tools.extend((1..=extra).map(|n| json!({"name": extra_name(n), "inputSchema": {"type": "object"}})));
    tools
}

fn own_definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "echo",
            "description": "Echo a message back. Echoing `touch` while subscribed to demo://readme sends resources/updated.",
            "inputSchema": schema(json!({"message": {"type": "string", "description": "Text to echo"}}), &["message"]),
            "annotations": {"readOnlyHint": true, "idempotentHint": true},
        }),
        json!({
            "name": "add",
            "description": "Add two numbers.",
            "inputSchema": schema(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"]),
            "outputSchema": schema(json!({"sum": {"type": "number"}}), &["sum"]),
            "annotations": {"readOnlyHint": true},
        }),
        json!({
            "name": "sleep",
            "description": "Wait `ms` milliseconds, reporting progress if asked to.",
            "inputSchema": schema(json!({
                "ms": {"type": "integer", "minimum": 0, "maximum": MAX_SLEEP_MS},
                "progress": {"type": "boolean", "description": "Send progress notifications (default true)"},
            }), &["ms"]),
            "annotations": {"readOnlyHint": true, "idempotentHint": true},
        }),
        json!({
            "name": "fail",
            "description": "Fail like a careless upstream: a raw traceback with paths, internal URLs and secrets (mode `elicit`: as a -32042 URL elicitation error).",
            "inputSchema": schema(json!({"mode": {"type": "string", "enum": ["error", "result", "elicit"]}}), &[]),
            "annotations": {"readOnlyHint": false, "destructiveHint": false},
        }),
        json!({
            "name": "flaky",
            "description": "Fail the first `fail_first` calls per key, or at random with probability `rate`.",
            "inputSchema": schema(json!({
                "key": {"type": "string", "default": "default"},
                "fail_first": {"type": "integer", "minimum": 0},
                "rate": {"type": "number", "minimum": 0, "maximum": 1},
                "mode": {"type": "string", "enum": ["error", "http_503", "exit"]},
            }), &[]),
        }),
        json!({
            "name": "crash",
            "description": "Exit the server process with code 3 without answering.",
            "inputSchema": schema(json!({}), &[]),
        }),
        json!({
            "name": "big",
            "description": "Return one text content of exactly `n` bytes.",
            "inputSchema": schema(json!({"n": {"type": "integer", "minimum": 0, "maximum": MAX_BIG_BYTES}}), &["n"]),
        }),
        json!({
            "name": "sample",
            "description": "Ask the client to sample an LLM completion for `prompt`.",
            "inputSchema": schema(json!({
                "prompt": {"type": "string"},
                "maxTokens": {"type": "integer", "minimum": 1},
            }), &["prompt"]),
        }),
        json!({
            "name": "roots",
            "description": "Ask the client for its roots and return them as JSON.",
            "inputSchema": schema(json!({}), &[]),
        }),
        json!({
            "name": "log",
            "description": "Send a notifications/message log entry to the client.",
            "inputSchema": schema(json!({
                "level": {"type": "string", "enum": ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]},
                "message": {"type": "string"},
            }), &["message"]),
        }),
    ]
}

/// `tools/list`, paginated by `page_size` (0 = one page). The cursor is the
/// decimal offset of the next tool; anything else is -32602.
pub(crate) fn list(config: &DemoConfig, params: &Value) -> Result<Value, RpcError> {
    let page_size = config.page_size;
    let params = params_object(params)?;
    let tools = definitions(config.extra_tools);
    let start = match optional_str(&params, "cursor")? {
        None => 0,
        Some(cursor) => cursor
            .parse::<usize>()
            .ok()
            .filter(|&offset| offset > 0 && offset < tools.len())
            .ok_or_else(|| RpcError::invalid_params(format!("invalid cursor: {cursor}")))?,
    };
    let end = match page_size {
        0 => tools.len(),
        size => start.saturating_add(size).min(tools.len()),
    };
    let page: Vec<Value> = tools.get(start..end).unwrap_or_default().to_vec();
    let mut result = json!({"tools": page});
    if end < tools.len()
        && let Some(obj) = result.as_object_mut()
    {
        obj.insert("nextCursor".into(), json!(end.to_string()));
    }
    Ok(result)
}

/// A successful result with one text content.
pub(crate) fn text_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}]})
}

/// An `isError: true` result with one text content.
pub(crate) fn error_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": true})
}

/// `tools/call`: record, apply the configured latency and error rate, run the tool.
pub(crate) async fn call(ctx: &CallContext, params: &Value) -> Handled {
    let params = params_object(params)?;
    let name = required_str(&params, "name")?;
    let arguments = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(args)) => args.clone(),
        Some(_) => return Err(RpcError::invalid_params("arguments must be an object").into()),
    };
    ctx.state.record(&ctx.session, json!({"event": "call", "tool": name, "id": ctx.id, "arguments": arguments}));
    ctx.state.count_call(name);

    let config = ctx.state.config();
    if !config.latency.is_zero() {
        tokio::time::sleep(config.latency).await;
    }
    if config.error_rate > 0.0 && rand::random::<f64>() < config.error_rate {
        return Err(RpcError::internal("injected failure (--error-rate)").into());
    }
    run_tool(ctx, name, &arguments).await
}

async fn run_tool(ctx: &CallContext, name: &str, args: &Map<String, Value>) -> Handled {
    match name {
        "echo" => echo(ctx, args),
        "add" => Ok(add(args)?),
        "sleep" => sleep(ctx, args).await,
        "fail" => fail(args),
        "flaky" => flaky(ctx, args),
        "crash" => exit_process("crash tool called"),
        "big" => Ok(big(args)?),
        "sample" => Ok(sample(ctx, args).await?),
        "roots" => Ok(roots(ctx).await),
        "log" => Ok(log(ctx, args)?),
        extra if is_extra(extra, ctx.state.config().extra_tools) => {
            Ok(text_result(optional_str(args, "message")?.unwrap_or(extra)))
        }
        _ => Err(RpcError::invalid_params(format!("Unknown tool: {name}")).into()),
    }
}

fn exit_process(why: &str) -> ! {
    tracing::warn!("demo: exiting with code {CRASH_EXIT_CODE}: {why}");
    std::process::exit(CRASH_EXIT_CODE)
}

fn echo(ctx: &CallContext, args: &Map<String, Value>) -> Handled {
    let message = required_str(args, "message")?;
    if message == "touch" {
        let updated = rpc::notification("notifications/resources/updated", json!({"uri": super::catalog::README_URI}));
        if ctx.session.is_subscribed(super::catalog::README_URI) {
            ctx.out.send(updated.clone());
        }
        // Modern-era listeners filter for themselves; nobody listening is fine.
        let _ = ctx.state.events.send(updated);
    }
    Ok(text_result(message))
}

fn add(args: &Map<String, Value>) -> Result<Value, RpcError> {
    let number = |field: &str| {
        args.get(field)
            .filter(|v| v.is_number())
            .ok_or_else(|| RpcError::invalid_params(format!("missing or non-numeric `{field}`")))
    };
    let (a, b) = (number("a")?, number("b")?);
    let sum = match (a.as_i64(), b.as_i64()) {
        (Some(x), Some(y)) if x.checked_add(y).is_some() => json!(x + y),
        _ => {
            let total = a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN);
            if !total.is_finite() {
                return Ok(error_result("sum is not a finite number"));
            }
            json!(total)
        }
    };
    Ok(json!({
        "content": [{"type": "text", "text": sum.to_string()}],
        "structuredContent": {"sum": sum},
    }))
}

async fn sleep(ctx: &CallContext, args: &Map<String, Value>) -> Handled {
    let ms = optional_u64(args, "ms")?.ok_or_else(|| RpcError::invalid_params("missing or non-integer `ms`"))?;
    if ms > MAX_SLEEP_MS {
        return Err(RpcError::invalid_params(format!("`ms` above {MAX_SLEEP_MS}")).into());
    }
    let start = Instant::now();
    let deadline = start + Duration::from_millis(ms);
    let token = ctx.progress_token.clone().filter(|_| optional_bool(args, "progress").ok().flatten() != Some(false));
    let Some(token) = token else {
        tokio::time::sleep_until(deadline).await;
        return Ok(text_result(format!("slept {ms} ms")));
    };
    let step = Duration::from_millis((ms / 10).max(10));
    let mut ticks = tokio::time::interval_at(start + step, step);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Skip);
    let mut last = 0u64;
    loop {
        tokio::select! {
            biased;
            () = tokio::time::sleep_until(deadline) => break,
            _ = ticks.tick() => {
                let elapsed = u64::try_from(start.elapsed().as_millis()).unwrap_or(ms).min(ms);
                if elapsed > last {
                    last = elapsed;
                    ctx.out.send(rpc::notification("notifications/progress", json!({
                        "progressToken": token,
                        "progress": elapsed,
                        "total": ms,
                        "message": format!("slept {elapsed} of {ms} ms"),
                    })));
                }
            }
        }
    }
    Ok(text_result(format!("slept {ms} ms")))
}

/// The URL `fail` in mode `elicit` asks the client to open (MCP URL elicitation).
pub(crate) const ELICITATION_URL: &str = "https://auth.example.com/connect?elicitation=demo-1";

/// A -32042 "URL elicitation required" error whose message and `data` carry, beside
/// the one URL elicitation the client needs, everything a careless upstream adds.
fn leaky_elicitation() -> RpcError {
    let message = format!(
        "\u{1b}[31mURL elicitation required\u{1b}[0m (api_key=sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c)\n{LEAKY_FAILURE}"
    );
    RpcError::new(rpc::code::URL_ELICITATION_REQUIRED, message).with_data(json!({
        "elicitations": [{
            "mode": "url",
            "elicitationId": "demo-1",
            "url": ELICITATION_URL,
            "message": "Sign in to continue (session at /srv/app/sessions/demo-1, key sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c)",
            "debug": LEAKY_FAILURE,
        }],
        "dsn": "postgres://admin:hunter2@10.0.3.7:5432/prod",
        "apiKey": "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c",
        "configFile": "/home/deploy/.config/app/secrets.yaml",
        "traceback": LEAKY_FAILURE,
        "banner": "\u{1b}[31mdemo\u{1b}[0m",
    }))
}

fn fail(args: &Map<String, Value>) -> Handled {
    match optional_str(args, "mode")? {
        None | Some("error") => Err(RpcError::internal(LEAKY_FAILURE).with_data(json!(LEAKY_FAILURE)).into()),
        Some("result") => Ok(error_result(LEAKY_FAILURE)),
        Some("elicit") => Err(leaky_elicitation().into()),
        Some(other) => Err(RpcError::invalid_params(format!("unknown mode: {other}")).into()),
    }
}

fn flaky(ctx: &CallContext, args: &Map<String, Value>) -> Handled {
    let key = optional_str(args, "key")?.unwrap_or("default");
    let fail_first = optional_u64(args, "fail_first")?.unwrap_or(0);
    let rate = match args.get("rate") {
        None | Some(Value::Null) => 0.0,
        Some(v) => v
            .as_f64()
            .filter(|r| (0.0..=1.0).contains(r))
            .ok_or_else(|| RpcError::invalid_params("`rate` must be a number in 0..=1"))?,
    };
    let mode = optional_str(args, "mode")?.unwrap_or("error");
    if !matches!(mode, "error" | "http_503" | "exit") {
        return Err(RpcError::invalid_params(format!("unknown mode: {mode}")).into());
    }
    match ctx.state.flaky_attempt(key, fail_first, rate) {
        Ok(failures) => Ok(text_result(format!("ok after {failures} failures"))),
        Err(()) => match mode {
            "http_503" => Err(Failure::Unavailable),
            "exit" => exit_process("flaky tool in exit mode"),
            _ => Err(RpcError::internal("transient failure").into()),
        },
    }
}

fn big(args: &Map<String, Value>) -> Result<Value, RpcError> {
    let n = optional_u64(args, "n")?.ok_or_else(|| RpcError::invalid_params("missing or non-integer `n`"))?;
    if n > MAX_BIG_BYTES {
        return Err(RpcError::invalid_params(format!("`n` above {MAX_BIG_BYTES}")));
    }
    let n = usize::try_from(n).map_err(|_| RpcError::invalid_params("`n` too large"))?;
    Ok(text_result("x".repeat(n)))
}

async fn sample(ctx: &CallContext, args: &Map<String, Value>) -> Result<Value, RpcError> {
    let prompt = required_str(args, "prompt")?;
    let max_tokens = optional_u64(args, "maxTokens")?.unwrap_or(DEFAULT_MAX_TOKENS);
    if !ctx.session.client_supports("sampling") {
        return Ok(error_result("client does not support sampling"));
    }
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
        "maxTokens": max_tokens,
    });
    match ctx.session.request(&ctx.out, "sampling/createMessage", params).await {
        Ok(reply) => {
            let text = reply.get("content").map(content_text).unwrap_or_default();
            Ok(text_result(format!("sampled: {text}")))
        }
        Err(err) => Ok(error_result(err.message)),
    }
}

/// The text of a sampling reply's content: one block or (2025-11-25) an array.
fn content_text(content: &Value) -> String {
    match content {
        Value::Array(blocks) => blocks.iter().map(content_text).collect::<Vec<_>>().join(""),
        block => block.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
    }
}

async fn roots(ctx: &CallContext) -> Value {
    if !ctx.session.client_supports("roots") {
        return error_result("client does not support roots");
    }
    match ctx.session.request(&ctx.out, "roots/list", json!({})).await {
        Ok(reply) => {
            let roots = reply.get("roots").cloned().unwrap_or_else(|| json!([]));
            text_result(roots.to_string())
        }
        Err(err) => error_result(err.message),
    }
}

fn log(ctx: &CallContext, args: &Map<String, Value>) -> Result<Value, RpcError> {
    let message = required_str(args, "message")?;
    let name = optional_str(args, "level")?.unwrap_or("info");
    let level = LogLevel::parse(name).ok_or_else(|| RpcError::invalid_params(format!("unknown level: {name}")))?;
    if ctx.session.wants_log(level) {
        ctx.out.send(rpc::notification(
            "notifications/message",
            json!({"level": name, "logger": "demo", "data": message}),
        ));
    }
    Ok(text_result("logged"))
}
