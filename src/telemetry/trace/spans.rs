//! The spans seawall makes, named and attributed after OpenTelemetry's MCP and JSON-RPC
//! conventions (names `{mcp.method.name} {target}`, the target being the tool or prompt
//! when there is one), plus attributes of seawall's own under `seawall.*`:
//!
//! | span | kind | made by |
//! |---|---|---|
//! | a client's request | server | [`RequestSpanLayer`](crate::client::RequestSpanLayer), outermost in the client stack |
//! | one attempt upstream (retries are its siblings) | client | the attempt layer |
//! | a client's `initialize` | server | the gateway's `initialize` |
//! | opening an upstream session (`initialize`) | client | the upstream registry |
//! | `server/discover`, answered by seawall | server | the modern gateway |
//! | opening a modern client's context | internal | the modern gateway |
//! | a list fanned out to every upstream | internal | routing's list methods |
//!
//! Each builder returns [`Span::none`] when tracing is off, so callers need no check of
//! their own and nothing is recorded.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState};
use serde_json::value::RawValue;
use tracing::field::Empty;
use tracing::{Span, info_span};
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

use crate::call::{Answer, GatewayError, Reply, UpstreamCall, UpstreamError};
use crate::jsonrpc::{self, Id};
use crate::mcp::method;
use crate::mcp::trace_context::{RequestTrace, TraceContext};
use std::net::IpAddr;

/// A name a client chose (a method, tool or prompt), escaped and capped as an
/// identifier: printable ASCII, at most 80 bytes.
fn label(text: &str) -> String {
    crate::sanitize::quote(text, crate::sanitize::IDENT_CAP)
}

/// The span's name: the method, and the tool or prompt it is about.
fn span_name(method_name: &str, target: Option<&str>) -> String {
    match target {
        Some(target) => format!("{} {}", label(method_name), label(target)),
        None => label(method_name),
    }
}

#[derive(serde::Deserialize)]
struct Target {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    uri: Option<String>,
}

/// The prompt of a `prompts/get` and the URI of a resource request, read from params.
fn prompt_and_uri(method_name: &str, params: Option<&RawValue>) -> (Option<String>, Option<String>) {
    let wanted = method_name == method::PROMPTS_GET || method_name.starts_with("resources/");
    let Some(target) = wanted.then(|| jsonrpc::view::<Target>(params)).flatten() else { return (None, None) };
    match method_name {
        method::PROMPTS_GET => (target.name, None),
        _ => (None, target.uri),
    }
}

/// A count as an attribute: OpenTelemetry's integers are signed (tracing's unsigned
/// values would arrive as text).
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `network.transport`: pipes for a child process, else TCP.
fn network_transport(process: bool) -> &'static str {
    if process { "pipe" } else { "tcp" }
}

/// `jsonrpc.request.id`: a string id as it is, a number as written.
fn id_text(id: &jsonrpc::Id) -> String {
    match id.to_value() {
        serde_json::Value::String(s) => s,
        other => other.to_string(),
    }
}

/// An OpenTelemetry context whose remote parent is `parent`.
fn remote(parent: &TraceContext) -> opentelemetry::Context {
    let state = parent.state().and_then(|s| s.parse::<TraceState>().ok()).unwrap_or_default();
    let context = SpanContext::new(
        TraceId::from(parent.trace_id()),
        SpanId::from(parent.span_id()),
        TraceFlags::new(parent.flags()),
        true,
        state,
    );
    opentelemetry::Context::new().with_remote_span_context(context)
}

/// The W3C context of `span` (started now if it was not yet): what goes upstream in
/// its name, and what the access log records. `None` for a disabled span.
pub(crate) fn context_of(span: &Span) -> Option<TraceContext> {
    if span.is_none() {
        return None;
    }
    let context = span.context();
    let span_ref = context.span();
    let sc = span_ref.span_context();
    let state = sc.trace_state().header();
    TraceContext::new(
        u128::from_be_bytes(sc.trace_id().to_bytes()),
        u64::from_be_bytes(sc.span_id().to_bytes()),
        sc.trace_flags().to_u8(),
        (!state.is_empty()).then_some(state),
    )
}

/// Continues the client's trace: the `_meta` context is the parent, a different header
/// context a link.
fn continue_trace(span: &Span, trace: &RequestTrace) {
    if let Some(parent) = trace.parent() {
        let _ = span.set_parent(remote(parent));
    }
    if let Some(linked) = trace.linked() {
        span.add_link(remote(linked).span().span_context().clone());
    }
}

/// What the span of a client request says of it.
pub(crate) struct RequestFacts<'a> {
    /// The method.
    pub(crate) method: &'a str,
    /// Its params (a prompt's name or a resource's URI are read from them).
    pub(crate) params: Option<&'a RawValue>,
    /// The tool, for `tools/call`.
    pub(crate) tool: Option<&'a str>,
    /// The client session's key.
    pub(crate) session: u64,
    /// The session's protocol version.
    pub(crate) version: &'a str,
    /// The client's id.
    pub(crate) id: &'a Id,
    /// The client's address, when its transport has one.
    pub(crate) peer: Option<IpAddr>,
    /// The trace context the client sent.
    pub(crate) trace: &'a RequestTrace,
}

/// The span of one client request.
pub(crate) fn request(req: &RequestFacts<'_>) -> Span {
    if !super::on() {
        return Span::none();
    }
    let method_name = req.method;
    let (prompt, uri) = prompt_and_uri(method_name, req.params);
    let target = req.tool.or(prompt.as_deref());
    let span = info_span!(
        "mcp.server",
        otel.name = %span_name(method_name, target),
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = %label(method_name),
        jsonrpc.protocol.version = "2.0",
        mcp.session.id = %req.session,
        mcp.protocol.version = %req.version,
        jsonrpc.request.id = %id_text(req.id),
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        client.address = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
        seawall.outcome = Empty,
        seawall.correlation_id = Empty,
    );
    if let Some(tool) = req.tool {
        span.record("gen_ai.tool.name", label(tool));
        span.record("gen_ai.operation.name", "execute_tool");
    }
    if let Some(prompt) = &prompt {
        span.record("gen_ai.prompt.name", label(prompt));
    }
    if let Some(uri) = &uri {
        span.record("mcp.resource.uri", crate::sanitize::quote(uri, crate::sanitize::TEXT_CAP));
    }
    if let Some(peer) = req.peer {
        span.record("client.address", tracing::field::display(peer));
    }
    continue_trace(&span, req.trace);
    span
}

/// Records the answer to a client request: for an error its code (`error.type`,
/// `rpc.response.status_code`) and message (the status), for a tool result with
/// `isError` the conventions' `tool_error`; and the `outcome` label of the metrics.
pub(crate) fn record_reply(span: &Span, reply: &Reply, outcome: &'static str) {
    match reply {
        Ok(_) if outcome == "ok" => {}
        // A tool's own `isError` result, or a failure answered as one.
        Ok(_) => {
            span.record("error.type", outcome);
            span.record("otel.status_code", "error");
        }
        Err(error) => {
            let error = jsonrpc::view::<jsonrpc::ErrorView>(Some(error));
            let code = error.as_ref().and_then(|e| e.code);
            let code = code.map_or_else(|| "_OTHER".to_owned(), |c| c.to_string());
            span.record("error.type", code.as_str());
            span.record("rpc.response.status_code", code.as_str());
            span.record("otel.status_code", "error");
            if let Some(message) = error.as_ref().and_then(|e| e.message.as_deref()) {
                span.record("otel.status_description", crate::sanitize::text(message));
            }
            if let Some(cid) = error.and_then(|e| e.data).and_then(|d| d.correlation_id) {
                span.record("seawall.correlation_id", crate::sanitize::ident(&cid));
            }
        }
    }
    span.record("seawall.outcome", outcome);
}

/// The span of one attempt of `call` upstream; the retry and breaker layers above said
/// which attempt it is and how it was admitted.
pub(crate) fn attempt(call: &UpstreamCall) -> Span {
    if !super::on() {
        return Span::none();
    }
    let method_name = &*call.method;
    let (prompt, uri) = prompt_and_uri(method_name, call.params.as_deref());
    let target = call.tool.as_deref().or(prompt.as_deref());
    let transport = network_transport(call.target.is_process());
    let span = info_span!(
        "mcp.client",
        otel.name = %span_name(method_name, target),
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = %label(method_name),
        jsonrpc.protocol.version = "2.0",
        network.transport = transport,
        gen_ai.operation.name = Empty,
        gen_ai.tool.name = Empty,
        gen_ai.prompt.name = Empty,
        mcp.resource.uri = Empty,
        error.type = Empty,
        rpc.response.status_code = Empty,
        seawall.upstream = %call.upstream,
        seawall.attempt = i64::from(call.trace.attempt),
        seawall.retry_reason = Empty,
        seawall.breaker = Empty,
        seawall.endpoint = Empty,
        seawall.idempotent = call.idempotent,
        seawall.outcome = Empty,
    );
    if let Some(tool) = &call.tool {
        span.record("gen_ai.tool.name", label(tool));
        span.record("gen_ai.operation.name", "execute_tool");
    }
    if let Some(prompt) = &prompt {
        span.record("gen_ai.prompt.name", label(prompt));
    }
    if let Some(uri) = &uri {
        span.record("mcp.resource.uri", crate::sanitize::quote(uri, crate::sanitize::TEXT_CAP));
    }
    if let Some(reason) = call.trace.retry_reason {
        span.record("seawall.retry_reason", reason);
    }
    if let Some(state) = call.trace.breaker {
        span.record("seawall.breaker", state);
    }
    if let Some(endpoint) = call.endpoint {
        span.record("seawall.endpoint", i64::from(endpoint));
    }
    span
}

/// Records how an attempt ended: the upstream's error code or `tool_error` as for a
/// request, a failure by its low-cardinality kind (an HTTP status, `timeout`,
/// `connection`, ...), and the `outcome` label of the metrics.
pub(crate) fn record_attempt(span: &Span, result: &Result<Answer, GatewayError>) {
    if span.is_none() {
        return;
    }
    let outcome = match result {
        Ok(answer @ Answer::Result { is_error, .. }) => {
            if *is_error {
                span.record("error.type", "tool_error");
                span.record("otel.status_code", "error");
            }
            answer.outcome()
        }
        Ok(answer @ Answer::Error { code, raw }) => {
            let code = code.map_or_else(|| "_OTHER".to_owned(), |c| c.to_string());
            span.record("error.type", code.as_str());
            span.record("rpc.response.status_code", code.as_str());
            span.record("otel.status_code", "error");
            if let Some(message) = jsonrpc::view::<jsonrpc::ErrorView>(Some(raw)).and_then(|e| e.message) {
                span.record("otel.status_description", crate::sanitize::text(&message));
            }
            answer.outcome()
        }
        Err(error) => {
            record_failure(span, error);
            error.class().outcome
        }
    };
    span.record("seawall.outcome", outcome);
}

/// Records a failure of seawall's own on `span`: its kind and its message.
pub(crate) fn record_failure(span: &Span, error: &GatewayError) {
    if span.is_none() {
        return;
    }
    let kind = match error {
        GatewayError::Upstream { source, .. } => upstream_failure_kind(source),
        GatewayError::AttemptTimeout { .. } => "attempt_timeout".into(),
        GatewayError::Unavailable { .. } => "unavailable".into(),
        other => other.class().outcome.into(),
    };
    span.record("error.type", kind.as_str());
    span.record("otel.status_code", "error");
    span.record("otel.status_description", crate::sanitize::text(&error.to_string()));
}

/// The `error.type` of a transport failure: the HTTP status, or what broke.
fn upstream_failure_kind(error: &UpstreamError) -> String {
    match error {
        UpstreamError::HttpStatus { status, .. } => status.to_string(),
        UpstreamError::Connect(_) => "connect".into(),
        UpstreamError::NotRunning(_) => "not_running".into(),
        UpstreamError::Handshake(_) => "handshake".into(),
        UpstreamError::Io(_) => "connection".into(),
        UpstreamError::ProcessExited { .. } => "process_exited".into(),
        UpstreamError::Restarting => "restarting".into(),
        UpstreamError::Protocol(_) => "protocol".into(),
        UpstreamError::TooLarge { .. } => "too_large".into(),
        UpstreamError::SessionLost(_) => "session_lost".into(),
    }
}

/// The span of a client's `initialize`, continuing the trace it came with.
pub(crate) fn initialize(id: &jsonrpc::Id, trace: &RequestTrace) -> Span {
    if !super::on() {
        return Span::none();
    }
    let span = info_span!(
        "mcp.server",
        otel.name = method::INITIALIZE,
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = method::INITIALIZE,
        jsonrpc.request.id = %id_text(id),
        mcp.session.id = Empty,
        mcp.protocol.version = Empty,
        error.type = Empty,
        seawall.outcome = Empty,
    );
    continue_trace(&span, trace);
    span
}

/// Records the session a client's `initialize` opened (its key, never its id) and the
/// version negotiated, or why it opened none.
/// `opened` is the session's key and version, or the error code answered and why.
pub(crate) fn record_initialized(span: &Span, opened: Result<(u64, &str), (String, String)>) {
    if span.is_none() {
        return;
    }
    match opened {
        Ok((session, version)) => {
            span.record("mcp.session.id", session.to_string());
            span.record("mcp.protocol.version", version);
            span.record("seawall.outcome", "ok");
        }
        Err((code, message)) => {
            span.record("error.type", code.as_str());
            span.record("otel.status_code", "error");
            span.record("otel.status_description", crate::sanitize::text(&message));
            span.record("seawall.outcome", "refused");
        }
    }
}

/// The span of opening a session with `upstream` for a client session.
pub(crate) fn connect(upstream: &str, process: bool) -> Span {
    if !super::on() {
        return Span::none();
    }
    info_span!(
        "mcp.client",
        otel.name = method::INITIALIZE,
        otel.kind = "client",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = method::INITIALIZE,
        network.transport = network_transport(process),
        mcp.protocol.version = Empty,
        error.type = Empty,
        seawall.upstream = upstream,
    )
}

/// Records the upstream's answer to a handshake: its version, or the failure.
pub(crate) fn record_connected(span: &Span, result: Result<Option<&str>, &UpstreamError>) {
    if span.is_none() {
        return;
    }
    match result {
        Ok(version) => {
            if let Some(version) = version {
                span.record("mcp.protocol.version", version);
            }
        }
        Err(error) => {
            span.record("error.type", upstream_failure_kind(error).as_str());
            span.record("otel.status_code", "error");
            span.record("otel.status_description", crate::sanitize::text(&error.to_string()));
        }
    }
}

/// The span of a `server/discover` seawall answers itself.
pub(crate) fn discover(id: &jsonrpc::Id, trace: &RequestTrace) -> Span {
    if !super::on() {
        return Span::none();
    }
    let span = info_span!(
        "mcp.server",
        otel.name = "server/discover",
        otel.kind = "server",
        otel.status_code = Empty,
        otel.status_description = Empty,
        mcp.method.name = "server/discover",
        jsonrpc.request.id = %id_text(id),
        mcp.session.id = Empty,
        error.type = Empty,
        seawall.outcome = Empty,
    );
    continue_trace(&span, trace);
    span
}

/// Records which context answered a `server/discover`, or the failure.
pub(crate) fn record_discovered(span: &Span, result: Result<u64, &GatewayError>) {
    if span.is_none() {
        return;
    }
    match result {
        Ok(session) => {
            span.record("mcp.session.id", session.to_string());
            span.record("seawall.outcome", "ok");
        }
        Err(error) => {
            record_failure(span, error);
            span.record("seawall.outcome", error.class().outcome);
        }
    }
}

/// The span of opening a modern client's context (session `session`) and its upstream
/// sessions: continuing `trace` when given, else under the current span.
pub(crate) fn context(trace: Option<&RequestTrace>, session: u64) -> Span {
    if !super::on() {
        return Span::none();
    }
    let span = info_span!("modern context", otel.name = "modern context", mcp.session.id = %session);
    if let Some(trace) = trace {
        continue_trace(&span, trace);
    }
    span
}

/// The span of a list method (or a broadcast) fanned out to `upstreams` upstreams; their
/// attempts are its children.
pub(crate) fn fan_out(method_name: &str, upstreams: usize) -> Span {
    if !super::on() {
        return Span::none();
    }
    info_span!(
        "fan-out",
        otel.name = %format!("{method_name} fan-out"),
        mcp.method.name = %label(method_name),
        otel.status_code = Empty,
        seawall.upstreams = count(upstreams),
        seawall.answered = Empty,
        seawall.failed = Empty,
    )
}

/// Records how many upstreams of a fan-out answered and how many failed.
pub(crate) fn record_fan_out(span: &Span, answered: usize, failed: usize) {
    if span.is_none() {
        return;
    }
    span.record("seawall.answered", count(answered));
    span.record("seawall.failed", count(failed));
    if answered == 0 && failed > 0 {
        span.record("otel.status_code", "error");
    }
}
