//! The bytes of one client connection read by seawall's HTTP/1.x server codec as its
//! connection reads them (`downstream::http1`), without a socket or an app: a request's
//! head, then its whole body, then the next request while the connection may carry one.
//! What the fuzz target `h1` and the differential test against hyper read through.

use bytes::BytesMut;
use http::Version;

use super::server::{self, HeadError};
use super::{BodyDecoder, BodyLength, Step};

/// A request as the codec read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: String,
    /// The request target, as `http::Uri` prints it.
    pub target: String,
    /// Whether it is an HTTP/1.0 request.
    pub http10: bool,
    /// The body, decoded.
    pub body: Vec<u8>,
}

/// How the reading of a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// A head was refused with this status; the connection closes after the answer.
    Refused(u16),
    /// A body could not be decoded: the request is answered 400 and the connection
    /// closes.
    BadBody,
    /// The last request asked for the connection to close (or HTTP/1.0 did not ask to
    /// keep it).
    Closed,
    /// The bytes ran out between two requests.
    Idle,
    /// The bytes ran out within a head or a body.
    Partial,
}

/// What was read off a connection: the requests read whole, and how the reading ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// The requests, each with its whole body.
    pub requests: Vec<Request>,
    /// Why nothing more was read.
    pub end: End,
}

/// Reads a connection's bytes arriving as `pieces`, one read after another.
pub fn read_connection(pieces: &[&[u8]]) -> Reading {
    let mut pieces = pieces.iter();
    let mut buf = BytesMut::new();
    let mut requests = Vec::new();
    let mut current: Option<(Request, BodyDecoder, bool)> = None;
    // As the connection does: a head parsed again only when it may have ended.
    let mut scanned = 0;
    loop {
        match current.as_mut() {
            None if server::worth_parsing(&buf, scanned) && !buf.is_empty() => match server::parse_request(&mut buf) {
                Ok(Some(head)) => {
                    let request = Request {
                        method: head.request.method().to_string(),
                        target: head.request.uri().to_string(),
                        http10: head.request.version() == Version::HTTP_10,
                        body: Vec::new(),
                    };
                    current = Some((request, BodyDecoder::new(head.body), head.keep_alive));
                    scanned = 0;
                    continue;
                }
                Ok(None) => scanned = buf.len(),
                Err(refusal) => return refused(requests, refusal),
            },
            None => {}
            Some((request, decoder, keep_alive)) => match decoder.decode(&mut buf) {
                Ok(Step::Data(data)) => {
                    request.body.extend_from_slice(&data);
                    continue;
                }
                Ok(Step::End) => {
                    let keep_alive = *keep_alive;
                    if let Some((request, _, _)) = current.take() {
                        requests.push(request);
                    }
                    if !keep_alive {
                        return Reading { requests, end: End::Closed };
                    }
                    continue;
                }
                Ok(Step::More) => {}
                Err(_) => return Reading { requests, end: End::BadBody },
            },
        }
        match pieces.next() {
            Some(piece) => buf.extend_from_slice(piece),
            None => break,
        }
    }
    if current.is_none() && !buf.is_empty() {
        // The bytes ran out: a head that cannot become one is refused, however it came.
        if let Err(refusal) = server::parse_request(&mut buf) {
            return refused(requests, refusal);
        }
    }
    let end = if current.is_none() && buf.is_empty() { End::Idle } else { End::Partial };
    Reading { requests, end }
}

fn refused(requests: Vec<Request>, refusal: HeadError) -> Reading {
    Reading { requests, end: End::Refused(refusal.status().as_u16()) }
}

/// What the body decoder made of a chunked body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChunkedBody {
    /// The body, and how many bytes were left after it (the next request's).
    Whole {
        /// The decoded body.
        body: Vec<u8>,
        /// The bytes after its end.
        rest: usize,
    },
    /// Malformed.
    Refused,
    /// More bytes were needed.
    Partial,
}

/// Decodes a chunked body arriving as `pieces`.
pub fn read_chunked(pieces: &[&[u8]]) -> ChunkedBody {
    let mut decoder = BodyDecoder::new(BodyLength::Chunked);
    let mut buf = BytesMut::new();
    let mut body = Vec::new();
    let mut pieces = pieces.iter();
    loop {
        match decoder.decode(&mut buf) {
            Ok(Step::Data(data)) => body.extend_from_slice(&data),
            Ok(Step::End) => {
                let rest = buf.len() + pieces.map(|p| p.len()).sum::<usize>();
                return ChunkedBody::Whole { body, rest };
            }
            Ok(Step::More) => match pieces.next() {
                Some(piece) => buf.extend_from_slice(piece),
                None => return ChunkedBody::Partial,
            },
            Err(_) => return ChunkedBody::Refused,
        }
    }
}
