//! SSE decoder: it finds the events a plain reading of the format finds, however an
//! upstream's stream is cut into chunks, followed by the same error if any; no event is
//! larger than the limit.
//!
//! Input: a knob byte (limit = 8 × (knob + 1) bytes), a chunking seed byte, the stream.
#![no_main]

use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use seawall::sse::{self, Decoder, Event, SseError};
use seawall_fuzz::{Input, chunk_sizes, split};

/// What `decode_stream` yields: the events, then the error that ended it, if any.
type Decoded = (Vec<Event>, Option<SseError>);

/// The body fails after its last chunk with this message.
const BODY_ERROR: &str = "connection reset";

fuzz_target!(|data: &[u8]| {
    let Some(input) = Input::parse(data) else {
        return;
    };
    let limit = 8 * (usize::from(input.knob) + 1);
    let body = input.body;

    let whole = decode(&[body], limit, false);
    assert_eq!(whole, model(body, limit), "the decoder disagrees with the format");
    assert_eq!(bytewise(body, limit), whole, "feeding byte by byte changed what was decoded");
    let chunked = decode(&split(body, &chunk_sizes(input.seed, body.len())), limit, false);
    assert_eq!(chunked, whole, "the chunking changed what was decoded");

    // A body that fails at the end yields the same events, then that failure.
    let (events, error) = decode(&[body], limit, true);
    assert_eq!(events, whole.0, "a failing body changed the events before the failure");
    match &whole.1 {
        Some(e) => assert_eq!(error.as_ref(), Some(e)),
        None => assert_eq!(error, Some(SseError::Body(BODY_ERROR.to_owned()))),
    }

    // Every event fits the limit: its fields come from at most `limit` bytes of lines
    // (and a byte that is not UTF-8 becomes U+FFFD, three bytes).
    let bound = if std::str::from_utf8(body).is_ok() { limit } else { 3 * limit };
    for event in &whole.0 {
        let size =
            event.data.len() + event.id.as_ref().map_or(0, String::len) + event.event.as_ref().map_or(0, String::len);
        assert!(size <= bound, "an event of {size} bytes passed a limit of {limit}: {event:?}");
        assert!(event.id.as_ref().is_none_or(|id| !id.contains('\0')), "an id with NUL: {event:?}");
    }
});

/// The events of `body` read line by line after the format (WHATWG HTML, "Parsing an
/// event stream"), with seawall's choices: an event with an `id` or `retry` but no data is
/// reported too, `id` and `event` belong to their event only, a byte order mark is not
/// special; and its limit: the lines of one event, each counted with one byte for its
/// end, may not exceed `limit` bytes, nor may the line not yet ended at the end.
fn model(body: &[u8], limit: usize) -> Decoded {
    let mut events = Vec::new();
    let mut event = Event::default();
    let (mut has_data, mut size) = (false, 0);
    let mut rest = body;
    while let Some(end) = rest.iter().position(|b| matches!(b, b'\r' | b'\n')) {
        let line = &rest[..end];
        let crlf = rest[end] == b'\r' && rest.get(end + 1) == Some(&b'\n');
        rest = &rest[end + if crlf { 2 } else { 1 }..];
        if line.is_empty() {
            let taken = std::mem::take(&mut event);
            if has_data || taken.id.is_some() || taken.retry.is_some() {
                events.push(taken);
            }
            (has_data, size) = (false, 0);
            continue;
        }
        size += line.len() + 1;
        if size > limit {
            return (events, Some(SseError::TooLarge(limit)));
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (&*text, ""),
        };
        match field {
            "event" => event.event = Some(value.to_owned()),
            "data" => {
                if has_data {
                    event.data.push('\n');
                }
                event.data.push_str(value);
                has_data = true;
            }
            "id" if !value.contains('\0') => event.id = Some(value.to_owned()),
            "retry" if value.bytes().all(|b| b.is_ascii_digit()) => {
                if let Ok(ms) = value.parse() {
                    event.retry = Some(ms);
                }
            }
            _ => {} // comments (empty field name) and unknown fields
        }
    }
    if rest.len() + size > limit {
        return (events, Some(SseError::TooLarge(limit)));
    }
    (events, None)
}

/// What the decoder returns when fed one byte at a time, as `decode_stream` would yield
/// it (without a stream per byte, which is slow).
fn bytewise(body: &[u8], limit: usize) -> Decoded {
    let mut decoder = Decoder::new(limit);
    let mut events = Vec::new();
    for byte in body.chunks(1) {
        if let Err(e) = decoder.feed(byte, &mut events) {
            return (events, Some(e));
        }
    }
    (events, None)
}

fn decode(chunks: &[&[u8]], limit: usize, fail_at_end: bool) -> Decoded {
    let mut items: Vec<Result<Bytes, String>> = chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    if fail_at_end {
        items.push(Err(BODY_ERROR.to_owned()));
    }
    let stream = sse::decode_stream(futures::stream::iter(items), limit);
    let results = futures::executor::block_on(stream.collect::<Vec<_>>());
    let mut events = Vec::new();
    let mut error = None;
    for result in results {
        assert!(error.is_none(), "decode_stream went on after an error");
        match result {
            Ok(event) => events.push(event),
            Err(e) => error = Some(e),
        }
    }
    (events, error)
}
