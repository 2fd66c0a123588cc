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
//! bytes and [`MAX_HEADERS`] fields, a chunk-size line to [`MAX_LINE`] bytes, and the
//! trailers to [`MAX_HEAD`] bytes.

use bytes::{Buf, Bytes, BytesMut};
use http::header::{CONNECTION, CONTENT_LENGTH, EXPECT, HOST, TRANSFER_ENCODING};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Version};

#[doc(hidden)] // public for the fuzz target `h1` and tests/it/framing.rs
pub mod offline;
pub(crate) mod server;

/// Longest answer head (status line and fields) read from an upstream.
pub(crate) const MAX_HEAD: usize = 64 * 1024;
/// Most header fields in an answer head.
pub(crate) const MAX_HEADERS: usize = 100;
/// Longest chunk-size line (the size and any extensions).
const MAX_LINE: usize = 1024;

/// Why an HTTP/1.1 message could not be read: an upstream's answer, or a client's
/// request body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// The head is not a valid HTTP/1.x response head.
    #[error("invalid HTTP response head: {0}")]
    Head(&'static str),
    /// The head is longer than [`MAX_HEAD`] bytes.
    #[error("HTTP response head longer than {MAX_HEAD} bytes")]
    HeadTooLong,
    /// The body's framing is contradictory or unreadable.
    #[error("invalid HTTP response framing: {0}")]
    Framing(&'static str),
    /// A chunk of a `chunked` body is malformed.
    #[error("invalid chunked body: {0}")]
    Chunk(&'static str),
    /// The connection closed before the end of the answer.
    #[error("the connection closed before the end of the answer")]
    Truncated,
}

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

fn is_tchar(b: u8) -> bool {
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

/// What the body decoder found in the bytes read so far.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// A piece of the body.
    Data(Bytes),
    /// The body is complete.
    End,
    /// More bytes must be read first.
    More,
}

/// Takes a body apart from the bytes read off its connection.
#[derive(Debug)]
pub(crate) struct BodyDecoder {
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// This many bytes of an exact-length body are still to come.
    Exact(u64),
    /// Everything until the connection closes.
    UntilClose,
    /// A chunk-size line is next.
    ChunkSize,
    /// This many bytes of the current chunk are still to come.
    ChunkData(u64),
    /// The CRLF after a chunk's data is next.
    ChunkEnd,
    /// Trailer fields, then an empty line; how many trailer bytes were seen.
    Trailers(usize),
    /// The body is complete.
    Done,
}

impl BodyDecoder {
    /// A decoder for a body of `length`.
    pub(crate) fn new(length: BodyLength) -> BodyDecoder {
        let state = match length {
            BodyLength::Exact(0) => State::Done,
            BodyLength::Exact(n) => State::Exact(n),
            BodyLength::Chunked => State::ChunkSize,
            BodyLength::UntilClose => State::UntilClose,
        };
        BodyDecoder { state }
    }

    /// Whether the whole body has been taken.
    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// How many more bytes the body is known to hold before its next boundary (the end
    /// of an exact-length body, or of the current chunk), so a read can make room for
    /// them at once.
    pub(crate) fn expected(&self) -> Option<u64> {
        match self.state {
            State::Exact(n) | State::ChunkData(n) => Some(n),
            _ => None,
        }
    }

    /// The body's length, when the head declared it and none of it was taken yet.
    pub(crate) fn remaining(&self) -> Option<u64> {
        match self.state {
            State::Exact(n) => Some(n),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// The next piece of the body from `buf` (which loses what it hands out).
    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Step, ProtocolError> {
        loop {
            match self.state {
                State::Done => return Ok(Step::End),
                State::Exact(n) | State::ChunkData(n) => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    let take = usize::try_from(n).map_or(buf.len(), |n| n.min(buf.len()));
                    let left = n - take as u64;
                    self.state = match self.state {
                        State::Exact(_) if left == 0 => State::Done,
                        State::Exact(_) => State::Exact(left),
                        _ if left == 0 => State::ChunkEnd,
                        _ => State::ChunkData(left),
                    };
                    return Ok(Step::Data(buf.split_to(take).freeze()));
                }
                State::UntilClose => {
                    if buf.is_empty() {
                        return Ok(Step::More);
                    }
                    return Ok(Step::Data(buf.split().freeze()));
                }
                State::ChunkSize => {
                    let Some(line) = take_line(buf, MAX_LINE, "chunk-size line too long")? else {
                        return Ok(Step::More);
                    };
                    let size = chunk_size(&line)?;
                    self.state = if size == 0 { State::Trailers(0) } else { State::ChunkData(size) };
                }
                State::ChunkEnd => {
                    if buf.len() < 2 {
                        return Ok(Step::More);
                    }
                    if &buf[..2] != b"\r\n" {
                        return Err(ProtocolError::Chunk("chunk data not followed by CRLF"));
                    }
                    buf.advance(2);
                    self.state = State::ChunkSize;
                }
                State::Trailers(seen) => {
                    let Some(line) = take_line(buf, MAX_HEAD - seen, "trailers too long")? else {
                        return Ok(Step::More);
                    };
                    if line.is_empty() {
                        self.state = State::Done;
                    } else if trailer_ok(&line) {
                        self.state = State::Trailers(seen + line.len() + 2);
                    } else {
                        return Err(ProtocolError::Chunk("malformed trailer field"));
                    }
                }
            }
        }
    }

    /// The connection closed: the end of a body that runs until then, an error otherwise.
    pub(crate) fn eof(&mut self) -> Result<Step, ProtocolError> {
        match self.state {
            State::UntilClose | State::Done => {
                self.state = State::Done;
                Ok(Step::End)
            }
            _ => Err(ProtocolError::Truncated),
        }
    }
}

/// Takes one CRLF-terminated line (without its CRLF) off `buf`, if all of it is there.
fn take_line(buf: &mut BytesMut, max: usize, too_long: &'static str) -> Result<Option<BytesMut>, ProtocolError> {
    match memchr::memchr(b'\n', buf) {
        Some(end) if end > max => Err(ProtocolError::Chunk(too_long)),
        Some(end) => {
            if end == 0 || buf[end - 1] != b'\r' {
                return Err(ProtocolError::Chunk("line not ended by CRLF"));
            }
            let mut line = buf.split_to(end + 1);
            line.truncate(end - 1);
            Ok(Some(line))
        }
        None if buf.len() > max => Err(ProtocolError::Chunk(too_long)),
        None => Ok(None),
    }
}

/// The size of a chunk-size line (RFC 9112 §7.1.1): hexadecimal digits, then nothing
/// but whitespace and well-formed extensions. The line ends at its first CRLF, so a
/// quoted string it leaves open, or a CR anywhere in it, is refused: a reader that took
/// the quoted line end as part of the extension would find other chunks.
fn chunk_size(line: &[u8]) -> Result<u64, ProtocolError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 || digits > 15 {
        return Err(ProtocolError::Chunk("chunk size is not hexadecimal"));
    }
    if !extensions_ok(&line[digits..]) {
        return Err(ProtocolError::Chunk("malformed chunk extension"));
    }
    let mut size = 0u64;
    for b in &line[..digits] {
        let digit = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => b - b'A' + 10,
        };
        size = size * 16 + u64::from(digit);
    }
    Ok(size)
}

/// Whether what follows a chunk size is `*( BWS ";" BWS name [ BWS "=" BWS value ] )`
/// and optional whitespace, the value a token or a quoted string.
fn extensions_ok(mut rest: &[u8]) -> bool {
    loop {
        rest = skip_whitespace(rest);
        match rest.split_first() {
            None => return true,
            Some((b';', after)) => rest = skip_whitespace(after),
            Some(_) => return false,
        }
        let name = token_len(rest);
        if name == 0 {
            return false;
        }
        rest = skip_whitespace(&rest[name..]);
        if let Some((b'=', after)) = rest.split_first() {
            let value = skip_whitespace(after);
            let len = if value.first() == Some(&b'"') { quoted_len(value) } else { token_len(value) };
            if len == 0 {
                return false;
            }
            rest = &value[len..];
        }
    }
}

fn skip_whitespace(text: &[u8]) -> &[u8] {
    let spaces = text.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    &text[spaces..]
}

/// How long the token at the start of `text` is.
fn token_len(text: &[u8]) -> usize {
    text.iter().take_while(|&&b| is_tchar(b)).count()
}

/// How long the quoted string at the start of `text` is, its quotes included (0 when
/// it does not end, or holds a control character).
fn quoted_len(text: &[u8]) -> usize {
    let text_byte = |b: u8| b == b'\t' || (b >= 0x20 && b != 0x7f);
    let mut at = 1;
    while let Some(&b) = text.get(at) {
        match b {
            b'"' => return at + 1,
            b'\\' if text.get(at + 1).is_some_and(|&q| text_byte(q)) => at += 2,
            _ if text_byte(b) && b != b'\\' => at += 1,
            _ => return 0,
        }
    }
    0
}

/// Whether a trailer line is a field line: a token, a colon, and a value of visible
/// characters and whitespace (no obs-fold, no CR).
fn trailer_ok(line: &[u8]) -> bool {
    let name = token_len(line);
    name > 0
        && line.get(name) == Some(&b':')
        && line[name + 1..].iter().all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
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

    /// Decodes `wire` (a body as it arrives) fed in pieces of `step` bytes; what the
    /// body was, or the first error.
    fn decode_in_pieces(length: BodyLength, wire: &[u8], step: usize) -> Result<Vec<u8>, ProtocolError> {
        let mut decoder = BodyDecoder::new(length);
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        let mut fed = 0;
        loop {
            match decoder.decode(&mut buf)? {
                Step::Data(d) => body.extend_from_slice(&d),
                Step::End => return Ok(body),
                Step::More if fed < wire.len() => {
                    let end = (fed + step).min(wire.len());
                    buf.extend_from_slice(&wire[fed..end]);
                    fed = end;
                }
                Step::More => {
                    return match decoder.eof()? {
                        Step::End => Ok(body),
                        _ => unreachable!(),
                    };
                }
            }
        }
    }

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

    #[test]
    fn bodies_come_out_whole_however_the_bytes_arrive() {
        let chunked = b"5;ext=1\r\nhello\r\n1 ; a ; b = \"q\\\"\\;\" \r\n \r\n6\r\nworld!\r\n0\r\nx-trailer: 1\r\n\r\n";
        for step in [1, 2, 3, 7, 1000] {
            assert_eq!(decode_in_pieces(BodyLength::Chunked, chunked, step).unwrap(), b"hello world!", "step {step}");
            assert_eq!(decode_in_pieces(BodyLength::Exact(5), b"hello", step).unwrap(), b"hello");
            assert_eq!(decode_in_pieces(BodyLength::UntilClose, b"all of it", step).unwrap(), b"all of it");
        }
        assert_eq!(decode_in_pieces(BodyLength::Exact(0), b"", 1).unwrap(), b"");
    }

    #[test]
    fn a_body_cut_short_or_badly_chunked_is_an_error() {
        assert_eq!(decode_in_pieces(BodyLength::Exact(10), b"short", 3), Err(ProtocolError::Truncated));
        assert_eq!(decode_in_pieces(BodyLength::Chunked, b"5\r\nhel", 3), Err(ProtocolError::Truncated));
        let bad_chunks = [
            &b"zz\r\n"[..],
            b"5\r\nhelloXX0\r\n\r\n",
            b"5\nhello",
            b"1234567890abcdef0\r\n",
            b"0000000000000005\r\nhello",
            b"5 x\r\nhello",
            b"-5\r\nhello",
            b"0x5\r\nhello",
            b" 5\r\nhello",
            b"5 5\r\nhello",
            b"5;a=\"x\r\n\"\r\nhello\r\n0\r\n\r\n",
            b"5;a=\"x\r\nhello\r\n0\r\n\r\n",
            b"5;a\rb\r\nhello",
            b"5;\r\nhello",
            b"5;a=\r\nhello",
            b"5;a b\r\nhello",
            b"5;a=\"\x01\"\r\nhello",
            b"0\r\nx-t: 1\r\n folded\r\n\r\n",
            b"0\r\nx-t : 1\r\n\r\n",
            b"0\r\nno colon\r\n\r\n",
            b"0\r\nx-t: a\rb\r\n\r\n",
        ];
        for bad in bad_chunks {
            assert!(
                matches!(decode_in_pieces(BodyLength::Chunked, bad, 2), Err(ProtocolError::Chunk(_))),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let endless_line = vec![b'1'; MAX_LINE + 10];
        assert!(matches!(decode_in_pieces(BodyLength::Chunked, &endless_line, 64), Err(ProtocolError::Chunk(_))));
        let mut endless_trailers = b"0\r\n".to_vec();
        while endless_trailers.len() < MAX_HEAD + 100 {
            endless_trailers.extend_from_slice(b"x-t: 1\r\n");
        }
        assert!(matches!(
            decode_in_pieces(BodyLength::Chunked, &endless_trailers, 4096),
            Err(ProtocolError::Chunk("trailers too long"))
        ));
    }

    #[test]
    fn a_decoder_knows_how_much_of_the_current_piece_is_still_to_come() {
        let mut exact = BodyDecoder::new(BodyLength::Exact(10));
        assert_eq!(exact.expected(), Some(10));
        let mut buf = BytesMut::from(&b"abcd"[..]);
        exact.decode(&mut buf).unwrap();
        assert_eq!(exact.expected(), Some(6));
        let mut chunked = BodyDecoder::new(BodyLength::Chunked);
        assert_eq!(chunked.expected(), None, "the size line is not read yet");
        let mut buf = BytesMut::from(&b"100\r\nab"[..]);
        chunked.decode(&mut buf).unwrap();
        assert_eq!(chunked.expected(), Some(0x100 - 2));
        assert_eq!(BodyDecoder::new(BodyLength::UntilClose).expected(), None);
    }

    #[test]
    fn the_bytes_after_a_body_stay_for_the_next_answer() {
        let mut buf = BytesMut::from(&b"2\r\nok\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n"[..]);
        let mut decoder = BodyDecoder::new(BodyLength::Chunked);
        assert_eq!(decoder.decode(&mut buf).unwrap(), Step::Data(Bytes::from_static(b"ok")));
        assert_eq!(decoder.decode(&mut buf).unwrap(), Step::End);
        assert_eq!(&buf[..], b"HTTP/1.1 200 OK\r\n");
    }
}
