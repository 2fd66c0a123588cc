//! The JSON-RPC 2.0 envelope.
//!
//! Only `jsonrpc`, `id` and `method` are parsed eagerly; `params`, `result` and `error`
//! stay raw JSON ([`RawValue`]) so that whatever a peer sends — unknown fields, number
//! formats, key order — is forwarded byte for byte unless the gateway changes it.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

mod id;
mod known;

pub use id::Id;
use id::null_raw;
#[doc(hidden)] // public for the fuzz target `known`
pub use known::{KnownResults, around as known_around};

/// Standard JSON-RPC and MCP error codes the gateway itself emits.
pub(crate) mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters (also unknown tool or prompt).
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// Resource not found (MCP up to 2025-11-25).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The client did not authenticate (HTTP 401), as MCP SDKs answer it.
    pub const UNAUTHORIZED: i64 = -32000;
    /// Request timed out.
    pub const REQUEST_TIMEOUT: i64 = -32001;
    /// The upstream that serves this request is unavailable (seawall's own code).
    pub const UPSTREAM_UNAVAILABLE: i64 = -32010;
    /// A circuit breaker is open for the upstream (seawall's own code).
    pub const CIRCUIT_OPEN: i64 = -32011;
    /// The gateway or the upstream has too many requests in flight (seawall's own code).
    pub const OVERLOADED: i64 = -32012;
    /// A rate limit refused the request (seawall's own code).
    pub const RATE_LIMITED: i64 = -32013;
    /// The gateway is shutting down and stopped the request at the end of its grace
    /// period (seawall's own code).
    pub const SHUTTING_DOWN: i64 = -32014;
    /// The request was cancelled.
    pub const REQUEST_CANCELLED: i64 = -32800;
    /// The client must complete a URL elicitation first (MCP 2025-11-25).
    pub const URL_ELICITATION_REQUIRED: i64 = -32042;
    /// The request needs a client capability the client did not declare (2026-07-28).
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
}

/// A request: has a method and an id.
#[derive(Debug, Clone)]
pub struct Request {
    /// The sender's id.
    pub id: Id,
    /// The method name.
    pub method: String,
    /// The parameters, untouched.
    pub params: Option<Box<RawValue>>,
}

/// A notification: a method without an id.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The parameters, untouched.
    pub params: Option<Box<RawValue>>,
}

/// A response: an id with either a result or an error object.
#[derive(Debug, Clone)]
pub struct Response {
    /// The id of the request this answers.
    pub id: Id,
    /// `Ok(result)` or `Err(error object)`, both raw.
    pub body: Result<Box<RawValue>, Box<RawValue>>,
}

/// Any JSON-RPC message.
#[derive(Debug, Clone)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

/// Why a message could not be decoded; each maps to a JSON-RPC error.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum DecodeError {
    /// Not JSON at all (answer -32700 with a null id).
    #[error("parse error: {0}")]
    Parse(String),
    /// JSON, but not a valid JSON-RPC message (answer -32600). Holds the id if one could be read.
    #[error("invalid request: {reason}")]
    Invalid {
        /// The id, when it could be read.
        id: Option<Id>,
        /// What is wrong.
        reason: &'static str,
    },
}

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        encode(self) == encode(other)
    }
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow)]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Box<RawValue>>,
    #[serde(default, borrow, deserialize_with = "present_borrowed")]
    method: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    result: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    error: Option<Box<RawValue>>,
}

/// Distinguishes a member that is present (even as `null`) from one that is absent.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// [`present`] for a member read in place.
fn present_borrowed<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// A JSON string's text: its characters as they are when it has no escapes (a method
/// name, as a rule), decoded otherwise; `None` when `raw` is not a string.
fn string_of(raw: &RawValue) -> Option<String> {
    let text = raw.get();
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(plain) if !plain.contains('\\') => Some(plain.to_owned()),
        _ => serde_json::from_str(text).ok(),
    }
}

/// One JSON-RPC payload: a single message or (protocol 2025-03-26 only) a batch.
#[derive(Debug)]
pub enum Payload<'a> {
    /// A single message's text, not yet checked as JSON: [`decode`] reads it once, and
    /// tells bad JSON (-32700) from a bad message (-32600).
    Single(&'a str),
    /// A batch of raw messages.
    Batch(Vec<&'a RawValue>),
}

/// Splits a body into a single message or a batch without decoding the messages. A
/// single message is handed on as it is, to be read once by [`decode`].
pub fn split_payload(body: &[u8]) -> Result<Payload<'_>, DecodeError> {
    let text = std::str::from_utf8(body).map_err(|_| DecodeError::Parse("body is not UTF-8".into()))?;
    if !text.trim_start_matches([' ', '\t', '\n', '\r']).starts_with('[') {
        return Ok(Payload::Single(text));
    }
    let items: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| DecodeError::Parse(short_serde_error(&e)))?;
    if items.is_empty() {
        return Err(DecodeError::Invalid { id: None, reason: "empty batch" });
    }
    Ok(Payload::Batch(items))
}

fn short_serde_error(e: &serde_json::Error) -> String {
    format!("{} at line {} column {}", classify(e), e.line(), e.column())
}

fn classify(e: &serde_json::Error) -> &'static str {
    match e.classify() {
        serde_json::error::Category::Eof => "unexpected end of input",
        serde_json::error::Category::Syntax => "invalid JSON",
        serde_json::error::Category::Data => "unexpected JSON structure",
        serde_json::error::Category::Io => "read failure",
    }
}

/// Decodes one message from its JSON text.
pub fn decode(text: &str) -> Result<Message, DecodeError> {
    let env: Envelope<'_> = match serde_json::from_str(text) {
        Ok(env) => env,
        Err(e) if e.is_syntax() || e.is_eof() => {
            return Err(DecodeError::Parse(short_serde_error(&e)));
        }
        // Not a message; whether it is JSON at all is known once all of it was read (the
        // envelope stopped at the first member that did not fit).
        Err(_) => {
            if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
                return Err(DecodeError::Parse(short_serde_error(&e)));
            }
            return Err(DecodeError::Invalid { id: None, reason: "a JSON-RPC message must be an object" });
        }
    };
    let id = match env.id {
        None => None,
        Some(raw) => match Id::from_raw_checked(raw) {
            Some(id) => Some(id),
            None => {
                return Err(DecodeError::Invalid { id: None, reason: "id must be a string or an integer" });
            }
        },
    };
    let invalid = |reason| DecodeError::Invalid { id: id.clone(), reason };
    if env.jsonrpc.map(RawValue::get) != Some("\"2.0\"") {
        return Err(invalid("jsonrpc must be \"2.0\""));
    }
    let params = match env.params {
        Some(p) if p.get() == "null" => None,
        Some(p) if !matches!(p.get().as_bytes().first(), Some(b'{' | b'[')) => {
            return Err(invalid("params must be an object or an array"));
        }
        other => other,
    };
    match (env.method, id.clone()) {
        (Some(method), id) => {
            let method = string_of(method).ok_or_else(|| invalid("method must be a string"))?;
            if env.result.is_some() || env.error.is_some() {
                return Err(invalid("a request must not carry result or error"));
            }
            Ok(match id {
                Some(id) => Message::Request(Request { id, method, params }),
                None => Message::Notification(Notification { method, params }),
            })
        }
        (None, Some(id)) => match (env.result, env.error) {
            (Some(result), None) => Ok(Message::Response(Response { id, body: Ok(result) })),
            (None, Some(error)) if error.get().starts_with('{') => {
                Ok(Message::Response(Response { id, body: Err(error) }))
            }
            (None, Some(_)) => Err(invalid("error must be an object")),
            _ => Err(invalid("a response carries exactly one of result and error")),
        },
        (None, None) => Err(invalid("message has neither method nor id")),
    }
}

/// Appends `text` as a JSON string: as it is when nothing in it needs escaping (the
/// usual method name), through the serializer otherwise.
pub(crate) fn push_json_str(out: &mut String, text: &str) {
    if text.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push('"');
        out.push_str(text);
        out.push('"');
    } else {
        out.push_str(&to_json(&text));
    }
}

/// `{"jsonrpc":"2.0"` and the members that follow it, written by hand: ids and raw
/// values are JSON already, so a message is their text put together, sized once (a
/// large result is not copied again as the text grows, nor read again as UTF-8).
fn envelope(size: usize) -> String {
    let mut out = String::with_capacity(size + 64);
    out.push_str(r#"{"jsonrpc":"2.0""#);
    out
}

/// Encodes a request.
pub(crate) fn encode_request(id: &Id, method: &str, params: Option<&RawValue>) -> String {
    let mut out = envelope(id.as_json().len() + method.len() + params.map_or(0, |p| p.get().len()));
    out.push_str(r#","id":"#);
    out.push_str(id.as_json());
    push_method(&mut out, method, params);
    out
}

/// Encodes a notification.
pub(crate) fn encode_notification(method: &str, params: Option<&RawValue>) -> String {
    let mut out = envelope(method.len() + params.map_or(0, |p| p.get().len()));
    push_method(&mut out, method, params);
    out
}

/// The `method` and `params` (left out when absent) members, and the closing brace.
fn push_method(out: &mut String, method: &str, params: Option<&RawValue>) {
    out.push_str(r#","method":"#);
    push_json_str(out, method);
    if let Some(params) = params {
        out.push_str(r#","params":"#);
        out.push_str(params.get());
    }
    out.push('}');
}

/// Encodes a response with a raw body; `id` is `None` only for errors whose id could not
/// be read (written as `null`; a result without an id goes out as an error, which a
/// client can tell from an answer it is waiting for).
pub(crate) fn encode_response(id: Option<&Id>, body: Result<&RawValue, &RawValue>) -> String {
    let id = id.map_or("null", Id::as_json);
    let (member, raw) = match body {
        Ok(result) if id != "null" => (r#","result":"#, result),
        Ok(raw) | Err(raw) => (r#","error":"#, raw),
    };
    let mut out = envelope(id.len() + raw.get().len());
    out.push_str(r#","id":"#);
    out.push_str(id);
    out.push_str(member);
    out.push_str(raw.get());
    out.push('}');
    out
}

/// Encodes a response from an owned result-or-error.
pub(crate) fn encode_reply(id: Option<&Id>, body: &Result<Box<RawValue>, Box<RawValue>>) -> String {
    match body {
        Ok(result) => encode_response(id, Ok(result)),
        Err(error) => encode_response(id, Err(error)),
    }
}

/// Encodes an error response built by the gateway.
pub(crate) fn encode_error(id: Option<&Id>, code: i64, message: &str, data: Option<serde_json::Value>) -> String {
    let error = error_object(code, message, data);
    encode_response(id, Err(&error))
}

/// Builds a raw JSON-RPC error object.
pub(crate) fn error_object(code: i64, message: &str, data: Option<serde_json::Value>) -> Box<RawValue> {
    let mut obj = serde_json::Map::new();
    obj.insert("code".into(), code.into());
    obj.insert("message".into(), message.into());
    if let Some(data) = data {
        obj.insert("data".into(), data);
    }
    to_raw(&serde_json::Value::Object(obj))
}

/// Encodes any message.
pub fn encode(msg: &Message) -> String {
    match msg {
        Message::Request(r) => encode_request(&r.id, &r.method, r.params.as_deref()),
        Message::Notification(n) => encode_notification(&n.method, n.params.as_deref()),
        Message::Response(r) => encode_reply(Some(&r.id), &r.body),
    }
}

/// Serialises a value the gateway built; these types cannot fail to serialise.
pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "serialisation of a gateway-built message failed");
        String::from("null")
    })
}

/// Serialises a value into a raw JSON value.
pub(crate) fn to_raw<T: Serialize>(value: &T) -> Box<RawValue> {
    RawValue::from_string(to_json(value)).unwrap_or_else(|_| null_raw())
}

/// What the telemetry reads of a JSON-RPC error object: its code, message and the
/// correlation id seawall puts in `data`.
#[derive(Deserialize)]
pub(crate) struct ErrorView {
    /// `code`.
    #[serde(default)]
    pub(crate) code: Option<i64>,
    /// `message`.
    #[serde(default)]
    pub(crate) message: Option<String>,
    /// `data`, for its correlation id.
    #[serde(default)]
    pub(crate) data: Option<ErrorData>,
}

/// The part of an error's `data` the telemetry reads.
#[derive(Deserialize)]
pub(crate) struct ErrorData {
    /// `correlationId`.
    #[serde(rename = "correlationId", default)]
    pub(crate) correlation_id: Option<String>,
}

/// Whether the JSON `text` may hold a member named `name` (plain ASCII): `false` only
/// when neither the name nor any `\u` escape (which could spell it) occurs in it, so
/// that most texts are told apart without a parse.
pub(crate) fn may_name(text: &str, name: &str) -> bool {
    let (text, name) = (text.as_bytes(), name.as_bytes());
    let Some(&first) = name.first() else { return true };
    // One pass for both, without a searcher built per call (texts are short).
    memchr::memchr2_iter(first, b'\\', text).any(|at| match text[at] {
        b'\\' => text.get(at + 1) == Some(&b'u') || text[at..].starts_with(name),
        _ => text[at..].starts_with(name),
    })
}

/// Parses a raw value into a typed view; `None` when it does not fit.
pub(crate) fn view<'a, T: Deserialize<'a>>(raw: Option<&'a RawValue>) -> Option<T> {
    raw.and_then(|r| serde_json::from_str(r.get()).ok())
}

/// Parses raw JSON text into a `RawValue`, rejecting invalid JSON (for tests).
#[cfg(test)]
pub(crate) fn raw_from_str(text: &str) -> Result<Box<RawValue>, serde_json::Error> {
    let raw: &RawValue = serde_json::from_str(text)?;
    Ok(raw.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_written_as_the_serializer_would_write_them() {
        let params = raw_from_str(r#"{"name":"echo","arguments":{"n":1.50}}"#).unwrap();
        let id = Id::string("a\"b");
        let parsed = |text: String| serde_json::from_str::<serde_json::Value>(&text).unwrap();
        assert_eq!(
            encode_request(&Id::number(7), "tools/call", Some(&params)),
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":1.50}}}"#
        );
        assert_eq!(
            parsed(encode_request(&id, "odd \"method\"\n", None)),
            serde_json::json!({"jsonrpc": "2.0", "id": "a\"b", "method": "odd \"method\"\n"})
        );
        assert_eq!(
            encode_notification("notifications/initialized", None),
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#
        );
        let result = raw_from_str(r#"{"content":[]}"#).unwrap();
        assert_eq!(encode_response(Some(&id), Ok(&result)), r#"{"jsonrpc":"2.0","id":"a\"b","result":{"content":[]}}"#);
        let error = error_object(-32601, "Method not found", None);
        assert_eq!(
            parsed(encode_response(None, Err(&error))),
            serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32601, "message": "Method not found"}})
        );
        assert_eq!(encode_response(None, Ok(&result)), r#"{"jsonrpc":"2.0","id":null,"error":{"content":[]}}"#);
    }

    #[test]
    fn methods_are_read_with_or_without_escapes() {
        let method = |text: &str| match decode(text) {
            Ok(Message::Request(r)) => Ok(r.method),
            Ok(Message::Notification(n)) => Ok(n.method),
            other => Err(format!("{other:?}")),
        };
        assert_eq!(method(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#), Ok("tools/call".to_owned()));
        assert_eq!(method(r#"{"jsonrpc":"2.0","id":1,"method":"tools\/c\u0061ll"}"#), Ok("tools/call".to_owned()));
        assert_eq!(method(r#"{"jsonrpc":"2.0","method":""}"#), Ok(String::new()));
        assert_eq!(
            decode(r#"{"jsonrpc":"2.0","id":1,"method":5}"#),
            Err(DecodeError::Invalid { id: Some(Id::number(1)), reason: "method must be a string" })
        );
        assert_eq!(
            decode(r#"{"jsonrpc":"2.0","id":1,"method":null}"#),
            Err(DecodeError::Invalid { id: Some(Id::number(1)), reason: "method must be a string" })
        );
    }

    #[test]
    fn may_name_is_false_only_without_the_name_or_an_escape() {
        assert!(may_name(r#"{"content":[],"isError":true}"#, "isError"));
        assert!(may_name(r#"{"\u0069sError":true}"#, "isError"), "an escape may spell it");
        assert!(may_name(r#"{"a":"\\","isError":1}"#, "isError"));
        assert!(!may_name(r#"{"content":[{"type":"text","text":"is it an Error?"}]}"#, "isError"));
        assert!(!may_name(r#"{"a":"\n\t\\"}"#, "isError"), "other escapes spell nothing");
        assert!(!may_name("", "isError"));
        assert!(may_name(r"isErro\u", "isError"));
    }

    #[test]
    fn decodes_each_kind_and_keeps_params_raw() {
        let req = decode(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"b":1.50,"a":{"x":[]}}}"#);
        match req {
            Ok(Message::Request(r)) => {
                assert_eq!(r.id.as_json(), "7");
                assert_eq!(r.params.as_deref().map(RawValue::get), Some(r#"{"b":1.50,"a":{"x":[]}}"#));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            decode(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#),
            Ok(Message::Notification(_))
        ));
        assert!(matches!(decode(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#), Ok(Message::Response(_))));
    }

    #[test]
    fn rejects_bad_envelopes_with_the_right_error() {
        assert!(matches!(decode("{"), Err(DecodeError::Parse(_))));
        assert!(matches!(decode("[1"), Err(DecodeError::Parse(_))));
        assert_eq!(
            decode(r#"{"jsonrpc":"1.0","id":3,"method":"x"}"#),
            Err(DecodeError::Invalid { id: Some(Id::number(3)), reason: "jsonrpc must be \"2.0\"" })
        );
        assert!(matches!(
            decode(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#),
            Err(DecodeError::Invalid { id: None, .. })
        ));
        assert!(matches!(decode(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#), Err(DecodeError::Invalid { .. })));
        assert!(matches!(decode(r#"{"jsonrpc":"2.0","id":1,"method":5}"#), Err(DecodeError::Invalid { .. })));
        assert!(matches!(decode(r#"{"jsonrpc":"2.0","id":1}"#), Err(DecodeError::Invalid { .. })));
        assert!(matches!(
            decode(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#),
            Err(DecodeError::Invalid { .. })
        ));
        assert!(matches!(decode("42"), Err(DecodeError::Invalid { .. })));
    }

    #[test]
    fn ids_round_trip_exactly() {
        for text in [r#""abc""#, "12345678901234567890123", "-4", r#""é""#] {
            let msg = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#);
            let Ok(Message::Request(r)) = decode(&msg) else { panic!("{text}") };
            assert_eq!(encode_request(&r.id, "ping", None), msg);
        }
    }

    #[test]
    fn ids_mcp_forbids_are_refused_without_an_id() {
        for text in ["1.5", "1e400", "-0", "1E2", "0.0", "-1.0", "null", "true", "[]"] {
            let msg = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#);
            assert_eq!(
                decode(&msg),
                Err(DecodeError::Invalid { id: None, reason: "id must be a string or an integer" }),
                "{text}"
            );
        }
        for text in ["0", "-1", "9223372036854775808", r#""1.5""#] {
            let msg = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#);
            assert!(matches!(decode(&msg), Ok(Message::Request(_))), "{text}");
        }
        let fraction: serde_json::Value = serde_json::from_str("2.5").unwrap();
        assert!(Id::from_value(&fraction).is_none());
        assert_eq!(Id::from_value(&serde_json::json!(7)), Some(Id::number(7)));
        assert_eq!(Id::number(u64::MAX).as_json(), "18446744073709551615");
        assert_eq!(Id::number(0).as_json(), "0");
    }

    proptest::proptest! {
        #[test]
        fn integer_ids_are_kept_and_other_numbers_refused(n in proptest::num::i64::ANY, f in -1e6f64..1e6) {
            let msg = format!(r#"{{"jsonrpc":"2.0","id":{n},"method":"ping"}}"#);
            let Ok(Message::Request(r)) = decode(&msg) else { panic!("{n}") };
            proptest::prop_assert_eq!(r.id.as_json(), n.to_string());
            let text = format!("{f:.3}");
            let msg = format!(r#"{{"jsonrpc":"2.0","id":{text},"method":"ping"}}"#);
            proptest::prop_assert!(decode(&msg).is_err(), "{}", text);
        }
    }

    #[test]
    fn batches_split() {
        assert!(matches!(split_payload(b"[{},{}]"), Ok(Payload::Batch(v)) if v.len() == 2));
        assert!(matches!(split_payload(b"[]"), Err(DecodeError::Invalid { .. })));
        assert!(matches!(split_payload(b"\xff"), Err(DecodeError::Parse(_))));
        assert!(matches!(split_payload(b" \n[{}]"), Ok(Payload::Batch(v)) if v.len() == 1));
        assert!(matches!(split_payload(b"[{}"), Err(DecodeError::Parse(_))));
        assert!(matches!(split_payload(b"{\"jsonrpc\""), Ok(Payload::Single(_))), "read once, by decode");
    }

    #[test]
    fn a_single_message_that_is_not_json_is_a_parse_error_whatever_comes_first() {
        // Each begins as valid JSON of the wrong shape, then stops being JSON: -32700, not -32600.
        for text in ["5 garbage", "\"text\" ]", "{\"id\":1,\"id\":2} x", "[1] {"] {
            let single = match split_payload(text.as_bytes()) {
                Ok(Payload::Single(single)) => decode(single).map(|_| ()),
                Ok(Payload::Batch(_)) => Ok(()),
                Err(e) => Err(e),
            };
            assert!(matches!(single, Err(DecodeError::Parse(_))), "{text}: {single:?}");
        }
        for text in ["5", "\"text\"", "{\"id\":1,\"id\":2}", "null"] {
            assert!(matches!(decode(text), Err(DecodeError::Invalid { .. })), "{text}");
        }
    }
}
