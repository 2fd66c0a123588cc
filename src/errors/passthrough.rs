//! Upstream errors whose code describes the client's request (-32600, -32601, -32602,
//! -32002, -32800, -32042, -32021) keep their code; this file decides what of their message and
//! `data` the client gets. Nothing passes as the upstream wrote it:
//!
//! - the message is sanitised (`[url]`, `[path]`, `[redacted]` …; what the client itself
//!   sent is kept, escaped, unless the upstream's level is `strict`), or for -32002 about the
//!   URI the client asked for, replaced by `Resource not found: <that URI>`;
//! - -32002: `data.uri` is the client's own URI, escaped but not masked, when the upstream
//!   names that URI or none; any other URI the upstream wrote is sanitised like all its
//!   text;
//! - -32042 (URL elicitation required, MCP 2025-11-25): `data` is cut down to what the
//!   client needs to go on, `elicitations: [{mode: "url", elicitationId, url, message}]`.
//!   The URL and the id are escaped but not masked (the client must open that URL and
//!   match that id); the message is sanitised; every other field is dropped;
//! - -32021 (missing client capability, MCP 2026-07-28): `data.requiredCapabilities`,
//!   sanitised;
//! - any other code: `data` is sanitised and bounded, under `data.upstream`.
//!
//! Every answer carries `data.correlationId`; the raw error is logged beside it.

use serde_json::{Map, Value, json};

use crate::jsonrpc::code;
use crate::sanitize::{self, IDENT_CAP, TEXT_CAP};

/// Longest elicitation URL relayed; a longer one is dropped, since a cut URL is useless.
const ELICITATION_URL_CAP: usize = 2048;
/// Most elicitations relayed from one error.
const MAX_ELICITATIONS: usize = 8;

/// The message and `data` the client gets for an upstream error with client-fault
/// `code`. `asked_uri` is the URI the client's own request named, if any.
pub(super) fn answer(
    code: i64,
    message: Option<&str>,
    data: Option<&Value>,
    asked_uri: Option<&str>,
    correlation_id: &str,
    quoting: &sanitize::Quoting<'_>,
) -> (String, Value) {
    let mut out = Map::new();
    let mut message = sanitize::sanitize_quoting(message.unwrap_or(""), TEXT_CAP, quoting);
    match (code, data) {
        (code::RESOURCE_NOT_FOUND, _) => {
            let named = data.and_then(|d| d.get("uri")).and_then(Value::as_str);
            match (named, asked_uri) {
                // Naming no URI, the upstream is speaking of the one it was asked for.
                (Some(named), Some(asked)) if named == asked => not_found(asked, &mut message, &mut out),
                (None, Some(asked)) => not_found(asked, &mut message, &mut out),
                (Some(named), _) => {
                    out.insert("uri".into(), Value::String(sanitize::sanitize_quoting(named, TEXT_CAP, quoting)));
                }
                (None, None) => {}
            }
        }
        (code::URL_ELICITATION_REQUIRED, _) => {
            out.insert("elicitations".into(), Value::Array(elicitations(data)));
        }
        // The modern era's resource-not-found (-32602) names the URI the client asked for.
        (code::INVALID_PARAMS, Some(data))
            if asked_uri.is_some() && data.get("uri").and_then(Value::as_str) == asked_uri =>
        {
            if let Some(asked) = asked_uri {
                out.insert("uri".into(), Value::String(sanitize::quote(asked, TEXT_CAP)));
            }
        }
        // The client must learn which capabilities to declare.
        (code::MISSING_CLIENT_CAPABILITY, Some(data)) => {
            if let Some(required) = data.get("requiredCapabilities") {
                out.insert("requiredCapabilities".into(), sanitize::sanitize_json(required, TEXT_CAP));
            }
        }
        (_, Some(data)) => {
            out.insert("upstream".into(), sanitize::sanitize_json_quoting(data, TEXT_CAP, quoting));
        }
        (_, None) => {}
    }
    out.insert("correlationId".into(), json!(correlation_id));
    if message.is_empty() {
        message = default_message(code).to_owned();
    }
    (message, Value::Object(out))
}

/// A -32002 about the client's own URI: the URI is quoted, not masked, in both places.
fn not_found(asked: &str, message: &mut String, out: &mut Map<String, Value>) {
    let quoted = sanitize::quote(asked, TEXT_CAP);
    *message = format!("Resource not found: {quoted}");
    out.insert("uri".into(), Value::String(quoted));
}

/// The well-formed URL elicitations of a -32042 `data`, reduced to their four fields.
fn elicitations(data: Option<&Value>) -> Vec<Value> {
    let Some(Value::Array(items)) = data.and_then(|d| d.get("elicitations")) else { return Vec::new() };
    items.iter().filter_map(elicitation).take(MAX_ELICITATIONS).collect()
}

fn elicitation(item: &Value) -> Option<Value> {
    if item.get("mode").and_then(Value::as_str) != Some("url") {
        return None;
    }
    let url = item.get("url").and_then(Value::as_str)?;
    let id = item.get("elicitationId").and_then(Value::as_str)?;
    // An id or URL that would have to be cut cannot be used; leave the entry out.
    let (quoted_url, quoted_id) = (sanitize::quote(url, usize::MAX), sanitize::quote(id, usize::MAX));
    if quoted_url.len() > ELICITATION_URL_CAP || quoted_id.len() > IDENT_CAP {
        return None;
    }
    let message = item.get("message").and_then(Value::as_str).map(sanitize::text).unwrap_or_default();
    Some(json!({ "mode": "url", "elicitationId": quoted_id, "url": quoted_url, "message": message }))
}

fn default_message(code: i64) -> &'static str {
    match code {
        code::INVALID_REQUEST => "Invalid request",
        code::METHOD_NOT_FOUND => "Method not found",
        code::INVALID_PARAMS => "Invalid params",
        code::RESOURCE_NOT_FOUND => "Resource not found",
        code::REQUEST_CANCELLED => "Request cancelled",
        code::URL_ELICITATION_REQUIRED => "URL elicitation required",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const Q: sanitize::Quoting<'static> = sanitize::Quoting { client_values: &[], credentials_only: false };

    const SECRET: &str = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";

    #[test]
    fn elicitation_data_keeps_only_the_url_entries_fields() {
        let data = json!({
            "elicitations": [
                {"mode": "url", "elicitationId": "e-1", "url": "https://auth.example.com/connect?state=abc",
                 "message": format!("Sign in (key {SECRET})"), "debug": "/srv/app/secrets.yaml"},
                {"mode": "form", "elicitationId": "e-2", "requestedSchema": {}},
                {"mode": "url", "elicitationId": "e-3", "url": format!("https://x/{}", "a".repeat(3000))},
            ],
            "dsn": "postgres://admin:hunter2@db.internal:5432/prod",
        });
        let (message, out) =
            answer(code::URL_ELICITATION_REQUIRED, Some(&format!("go to {SECRET}")), Some(&data), None, "c1", &Q);
        assert!(!message.contains(SECRET), "{message}");
        assert_eq!(out["correlationId"], "c1");
        let list = out["elicitations"].as_array().unwrap();
        assert_eq!(list.len(), 1, "{out}");
        assert_eq!(list[0]["url"], "https://auth.example.com/connect?state=abc");
        assert_eq!(list[0]["elicitationId"], "e-1");
        assert_eq!(list[0]["mode"], "url");
        let text = out.to_string();
        for planted in [SECRET, "hunter2", "/srv/app", "debug", "dsn"] {
            assert!(!text.contains(planted), "{planted} in {text}");
        }
    }

    #[test]
    fn elicitation_urls_are_escaped_not_masked() {
        let data = json!({"elicitations": [{"mode": "url", "elicitationId": "é", "url": "https://a.example/é"}]});
        let (message, out) = answer(code::URL_ELICITATION_REQUIRED, None, Some(&data), None, "c", &Q);
        assert_eq!(message, "URL elicitation required");
        assert_eq!(out["elicitations"][0]["url"], "https://a.example/\\xc3\\xa9");
        assert_eq!(out["elicitations"][0]["elicitationId"], "\\xc3\\xa9");
        let (_, empty) = answer(code::URL_ELICITATION_REQUIRED, None, Some(&json!("raw")), None, "c", &Q);
        assert_eq!(empty, json!({"elicitations": [], "correlationId": "c"}));
    }

    #[test]
    fn the_modern_not_found_and_missing_capability_keep_what_the_client_needs() {
        let data = json!({"uri": "test://gone", "trace": "/home/deploy/x"});
        let (_, out) =
            answer(code::INVALID_PARAMS, Some("Resource not found"), Some(&data), Some("test://gone"), "c", &Q);
        assert_eq!(out["uri"], "test://gone");
        assert!(out.get("upstream").is_none(), "{out}");
        let data = json!({"requiredCapabilities": {"sampling": {}}});
        let (_, out) = answer(code::MISSING_CLIENT_CAPABILITY, Some("needs sampling"), Some(&data), None, "c", &Q);
        assert_eq!(out["requiredCapabilities"], json!({"sampling": {}}));
    }

    #[test]
    fn not_found_names_the_clients_uri_but_scrubs_any_other() {
        let data = json!({"uri": "nope://missing/thing"});
        let (message, out) =
            answer(code::RESOURCE_NOT_FOUND, Some("no such thing"), Some(&data), Some("nope://missing/thing"), "c", &Q);
        assert_eq!(message, "Resource not found: nope://missing/thing");
        assert_eq!(out["uri"], "nope://missing/thing");
        let data = json!({"uri": "file:///home/deploy/secret"});
        let (message, out) = answer(code::RESOURCE_NOT_FOUND, Some("gone"), Some(&data), Some("demo://x"), "c", &Q);
        assert_eq!(message, "gone");
        assert_eq!(out["uri"], "[url]");
        let (message, out) = answer(code::RESOURCE_NOT_FOUND, Some("gone"), None, Some("demo://x"), "c", &Q);
        assert_eq!((message.as_str(), &out["uri"]), ("Resource not found: demo://x", &json!("demo://x")));
        let (message, out) = answer(code::RESOURCE_NOT_FOUND, None, None, None, "c", &Q);
        assert_eq!((message.as_str(), out), ("Resource not found", json!({"correlationId": "c"})));
    }

    #[test]
    fn other_data_is_sanitised_under_upstream() {
        let data = json!({"path": "/home/deploy/x", "key": SECRET});
        let (message, out) = answer(code::INVALID_PARAMS, Some(""), Some(&data), None, "c", &Q);
        assert_eq!(message, "Invalid params");
        assert!(!out.to_string().contains(SECRET) && !out.to_string().contains("/home/deploy"), "{out}");
        assert_eq!(out["correlationId"], "c");
    }
}
