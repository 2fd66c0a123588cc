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
    pending: Event,
    has_data: bool,
    limit: usize,
    event_bytes: usize,
}

impl Decoder {
    /// A decoder that refuses events larger than `limit` bytes.
    pub fn new(limit: usize) -> Decoder {
        Decoder { buf: BytesMut::new(), pending: Event::default(), has_data: false, limit, event_bytes: 0 }
    }

    /// Adds bytes and returns the events they complete.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, SseError> {
        self.buf.extend_from_slice(chunk);
        let mut out = Vec::new();
        while let Some(pos) = self.buf.iter().position(|b| *b == b'\n' || *b == b'\r') {
            let terminator = if self.buf[pos] == b'\r' {
                match self.buf.get(pos + 1) {
                    // A lone \r at the end: wait to see whether \n follows.
                    None => break,
                    Some(b'\n') => 2,
                    Some(_) => 1,
                }
            } else {
                1
            };
            let line = self.buf.split_to(pos);
            self.buf.advance(terminator);
            if let Some(ev) = self.line(&line)? {
                out.push(ev);
            }
        }
        if self.buf.len() + self.event_bytes > self.limit {
            return Err(SseError::TooLarge(self.limit));
        }
        Ok(out)
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
            "retry" => self.pending.retry = value.parse().ok(),
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
    let state = (Box::pin(body), Decoder::new(limit), std::collections::VecDeque::new(), false);
    futures::stream::unfold(state, |(mut body, mut dec, mut queue, done)| async move {
        loop {
            if let Some(ev) = queue.pop_front() {
                return Some((Ok(ev), (body, dec, queue, done)));
            }
            if done {
                return None;
            }
            match body.next().await {
                Some(Ok(chunk)) => match dec.feed(&chunk) {
                    Ok(events) => queue.extend(events),
                    Err(e) => return Some((Err(e), (body, dec, queue, true))),
                },
                Some(Err(e)) => {
                    return Some((Err(SseError::Body(e.to_string())), (body, dec, queue, true)));
                }
                None => return None,
            }
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
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
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
    for line in data.split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_events_split_across_chunks() {
        let mut d = Decoder::new(1024);
        let mut evs = d.feed(b"id: 1\nevent: message\ndata: {\"a\"").unwrap();
        assert!(evs.is_empty());
        evs = d.feed(b":1}\r\n\r\n: comment\n\ndata: x\ndata: y\n\n").unwrap();
        assert_eq!(evs.len(), 2);
        assert_eq!(evs[0].data, "{\"a\":1}");
        assert_eq!(evs[0].id.as_deref(), Some("1"));
        assert_eq!(evs[1].data, "x\ny");
    }

    #[test]
    fn priming_event_with_only_an_id_is_reported() {
        let mut d = Decoder::new(1024);
        let evs = d.feed(b"id: p0\nretry: 500\ndata:\n\n").unwrap();
        assert_eq!(evs, vec![Event { event: None, data: String::new(), id: Some("p0".into()), retry: Some(500) }]);
    }

    #[test]
    fn refuses_oversized_events() {
        let mut d = Decoder::new(16);
        assert_eq!(d.feed(b"data: 0123456789012345678\n"), Err(SseError::TooLarge(16)));
        let mut d = Decoder::new(16);
        assert_eq!(d.feed(&[b'x'; 40]), Err(SseError::TooLarge(16)));
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
        let evs = Decoder::new(1024).feed(&frame).unwrap();
        assert_eq!(evs, vec![Event { event: None, data: String::new(), id: Some("7-1".into()), retry: Some(1000) }]);
    }
}
