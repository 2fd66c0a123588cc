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
mod tests;
