//! `params._meta` and the typed views of request parameters the gateway reads or rewrites.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::jsonrpc::{self, Id};

/// The part of any request's params the gateway looks at.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CommonParams {
    /// `_meta`, if present.
    #[serde(rename = "_meta", default)]
    pub meta: Option<Meta>,
    /// `name`: of the tool, for a `tools/call` (read in the same pass as `_meta`).
    #[serde(default)]
    pub name: Option<Value>,
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

/// Reads the `_meta` of a request's params and its `name`, when that is a string, in one
/// pass.
pub(crate) fn read_with_name(params: Option<&RawValue>) -> (Meta, Option<String>) {
    match jsonrpc::view::<CommonParams>(params) {
        Some(CommonParams { meta, name }) => (
            meta.unwrap_or_default(),
            match name {
                Some(Value::String(name)) => Some(name),
                _ => None,
            },
        ),
        // A `_meta` of the wrong shape fails the view: the name is then read on its own,
        // so that a malformed `_meta` never hides the tool from policies.
        None => {
            #[derive(Deserialize)]
            struct Name {
                name: String,
            }
            (Meta::default(), jsonrpc::view::<Name>(params).map(|n| n.name))
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
        let (meta, name) = read_with_name(Some(&raw(r#"{"name":"echo","_meta":{"progressToken":7},"arguments":{}}"#)));
        assert_eq!((meta.progress(), name.as_deref()), (Some(Value::from(7)), Some("echo")));
        let (meta, name) = read_with_name(Some(&raw(r#"{"_meta":5,"name":"echo"}"#)));
        assert_eq!((meta.progress(), name.as_deref()), (None, Some("echo")), "a malformed _meta hides no tool");
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
