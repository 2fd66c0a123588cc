//! HTTP/1.x read by seawall's own codec without a socket: the bytes of one client
//! connection as the server reads them (`downstream::http1`: a request's head, then its
//! whole body, then the next request while the connection may carry one), and an
//! upstream's answer as the plain-HTTP client reads it (`upstream::client`: interim
//! answers, the final head, its body by its framing). What the fuzz targets `h1` and
//! `h1_answer` and the differential test against hyper read through.

use bytes::BytesMut;
use http::Version;

use super::server::{self, HeadError};
use super::{BodyDecoder, BodyLength, MAX_INTERIM, Step, framing, parse_head};

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

/// An upstream's final answer as the client read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// Whether the body ran until the connection closed (no length, no chunks).
    pub until_close: bool,
    /// Whether the connection may carry another request afterwards.
    pub keep_alive: bool,
    /// The body, decoded.
    pub body: Vec<u8>,
}

/// How the reading of an answer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerEnd {
    /// Read whole, with this many bytes after it.
    Whole {
        /// Bytes after the answer's end.
        rest: usize,
    },
    /// Its head, its framing or its body broke the protocol (or too many interim
    /// answers came, or an unasked protocol switch): the call fails.
    Refused,
    /// The bytes ran out before its end.
    Partial,
}

/// What was read of an upstream's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerReading {
    /// The interim (1xx) answers skipped before the final one.
    pub interim: usize,
    /// The final answer, when its head was read (its body as far as it was read).
    pub answer: Option<Answer>,
    /// How the reading ended.
    pub end: AnswerEnd,
}

/// Reads an upstream's answer arriving as `pieces`, as the plain-HTTP client does; the
/// end of the pieces is the connection's close.
pub fn read_answer(pieces: &[&[u8]]) -> AnswerReading {
    let mut pieces = pieces.iter();
    let mut buf = BytesMut::new();
    let mut interim = 0;
    let refused = |interim, answer| AnswerReading { interim, answer, end: AnswerEnd::Refused };
    let head = loop {
        match parse_head(&mut buf) {
            Ok(Some(head)) if head.status == http::StatusCode::SWITCHING_PROTOCOLS => return refused(interim, None),
            Ok(Some(head)) if head.status.is_informational() => {
                interim += 1;
                if interim > MAX_INTERIM {
                    return refused(interim, None);
                }
                continue;
            }
            Ok(Some(head)) => break head,
            Ok(None) => {}
            Err(_) => return refused(interim, None),
        }
        match pieces.next() {
            Some(piece) => buf.extend_from_slice(piece),
            None => return AnswerReading { interim, answer: None, end: AnswerEnd::Partial },
        }
    };
    let Ok(framing) = framing(&head) else { return refused(interim, None) };
    let mut answer = Answer {
        status: head.status.as_u16(),
        until_close: framing.body == BodyLength::UntilClose,
        keep_alive: framing.keep_alive,
        body: Vec::new(),
    };
    let mut decoder = BodyDecoder::new(framing.body);
    loop {
        match decoder.decode(&mut buf) {
            Ok(Step::Data(data)) => {
                answer.body.extend_from_slice(&data);
                continue;
            }
            Ok(Step::End) => {
                let rest = buf.len() + pieces.map(|p| p.len()).sum::<usize>();
                return AnswerReading { interim, answer: Some(answer), end: AnswerEnd::Whole { rest } };
            }
            Ok(Step::More) => {}
            Err(_) => return refused(interim, Some(answer)),
        }
        match pieces.next() {
            Some(piece) => buf.extend_from_slice(piece),
            None => {
                let end = match decoder.eof() {
                    Ok(_) => AnswerEnd::Whole { rest: 0 },
                    Err(_) => AnswerEnd::Partial,
                };
                return AnswerReading { interim, answer: Some(answer), end };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_is_read_past_its_interim_answers_by_its_framing() {
        let read = read_answer(&[
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"3\r\nabc\r\n0\r\n\r\nnext",
        ]);
        assert_eq!(read.interim, 1);
        assert_eq!(read.end, AnswerEnd::Whole { rest: 4 });
        let answer = read.answer.unwrap();
        assert_eq!((answer.status, answer.body.as_slice(), answer.until_close), (200, &b"abc"[..], false));

        let closed = read_answer(&[b"HTTP/1.0 200 OK\r\n\r\nto the end"]);
        assert_eq!(closed.end, AnswerEnd::Whole { rest: 0 });
        assert!(closed.answer.as_ref().is_some_and(|a| a.until_close && a.body == b"to the end"));

        let short = read_answer(&[b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc"]);
        assert_eq!(short.end, AnswerEnd::Partial);
    }

    #[test]
    fn a_switch_too_many_interim_answers_and_a_broken_framing_are_refused() {
        assert_eq!(read_answer(&[b"HTTP/1.1 101 Switching Protocols\r\n\r\n"]).end, AnswerEnd::Refused);
        let interim = "HTTP/1.1 103 Early Hints\r\n\r\n".repeat(MAX_INTERIM + 1);
        assert_eq!(read_answer(&[interim.as_bytes()]).end, AnswerEnd::Refused);
        let lengths = read_answer(&[b"HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\nabcd"]);
        assert_eq!(lengths.end, AnswerEnd::Refused);
        assert_eq!(read_answer(&[b"not http\r\n\r\n"]).end, AnswerEnd::Refused);
    }
}
