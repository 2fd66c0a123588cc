//! SSE event ids towards clients: `<stream>-<seq>`, both decimal.
//!
//! Stream numbers come from one counter for the whole process, so an id names at most
//! one stream of one session: the id of another session names no stream of this one.
//! Sequence numbers count up from 1 within a stream (0 is the position before its first
//! event), so every id is unique within its session.

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};

/// One SSE stream towards a client: a session's GET stream or one POST answered with SSE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct StreamId(u64);

static NEXT_STREAM: AtomicU64 = AtomicU64::new(1);

impl StreamId {
    /// A stream number no other stream of this process has.
    pub(crate) fn mint() -> StreamId {
        StreamId(NEXT_STREAM.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The id of one event: its stream and its position there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EventId {
    /// The stream the event was sent on.
    pub(crate) stream: StreamId,
    /// Its position in that stream, from 1.
    pub(crate) seq: u64,
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.stream, self.seq)
    }
}

/// A `Last-Event-ID` that is not of the form seawall writes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an event id of the form <stream>-<seq>")]
pub(crate) struct MalformedEventId;

impl FromStr for EventId {
    type Err = MalformedEventId;

    fn from_str(text: &str) -> Result<EventId, MalformedEventId> {
        let (stream, seq) = text.split_once('-').ok_or(MalformedEventId)?;
        Ok(EventId { stream: StreamId(decimal(stream)?), seq: decimal(seq)? })
    }
}

/// Plain decimal digits only: `u64::from_str` would also take a leading `+`.
fn decimal(text: &str) -> Result<u64, MalformedEventId> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(MalformedEventId);
    }
    text.parse().map_err(|_| MalformedEventId)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_their_text() {
        let id = EventId { stream: StreamId(17), seq: 4 };
        assert_eq!(id.to_string(), "17-4");
        assert_eq!("17-4".parse::<EventId>(), Ok(id));
        assert_eq!("17-0".parse::<EventId>().map(|e| e.seq), Ok(0));
        let max = format!("{0}-{0}", u64::MAX);
        assert_eq!(max.parse::<EventId>().map(|e| e.to_string()), Ok(max));
    }

    #[test]
    fn anything_else_is_malformed() {
        for text in [
            "",
            "17",
            "17-",
            "-4",
            "+17-4",
            "17-+4",
            "17-4-1",
            "a-1",
            "1-b",
            " 1-2",
            "1-2 ",
            "1_2",
            "99999999999999999999-1",
        ] {
            assert_eq!(text.parse::<EventId>(), Err(MalformedEventId), "{text:?}");
        }
    }

    #[test]
    fn stream_numbers_are_never_reused() {
        let a = StreamId::mint();
        let b = StreamId::mint();
        assert!(b > a);
        let first = EventId { stream: a, seq: 1 }.to_string();
        assert_ne!(first, EventId { stream: b, seq: 1 }.to_string());
    }
}
