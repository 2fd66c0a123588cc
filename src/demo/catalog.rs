//! Resources, resource templates, prompts and completion of the demo server.

use base64::Engine as _;
use serde_json::{Value, json};

use super::handler::{Failure, Handled, ServerState};
use super::rpc::{RpcError, code, optional_str, params_object, required_str};

/// The text resource; echoing `touch` notifies its subscribers.
pub(crate) const README_URI: &str = "demo://readme";

/// The binary resource.
pub(crate) const BINARY_URI: &str = "demo://binary";

const README_TEXT: &str = "seawall demo upstream: a built-in MCP server for exercising the gateway.\n";
const BINARY_BYTES: &[u8] = &[0xde, 0xad, 0xbe, 0xef, 0x00, 0x01, 0x02, 0x03];
const ECHO_PREFIX: &str = "demo://echo/";
const ECHO_TEMPLATE: &str = "demo://echo/{text}";
const FLAKY_PREFIX: &str = "demo://flaky/";
const NAMES: &[&str] = &["alice", "albert", "bob", "carol"];
const ECHO_WORDS: &[&str] = &["hello", "help"];

/// `resources/list`.
pub(crate) fn list_resources() -> Value {
    json!({"resources": [
        {"uri": README_URI, "name": "readme", "description": "A short text", "mimeType": "text/plain"},
        {"uri": BINARY_URI, "name": "binary", "description": "A few bytes", "mimeType": "application/octet-stream"},
    ]})
}

/// `resources/templates/list`.
pub(crate) fn list_templates() -> Value {
    json!({"resourceTemplates": [
        {"uriTemplate": ECHO_TEMPLATE, "name": "echo", "description": "Reads back the (percent-decoded) text", "mimeType": "text/plain"},
        {"uriTemplate": "demo://flaky/{key}/{n}", "name": "flaky", "description": "Fails the first n reads per key, then reads `ok`", "mimeType": "text/plain"},
    ]})
}

/// `resources/read`.
pub(crate) fn read_resource(server: &ServerState, params: &Value) -> Handled {
    let params = params_object(params)?;
    let uri = required_str(&params, "uri")?;
    let text = |text: &str| json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": text}]});
    if uri == README_URI {
        return Ok(text(README_TEXT));
    }
    if uri == BINARY_URI {
        let blob = base64::engine::general_purpose::STANDARD.encode(BINARY_BYTES);
        return Ok(json!({"contents": [{"uri": uri, "mimeType": "application/octet-stream", "blob": blob}]}));
    }
    if let Some(encoded) = uri.strip_prefix(ECHO_PREFIX) {
        return Ok(text(&percent_decode(encoded)));
    }
    if let Some((key, n)) = uri
        .strip_prefix(FLAKY_PREFIX)
        .and_then(|rest| rest.rsplit_once('/'))
        .and_then(|(key, n)| Some((key, n.parse::<u64>().ok()?)))
        .filter(|(key, _)| !key.is_empty())
    {
        if server.flaky_resource_fails(key, n) {
            return Err(Failure::Unavailable);
        }
        return Ok(text("ok"));
    }
    Err(RpcError::new(code::RESOURCE_NOT_FOUND, "Resource not found").with_data(json!({"uri": uri})).into())
}

/// Decode `%XX` escapes; malformed escapes stay as they are, invalid UTF-8 is replaced.
pub(crate) fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        let escaped = (b == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(decoded) => {
                out.push(decoded);
                i += 3;
            }
            None => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `prompts/list`.
pub(crate) fn list_prompts() -> Value {
    json!({"prompts": [{
        "name": "greet",
        "description": "Ask the model to greet someone",
        "arguments": [{"name": "name", "description": "Who to greet", "required": true}],
    }]})
}

/// `prompts/get`.
pub(crate) fn get_prompt(params: &Value) -> Result<Value, RpcError> {
    let params = params_object(params)?;
    let name = required_str(&params, "name")?;
    if name != "greet" {
        return Err(RpcError::invalid_params(format!("Unknown prompt: {name}")));
    }
    let who = params
        .get("arguments")
        .and_then(|args| args.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params("missing required argument `name`"))?;
    Ok(json!({
        "description": format!("Greet {who}"),
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("Please greet {who}.")}}],
    }))
}

/// `completion/complete` for the `greet` prompt and the echo template.
pub(crate) fn complete(params: &Value) -> Result<Value, RpcError> {
    let params = params_object(params)?;
    let reference =
        params.get("ref").and_then(Value::as_object).ok_or_else(|| RpcError::invalid_params("missing `ref`"))?;
    let argument = params
        .get("argument")
        .and_then(Value::as_object)
        .ok_or_else(|| RpcError::invalid_params("missing `argument`"))?;
    let arg_name = required_str(argument, "name")?;
    let prefix = optional_str(argument, "value")?.unwrap_or("");
    let candidates: &[&str] = match required_str(reference, "type")? {
        "ref/prompt" => match required_str(reference, "name")? {
            "greet" if arg_name == "name" => NAMES,
            "greet" => &[],
            other => return Err(RpcError::invalid_params(format!("Unknown prompt: {other}"))),
        },
        "ref/resource" => match required_str(reference, "uri")? {
            ECHO_TEMPLATE if arg_name == "text" => ECHO_WORDS,
            ECHO_TEMPLATE => &[],
            other => {
                return Err(RpcError::invalid_params(format!("Unknown resource: {other}")));
            }
        },
        other => {
            return Err(RpcError::invalid_params(format!("Unknown ref type: {other}")));
        }
    };
    let values: Vec<&str> = candidates.iter().copied().filter(|v| v.starts_with(prefix)).collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
