//! A body taken apart from the bytes read off its connection: a known length, `chunked`
//! (chunk-size lines, extensions and trailers checked), or until the close.

use bytes::{Buf, Bytes, BytesMut};

use super::error::{MAX_HEAD, MAX_LINE, ProtocolError};
use super::head::{BodyLength, is_tchar};

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
