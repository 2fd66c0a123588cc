//! HTTP/1.1 as seawall speaks it on both sides. Towards plain-HTTP upstreams: a request
//! written in one piece, an answer's head parsed with `httparse`, and its body taken apart
//! by its framing (`Content-Length`, `chunked`, or until the connection closes). Towards
//! clients, [`server`]: a request's head read into an `http::Request`, and an answer's
//! head written; the same body decoder takes request bodies apart.
//!
//! A proxied call is one small exchange on a keep-alive connection. Written here, it costs
//! one buffer for the request and one read buffer per connection; nothing between the
//! call and the socket (no dispatcher, no channel, no request or response object built
//! and taken apart again). What the upstream sends is bounded: the head to [`MAX_HEAD`]
//! bytes and [`MAX_HEADERS`] fields, a chunk-size line to [`MAX_LINE`](error::MAX_LINE) bytes, and the
//! trailers to [`MAX_HEAD`] bytes.

use http::header::{CONNECTION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method};

mod body;
mod error;
mod head;
#[cfg_attr(not(feature = "internals"), allow(unreachable_pub, dead_code))]
pub mod offline;
pub(crate) mod server;

pub(crate) use body::{BodyDecoder, Step};
pub(crate) use error::{MAX_HEAD, MAX_HEADERS, MAX_INTERIM};
pub(crate) use head::{BodyLength, FramingFields, Head, field_name, framing, has_token, parse_head};

/// Writes a request (head and body) to `out`: `target` is the origin form (path and
/// query), `host` the `Host` field unless the fields carry one. The fields are `headers`
/// (an upstream's static ones) and `more` (the call's own), which replace those of
/// `headers` with the same name. The body's length is always declared, but for a
/// bodiless GET or DELETE; `Content-Length`, `Transfer-Encoding` and `Connection` among
/// the fields are left out, since the framing is this writer's.
pub(crate) fn encode_request(
    out: &mut Vec<u8>,
    method: &Method,
    target: &str,
    host: &str,
    headers: &HeaderMap,
    more: &[(HeaderName, HeaderValue)],
    body: &[u8],
) {
    out.reserve(128 + target.len() + (headers.len() + more.len()) * 48 + body.len());
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    if !headers.contains_key(HOST) && !more.iter().any(|(name, _)| name == HOST) {
        field(out, b"host", host.as_bytes());
    }
    let framing = |name: &HeaderName| name == CONTENT_LENGTH || name == TRANSFER_ENCODING || name == CONNECTION;
    for (name, value) in headers {
        if framing(name) || more.iter().any(|(n, _)| n == name) {
            continue;
        }
        field(out, name.as_str().as_bytes(), value.as_bytes());
    }
    for (name, value) in more {
        if !framing(name) {
            field(out, name.as_str().as_bytes(), value.as_bytes());
        }
    }
    if !body.is_empty() || !(method == Method::GET || method == Method::DELETE) {
        let mut digits = itoa::Buffer::new();
        field(out, b"content-length", digits.format(body.len()).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
}

fn field(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_declares_its_length_and_keeps_the_framing_to_itself() {
        let mut headers = HeaderMap::new();
        headers.insert("accept", HeaderValue::from_static("application/json, text/event-stream"));
        headers.insert("content-length", HeaderValue::from_static("999"));
        headers.insert("connection", HeaderValue::from_static("close"));
        let mut out = Vec::new();
        let session = [(HeaderName::from_static("mcp-session-id"), HeaderValue::from_static("s1"))];
        encode_request(&mut out, &Method::POST, "/mcp?x=1", "127.0.0.1:8080", &headers, &session, b"{}");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "POST /mcp?x=1 HTTP/1.1\r\nhost: 127.0.0.1:8080\r\naccept: application/json, text/event-stream\r\n\
             mcp-session-id: s1\r\ncontent-length: 2\r\n\r\n{}"
        );
        let mut get = Vec::new();
        headers.insert(HOST, HeaderValue::from_static("example.com"));
        headers.insert("mcp-session-id", HeaderValue::from_static("static"));
        encode_request(&mut get, &Method::GET, "/", "ignored", &headers, &session, b"");
        let get = String::from_utf8(get).unwrap();
        assert!(get.starts_with("GET / HTTP/1.1\r\n"), "{get}");
        assert_eq!(get.matches("host: ").count(), 1, "the caller's Host alone: {get}");
        assert!(get.contains("host: example.com\r\n"), "{get}");
        assert!(!get.contains("content-length"), "a bodiless GET declares no length: {get}");
        assert!(get.contains("mcp-session-id: s1\r\n") && !get.contains("static"), "the call's own field wins: {get}");
    }
}
