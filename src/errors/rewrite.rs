//! The one rewrite layer: every failure and every upstream error becomes the answer a
//! client sees here, and only here. This file is the table of docs/src/reference/errors.md.
//!
//! | case | answer |
//! |---|---|
//! | tool could not do its job (upstream internal error, crash, broken connection, timeout, open circuit) | `isError` result (or -32603 / -32001 / -32010 / -32011 with `tool_failures: error`) |
//! | arguments break the tool's `inputSchema` | `isError` result listing violations (or -32602 with `data.validation_errors`) |
//! | `structuredContent` breaks the tool's `outputSchema` | `isError` result (or -32603) |
//! | upstream -32600 / -32601 / -32602 / -32002 / -32800 / -32042 | same code, sanitised message and data (`passthrough`) |
//! | upstream -32603 or any other code | -32603 "Internal error in upstream 'x'" (tool calls: `isError`) |
//! | seawall's refusals | -32700, -32600, -32601, -32602, -32002, -32001, -32800, -32010, -32011, -32012, -32013 |
//! | a request still in flight when the shutdown grace period ends | -32014 |
//!
//! Every rewritten answer carries a correlation id (`data.correlationId`, or in the
//! `isError` text) that appears in seawall's log next to the raw detail.

use serde_json::json;

use super::{correlation_id, human, tool_error};
use crate::call::{ArgumentViolation, GatewayError, Origin, Reply};
use crate::config::{ErrorsConfig, Report};
use crate::jsonrpc::{self, code};
use crate::sanitize::{self, TEXT_CAP};
use crate::telemetry::metrics;
use crate::validation::SchemaCache;

mod upstream;

/// Turns failures and upstream errors into answers.
pub(crate) struct Rewriter {
    config: ErrorsConfig,
    schemas: SchemaCache,
}

impl Rewriter {
    /// A rewriter with these settings.
    pub(crate) fn new(config: ErrorsConfig) -> Rewriter {
        Rewriter { config, schemas: SchemaCache::new(crate::validation::DEFAULT_CAPACITY) }
    }

    /// A failure inside seawall → the answer. `tool` is the tool name as the client
    /// wrote it, for `tools/call`.
    pub(crate) fn failure(&self, err: &GatewayError, tool: Option<&str>) -> Reply {
        let cid = correlation_id();
        let origin = err.class().origin;
        metrics::error_rewritten(origin.as_str());
        if matches!(origin, Origin::Client | Origin::Policy) {
            tracing::debug!(correlation_id = %cid, origin = origin.as_str(), error = %err, "refused a request");
        } else {
            tracing::warn!(correlation_id = %cid, origin = origin.as_str(), error = %err, "request failed");
        }
        let data = || Some(json!({ "correlationId": cid }));
        let as_result = tool.filter(|_| self.config.tool_failures == Report::Result).map(sanitize::ident);
        // A denial is answered as the unknown name it stands for.
        let err = match err {
            GatewayError::Denied { answer } => answer.as_ref(),
            other => other,
        };
        match err {
            GatewayError::InvalidParams(m) => Err(jsonrpc::error_object(
                code::INVALID_PARAMS,
                &format!("Invalid params: {}", sanitize::text(m)),
                data(),
            )),
            GatewayError::InvalidRequest(m) => Err(jsonrpc::error_object(
                code::INVALID_REQUEST,
                &format!("Invalid request: {}", sanitize::text(m)),
                data(),
            )),
            GatewayError::MethodNotFound(m) => Err(jsonrpc::error_object(
                code::METHOD_NOT_FOUND,
                &format!("Method not found: {}", sanitize::ident(m)),
                data(),
            )),
            GatewayError::InvalidArguments { tool, violations } => self.invalid_arguments(tool, violations, &cid),
            GatewayError::UnknownTool(t) => Err(jsonrpc::error_object(
                code::INVALID_PARAMS,
                &format!("Unknown tool: {}", sanitize::ident(t)),
                data(),
            )),
            GatewayError::UnknownPrompt(p) => Err(jsonrpc::error_object(
                code::INVALID_PARAMS,
                &format!("Unknown prompt: {}", sanitize::ident(p)),
                data(),
            )),
            GatewayError::ResourceNotFound(uri) => {
                // The client's own URI is no secret: escaped and capped, never masked.
                let uri = sanitize::quote(uri, TEXT_CAP);
                Err(jsonrpc::error_object(
                    code::RESOURCE_NOT_FOUND,
                    &format!("Resource not found: {uri}"),
                    Some(json!({ "uri": uri, "correlationId": cid })),
                ))
            }
            GatewayError::Cancelled => Err(jsonrpc::error_object(code::REQUEST_CANCELLED, "Request cancelled", data())),
            // Always a JSON-RPC error, a tool call's too: the tool did not fail, seawall
            // stopped waiting for it.
            GatewayError::ShuttingDown => Err(jsonrpc::error_object(
                code::SHUTTING_DOWN,
                "Gateway shutting down: the request did not finish within the shutdown grace period; its outcome is unknown",
                data(),
            )),
            GatewayError::Timeout { after, .. } | GatewayError::AttemptTimeout { after, .. } => match as_result {
                Some(tool) => Ok(tool_error(&format!(
                    "tool '{tool}' timed out after {}; the outcome is unknown (correlation id {cid})",
                    human(*after)
                ))),
                None => Err(jsonrpc::error_object(code::REQUEST_TIMEOUT, "Request timed out", data())),
            },
            GatewayError::Upstream { upstream, source, .. } => match as_result {
                Some(tool) => Ok(tool_error(&format!(
                    "tool '{tool}' failed: {} (correlation id {cid})",
                    source.summary(upstream)
                ))),
                None => Err(jsonrpc::error_object(
                    code::UPSTREAM_UNAVAILABLE,
                    &capitalise(&source.summary(upstream)),
                    data(),
                )),
            },
            GatewayError::Unavailable { upstream, .. } => match as_result {
                Some(tool) => Ok(tool_error(&format!(
                    "tool '{tool}' is unavailable: upstream '{upstream}' cannot be reached; try again later (correlation id {cid})"
                ))),
                None => Err(jsonrpc::error_object(
                    code::UPSTREAM_UNAVAILABLE,
                    &format!("Upstream '{upstream}' is unavailable"),
                    data(),
                )),
            },
            GatewayError::CircuitOpen { upstream, tool: open_tool, isolated: Some(reason), .. } => {
                // Held open by the operator: no break ends, so no time to retry in.
                let what = match open_tool {
                    Some(t) => format!("tool '{}' of upstream '{upstream}'", sanitize::ident(t)),
                    None => format!("upstream '{upstream}'"),
                };
                match as_result {
                    Some(tool) => Ok(tool_error(&format!(
                        "tool '{tool}' is unavailable: {what} is isolated by the operator: {reason} (correlation id {cid})"
                    ))),
                    None => Err(jsonrpc::error_object(
                        code::CIRCUIT_OPEN,
                        &capitalise(&format!("{what} is isolated by the operator: {reason}")),
                        Some(json!({ "correlationId": cid, "isolated": true, "reason": &**reason })),
                    )),
                }
            }
            GatewayError::CircuitOpen { upstream, tool: open_tool, retry_after, isolated: None } => {
                let secs = retry_after.as_secs().max(1);
                match as_result {
                    Some(tool) => Ok(tool_error(&format!(
                        "tool '{tool}' is temporarily unavailable: {} is failing and calls are paused; retry in {secs} s (correlation id {cid})",
                        match open_tool {
                            Some(_) => "the tool".to_owned(),
                            None => format!("upstream '{upstream}'"),
                        }
                    ))),
                    None => Err(jsonrpc::error_object(
                        code::CIRCUIT_OPEN,
                        &format!("Upstream '{upstream}' is failing and requests are paused; retry in {secs} s"),
                        Some(json!({ "correlationId": cid, "retryAfterSeconds": secs })),
                    )),
                }
            }
            GatewayError::Overloaded { retry_after, .. } => {
                let secs = retry_after.as_secs().max(1);
                Err(jsonrpc::error_object(
                    code::OVERLOADED,
                    &format!("Overloaded: too many requests in flight; retry in {secs} s"),
                    Some(json!({ "correlationId": cid, "retryAfterSeconds": secs })),
                ))
            }
            GatewayError::RateLimited { retry_after, .. } => {
                let secs = retry_after.as_secs().max(1);
                Err(jsonrpc::error_object(
                    code::RATE_LIMITED,
                    &format!("Rate limited: too many requests; retry in {secs} s"),
                    Some(json!({ "correlationId": cid, "retryAfterSeconds": secs })),
                ))
            }
            // A denial in a denial is not made; were it, it would say nothing.
            GatewayError::Internal(_) | GatewayError::Denied { .. } => {
                Err(jsonrpc::error_object(code::INTERNAL_ERROR, "Internal error", data()))
            }
        }
    }

    /// Arguments that break the tool's input schema → an `isError` result the model can
    /// correct itself from, or -32602 with the violations (`errors.argument_errors`).
    fn invalid_arguments(&self, tool: &str, violations: &[ArgumentViolation], cid: &str) -> Reply {
        let tool = sanitize::ident(tool);
        match self.config.argument_errors {
            Report::Result => Ok(tool_error(&format!(
                "invalid arguments for tool '{tool}': {}; correct them and call again (correlation id {cid})",
                describe(violations.iter().map(|v| (v.pointer.as_str(), v.message.as_str())))
            ))),
            Report::Error => Err(jsonrpc::error_object(
                code::INVALID_PARAMS,
                &format!("Invalid params: arguments do not match the input schema of tool '{tool}'"),
                Some(json!({
                    "validation_errors": violations.iter().map(|v| json!({ "pointer": v.pointer, "message": v.message })).collect::<Vec<_>>(),
                    "correlationId": cid,
                })),
            )),
        }
    }
}

/// `"/a: must be a number; /b: ..."` for at most [`crate::validation::MAX_VIOLATIONS`].
pub(super) fn describe<'a>(violations: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    violations
        .into_iter()
        .map(|(pointer, message)| {
            let pointer = if pointer.is_empty() { "(root)".to_owned() } else { sanitize::ident(pointer) };
            format!("{pointer}: {message}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::value::RawValue;
    use serde_json::{Value, json};

    use super::upstream::*;
    use super::*;
    use crate::call::{Answer, UpstreamError};
    use crate::catalog::ToolInfo;

    /// What the client sees for an upstream's reply, read as the stack reads it.
    fn reply(
        r: &Rewriter,
        upstream: &str,
        method: &str,
        tool: Option<&str>,
        info: Option<&ToolInfo>,
        reply: Reply,
    ) -> Reply {
        r.upstream_reply(upstream, method, tool, &Asked::default(), info, Answer::parse(reply, method == "tools/call"))
    }

    const SECRETS: &[&str] =
        &["sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "/home/deploy", "10.0.3.7", "File \"", "line 3", "eyJhbGci"];

    fn raw(v: Value) -> Box<RawValue> {
        jsonrpc::to_raw(&v)
    }

    fn leak_free(text: &str) {
        for s in SECRETS {
            assert!(!text.contains(s), "{s} leaked in {text}");
        }
    }

    const RAW_TRACE: &str = "Traceback (most recent call last):\n  File \"/home/deploy/app.py\", line 3, in f\nConnectionRefusedError: [Errno 111] refused http://10.0.3.7:5432 key sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";

    #[test]
    fn tool_failures_become_is_error_results_and_others_json_rpc_errors() {
        let r = Rewriter::new(ErrorsConfig::default());
        let timeout = GatewayError::Timeout { upstream: Arc::from("u"), after: Duration::from_secs(2) };
        let result = r.failure(&timeout, Some("u__slow")).unwrap();
        assert!(result.get().contains("\"isError\":true"));
        assert!(result.get().contains("timed out after 2 s; the outcome is unknown"));
        let err = r.failure(&timeout, None).unwrap_err();
        assert!(err.get().starts_with(r#"{"code":-32001,"message":"Request timed out""#));
        let io = GatewayError::Upstream {
            upstream: Arc::from("u"),
            source: UpstreamError::Io(RAW_TRACE.into()),
            endpoint: None,
        };
        leak_free(r.failure(&io, None).unwrap_err().get());
        leak_free(r.failure(&io, Some("t")).unwrap().get());
        let errors_mode = Rewriter::new(ErrorsConfig { tool_failures: Report::Error, ..ErrorsConfig::default() });
        assert!(errors_mode.failure(&timeout, Some("t")).is_err());
    }

    #[test]
    fn upstream_internal_errors_are_replaced_and_client_faults_sanitised() {
        let r = Rewriter::new(ErrorsConfig::default());
        let internal = raw(json!({"code": -32603, "message": RAW_TRACE, "data": RAW_TRACE}));
        let as_tool = reply(&r, "u", "tools/call", Some("u__fail"), None, Err(internal.clone())).unwrap();
        assert!(as_tool.get().contains("reported an internal error") && as_tool.get().contains("correlation id"));
        leak_free(as_tool.get());
        let as_read = reply(&r, "u", "resources/read", None, None, Err(internal)).unwrap_err();
        let v: Value = serde_json::from_str(as_read.get()).unwrap();
        assert_eq!(v["code"], -32603);
        assert_eq!(v["message"], "Internal error in upstream 'u'");
        assert!(v["data"]["correlationId"].is_string());

        let unknown_code = raw(json!({"code": 42, "message": "weird \u{1b}[31mred"}));
        let v: Value =
            serde_json::from_str(reply(&r, "u", "prompts/get", None, None, Err(unknown_code)).unwrap_err().get())
                .unwrap();
        assert_eq!(v["code"], -32603);

        let invalid = raw(
            json!({"code": -32602, "message": format!("bad argument \u{1b}[31mé {RAW_TRACE}"), "data": {"path": "/home/deploy/x"}}),
        );
        let text = reply(&r, "u", "tools/call", Some("t"), None, Err(invalid)).unwrap_err();
        let v: Value = serde_json::from_str(text.get()).unwrap();
        assert_eq!(v["code"], -32602);
        let message = v["message"].as_str().unwrap();
        assert!(message.starts_with("bad argument") && message.contains("\\xc3\\xa9") && !message.contains('\u{1b}'));
        assert!(message.len() <= 256);
        leak_free(text.get());

        let missing = raw(
            json!({"code": -32002, "message": "Resource not found", "data": {"uri": "file:///home/deploy/secret"}}),
        );
        let v: Value =
            serde_json::from_str(reply(&r, "u", "resources/read", None, None, Err(missing)).unwrap_err().get())
                .unwrap();
        assert_eq!(v["code"], -32002);
        assert!(v["data"]["uri"].is_string());
    }

    #[test]
    fn is_error_texts_are_scrubbed_and_other_results_untouched() {
        let r = Rewriter::new(ErrorsConfig::default());
        let failed = raw(json!({"content": [{"type": "text", "text": RAW_TRACE}], "isError": true}));
        let out = reply(&r, "u", "tools/call", Some("t"), None, Ok(failed)).unwrap();
        assert!(out.get().contains("ConnectionRefusedError"), "the headline survives: {}", out.get());
        leak_free(out.get());
        // Every text of the content is scrubbed: an embedded resource's, a link's description.
        let attached = raw(json!({"content": [
            {"type": "resource", "resource": {"uri": "file:///home/deploy/log", "mimeType": "text/plain", "text": RAW_TRACE}},
            {"type": "resource_link", "uri": "demo://log", "name": "log", "description": RAW_TRACE},
            {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
        ], "isError": true}));
        let out = reply(&r, "u", "tools/call", Some("t"), None, Ok(attached)).unwrap();
        leak_free(out.get());
        let v: Value = serde_json::from_str(out.get()).unwrap();
        assert!(v["content"][0]["resource"]["text"].as_str().unwrap().contains("ConnectionRefusedError"), "{v}");
        assert_eq!(v["content"][0]["resource"]["mimeType"], "text/plain");
        assert_eq!(v["content"][1]["name"], "log");
        assert_eq!(v["content"][2]["data"], "aGVsbG8=");
        let fine = raw(json!({"content": [{"type": "text", "text": "/home/deploy is fine here"}], "extra": 1.50}));
        let text = fine.get().to_owned();
        assert_eq!(reply(&r, "u", "tools/call", Some("t"), None, Ok(fine)).unwrap().get(), text);
    }

    #[test]
    fn arguments_and_structured_output_are_checked_against_the_schemas() {
        let r = Rewriter::new(ErrorsConfig::default());
        let info = ToolInfo {
            input_schema: Some(Arc::new(
                json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a", "b"]}),
            )),
            output_schema: Some(Arc::new(
                json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}),
            )),
            ..ToolInfo::default()
        };
        let check = crate::validation::ArgumentCheck::new(true);
        let schema = info.input_schema.as_deref();
        assert!(check.check(schema, None, Some(&json!({"a": 1, "b": 2}))).is_ok());
        let violations = check.check(schema, None, Some(&json!({"a": "x"}))).unwrap_err();
        let invalid = GatewayError::InvalidArguments {
            tool: "t".into(),
            violations: violations
                .into_iter()
                .map(|v| crate::call::ArgumentViolation { pointer: v.pointer, message: v.message })
                .collect(),
        };
        let refused = r.failure(&invalid, Some("t")).unwrap();
        assert!(refused.get().contains("/a") && refused.get().contains("\"isError\":true"), "{}", refused.get());
        let strict = Rewriter::new(ErrorsConfig { argument_errors: Report::Error, ..ErrorsConfig::default() });
        let err = strict.failure(&invalid, Some("t")).unwrap_err();
        let v: Value = serde_json::from_str(err.get()).unwrap();
        assert_eq!(v["code"], -32602);
        assert!(!v["data"]["validation_errors"].as_array().unwrap().is_empty());
        assert!(check.check(None, None, Some(&json!({"a": "x"}))).is_ok(), "no schema known: not checked");
        let off = crate::validation::ArgumentCheck::new(false);
        assert!(off.check(schema, None, Some(&json!({"a": "x"}))).is_ok(), "the check turned off");

        let good = raw(json!({"content": [], "structuredContent": {"sum": 3}}));
        assert!(reply(&r, "u", "tools/call", Some("t"), Some(&info), Ok(good)).unwrap().get().contains("\"sum\":3"));
        let bad = raw(
            json!({"content": [], "structuredContent": {"sum": "three", "secret": "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"}}),
        );
        let out = reply(&r, "u", "tools/call", Some("t"), Some(&info), Ok(bad)).unwrap();
        assert!(out.get().contains("\"isError\":true") && !out.get().contains("three"));
        leak_free(out.get());
    }
}
