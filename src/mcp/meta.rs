//! `params._meta` and the typed views of request parameters the gateway reads or rewrites.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::jsonrpc::{self, Id};

/// Result `_meta` key of the correlation id seawall gives a result it changed (a tool's
/// `isError` result it scrubbed): the same id is in seawall's log beside the original.
pub(crate) const CORRELATION_ID_KEY: &str = "seawall/correlationId";

/// The part of any request's params the gateway looks at.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CommonParams {
    /// `_meta`, if present.
    #[serde(rename = "_meta", default)]
    pub meta: Option<Meta>,
    /// `name`: of the tool, for a `tools/call` (read in the same pass as `_meta`).
    #[serde(default)]
    pub name: Option<Value>,
    /// `arguments`: of a `tools/call` (read in the same pass, for the router).
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// The tool a `tools/call` names, and its arguments, as read with its `_meta`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Called {
    /// The tool's name.
    pub name: String,
    /// The arguments, when present (any JSON: the tool's schema judges them).
    pub arguments: Option<Value>,
}

/// The `_meta` fields the gateway reads.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Meta {
    /// The client's progress token, if it wants progress notifications.
    #[serde(rename = "progressToken", default)]
    pub progress_token: Option<Value>,
    /// The W3C trace parent (SEP-414), as sent.
    #[serde(default)]
    pub traceparent: Option<Value>,
    /// The W3C trace state, as sent.
    #[serde(default)]
    pub tracestate: Option<Value>,
}

impl Meta {
    /// The progress token, when it is one (a string or a number).
    pub(crate) fn progress(&self) -> Option<Value> {
        self.progress_token.clone().filter(|t| t.is_string() || t.is_number())
    }
}

/// Reads the `_meta` of a request's params in one pass (empty when there is none).
pub(crate) fn read(params: Option<&RawValue>) -> Meta {
    read_with_name(params).0
}

/// Reads the `_meta` of a request's params and, when its `name` is a string, the tool
/// it calls with its arguments, in one pass.
pub(crate) fn read_with_name(params: Option<&RawValue>) -> (Meta, Option<Called>) {
    match jsonrpc::view::<CommonParams>(params) {
        Some(CommonParams { meta, name, arguments }) => (
            meta.unwrap_or_default(),
            match name {
                Some(Value::String(name)) => Some(Called { name, arguments }),
                _ => None,
            },
        ),
        // A `_meta` of the wrong shape fails the view: the name is then read on its own,
        // so that a malformed `_meta` never hides the tool from policies.
        None => {
            #[derive(Deserialize)]
            struct Name {
                name: String,
                #[serde(default)]
                arguments: Option<Value>,
            }
            let called = jsonrpc::view::<Name>(params).map(|n| Called { name: n.name, arguments: n.arguments });
            (Meta::default(), called)
        }
    }
}

/// Reads the progress token of a request's params.
#[cfg(test)]
pub(crate) fn progress_token(params: Option<&RawValue>) -> Option<Value> {
    read(params).progress()
}

/// Parameters parsed into an object for rewriting; `None` when params are absent or not an object.
pub(crate) fn params_object(params: Option<&RawValue>) -> Option<Map<String, Value>> {
    match jsonrpc::view::<Value>(params)? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// Replaces `_meta.progressToken` in params (which must hold one) with `token`.
pub(crate) fn with_progress_token(params: Option<&RawValue>, token: &Value) -> Option<Box<RawValue>> {
    let mut map = params_object(params)?;
    let meta = map.get_mut("_meta")?.as_object_mut()?;
    meta.insert("progressToken".into(), token.clone());
    Some(jsonrpc::to_raw(&map))
}

/// `notifications/cancelled` params.
#[derive(Debug, Deserialize)]
pub(crate) struct CancelledParams {
    /// The id of the request to cancel.
    #[serde(rename = "requestId")]
    pub request_id: Value,
    /// Optional reason.
    #[serde(default)]
    pub reason: Option<String>,
}

/// Builds `notifications/cancelled` params for an id.
pub(crate) fn cancelled_params(id: &Id, reason: &str) -> Box<RawValue> {
    jsonrpc::to_raw(&serde_json::json!({ "requestId": id.to_value(), "reason": reason }))
}

/// `notifications/progress` params (only the token is read).
#[derive(Debug, Deserialize)]
pub(crate) struct ProgressParams {
    /// The token the request carried.
    #[serde(rename = "progressToken")]
    pub progress_token: Value,
}

/// A key for a progress token usable in maps (its JSON text).
pub(crate) fn token_key(token: &Value) -> String {
    token.to_string()
}

/// Replaces the `progressToken` of `notifications/progress` params.
pub(crate) fn progress_with_token(params: Option<&RawValue>, token: &Value) -> Option<Box<RawValue>> {
    let mut map = params_object(params)?;
    map.insert("progressToken".into(), token.clone());
    Some(jsonrpc::to_raw(&map))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_name_is_read_with_the_meta_and_without_it_when_the_meta_is_malformed() {
        let raw = |s: &str| RawValue::from_string(s.to_owned()).unwrap();
        let (meta, called) =
            read_with_name(Some(&raw(r#"{"name":"echo","_meta":{"progressToken":7},"arguments":{}}"#)));
        let called = called.unwrap();
        assert_eq!(called.arguments, Some(serde_json::json!({})));
        let name = Some(called.name);
        assert_eq!((meta.progress(), name.as_deref()), (Some(Value::from(7)), Some("echo")));
        let (meta, called) = read_with_name(Some(&raw(r#"{"_meta":5,"name":"echo","arguments":[1]}"#)));
        let called = called.unwrap();
        assert_eq!((meta.progress(), called.name.as_str()), (None, "echo"), "a malformed _meta hides no tool");
        assert_eq!(called.arguments, Some(serde_json::json!([1])));
        assert_eq!(read_with_name(Some(&raw(r#"{"name":3}"#))).1, None);
        assert_eq!(read_with_name(None).1, None);
    }

    #[test]
    fn reads_and_rewrites_progress_tokens() {
        let raw = jsonrpc::raw_from_str(r#"{"name":"t","_meta":{"progressToken":"abc","x":1},"z":1.50}"#).unwrap();
        assert_eq!(progress_token(Some(&raw)), Some(Value::String("abc".into())));
        let new = with_progress_token(Some(&raw), &Value::from(9)).unwrap();
        assert_eq!(new.get(), r#"{"name":"t","_meta":{"progressToken":9,"x":1},"z":1.50}"#);
        let none = jsonrpc::raw_from_str(r#"{"name":"t"}"#).unwrap();
        assert_eq!(progress_token(Some(&none)), None);
        // A trace context of the wrong type loses nothing else.
        let odd = jsonrpc::raw_from_str(r#"{"_meta":{"progressToken":1,"traceparent":5,"tracestate":[]}}"#).unwrap();
        let meta = read(Some(&odd));
        assert_eq!((meta.progress(), meta.traceparent), (Some(Value::from(1)), Some(Value::from(5))));
    }
}
