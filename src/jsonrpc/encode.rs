//! Writing messages: the envelope put together by hand from ids and raw values that are
//! JSON already, sized once.

use serde::Serialize;
use serde_json::value::RawValue;

use super::id::{Id, null_raw};
use super::message::Message;

impl PartialEq for Message {
    fn eq(&self, other: &Self) -> bool {
        encode(self) == encode(other)
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::raw_from_str;

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
}
