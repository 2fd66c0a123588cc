//! An answer's head taken off the wire with `httparse`, the framing fields noted as it is
//! parsed, and the framing they give its body (RFC 9112 §6.3).

use bytes::BytesMut;
use http::header::{CONNECTION, CONTENT_LENGTH, EXPECT, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Version};

use super::error::{MAX_HEAD, MAX_HEADERS, ProtocolError};

/// An answer's head.
#[derive(Debug)]
pub(crate) struct Head {
    pub(crate) status: StatusCode,
    pub(crate) version: Version,
    pub(crate) headers: HeaderMap,
    /// What its fields say about its framing, noted as they were parsed.
    pub(crate) framing_fields: FramingFields,
}

/// What a message's fields say about its framing and its connection, noted field by
/// field while its head is parsed, so that none of them is looked up by name again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FramingFields {
    /// Whether any `Transfer-Encoding` field came.
    transfer_encoding: bool,
    /// The transfer codings of those fields, in order.
    codings: Codings,
    /// `Content-Length`: every field and list item the same decimal number (`None`
    /// without one), else why not.
    length: Result<Option<u64>, &'static str>,
    /// Whether `Content-Length` came more than once (in two fields or as a list).
    length_repeated: bool,
    /// Whether `Connection` holds `close`.
    close: bool,
    /// Whether `Connection` holds `keep-alive`.
    keep_alive: bool,
    /// Whether the first `Expect` field is `100-continue` (`None` without one).
    expect_continue: Option<bool>,
}

impl Default for FramingFields {
    fn default() -> Self {
        FramingFields {
            transfer_encoding: false,
            codings: Codings::default(),
            length: Ok(None),
            length_repeated: false,
            close: false,
            keep_alive: false,
            expect_continue: None,
        }
    }
}

impl FramingFields {
    /// Notes one field, in the order the head has them.
    pub(crate) fn note(&mut self, name: &HeaderName, value: &HeaderValue) {
        if *name == TRANSFER_ENCODING {
            self.transfer_encoding = true;
            self.codings.note(value.as_bytes());
        } else if *name == CONTENT_LENGTH {
            self.length_repeated |= self.has_content_length() || value.as_bytes().contains(&b',');
            if let Ok(seen) = self.length {
                self.length = more_length(seen, value.as_bytes());
            }
        } else if *name == CONNECTION {
            for token in value.as_bytes().split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                self.close |= token.eq_ignore_ascii_case(b"close");
                self.keep_alive |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if *name == EXPECT && self.expect_continue.is_none() {
            self.expect_continue = Some(value.as_bytes().eq_ignore_ascii_case(b"100-continue"));
        }
    }

    /// Whether any `Transfer-Encoding` field came.
    pub(crate) fn has_transfer_encoding(&self) -> bool {
        self.transfer_encoding
    }

    /// Whether the last transfer coding is `chunked`.
    pub(crate) fn chunked_last(&self) -> bool {
        self.codings.chunked_last
    }

    /// The transfer codings of the `Transfer-Encoding` fields.
    pub(crate) fn codings(&self) -> Codings {
        self.codings
    }

    /// Whether `Content-Length` came more than once, in two fields or as a list (even of
    /// one number).
    pub(crate) fn length_repeated(&self) -> bool {
        self.length_repeated
    }

    /// Whether any `Content-Length` field came (well-formed or not).
    pub(crate) fn has_content_length(&self) -> bool {
        !matches!(self.length, Ok(None))
    }

    /// The `Content-Length`, when there is one, else why it cannot be trusted.
    pub(crate) fn content_length(&self) -> Result<Option<u64>, &'static str> {
        self.length
    }

    /// Whether the connection stays open after this message: HTTP/1.0 only when it
    /// asks with `keep-alive`, later versions unless it says `close`.
    pub(crate) fn keep_alive(&self, version: Version) -> bool {
        match version {
            Version::HTTP_10 => self.keep_alive,
            _ => !self.close,
        }
    }

    /// Whether the first `Expect` field asks for `100 Continue`.
    pub(crate) fn expects_continue(&self) -> bool {
        self.expect_continue == Some(true)
    }
}

/// What the elements of a message's `Transfer-Encoding` fields say, all fields in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Codings {
    /// How many times `chunked` is applied.
    pub(crate) chunked: u8,
    /// Whether a coding other than `chunked` is applied.
    pub(crate) other: bool,
    /// Whether an element is no coding at all (not a token), or `chunked` with
    /// parameters, which it has none of.
    pub(crate) malformed: bool,
    /// Whether the last coding is `chunked`.
    pub(crate) chunked_last: bool,
}

impl Codings {
    /// Notes the elements of one field value. An empty element is malformed here,
    /// although RFC 9110 §5.6.1 has a list skip it: a reader that takes `chunked,` for a
    /// coding other than chunked frames the body otherwise.
    fn note(&mut self, value: &[u8]) {
        for element in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
            if element.is_empty() {
                self.malformed = true;
                continue;
            }
            let (coding, parameters) = match memchr::memchr(b';', element) {
                Some(at) => (element[..at].trim_ascii(), true),
                None => (element, false),
            };
            if coding.eq_ignore_ascii_case(b"chunked") {
                self.chunked = self.chunked.saturating_add(1);
                self.malformed |= parameters;
                self.chunked_last = true;
            } else {
                self.other = true;
                self.malformed |= !is_token(coding);
                self.chunked_last = false;
            }
        }
    }
}

/// Whether `text` is a token (RFC 9110 §5.6.2): one or more `tchar`.
fn is_token(text: &[u8]) -> bool {
    !text.is_empty() && text.iter().all(|&b| is_tchar(b))
}

/// Whether `b` may stand in a token (RFC 9110 §5.6.2).
pub(super) fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// The name of a header field: the usual ones of MCP requests and answers matched here
/// (a few comparisons, no copy), the rest parsed by `http`.
pub(crate) fn field_name(name: &[u8]) -> Result<HeaderName, http::header::InvalidHeaderName> {
    use http::header::{ACCEPT, ACCEPT_ENCODING, AUTHORIZATION, CONTENT_TYPE, DATE, USER_AGENT};
    const SESSION: HeaderName = HeaderName::from_static("mcp-session-id");
    const VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
    let is = |known: &[u8]| name.eq_ignore_ascii_case(known);
    Ok(match name.len() {
        4 if is(b"host") => HOST,
        4 if is(b"date") => DATE,
        6 if is(b"accept") => ACCEPT,
        10 if is(b"connection") => CONNECTION,
        10 if is(b"user-agent") => USER_AGENT,
        12 if is(b"content-type") => CONTENT_TYPE,
        13 if is(b"authorization") => AUTHORIZATION,
        14 if is(b"content-length") => CONTENT_LENGTH,
        14 if is(b"mcp-session-id") => SESSION,
        15 if is(b"accept-encoding") => ACCEPT_ENCODING,
        17 if is(b"transfer-encoding") => TRANSFER_ENCODING,
        20 if is(b"mcp-protocol-version") => VERSION,
        _ => return HeaderName::from_bytes(name),
    })
}

/// Takes an answer head off the start of `buf` once `buf` holds all of it (`None` while
/// it may still come). The field values are slices of the head's bytes, not copies.
pub(crate) fn parse_head(buf: &mut BytesMut) -> Result<Option<Head>, ProtocolError> {
    // Left uninitialised: the parser writes the fields it finds, and nothing clears the
    // rest on every answer.
    let mut fields = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut []);
    let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut response, buf, &mut fields);
    let len = match parsed {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if buf.len() > MAX_HEAD => return Err(ProtocolError::HeadTooLong),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(ProtocolError::Head("more than 100 header fields")),
        Err(_) => return Err(ProtocolError::Head("not an HTTP/1.x status line and header fields")),
    };
    if len > MAX_HEAD {
        return Err(ProtocolError::HeadTooLong);
    }
    let status = response.code.and_then(|c| StatusCode::from_u16(c).ok()).ok_or(ProtocolError::Head("bad status"))?;
    let version = if response.version == Some(0) { Version::HTTP_10 } else { Version::HTTP_11 };
    // Where each field lies in the head, while `buf` is borrowed.
    let start = buf.as_ptr() as usize;
    let spans: Vec<_> = response
        .headers
        .iter()
        .map(|f| {
            let (name, value) = (f.name.as_ptr() as usize - start, f.value.as_ptr() as usize - start);
            (name, name + f.name.len(), value, value + f.value.len())
        })
        .collect();
    let head = buf.split_to(len).freeze();
    let mut headers = HeaderMap::with_capacity(spans.len());
    let mut framing_fields = FramingFields::default();
    for &(name_from, name_to, value_from, value_to) in &spans {
        let name = field_name(&head[name_from..name_to]).map_err(|_| ProtocolError::Head("bad field name"))?;
        let value = HeaderValue::from_maybe_shared(head.slice(value_from..value_to))
            .map_err(|_| ProtocolError::Head("bad field value"))?;
        framing_fields.note(&name, &value);
        headers.append(name, value);
    }
    Ok(Some(Head { status, version, headers, framing_fields }))
}

/// How an answer's body is delimited (RFC 9112 §6.3), and whether the connection can
/// carry another request after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Framing {
    pub(crate) body: BodyLength,
    pub(crate) keep_alive: bool,
}

/// How an answer's body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyLength {
    /// Exactly this many bytes (none for 204, 304).
    Exact(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
    /// Whatever comes until the upstream closes the connection.
    UntilClose,
}

/// The framing of an answer with `head` (never a 1xx one).
pub(crate) fn framing(head: &Head) -> Result<Framing, ProtocolError> {
    let fields = &head.framing_fields;
    let mut keep_alive = fields.keep_alive(head.version);
    if head.status == StatusCode::NO_CONTENT || head.status == StatusCode::NOT_MODIFIED {
        return Ok(Framing { body: BodyLength::Exact(0), keep_alive });
    }
    if fields.has_transfer_encoding() {
        // Chunked only when it is the last coding; anything else runs until the close.
        if fields.chunked_last() && head.version != Version::HTTP_10 {
            return Ok(Framing { body: BodyLength::Chunked, keep_alive });
        }
        return Ok(Framing { body: BodyLength::UntilClose, keep_alive: false });
    }
    Ok(match fields.content_length().map_err(ProtocolError::Framing)? {
        Some(n) => Framing { body: BodyLength::Exact(n), keep_alive },
        None => {
            keep_alive = false;
            Framing { body: BodyLength::UntilClose, keep_alive }
        }
    })
}

/// The `Content-Length` of a message after one more field, `value`, given what the
/// fields before it said: every field and list item the same decimal number, else why
/// not.
fn more_length(seen: Option<u64>, value: &[u8]) -> Result<Option<u64>, &'static str> {
    let mut length = seen;
    for part in value.split(|&b| b == b',') {
        let n = decimal(part.trim_ascii()).ok_or("Content-Length is not a number")?;
        if length.is_some_and(|seen| seen != n) {
            return Err("Content-Length fields disagree");
        }
        length = Some(n);
    }
    Ok(length)
}

/// Whether the comma-separated values of the `name` fields hold `token` (in any case).
pub(crate) fn has_token(headers: &HeaderMap, name: HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// A non-negative decimal of digits only, without overflow.
fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() { n.checked_mul(10)?.checked_add(u64::from(b - b'0')) } else { None }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`parse_head`] of `text`: the head and how long it was.
    fn parse(text: &[u8]) -> Result<Option<(Head, usize)>, ProtocolError> {
        let mut buf = BytesMut::from(text);
        Ok(parse_head(&mut buf)?.map(|head| (head, text.len() - buf.len())))
    }

    fn head(text: &str) -> Head {
        parse(text.as_bytes()).unwrap().unwrap().0
    }

    #[test]
    fn field_names_matched_on_the_way_are_those_http_would_parse() {
        let names = [
            "Host",
            "DATE",
            "accept",
            "Connection",
            "user-agent",
            "Content-Type",
            "authorization",
            "Content-Length",
            "Mcp-Session-Id",
            "accept-encoding",
            "Transfer-Encoding",
            "MCP-Protocol-Version",
            // Of a known length, not known.
            "hosx",
            "x-forwarded",
            "content-typf",
            "mcp-session-ix",
            "x",
            "Last-Event-ID",
        ];
        for name in names {
            let parsed = HeaderName::from_bytes(name.as_bytes()).unwrap();
            assert_eq!(field_name(name.as_bytes()).unwrap(), parsed, "{name}");
        }
        for bad in ["", "bad name", "a:b", "caf\u{e9}"] {
            assert!(field_name(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_head_is_parsed_once_all_of_it_is_there() {
        let text = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nmcp-session-id: abc\r\ncontent-length: 5\r\n\r\nhello";
        for cut in 0..text.find("\r\n\r\n").unwrap() + 3 {
            assert!(parse(&text.as_bytes()[..cut]).unwrap().is_none(), "partial at {cut}");
        }
        let (head, len) = parse(text.as_bytes()).unwrap().unwrap();
        assert_eq!(&text[len..], "hello");
        assert_eq!(head.status, StatusCode::OK);
        assert_eq!(head.headers["content-type"], "application/json");
        assert_eq!(head.headers["mcp-session-id"], "abc");
        assert_eq!(framing(&head).unwrap(), Framing { body: BodyLength::Exact(5), keep_alive: true });
    }

    #[test]
    fn a_head_that_is_not_http_or_too_long_is_refused() {
        assert!(matches!(parse(b"SSH-2.0-OpenSSH\r\n\r\n"), Err(ProtocolError::Head(_))));
        assert!(matches!(parse(b"HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n"), Err(ProtocolError::Head(_))));
        let mut long = b"HTTP/1.1 200 OK\r\n".to_vec();
        while long.len() <= MAX_HEAD {
            long.extend_from_slice(b"x-filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
        }
        assert!(matches!(parse(&long), Err(ProtocolError::HeadTooLong | ProtocolError::Head(_))));
        let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
        for i in 0..=MAX_HEADERS {
            many.extend_from_slice(format!("x-{i}: 1\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert_eq!(parse(&many).unwrap_err(), ProtocolError::Head("more than 100 header fields"));
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let f = |text: &str| framing(&head(text));
        assert_eq!(f("HTTP/1.1 204 No Content\r\n\r\n").unwrap().body, BodyLength::Exact(0));
        assert_eq!(
            f("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\ncontent-length: 3\r\n\r\n").unwrap().body,
            BodyLength::Chunked,
            "chunked wins over a length"
        );
        assert_eq!(
            f("HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n").unwrap(),
            Framing { body: BodyLength::UntilClose, keep_alive: false }
        );
        assert_eq!(
            f("HTTP/1.1 200 OK\r\n\r\n").unwrap(),
            Framing { body: BodyLength::UntilClose, keep_alive: false },
            "no length: until the close"
        );
        assert_eq!(f("HTTP/1.1 200 OK\r\ncontent-length: 4, 4\r\n\r\n").unwrap().body, BodyLength::Exact(4));
        assert!(f("HTTP/1.1 200 OK\r\ncontent-length: 4\r\ncontent-length: 5\r\n\r\n").is_err());
        assert!(f("HTTP/1.1 200 OK\r\ncontent-length: +4\r\n\r\n").is_err());
        assert!(f("HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n").is_err());
        assert!(!f("HTTP/1.1 200 OK\r\nconnection: Close\r\ncontent-length: 0\r\n\r\n").unwrap().keep_alive);
        assert!(!f("HTTP/1.0 200 OK\r\ncontent-length: 0\r\n\r\n").unwrap().keep_alive);
        assert!(f("HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 0\r\n\r\n").unwrap().keep_alive);
    }
}
