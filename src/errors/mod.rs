//! Every failure inside seawall, and the one place that turns it into an answer.
//!
//! Failures are typed where they happen (`GatewayError` in `crate::call`); the `Rewriter` maps them —
//! and whatever error an upstream sent — to a JSON-RPC error object or, for a `tools/call`
//! whose tool could not do its job, to a `CallToolResult` with `isError: true`. Raw
//! upstream detail goes to the log next to a correlation id and never to the client;
//! everything quoted from a peer passes through [`crate::sanitize`].

pub(crate) mod layer;
mod passthrough;
pub(crate) mod rewrite;

pub(crate) use layer::RewriteLayer;
pub(crate) use rewrite::Rewriter;

use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;

use crate::jsonrpc;

/// A fresh correlation id for one rewritten answer.
pub(crate) fn correlation_id() -> String {
    let bytes: [u8; 8] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A `CallToolResult` with `isError: true` and one text.
pub(crate) fn tool_error(text: &str) -> Box<RawValue> {
    jsonrpc::to_raw(&json!({ "content": [{ "type": "text", "text": text }], "isError": true }))
}

pub(crate) fn human(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{} ms", d.as_millis()) }
}
