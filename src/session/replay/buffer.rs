//! The replay buffer of one stream: the events already sent (kept for a client that
//! reconnects) and the messages not yet sent, under one bound of count and bytes.
//!
//! Ids are given when a message is sent, so a connection's priming event always sits
//! right before the first message that connection carries. Past either bound the
//! oldest event goes first: a sent one makes the ids before it unresumable; an unsent
//! one (nobody read the stream for too long) makes every id given so far unresumable,
//! since the client could not tell the gap.

use std::collections::VecDeque;

use bytes::Bytes;

use super::event_id::{EventId, StreamId};
use crate::config::ReplayBufferConfig;
use crate::sse;

/// One stream's events, sent and not yet sent.
#[derive(Debug)]
pub(crate) struct ReplayBuffer {
    stream: StreamId,
    limits: ReplayBufferConfig,
    /// The sequence number the next event (or priming event) gets.
    next_seq: u64,
    /// Events already handed to a connection, oldest first, as encoded then.
    sent: VecDeque<Sent>,
    sent_bytes: usize,
    /// Messages not yet handed to any connection, oldest first.
    pending: VecDeque<String>,
    pending_bytes: usize,
    /// The oldest position a client may resume after: every event after it is here.
    resumable_from: u64,
}

#[derive(Debug)]
struct Sent {
    seq: u64,
    frame: Bytes,
}

impl ReplayBuffer {
    /// An empty buffer for `stream`.
    pub(crate) fn new(stream: StreamId, limits: ReplayBufferConfig) -> ReplayBuffer {
        ReplayBuffer {
            stream,
            limits,
            next_seq: 1,
            sent: VecDeque::new(),
            sent_bytes: 0,
            pending: VecDeque::new(),
            pending_bytes: 0,
            resumable_from: 0,
        }
    }

    /// Queues a message to send; returns how many unsent messages had to be dropped to
    /// stay within the bounds.
    pub(crate) fn push(&mut self, message: String) -> usize {
        self.pending_bytes += message.len();
        self.pending.push_back(message);
        self.trim()
    }

    /// Whether a message of `len` bytes fits beside the unsent ones without dropping any
    /// of them (a lone message always fits: the newest event is always kept).
    pub(crate) fn has_room(&self, len: usize) -> bool {
        self.pending.is_empty()
            || (self.pending.len() < self.limits.messages && self.pending_bytes + len <= self.limits.bytes)
    }

    /// The position of the newest event sent (0 before the first).
    pub(crate) fn position(&self) -> u64 {
        self.next_seq - 1
    }

    /// The id of a priming event at the current position: it takes a sequence number of
    /// its own (ids are never repeated) but holds nothing, so nothing is kept for it.
    pub(crate) fn prime(&mut self) -> EventId {
        let id = EventId { stream: self.stream, seq: self.next_seq };
        self.next_seq += 1;
        id
    }

    /// Whether every event sent after position `after` is still here.
    pub(crate) fn resumable(&self, after: u64) -> bool {
        after >= self.resumable_from && after < self.next_seq
    }

    /// The first event after position `cursor`: a sent one again, or else the oldest
    /// unsent message, which gets its id now. `None` when there is nothing after it.
    pub(crate) fn next_after(&mut self, cursor: u64) -> Option<(u64, Bytes)> {
        let replay = self.sent.partition_point(|s| s.seq <= cursor);
        if let Some(sent) = self.sent.get(replay) {
            return Some((sent.seq, sent.frame.clone()));
        }
        let message = self.pending.pop_front()?;
        self.pending_bytes -= message.len();
        let id = EventId { stream: self.stream, seq: self.next_seq };
        self.next_seq += 1;
        let frame = sse::encode_message(&message, Some(&id.to_string()));
        self.sent_bytes += frame.len();
        self.sent.push_back(Sent { seq: id.seq, frame: frame.clone() });
        self.trim();
        Some((id.seq, frame))
    }

    /// Forgets every event (the stream is complete); no id of it can be resumed.
    pub(crate) fn release(&mut self) {
        self.sent = VecDeque::new();
        self.pending = VecDeque::new();
        self.sent_bytes = 0;
        self.pending_bytes = 0;
        self.resumable_from = self.next_seq;
    }

    /// Events held, sent and unsent.
    pub(crate) fn len(&self) -> usize {
        self.sent.len() + self.pending.len()
    }

    /// Bytes held, sent and unsent.
    pub(crate) fn bytes(&self) -> usize {
        self.sent_bytes + self.pending_bytes
    }

    fn over(&self) -> bool {
        self.len() > self.limits.messages || self.bytes() > self.limits.bytes
    }

    /// Drops the oldest events until both bounds hold, keeping the newest one unless it
    /// was sent already; returns how many unsent messages went.
    fn trim(&mut self) -> usize {
        let mut lost = 0;
        while self.over() && (self.len() > 1 || self.pending.is_empty()) {
            if let Some(sent) = self.sent.pop_front() {
                self.sent_bytes -= sent.frame.len();
                self.resumable_from = self.resumable_from.max(sent.seq);
            } else if let Some(message) = self.pending.pop_front() {
                self.pending_bytes -= message.len();
                self.resumable_from = self.next_seq;
                lost += 1;
            } else {
                break;
            }
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buffer(messages: usize, bytes: usize) -> ReplayBuffer {
        ReplayBuffer::new(StreamId::mint(), ReplayBufferConfig { messages, bytes })
    }

    fn data(frame: &Bytes) -> String {
        let text = String::from_utf8_lossy(frame);
        text.lines().filter_map(|l| l.strip_prefix("data: ")).collect()
    }

    /// Sends everything after `cursor`, returning (seq, data) pairs.
    fn drain(b: &mut ReplayBuffer, mut cursor: u64) -> Vec<(u64, String)> {
        let mut out = Vec::new();
        while let Some((seq, frame)) = b.next_after(cursor) {
            out.push((seq, data(&frame)));
            cursor = seq;
        }
        out
    }

    #[test]
    fn events_get_ids_in_order_when_sent_and_replay_after_a_cursor() {
        let mut b = buffer(16, 1 << 20);
        let stream = b.stream;
        for m in ["a", "b", "c"] {
            b.push(m.into());
        }
        let (seq, frame) = b.next_after(0).unwrap();
        assert_eq!(seq, 1);
        assert!(String::from_utf8_lossy(&frame).starts_with(&format!("id: {stream}-1\n")));
        assert_eq!(drain(&mut b, 1), vec![(2, "b".into()), (3, "c".into())]);
        // A client that saw only the first event gets exactly the two after it, again.
        assert!(b.resumable(1));
        assert_eq!(drain(&mut b, 1), vec![(2, "b".into()), (3, "c".into())]);
        assert!(!b.resumable(4), "a position not reached yet");
    }

    #[test]
    fn a_priming_event_takes_a_position_of_its_own() {
        let mut b = buffer(16, 1 << 20);
        b.push("a".into());
        assert_eq!(drain(&mut b, 0), vec![(1, "a".into())]);
        b.push("b".into());
        let primed = b.prime();
        assert_eq!(primed.seq, 2, "after every event sent, before the unsent one");
        assert!(b.resumable(primed.seq));
        assert_eq!(drain(&mut b, primed.seq), vec![(3, "b".into())]);
        assert_eq!(b.position(), 3);
    }

    #[test]
    fn overflowing_the_count_makes_the_oldest_ids_unresumable() {
        let mut b = buffer(3, 1 << 20);
        for i in 0..5 {
            b.push(format!("m{i}"));
            b.next_after(b.position());
        }
        assert_eq!(b.len(), 3);
        assert!(!b.resumable(0) && !b.resumable(1));
        assert!(b.resumable(2), "events 3, 4 and 5 are all here");
        assert_eq!(drain(&mut b, 2), vec![(3, "m2".into()), (4, "m3".into()), (5, "m4".into())]);
    }

    #[test]
    fn the_byte_bound_holds_and_a_lone_large_event_stays_until_sent() {
        let mut b = buffer(100, 64);
        for _ in 0..4 {
            b.push("x".repeat(20));
        }
        assert!(b.bytes() <= 64);
        let big = "y".repeat(200);
        assert_eq!(b.push(big.clone()), 3, "unsent messages before it go");
        assert_eq!(b.len(), 1);
        let primed = b.prime();
        assert!(!b.resumable(primed.seq - 1), "the dropped messages left a gap");
        assert!(b.resumable(primed.seq));
        let (_, frame) = b.next_after(primed.seq).unwrap();
        assert_eq!(data(&frame), big);
        assert_eq!(b.len(), 0, "sent, it is over the bound alone");
        assert!(!b.resumable(primed.seq));
    }

    #[test]
    fn room_is_counted_on_the_unsent_messages_only() {
        let mut b = buffer(2, 100);
        assert!(b.has_room(1000), "an empty queue takes anything");
        b.push("a".into());
        assert!(b.has_room(10));
        assert!(!b.has_room(100));
        b.push("b".into());
        assert!(!b.has_room(1));
        drain(&mut b, 0);
        assert!(b.has_room(1), "sent events make way");
    }

    #[test]
    fn release_forgets_everything() {
        let mut b = buffer(8, 1 << 20);
        b.push("a".into());
        drain(&mut b, 0);
        b.release();
        assert_eq!((b.len(), b.bytes()), (0, 0));
        assert!(!b.resumable(0) && !b.resumable(1));
    }
}
