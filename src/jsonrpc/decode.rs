//! Reading a message or a batch from its text: only `jsonrpc`, `id` and `method` parsed,
//! the rest kept raw, and bad JSON (-32700) told from a bad message (-32600).

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use super::id::Id;
use super::message::{DecodeError, Message, Notification, Request, Response};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::encode_request;

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
