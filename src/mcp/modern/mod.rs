//! The modern era (2026-07-28): no handshake and no sessions; every request carries its
//! protocol version, client capabilities and client info in `params._meta`, and its
//! method and name in HTTP headers that must agree with the body.
//!
//! This module is pure: the envelope and the validation ladder a request passes before
//! it is served, the methods the era removed, and the stamping of results with the
//! members the era requires (`resultType`, and `ttlMs`/`cacheScope` on cacheable ones).

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::jsonrpc;
use crate::mcp::method;

mod headers;

pub(crate) use headers::{
    PARAM_HEADER_PREFIX, check_param_headers, decode_header_value, encode_header_value, marks_headers, param_headers,
};

/// The modern protocol versions seawall speaks.
pub(crate) const MODERN_VERSIONS: &[&str] = &["2026-07-28"];

/// `_meta` key of the request's protocol version.
pub(crate) const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities.
pub(crate) const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's `Implementation`.
pub(crate) const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the desired log level.
pub(crate) const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key of the server's `Implementation`.
pub(crate) const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";

/// Header carrying the protocol version.
pub(crate) const VERSION_HEADER: &str = "mcp-protocol-version";
/// Header carrying the JSON-RPC method.
pub(crate) const METHOD_HEADER: &str = "mcp-method";
/// Header carrying the tool or prompt name or resource URI.
pub(crate) const NAME_HEADER: &str = "mcp-name";

/// Header and body disagree (or a routing header is missing or repeated).
pub(crate) const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability it did not declare.
pub(crate) const MISSING_CLIENT_CAPABILITY: i64 = jsonrpc::code::MISSING_CLIENT_CAPABILITY;
/// The requested protocol version is not served.
pub(crate) const UNSUPPORTED_VERSION: i64 = -32022;

/// `server/discover`.
pub(crate) const DISCOVER: &str = "server/discover";
/// `subscriptions/listen`.
pub(crate) const LISTEN: &str = "subscriptions/listen";

/// Whether `version` is a modern version seawall serves.
pub(crate) fn is_modern(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}

/// Methods of the legacy era that 2026-07-28 removed: answered -32601 (HTTP 404).
/// (`tasks/*` left the core for an extension: they travel to the upstream.)
pub(crate) fn is_removed(name: &str) -> bool {
    matches!(
        name,
        method::INITIALIZE
            | method::PING
            | method::LOGGING_SET_LEVEL
            | method::RESOURCES_SUBSCRIBE
            | method::RESOURCES_UNSUBSCRIBE
    )
}

/// The body parameter a method's `Mcp-Name` header mirrors.
fn name_param(name: &str) -> Option<&'static str> {
    match name {
        method::TOOLS_CALL | method::PROMPTS_GET => Some("name"),
        method::RESOURCES_READ => Some("uri"),
        _ => None,
    }
}

/// Results the era lets clients cache: they carry `ttlMs` and `cacheScope`. The response
/// cache keeps the same ones.
pub(crate) fn is_cacheable(name: &str) -> bool {
    matches!(
        name,
        method::TOOLS_LIST
            | method::PROMPTS_LIST
            | method::RESOURCES_LIST
            | method::RESOURCE_TEMPLATES_LIST
            | method::RESOURCES_READ
            | DISCOVER
    )
}

/// A request's envelope, once it passed the ladder.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Envelope {
    /// The protocol version (one of [`MODERN_VERSIONS`]).
    pub(crate) version: String,
    /// The client's capabilities.
    pub(crate) capabilities: Value,
    /// The client's `Implementation` (`null` when not sent).
    pub(crate) client_info: Value,
}

/// Why a request failed the ladder: a JSON-RPC error.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rejection {
    /// The error code.
    pub(crate) code: i64,
    /// The message.
    pub(crate) message: String,
    /// The error's `data`.
    pub(crate) data: Option<Value>,
}

impl Rejection {
    fn new(code: i64, message: impl Into<String>) -> Rejection {
        Rejection { code, message: message.into(), data: None }
    }

    /// The -32022 answer naming what is served and what was asked for.
    pub(crate) fn unsupported(requested: &str) -> Rejection {
        Rejection {
            code: UNSUPPORTED_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": MODERN_VERSIONS, "requested": requested})),
        }
    }

    /// The -32022 answer to a request that names its version only in the header, where
    /// the client may speak either era: every version seawall serves, newest first.
    fn unsupported_by_either_era(requested: &str) -> Rejection {
        let supported: Vec<&str> =
            MODERN_VERSIONS.iter().chain(crate::mcp::LEGACY_VERSIONS.iter().rev()).copied().collect();
        Rejection {
            code: UNSUPPORTED_VERSION,
            message: "Unsupported protocol version".into(),
            data: Some(json!({"supported": supported, "requested": requested})),
        }
    }
}

/// The routing headers of one request (each `None` when absent). A header given more
/// than once is reported by the caller before the ladder runs.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct RoutingHeaders<'a> {
    /// `MCP-Protocol-Version`.
    pub(crate) version: Option<&'a str>,
    /// `Mcp-Method`.
    pub(crate) method: Option<&'a str>,
    /// `Mcp-Name`.
    pub(crate) name: Option<&'a str>,
}

/// Runs the ladder over a request's method and params, first failure wins:
///
/// 0. a body naming no version, under an `MCP-Protocol-Version` header seawall does not
///    speak in either era, is a client of another version, not a malformed modern
///    request: -32022 with every version served;
/// 1. `params._meta` is an object with the protocol version and client capabilities
///    (-32602 otherwise; client info is optional);
/// 2. `MCP-Protocol-Version` equals the envelope's version, `Mcp-Method` the method and,
///    for `tools/call`, `prompts/get` and `resources/read`, `Mcp-Name` the body's name or
///    URI (-32020 otherwise) — before the version rung, so a client that disagrees with
///    itself is told so;
/// 3. the version is a string seawall serves (-32602 for a non-string, -32022 with
///    `data.supported` and `data.requested` otherwise).
pub(crate) fn classify(
    name: &str,
    params: Option<&RawValue>,
    headers: RoutingHeaders<'_>,
) -> Result<Envelope, Rejection> {
    let params: Option<Map<String, Value>> = match jsonrpc::view::<Value>(params) {
        Some(Value::Object(map)) => Some(map),
        _ => None,
    };
    let meta = params.as_ref().and_then(|p| p.get("_meta")).and_then(Value::as_object);
    if let Some(requested) = headers.version
        && !meta.is_some_and(|m| m.contains_key(PROTOCOL_VERSION_KEY))
        && !is_modern(requested)
        && !crate::mcp::is_supported(requested)
    {
        return Err(Rejection::unsupported_by_either_era(requested));
    }
    let Some(meta) = meta else {
        return Err(Rejection::new(
            jsonrpc::code::INVALID_PARAMS,
            format!("params._meta must be an object carrying {PROTOCOL_VERSION_KEY:?} and {CLIENT_CAPABILITIES_KEY:?}"),
        ));
    };
    let missing: Vec<&str> =
        [PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY].into_iter().filter(|k| !meta.contains_key(*k)).collect();
    if !missing.is_empty() {
        return Err(Rejection::new(
            jsonrpc::code::INVALID_PARAMS,
            format!("params._meta is missing the required key(s): {}", missing.join(", ")),
        ));
    }
    let version = &meta[PROTOCOL_VERSION_KEY];
    if headers.version.is_none() || headers.version != version.as_str() {
        return Err(Rejection::new(
            HEADER_MISMATCH,
            "MCP-Protocol-Version header does not match params._meta's protocol version",
        ));
    }
    if headers.method != Some(name) {
        return Err(Rejection::new(HEADER_MISMATCH, "Mcp-Method header does not match the request's method"));
    }
    if let Some(key) = name_param(name)
        && let Some(body) = params.as_ref().and_then(|p| p.get(key)).filter(|v| !v.is_null())
        && headers.name.and_then(decode_header_value).as_deref() != body.as_str()
    {
        return Err(Rejection::new(HEADER_MISMATCH, format!("Mcp-Name header does not match the request's {key:?}")));
    }
    let Some(version) = version.as_str() else {
        return Err(Rejection::new(jsonrpc::code::INVALID_PARAMS, "the protocol version must be a string"));
    };
    if !is_modern(version) {
        return Err(Rejection::unsupported(version));
    }
    Ok(Envelope {
        version: version.to_owned(),
        capabilities: meta[CLIENT_CAPABILITIES_KEY].clone(),
        client_info: meta.get(CLIENT_INFO_KEY).cloned().unwrap_or(Value::Null),
    })
}

/// `params` without the envelope's keys in `_meta` (an empty `_meta` is dropped): the
/// context's link adds its own (a modern upstream) or none (a legacy one). The request's
/// own `logLevel` stays.
pub(crate) fn strip_envelope(params: Option<Box<RawValue>>) -> Option<Box<RawValue>> {
    let Some(Value::Object(mut map)) = jsonrpc::view::<Value>(params.as_deref()) else {
        return params;
    };
    let Some(Value::Object(meta)) = map.get_mut("_meta") else { return params };
    for key in [PROTOCOL_VERSION_KEY, CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY] {
        meta.remove(key);
    }
    if meta.is_empty() {
        map.remove("_meta");
    }
    Some(jsonrpc::to_raw(&map))
}

/// A result as the modern era requires it: `resultType` (`complete` when absent), and
/// for cacheable results `ttlMs` (0) and `cacheScope` (`private`) when absent. A result
/// that already has them all, or is not an object, is the same text.
pub(crate) fn stamp_result(name: &str, result: Box<RawValue>) -> Box<RawValue> {
    let cacheable = is_cacheable(name);
    let Ok(mut map) = serde_json::from_str::<Map<String, Value>>(result.get()) else {
        return result;
    };
    let mut changed = false;
    let mut default = |key: &str, value: Value| {
        if !map.contains_key(key) {
            map.insert(key.to_owned(), value);
            changed = true;
        }
    };
    default("resultType", json!("complete"));
    if cacheable {
        default("ttlMs", json!(0));
        default("cacheScope", json!("private"));
    }
    if !changed {
        return result;
    }
    jsonrpc::to_raw(&map)
}

/// The HTTP status of a JSON answer carrying error `code`.
pub(crate) fn error_status(code: i64) -> http::StatusCode {
    match code {
        jsonrpc::code::PARSE_ERROR
        | jsonrpc::code::INVALID_REQUEST
        | jsonrpc::code::INVALID_PARAMS
        | HEADER_MISMATCH
        | MISSING_CLIENT_CAPABILITY
        | UNSUPPORTED_VERSION => http::StatusCode::BAD_REQUEST,
        jsonrpc::code::METHOD_NOT_FOUND => http::StatusCode::NOT_FOUND,
        _ => http::StatusCode::OK,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Box<RawValue> {
        jsonrpc::to_raw(&value)
    }

    fn envelope(version: &str) -> Value {
        json!({PROTOCOL_VERSION_KEY: version, CLIENT_CAPABILITIES_KEY: {}, CLIENT_INFO_KEY: {"name": "c", "version": "1"}})
    }

    fn headers<'a>(version: &'a str, method: &'a str, name: Option<&'a str>) -> RoutingHeaders<'a> {
        RoutingHeaders { version: Some(version), method: Some(method), name }
    }

    #[test]
    fn a_request_whose_headers_agree_passes_with_its_envelope() {
        let p = params(json!({"name": "echo", "arguments": {}, "_meta": envelope("2026-07-28")}));
        let got = classify("tools/call", Some(&p), headers("2026-07-28", "tools/call", Some("echo")));
        let env = got.expect("passes");
        assert_eq!(env.version, "2026-07-28");
        assert_eq!(env.client_info, json!({"name": "c", "version": "1"}));
        let discover = params(json!({"_meta": envelope("2026-07-28")}));
        assert!(classify(DISCOVER, Some(&discover), headers("2026-07-28", DISCOVER, None)).is_ok());
    }

    #[test]
    fn each_rung_fails_with_its_code() {
        let code = |r: Result<Envelope, Rejection>| r.err().map(|e| e.code);
        let ok = params(json!({"name": "echo", "_meta": envelope("2026-07-28")}));
        assert_eq!(code(classify("tools/call", None, headers("2026-07-28", "tools/call", Some("echo")))), Some(-32602));
        let no_caps = params(json!({"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28"}}));
        assert_eq!(
            code(classify("tools/list", Some(&no_caps), headers("2026-07-28", "tools/list", None))),
            Some(-32602)
        );
        let h = RoutingHeaders { version: None, ..headers("x", "tools/call", Some("echo")) };
        assert_eq!(code(classify("tools/call", Some(&ok), h)), Some(HEADER_MISMATCH), "a missing version header");
        assert_eq!(
            code(classify("tools/call", Some(&ok), headers("2026-07-28", "tools/list", Some("echo")))),
            Some(HEADER_MISMATCH)
        );
        assert_eq!(
            code(classify("tools/call", Some(&ok), headers("2026-07-28", "tools/call", Some("add")))),
            Some(HEADER_MISMATCH)
        );
        assert_eq!(
            code(classify("tools/call", Some(&ok), headers("2026-07-28", "tools/call", None))),
            Some(HEADER_MISMATCH)
        );
        let old = params(json!({"_meta": envelope("2099-01-01")}));
        let err = classify("tools/list", Some(&old), headers("2099-01-01", "tools/list", None)).err();
        assert_eq!(err.as_ref().map(|e| e.code), Some(UNSUPPORTED_VERSION));
        assert_eq!(err.and_then(|e| e.data), Some(json!({"supported": ["2026-07-28"], "requested": "2099-01-01"})));
    }

    #[test]
    fn a_body_without_envelope_under_an_unknown_version_learns_every_version_served() {
        let legacy_shaped = params(json!({"name": "echo", "arguments": {}}));
        let err = classify("tools/call", Some(&legacy_shaped), headers("1999-01-01", "tools/call", Some("echo"))).err();
        assert_eq!(err.as_ref().map(|e| e.code), Some(UNSUPPORTED_VERSION));
        let supported = json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
        assert_eq!(err.and_then(|e| e.data), Some(json!({"supported": supported, "requested": "1999-01-01"})));
        // A modern version without its envelope is still a malformed modern request.
        let err = classify("tools/call", Some(&legacy_shaped), headers("2026-07-28", "tools/call", Some("echo"))).err();
        assert_eq!(err.map(|e| e.code), Some(jsonrpc::code::INVALID_PARAMS));
    }

    #[test]
    fn the_name_header_may_be_base64_wrapped() {
        let p = params(json!({"uri": "file:///ä b", "_meta": envelope("2026-07-28")}));
        let wrapped = "=?base64?ZmlsZTovLy/DpCBi?=";
        assert!(classify("resources/read", Some(&p), headers("2026-07-28", "resources/read", Some(wrapped))).is_ok());
        assert_eq!(decode_header_value("=?base64?!!?="), None);
        assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
    }

    #[test]
    fn results_are_stamped_and_the_envelope_is_stripped() {
        let list = stamp_result("tools/list", params(json!({"tools": []})));
        let list: Value = serde_json::from_str(list.get()).unwrap();
        assert_eq!(list, json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"}));
        let call = stamp_result("tools/call", params(json!({"content": [], "resultType": "input_required"})));
        assert_eq!(call.get(), r#"{"content":[],"resultType":"input_required"}"#, "kept as it was");
        let stripped = strip_envelope(Some(params(json!({"name": "x", "_meta": envelope("2026-07-28")}))));
        assert_eq!(stripped.map(|p| p.get().to_owned()).as_deref(), Some(r#"{"name":"x"}"#));
        let mut meta = envelope("2026-07-28");
        meta["progressToken"] = json!(7);
        let stripped = strip_envelope(Some(params(json!({"_meta": meta}))));
        assert_eq!(stripped.map(|p| p.get().to_owned()).as_deref(), Some(r#"{"_meta":{"progressToken":7}}"#));
        assert!(is_removed("initialize") && !is_removed("tasks/get") && !is_removed("tools/call"));
        assert_eq!(error_status(-32601), http::StatusCode::NOT_FOUND);
    }
}
