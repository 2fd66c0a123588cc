//! An upstream's answer as the client sees it: its errors passed through sanitised or
//! made -32603, a tool's `isError` result scrubbed, structured output checked against
//! the tool's output schema.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Rewriter, describe};
use crate::call::{Answer, Origin, Reply};
use crate::catalog::ToolInfo;
use crate::client::{FromUpstream, Routed};
use crate::config::{Report, SanitizeLevel};
use crate::errors::{correlation_id, passthrough, tool_error};
use crate::jsonrpc::{self, code};
use crate::mcp::method;
use crate::sanitize::{self, TEXT_CAP};
use crate::telemetry::metrics;

/// Longest `isError` text relayed from an upstream, after scrubbing.
const TOOL_ERROR_CAP: usize = 4096;

/// Upstream error codes that describe the client's request, passed through (sanitised).
const CLIENT_FAULTS: &[i64] = &[
    code::INVALID_REQUEST,
    code::METHOD_NOT_FOUND,
    code::INVALID_PARAMS,
    code::RESOURCE_NOT_FOUND,
    code::REQUEST_CANCELLED,
    code::URL_ELICITATION_REQUIRED,
    code::MISSING_CLIENT_CAPABILITY,
];

/// What the client's request said that an answer about it may quote back, and how the
/// upstream's text is sanitised ([`SanitizeLevel`]).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Asked<'a> {
    /// The upstream's sanitising level.
    pub(crate) level: SanitizeLevel,
    /// The arguments of a `tools/call`.
    pub(crate) arguments: Option<&'a Value>,
    /// The URI a `resources/*` request named.
    pub(crate) uri: Option<&'a str>,
}

/// Most of the client's values looked for in one answer.
const MAX_CLIENT_VALUES: usize = 64;

impl Asked<'_> {
    /// The strings the client sent (argument values at any depth, the URI), at most
    /// [`MAX_CLIENT_VALUES`] of them, each short enough to be kept.
    fn client_values(&self) -> Vec<String> {
        fn walk(value: &Value, out: &mut Vec<String>) {
            if out.len() >= MAX_CLIENT_VALUES {
                return;
            }
            match value {
                Value::String(s) if !s.is_empty() && s.len() <= sanitize::CLIENT_VALUE_CAP => out.push(s.clone()),
                Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
                Value::Object(map) => map.values().for_each(|v| walk(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        if self.level == SanitizeLevel::Strict {
            return out;
        }
        if let Some(uri) = self.uri.filter(|u| !u.is_empty() && u.len() <= sanitize::CLIENT_VALUE_CAP) {
            out.push(uri.to_owned());
        }
        if let Some(arguments) = self.arguments {
            walk(arguments, &mut out);
        }
        out
    }

    /// The sanitiser's allowances, keeping `values` (the client's).
    fn quoting<'v>(&self, values: &'v [String]) -> sanitize::Quoting<'v> {
        sanitize::Quoting { client_values: values, credentials_only: self.level == SanitizeLevel::Trusted }
    }
}

#[derive(Deserialize)]
struct ErrorView {
    code: Option<i64>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    data: Option<Value>,
}

#[derive(Deserialize)]
struct StructuredView<'a> {
    #[serde(rename = "structuredContent", default, borrow)]
    structured: Option<&'a RawValue>,
}

impl Rewriter {
    /// What the router handed back → what the client sees: seawall's own answers as
    /// they are, an upstream's rewritten ([`Rewriter::upstream_reply`]).
    pub(crate) fn routed(&self, method: &str, routed: Routed) -> Reply {
        match routed {
            Routed::Made(reply) => reply,
            Routed::Upstream(from) => {
                let FromUpstream { answer, upstream, level, tool, info, arguments, uri } = *from;
                let asked = Asked { level, arguments: arguments.as_deref(), uri: uri.as_deref() };
                self.upstream_reply(&upstream, method, tool.as_deref(), &asked, info.as_deref(), answer)
            }
        }
    }

    /// An upstream's answer → what the client sees. Results pass untouched, except
    /// `tools/call` results that are `isError` (scrubbed) or whose `structuredContent`
    /// breaks the tool's `outputSchema` (replaced). `asked` is what the request said
    /// (its arguments, the URI a `resources/*` request named), which the answer may quote
    /// back, and how much of the upstream's text is scrubbed.
    pub(crate) fn upstream_reply(
        &self,
        upstream: &str,
        method: &str,
        tool: Option<&str>,
        asked: &Asked<'_>,
        info: Option<&ToolInfo>,
        answer: Answer,
    ) -> Reply {
        match answer {
            Answer::Error { raw, .. } => self.upstream_error(upstream, method, tool, asked, &raw),
            Answer::Result { raw, is_error } if method == method::TOOLS_CALL => {
                self.tool_result(upstream, tool, info, raw, is_error, asked)
            }
            Answer::Result { raw, .. } => Ok(raw),
        }
    }

    fn upstream_error(
        &self,
        upstream: &str,
        method: &str,
        tool: Option<&str>,
        asked: &Asked<'_>,
        error: &RawValue,
    ) -> Reply {
        let cid = correlation_id();
        let view: Option<ErrorView> = serde_json::from_str(error.get()).ok();
        let code = view.as_ref().and_then(|v| v.code);
        if let (Some(code), Some(view)) = (code, &view)
            && CLIENT_FAULTS.contains(&code)
        {
            tracing::debug!(correlation_id = %cid, upstream, code, raw = %truncated(error.get()), "upstream refused a request");
            let values = asked.client_values();
            let quoting = asked.quoting(&values);
            let (message, data) =
                passthrough::answer(code, view.message.as_deref(), view.data.as_ref(), asked.uri, &cid, &quoting);
            metrics::error_rewritten(Origin::Client.as_str());
            return Err(jsonrpc::error_object(code, &message, Some(data)));
        }
        tracing::warn!(
            correlation_id = %cid,
            origin = Origin::UpstreamTool.as_str(),
            upstream,
            method = %sanitize::ident(method),
            raw = %truncated(error.get()),
            "upstream reported an internal error"
        );
        metrics::error_rewritten(Origin::UpstreamTool.as_str());
        match tool.filter(|_| self.config.tool_failures == Report::Result) {
            Some(tool) => Ok(tool_error(&format!(
                "tool '{}' failed: upstream '{upstream}' reported an internal error (correlation id {cid})",
                sanitize::ident(tool)
            ))),
            None => Err(jsonrpc::error_object(
                code::INTERNAL_ERROR,
                &format!("Internal error in upstream '{upstream}'"),
                Some(json!({ "correlationId": cid })),
            )),
        }
    }

    fn tool_result(
        &self,
        upstream: &str,
        tool: Option<&str>,
        info: Option<&ToolInfo>,
        result: Box<RawValue>,
        is_error: bool,
        asked: &Asked<'_>,
    ) -> Reply {
        if is_error {
            if !self.config.scrub_tool_errors {
                return Ok(result);
            }
            let values = asked.client_values();
            return Ok(scrubbed_tool_error(upstream, tool, result, &asked.quoting(&values)));
        }
        if !self.config.validate_output {
            return Ok(result);
        }
        let Some(schema) = info.and_then(|i| i.output_schema.as_deref()) else { return Ok(result) };
        let Ok(view) = serde_json::from_str::<StructuredView<'_>>(result.get()) else { return Ok(result) };
        let structured = view.structured.and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok());
        let problem = match &structured {
            None => "it declares an output schema but returned no structured content".to_owned(),
            Some(value) => {
                let checked = match info.and_then(|i| i.output_key.as_ref()) {
                    Some(key) => self.schemas.validate_with_key(key, schema, value),
                    None => self.schemas.validate(schema, value),
                };
                match checked {
                    Ok(()) => return Ok(result),
                    Err(violations) => describe(violations.iter().map(|v| (v.pointer.as_str(), v.message.as_str()))),
                }
            }
        };
        let cid = correlation_id();
        let tool = sanitize::ident(tool.unwrap_or("?"));
        tracing::warn!(correlation_id = %cid, upstream, tool = %tool, problem = %problem, "tool output does not match its output schema");
        match self.config.tool_failures {
            Report::Result => Ok(tool_error(&format!(
                "tool '{tool}' returned output that does not match its output schema, so it was withheld (correlation id {cid})"
            ))),
            Report::Error => Err(jsonrpc::error_object(
                code::INTERNAL_ERROR,
                &format!("Tool '{tool}' returned output that does not match its output schema"),
                Some(json!({ "correlationId": cid })),
            )),
        }
    }
}

/// An `isError` result as the client gets it: scrubbed, and when that changed anything,
/// marked with a correlation id (in a text the model reads, and in `_meta`) that is in
/// seawall's log beside the original.
fn scrubbed_tool_error(
    upstream: &str,
    tool: Option<&str>,
    result: Box<RawValue>,
    quoting: &sanitize::Quoting<'_>,
) -> Box<RawValue> {
    let Some(mut scrubbed) = scrub_tool_error(&result, quoting) else { return result };
    let cid = correlation_id();
    tracing::warn!(
        correlation_id = %cid,
        upstream,
        tool = %sanitize::ident(tool.unwrap_or("?")),
        original = %sanitize::quote(result.get(), ORIGINAL_LOG_CAP),
        "scrubbed a tool's error result; the original is logged here"
    );
    mark_rewritten(&mut scrubbed, &cid);
    jsonrpc::to_raw(&scrubbed)
}

/// Longest original of a scrubbed result in the log (bytes, escapes counted).
const ORIGINAL_LOG_CAP: usize = 8 * 1024;

/// Scrubs the content of an `isError` result; `None` if it is not an object or nothing
/// in it changed.
fn scrub_tool_error(result: &RawValue, quoting: &sanitize::Quoting<'_>) -> Option<Map<String, Value>> {
    let Value::Object(original) = serde_json::from_str::<Value>(result.get()).ok()? else { return None };
    let mut map = original.clone();
    if let Some(Value::Array(items)) = map.get_mut("content") {
        items.iter_mut().for_each(|item| scrub_content(item, quoting));
    }
    if let Some(structured) = map.get_mut("structuredContent") {
        *structured = sanitize::sanitize_json_quoting(structured, TEXT_CAP, quoting);
    }
    (map != original).then_some(map)
}

/// Adds the correlation id of a changed result: a last text item saying so, and the
/// `_meta` key the access log reads.
fn mark_rewritten(result: &mut Map<String, Value>, cid: &str) {
    let note =
        json!({"type": "text", "text": format!("(details were removed from this result; correlation id {cid})")});
    match result.get_mut("content") {
        Some(Value::Array(items)) => items.push(note),
        Some(_) => {}
        None => {
            result.insert("content".into(), json!([note]));
        }
    }
    let meta = result.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert(crate::mcp::meta::CORRELATION_ID_KEY.into(), json!(cid));
    }
}

/// Scrubs one content item of an `isError` result: its text, and an embedded
/// resource's, to [`TOOL_ERROR_CAP`]; every other string (a link's name or
/// description, a URI, `_meta`) to [`TEXT_CAP`]. The type, MIME type and binary data
/// (`data`, `blob`) stay as they are.
fn scrub_content(item: &mut Value, quoting: &sanitize::Quoting<'_>) {
    let Value::Object(fields) = item else {
        *item = sanitize::sanitize_json_quoting(item, TEXT_CAP, quoting);
        return;
    };
    for (key, value) in fields.iter_mut() {
        match (key.as_str(), value) {
            ("type" | "mimeType" | "data" | "blob", _) => {}
            ("text", Value::String(text)) => *text = sanitize::sanitize_quoting(text, TOOL_ERROR_CAP, quoting),
            ("resource", resource @ Value::Object(_)) => scrub_content(resource, quoting),
            (_, other) => *other = sanitize::sanitize_json_quoting(other, TEXT_CAP, quoting),
        }
    }
}

/// The raw detail for the log: bounded, but otherwise as the upstream wrote it.
fn truncated(raw: &str) -> &str {
    const LOG_CAP: usize = 8 * 1024;
    if raw.len() <= LOG_CAP {
        return raw;
    }
    let mut end = LOG_CAP;
    while !raw.is_char_boundary(end) {
        end -= 1;
    }
    &raw[..end]
}
