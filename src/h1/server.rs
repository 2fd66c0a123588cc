//! The server side of HTTP/1.1: a request's head read into an `http::Request` (its field
//! values and target slices of the head's bytes, not copies), how its body is framed,
//! and an answer's head written.

use std::cell::RefCell;
use std::time::SystemTime;

use bytes::{BufMut, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, DATE, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, Version};

use super::{BodyLength, FramingFields, MAX_HEAD, MAX_HEADERS, field_name};

/// A request head, taken off the connection's buffer.
#[derive(Debug)]
pub(crate) struct RequestHead {
    /// The request, without its body.
    pub(crate) request: Request<()>,
    /// How its body is framed.
    pub(crate) body: BodyLength,
    /// Whether the connection may carry another request after this one.
    pub(crate) keep_alive: bool,
    /// Whether the client waits for `100 Continue` before it sends the body.
    pub(crate) expects_continue: bool,
}

/// The largest `Content-Length` taken: a front proxy that keeps lengths in a signed
/// 64-bit number reads a larger one otherwise.
const MAX_LENGTH: u64 = i64::MAX as u64;

/// Why a request head was refused: the status of the answer, before the connection is
/// closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Not an HTTP/1.x request, or its framing cannot be trusted: 400.
    Malformed(&'static str),
    /// Longer than [`MAX_HEAD`] bytes or more than [`MAX_HEADERS`] fields: 431.
    TooLarge,
    /// A transfer coding other than `chunked`: 501.
    NotImplemented(&'static str),
}

impl HeadError {
    /// The answer's status.
    pub(crate) fn status(self) -> StatusCode {
        match self {
            HeadError::Malformed(_) => StatusCode::BAD_REQUEST,
            HeadError::TooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            HeadError::NotImplemented(_) => StatusCode::NOT_IMPLEMENTED,
        }
    }
}

/// Takes a request head off the start of `buf` once `buf` holds all of it (`None` while
/// it may still come).
pub(crate) fn parse_request(buf: &mut BytesMut) -> Result<Option<RequestHead>, HeadError> {
    let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut parsed = httparse::Request::new(&mut []);
    let len = match httparse::ParserConfig::default().parse_request_with_uninit_headers(&mut parsed, buf, &mut fields) {
        Ok(httparse::Status::Complete(len)) if len > MAX_HEAD => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(HeadError::TooLarge),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooLarge),
        Err(_) => return Err(HeadError::Malformed("not an HTTP/1.x request line and header fields")),
    };
    let method = parsed.method.map(|m| Method::from_bytes(m.as_bytes()));
    let Some(Ok(method)) = method else { return Err(HeadError::Malformed("bad method")) };
    let version = if parsed.version == Some(0) { Version::HTTP_10 } else { Version::HTTP_11 };
    // Where the target and each field lie in the head, while `buf` is borrowed.
    let start = buf.as_ptr() as usize;
    let offset = |s: &[u8]| s.as_ptr() as usize - start;
    let target = parsed.path.map(|p| (offset(p.as_bytes()), p.len())).unwrap_or_default();
    let spans: Vec<_> = parsed
        .headers
        .iter()
        .map(|f| (offset(f.name.as_bytes()), f.name.len(), offset(f.value), f.value.len()))
        .collect();
    if !crlf_only(&buf[..len]) {
        return Err(HeadError::Malformed("a line not ended by CRLF"));
    }
    let head = buf.split_to(len).freeze();
    let uri = Uri::from_maybe_shared(head.slice(target.0..target.0 + target.1))
        .map_err(|_| HeadError::Malformed("bad request target"))?;
    let mut headers = HeaderMap::with_capacity(spans.len());
    let mut fields = FramingFields::default();
    for &(name_at, name_len, value_at, value_len) in &spans {
        let name = &head[name_at..name_at + name_len];
        let name = field_name(name).map_err(|_| HeadError::Malformed("bad field name"))?;
        let value = HeaderValue::from_maybe_shared(head.slice(value_at..value_at + value_len))
            .map_err(|_| HeadError::Malformed("bad field value"))?;
        fields.note(&name, &value);
        headers.append(name, value);
    }
    let body = request_framing(&fields, version, &method)?;
    let keep_alive = fields.keep_alive(version);
    let expects_continue = version == Version::HTTP_11 && fields.expects_continue();
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = version;
    *request.headers_mut() = headers;
    Ok(Some(RequestHead { request, body, keep_alive, expects_continue }))
}

/// Whether a head of which the first `scanned` bytes of `buf` were looked at already is
/// worth parsing again: at the first look (most heads arrive whole in one read), once
/// an empty line may have come, or once it is too long to wait for (then it is refused
/// as its bytes deserve: 400 when malformed, else 431).
pub(crate) fn worth_parsing(buf: &[u8], scanned: usize) -> bool {
    scanned == 0 || buf.len() > MAX_HEAD || head_may_end(buf, scanned)
}

/// Whether `buf` may hold a whole head: an empty line (`\n\n` or `\n\r\n`) ends it,
/// looked for only past the first `scanned` bytes (and the three before them).
fn head_may_end(buf: &[u8], scanned: usize) -> bool {
    let from = scanned.saturating_sub(3);
    let rest = &buf[from.min(buf.len())..];
    memchr::memchr_iter(b'\n', rest).any(|i| {
        let after = &rest[i + 1..];
        after.first() == Some(&b'\n') || after.starts_with(b"\r\n")
    })
}

/// Whether every line of a head ends with CRLF: `httparse` also takes a bare LF, which a
/// front proxy may read otherwise.
fn crlf_only(head: &[u8]) -> bool {
    memchr::memchr_iter(b'\n', head).all(|at| at > 0 && head[at - 1] == b'\r')
}

/// How a request's body is framed (RFC 9112 §6.3), or why its framing cannot be
/// trusted. Stricter than the RFC where a front proxy might read the body otherwise:
/// `Content-Length` with `Transfer-Encoding`, `Content-Length` twice (even the same
/// number), and a body on a GET, HEAD or DELETE are refused rather than read.
fn request_framing(fields: &FramingFields, version: Version, method: &Method) -> Result<BodyLength, HeadError> {
    let body = if fields.has_transfer_encoding() {
        transfer_coded(fields, version)?;
        BodyLength::Chunked
    } else {
        match fields.content_length().map_err(HeadError::Malformed)? {
            _ if fields.length_repeated() => return Err(HeadError::Malformed("Content-Length given more than once")),
            Some(n) if n > MAX_LENGTH => return Err(HeadError::Malformed("Content-Length too large")),
            length => BodyLength::Exact(length.unwrap_or(0)),
        }
    };
    let bodiless = *method == Method::GET || *method == Method::HEAD || *method == Method::DELETE;
    if bodiless && body != BodyLength::Exact(0) {
        return Err(HeadError::Malformed("a body on a GET, HEAD or DELETE request"));
    }
    Ok(body)
}

/// Whether a request's `Transfer-Encoding` can be read: HTTP/1.1, no `Content-Length`
/// beside it, and a single `chunked` as its only coding (RFC 9112 §6.1, §6.3).
fn transfer_coded(fields: &FramingFields, version: Version) -> Result<(), HeadError> {
    let codings = fields.codings();
    if version == Version::HTTP_10 {
        Err(HeadError::Malformed("Transfer-Encoding in an HTTP/1.0 request"))
    } else if fields.has_content_length() {
        Err(HeadError::Malformed("both Transfer-Encoding and Content-Length"))
    } else if codings.malformed {
        Err(HeadError::Malformed("a malformed Transfer-Encoding"))
    } else if !codings.chunked_last {
        Err(HeadError::Malformed("a Transfer-Encoding that does not end with chunked"))
    } else if codings.chunked > 1 {
        Err(HeadError::Malformed("chunked applied more than once"))
    } else if codings.other {
        Err(HeadError::NotImplemented("a transfer coding other than chunked"))
    } else {
        Ok(())
    }
}

/// How an answer's body goes on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AnswerFraming {
    /// No body at all (an answer to HEAD, 1xx, 204, 304): `Content-Length` as given.
    Bodiless,
    /// `Content-Length`.
    Exact(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Until the connection closes (HTTP/1.0 without a length).
    UntilClose,
}

/// Writes an answer's head to `out`: the status line, the handler's fields (less those
/// of framing, which are this side's: `Content-Length`, `Transfer-Encoding`,
/// `Connection`), `Date` when it has none, then the framing's and `Connection`'s.
pub(crate) fn encode_answer_head(
    out: &mut BytesMut,
    status: StatusCode,
    headers: &HeaderMap,
    framing: AnswerFraming,
    keep_alive: bool,
    http10_keep_alive: bool,
) {
    out.put_slice(b"HTTP/1.1 ");
    out.put_slice(status.as_str().as_bytes());
    out.put_u8(b' ');
    out.put_slice(status.canonical_reason().unwrap_or("Unknown").as_bytes());
    out.put_slice(b"\r\n");
    for (name, value) in headers {
        if name == CONTENT_LENGTH && framing != AnswerFraming::Bodiless
            || name == TRANSFER_ENCODING
            || name == CONNECTION
        {
            continue;
        }
        out.put_slice(name.as_str().as_bytes());
        out.put_slice(b": ");
        out.put_slice(value.as_bytes());
        out.put_slice(b"\r\n");
    }
    if !headers.contains_key(DATE) {
        out.put_slice(b"date: ");
        with_date(|date| out.put_slice(date));
        out.put_slice(b"\r\n");
    }
    match framing {
        AnswerFraming::Exact(n) => {
            out.put_slice(b"content-length: ");
            out.put_slice(itoa::Buffer::new().format(n).as_bytes());
            out.put_slice(b"\r\n");
        }
        AnswerFraming::Chunked => out.put_slice(b"transfer-encoding: chunked\r\n"),
        AnswerFraming::Bodiless | AnswerFraming::UntilClose => {}
    }
    if !keep_alive {
        out.put_slice(b"connection: close\r\n");
    } else if http10_keep_alive {
        out.put_slice(b"connection: keep-alive\r\n");
    }
    out.put_slice(b"\r\n");
}

/// Calls `f` with the current time as an HTTP date, formatted once a second per thread.
fn with_date(f: impl FnOnce(&[u8])) {
    thread_local! {
        static DATE: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
    DATE.with_borrow_mut(|(at, text)| {
        if *at != second {
            *text = httpdate::fmt_http_date(now);
            *at = second;
        }
        f(text.as_bytes());
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Option<(RequestHead, usize)>, HeadError> {
        let mut buf = BytesMut::from(text.as_bytes());
        Ok(parse_request(&mut buf)?.map(|head| (head, buf.len())))
    }

    #[test]
    fn a_request_head_is_read_once_all_of_it_is_there() {
        let text =
            "POST /mcp/echo?x=1 HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}";
        for cut in 0..text.find("\r\n\r\n").unwrap() + 3 {
            assert!(parse(&text[..cut]).unwrap().is_none(), "partial at {cut}");
        }
        let (head, left) = parse(text).unwrap().unwrap();
        assert_eq!(left, 2, "the body stays in the buffer");
        assert_eq!(head.request.method(), Method::POST);
        assert_eq!(head.request.uri().path(), "/mcp/echo");
        assert_eq!(head.request.uri().query(), Some("x=1"));
        assert_eq!(head.request.headers()["content-type"], "application/json");
        let (mcp, _) =
            parse("GET / HTTP/1.1\r\nMCP-Session-Id: s1\r\nmcp-protocol-version: v\r\n\r\n").unwrap().unwrap();
        assert_eq!(mcp.request.headers()["mcp-session-id"], "s1", "found by its name in any case");
        assert_eq!(mcp.request.headers()["MCP-Protocol-Version"], "v");
        assert_eq!(head.body, BodyLength::Exact(2));
        assert!(head.keep_alive && !head.expects_continue);
    }

    #[test]
    fn framing_and_keep_alive_follow_rfc_9112() {
        let head = |fields: &str| parse(&format!("POST / HTTP/1.1\r\n{fields}\r\n")).map(|h| h.unwrap().0);
        assert_eq!(head("").unwrap().body, BodyLength::Exact(0));
        assert_eq!(head("Content-Length: 5\r\n").unwrap().body, BodyLength::Exact(5));
        assert_eq!(head("Transfer-Encoding: Chunked\r\n").unwrap().body, BodyLength::Chunked);
        assert!(head("Content-Length: 5\r\nContent-Length: 6\r\n").is_err());
        assert!(head("Content-Length: -1\r\n").is_err());
        assert!(head("Content-Length: 1e3\r\n").is_err());
        assert!(head("Content-Length: 9223372036854775808\r\n").is_err(), "beyond a signed 64-bit length");
        assert!(head("Transfer-Encoding: chunked, gzip\r\n").is_err(), "no length to read by");
        assert!(!head("Connection: close\r\n").unwrap().keep_alive);
        assert!(head("Expect: 100-Continue\r\n").unwrap().expects_continue);
        assert!(head("Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n").is_err());
        assert!(!head("Connection: keep-alive, Close\r\n").unwrap().keep_alive);
        assert!(!head("Expect: nothing\r\nExpect: 100-continue\r\n").unwrap().expects_continue, "the first one counts");
        let old = parse("GET / HTTP/1.0\r\n\r\n").unwrap().unwrap().0;
        assert!(!old.keep_alive && old.request.version() == Version::HTTP_10);
        assert!(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").unwrap().unwrap().0.keep_alive);
    }

    #[test]
    fn framing_a_front_proxy_could_read_otherwise_is_refused() {
        let refused = |request: &str| parse(request).map(|h| h.map(|(h, _)| h.body)).unwrap_err();
        let bad = |why| HeadError::Malformed(why);
        let cases = [
            (
                "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n",
                bad("Transfer-Encoding in an HTTP/1.0 request"),
            ),
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                bad("both Transfer-Encoding and Content-Length"),
            ),
            (
                "POST / HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
                bad("both Transfer-Encoding and Content-Length"),
            ),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", bad("chunked applied more than once")),
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
                bad("chunked applied more than once"),
            ),
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                HeadError::NotImplemented("a transfer coding other than chunked"),
            ),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", bad("a malformed Transfer-Encoding")),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", bad("a malformed Transfer-Encoding")),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: \r\n\r\n", bad("a malformed Transfer-Encoding")),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked,\r\n\r\n", bad("a malformed Transfer-Encoding")),
            ("POST / HTTP/1.1\r\nTransfer-Encoding: , chunked\r\n\r\n", bad("a malformed Transfer-Encoding")),
            (
                "POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
                bad("a Transfer-Encoding that does not end with chunked"),
            ),
            ("POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", bad("Content-Length given more than once")),
            (
                "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
                bad("Content-Length given more than once"),
            ),
            ("GET / HTTP/1.1\r\nContent-Length: 1\r\n\r\n", bad("a body on a GET, HEAD or DELETE request")),
            ("HEAD / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", bad("a body on a GET, HEAD or DELETE request")),
            ("DELETE / HTTP/1.1\r\nContent-Length: 2\r\n\r\n", bad("a body on a GET, HEAD or DELETE request")),
            ("GET / HTTP/1.1\nHost: h\n\n", bad("a line not ended by CRLF")),
            ("GET / HTTP/1.1\r\nHost: h\n\r\n", bad("a line not ended by CRLF")),
        ];
        for (request, why) in cases {
            assert_eq!(refused(request), why, "{request:?}");
        }
        assert_eq!(HeadError::NotImplemented("x").status(), StatusCode::NOT_IMPLEMENTED);
        let empty_get = parse("GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").unwrap().unwrap().0;
        assert_eq!(empty_get.body, BodyLength::Exact(0), "an empty body is no body");
        // What httparse refuses by itself: obs-fold, whitespace before the colon, a
        // bare CR, NUL, two spaces in the request line.
        for request in [
            "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : h\r\n\r\n",
            "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
            "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n",
            "GET  / HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\n\rX: y\r\n\r\n",
        ] {
            assert!(matches!(parse(request), Err(HeadError::Malformed(_))), "{request:?}");
        }
    }

    #[test]
    fn a_head_is_parsed_only_once_it_may_be_whole() {
        let head = b"GET / HTTP/1.1\r\nHost: h\r\n\r\n";
        for cut in 0..head.len() - 1 {
            assert!(!head_may_end(&head[..cut], 0), "not before its empty line: {cut}");
        }
        assert!(head_may_end(head, 0));
        assert!(head_may_end(head, head.len() - 1), "found across what was scanned");
        assert!(head_may_end(b"GET / HTTP/1.1\nHost: h\n\n", 20), "bare line feeds");
        assert!(!head_may_end(b"GET / HTTP/1.1\r\n\r\n", 40), "nothing new past the scanned part");
    }

    #[test]
    fn what_is_not_a_request_or_too_large_is_refused() {
        assert!(matches!(parse("SSH-2.0-OpenSSH\r\n\r\n"), Err(HeadError::Malformed(_))));
        assert!(matches!(parse("GET / HTTP/1.1\r\nbad name: x\r\n\r\n"), Err(HeadError::Malformed(_))));
        let mut long = String::from("GET / HTTP/1.1\r\n");
        while long.len() <= MAX_HEAD {
            long.push_str("x-filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert_eq!(parse(&long).unwrap_err(), HeadError::TooLarge);
        let mut many = String::from("GET / HTTP/1.1\r\n");
        for i in 0..=MAX_HEADERS {
            many.push_str(&format!("x-{i}: 1\r\n"));
        }
        many.push_str("\r\n");
        assert_eq!(parse(&many).unwrap_err(), HeadError::TooLarge);
        assert_eq!(HeadError::TooLarge.status(), StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    }

    #[test]
    fn an_answer_head_carries_this_sides_framing_only() {
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("content-length", HeaderValue::from_static("999"));
        headers.insert("connection", HeaderValue::from_static("upgrade"));
        let mut out = BytesMut::new();
        encode_answer_head(&mut out, StatusCode::OK, &headers, AnswerFraming::Exact(2), true, false);
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.starts_with("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ndate: "), "{text}");
        assert!(text.ends_with("content-length: 2\r\n\r\n"), "{text}");
        assert!(!text.contains("999") && !text.contains("upgrade"), "{text}");
        let mut out = BytesMut::new();
        encode_answer_head(&mut out, StatusCode::NOT_FOUND, &HeaderMap::new(), AnswerFraming::Chunked, false, false);
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.ends_with("transfer-encoding: chunked\r\nconnection: close\r\n\r\n"), "{text}");
    }
}
