//! Server-sent events: a bounded decoder for upstream streams and the encoder for clients.

use bytes::{Buf, Bytes, BytesMut};
use futures::{Stream, StreamExt};

/// One decoded event. Only the fields MCP uses are kept.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Event {
    /// `event:` field; `None` means the default type `message`.
    pub event: Option<String>,
    /// `data:` lines joined with `\n`.
    pub data: String,
    /// `id:` field.
    pub id: Option<String>,
    /// `retry:` field in milliseconds.
    pub retry: Option<u64>,
}

/// Why a stream could not be decoded.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    /// One event grew past the limit.
    #[error("an event exceeded {0} bytes")]
    TooLarge(usize),
    /// The underlying body failed.
    #[error("{0}")]
    Body(String),
}

/// Incremental decoder: feed bytes, take complete events.
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    /// How much of `buf` is known to hold no line end, so that a long line arriving in
    /// many chunks is searched once, not once per chunk.
    scanned: usize,
    /// The last line ended with `\r`: a `\n` that comes next belongs to it.
    after_cr: bool,
    pending: Event,
    has_data: bool,
    limit: usize,
    event_bytes: usize,
}

impl Decoder {
    /// A decoder that refuses events larger than `limit` bytes.
    pub fn new(limit: usize) -> Decoder {
        Decoder {
            buf: BytesMut::new(),
            scanned: 0,
            after_cr: false,
            pending: Event::default(),
            has_data: false,
            limit,
            event_bytes: 0,
        }
    }

    /// Adds bytes and appends the events they complete to `out`. On an error the events
    /// completed before it are in `out` all the same, so how the stream is cut into
    /// chunks never changes what is decoded.
    pub fn feed(&mut self, chunk: &[u8], out: &mut impl Extend<Event>) -> Result<(), SseError> {
        self.buf.extend_from_slice(chunk);
        loop {
            if self.after_cr && !self.buf.is_empty() {
                if self.buf[0] == b'\n' {
                    self.buf.advance(1);
                }
                self.after_cr = false;
            }
            let Some(pos) = self.buf[self.scanned..].iter().position(|b| *b == b'\n' || *b == b'\r') else {
                self.scanned = self.buf.len();
                break;
            };
            let line = self.buf.split_to(self.scanned + pos);
            // A line ends at \r, \n or \r\n; the \n of a \r\n may come in the next chunk.
            self.after_cr = self.buf[0] == b'\r';
            self.buf.advance(1);
            self.scanned = 0;
            if let Some(ev) = self.line(&line)? {
                out.extend(Some(ev));
            }
        }
        // The line not yet ended counts as it will: its bytes and one for its end.
        if self.buf.len() + self.event_bytes > self.limit {
            return Err(SseError::TooLarge(self.limit));
        }
        Ok(())
    }

    fn line(&mut self, line: &[u8]) -> Result<Option<Event>, SseError> {
        if line.is_empty() {
            self.event_bytes = 0;
            if !self.has_data && self.pending.id.is_none() && self.pending.retry.is_none() {
                self.pending = Event::default();
                return Ok(None);
            }
            self.has_data = false;
            return Ok(Some(std::mem::take(&mut self.pending)));
        }
        self.event_bytes += line.len() + 1;
        if self.event_bytes > self.limit {
            return Err(SseError::TooLarge(self.limit));
        }
        let text = String::from_utf8_lossy(line);
        if text.starts_with(':') {
            return Ok(None);
        }
        let (field, value) = match text.find(':') {
            Some(i) => {
                let v = &text[i + 1..];
                (&text[..i], v.strip_prefix(' ').unwrap_or(v))
            }
            None => (&text[..], ""),
        };
        match field {
            "event" => self.pending.event = Some(value.to_owned()),
            "data" => {
                if self.has_data {
                    self.pending.data.push('\n');
                }
                self.pending.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.pending.id = Some(value.to_owned()),
            // Only digits; anything else (`+5`, `1.5`, a number too large) is ignored.
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    self.pending.retry = Some(ms);
                }
            }
            _ => {}
        }
        Ok(None)
    }
}

/// Decodes a byte stream into events, bounded by `limit` bytes per event.
pub fn decode_stream<S, E>(body: S, limit: usize) -> impl Stream<Item = Result<Event, SseError>> + Send
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::fmt::Display,
{
    // The queue holds what one chunk decoded; an error goes in after the events before it.
    let state = (Box::pin(body), Decoder::new(limit), std::collections::VecDeque::new(), false);
    futures::stream::unfold(state, |(mut body, mut dec, mut queue, mut done)| async move {
        loop {
            if let Some(item) = queue.pop_front() {
                return Some((item, (body, dec, queue, done)));
            }
            if done {
                return None;
            }
            let mut events = Vec::new();
            let failure = match body.next().await {
                Some(Ok(chunk)) => dec.feed(&chunk, &mut events).err(),
                Some(Err(e)) => Some(SseError::Body(e.to_string())),
                None => return None,
            };
            done = failure.is_some();
            queue.extend(events.into_iter().map(Ok).chain(failure.map(Err)));
        }
    })
}

/// Encodes one `message` event for a client, with an optional id.
pub(crate) fn encode_message(data: &str, id: Option<&str>) -> Bytes {
    let mut out = String::with_capacity(data.len() + 32);
    if let Some(id) = id {
        out.push_str("id: ");
        out.push_str(id);
        out.push('\n');
    }
    out.push_str("event: message\n");
    push_data(&mut out, data);
    Bytes::from(out)
}

/// Appends `data` as an event's `data:` lines, one per line of it, and the blank line
/// that ends the event.
fn push_data(out: &mut String, data: &str) {
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
}

/// Encodes a priming event: an id and empty data, so that a client may reconnect with
/// `Last-Event-ID` before any message arrived, and `retry` (milliseconds), how long it
/// should wait before it does.
pub(crate) fn encode_priming(id: &str, retry: std::time::Duration) -> Bytes {
    Bytes::from(format!("id: {id}\nretry: {}\ndata: \n\n", retry.as_millis()))
}

/// Encodes one event of type `event` (e.g. `endpoint`), without an id.
pub(crate) fn encode_event(event: &str, data: &str) -> Bytes {
    let mut out = format!("event: {event}\n");
    push_data(&mut out, data);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(d: &mut Decoder, chunk: &[u8]) -> Result<Vec<Event>, SseError> {
        let mut out = Vec::new();
        d.feed(chunk, &mut out).map(|()| out)
    }

    fn data(text: &str) -> Event {
        Event { data: text.to_owned(), ..Event::default() }
    }

    #[test]
    fn decodes_events_split_across_chunks() {
        let mut d = Decoder::new(1024);
        let mut evs = feed(&mut d, b"id: 1\nevent: message\ndata: {\"a\"").unwrap();
        assert!(evs.is_empty());
        evs = feed(&mut d, b":1}\r\n\r\n: comment\n\ndata: x\ndata: y\n\n").unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].data, "{\"a\":1}");
        assert_eq!(evs[0].id.as_deref(), Some("1"));
        assert_eq!(evs[1].data, "x\ny");
    }

    #[test]
    fn priming_event_with_only_an_id_is_reported() {
        let mut d = Decoder::new(1024);
        let evs = feed(&mut d, b"id: p0\nretry: 500\ndata:\n\n").unwrap();
        assert_eq!(evs, vec![Event { event: None, data: String::new(), id: Some("p0".into()), retry: Some(500) }]);
    }

    #[test]
    fn refuses_oversized_events() {
        let mut d = Decoder::new(16);
        assert_eq!(feed(&mut d, b"data: 0123456789012345678\n"), Err(SseError::TooLarge(16)));
        let mut d = Decoder::new(16);
        assert_eq!(feed(&mut d, &[b'x'; 40]), Err(SseError::TooLarge(16)));
    }

    #[test]
    fn encodes_multiline_data() {
        assert_eq!(&encode_message("a\nb", Some("7"))[..], b"id: 7\nevent: message\ndata: a\ndata: b\n\n");
        assert_eq!(
            &encode_event("endpoint", "/messages?sessionId=x")[..],
            b"event: endpoint\ndata: /messages?sessionId=x\n\n"
        );
    }

    #[test]
    fn priming_events_decode_as_an_id_with_empty_data() {
        let frame = encode_priming("7-1", std::time::Duration::from_secs(1));
        assert_eq!(&frame[..], b"id: 7-1\nretry: 1000\ndata: \n\n");
        let evs = feed(&mut Decoder::new(1024), &frame).unwrap();
        assert_eq!(evs, vec![Event { event: None, data: String::new(), id: Some("7-1".into()), retry: Some(1000) }]);
    }

    #[test]
    fn events_before_an_oversized_one_are_decoded_however_the_stream_is_cut() {
        let stream: &[u8] = b"data: ok\n\ndata: 0123456789abcdef0123\n\n";
        let mut d = Decoder::new(16);
        let mut out = Vec::new();
        assert_eq!(d.feed(stream, &mut out), Err(SseError::TooLarge(16)));
        assert_eq!(out, vec![data("ok")]);
        for chunks in [vec![stream], stream.chunks(1).collect()] {
            let body = futures::stream::iter(chunks.into_iter().map(|c| Ok::<_, String>(Bytes::copy_from_slice(c))));
            let decoded: Vec<_> = futures::executor::block_on(decode_stream(body, 16).collect());
            assert_eq!(decoded, vec![Ok(data("ok")), Err(SseError::TooLarge(16))]);
        }
    }

    #[test]
    fn an_event_of_exactly_the_limit_passes_when_its_crlf_is_cut() {
        // "data: 012345678" and its terminator are the 16 bytes of the event.
        let stream: &[u8] = b"data: 012345678\r\n\r\n";
        let whole = feed(&mut Decoder::new(16), stream);
        assert_eq!(whole, Ok(vec![data("012345678")]));
        for cut in 1..stream.len() {
            let mut d = Decoder::new(16);
            let mut out = Vec::new();
            d.feed(&stream[..cut], &mut out).unwrap();
            d.feed(&stream[cut..], &mut out).unwrap();
            assert_eq!(out, vec![data("012345678")], "cut at {cut}");
        }
    }

    #[test]
    fn an_event_ending_in_cr_is_decoded_before_the_next_byte_arrives() {
        let mut d = Decoder::new(1024);
        assert_eq!(feed(&mut d, b"data: a\r\r"), Ok(vec![data("a")]));
        // The \n of a \r\n cut after the \r is not another line.
        assert_eq!(feed(&mut d, b"data: b\r\n\r"), Ok(vec![data("b")]));
        assert_eq!(feed(&mut d, b"\ndata: c\n\n"), Ok(vec![data("c")]));
    }

    #[test]
    fn retry_takes_only_digits() {
        let mut d = Decoder::new(1024);
        let evs = feed(&mut d, b"retry: 500\nretry: +5\nretry: 1.5\nretry: 99999999999999999999\nretry:\ndata: x\n\n");
        assert_eq!(evs, Ok(vec![Event { retry: Some(500), ..data("x") }]));
    }

    #[test]
    fn a_long_line_in_many_chunks_is_one_line() {
        let mut d = Decoder::new(1 << 20);
        let mut out = Vec::new();
        d.feed(b"data: ", &mut out).unwrap();
        for _ in 0..1000 {
            d.feed(&[b'x'; 100], &mut out).unwrap();
        }
        d.feed(b"\r", &mut out).unwrap();
        d.feed(b"\r", &mut out).unwrap();
        assert_eq!(out, vec![data(&"x".repeat(100_000))]);
    }
}
