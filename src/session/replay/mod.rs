//! Resumable SSE streams towards Streamable HTTP clients (legacy session era).
//!
//! Every SSE stream seawall opens towards such a client — the session's GET stream and
//! each POST answered with SSE — is a [`ResumableStream`]: producers push messages into
//! its [`buffer::ReplayBuffer`] and the connection currently attached to it, a
//! [`Reader`], sends them with ids `<stream>-<seq>` ([`EventId`]). The stream outlives
//! its connections: a client whose connection drops reconnects with `GET` and
//! `Last-Event-ID`, a new reader takes the stream over (ending any reader still
//! attached), replays the events after that id and goes on with the stream.
//!
//! Memory is bounded per stream by `session.replay_buffer` and per session by the
//! streams it may hold: its GET stream, the POST streams in flight (at most
//! `limits.max_in_flight_per_session`) and at most [`RETAINED_FINISHED`] finished
//! ones whose answer no connection carried to the end. A stream whose answer was sent
//! is released at once; every stream goes with its session.

pub(crate) mod buffer;
mod event_id;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use tokio::sync::watch;

pub(crate) use event_id::{EventId, StreamId};

use crate::config::ReplayBufferConfig;
use crate::sse;
use buffer::ReplayBuffer;

/// Finished POST streams whose answer was not carried to the end, kept per session for
/// a client that resumes them; past this the oldest is released.
pub(crate) const RETAINED_FINISHED: usize = 16;

/// The `retry` of priming events: how long a client waits before it reconnects.
pub(crate) const RETRY: Duration = Duration::from_millis(1000);

/// Whether streams of a session of protocol `version` start with a priming event: from
/// 2025-11-25 on (earlier clients may not accept an event with empty data). Versions
/// are dates, so they compare as text.
pub(crate) fn primes(version: &str) -> bool {
    version >= "2025-11-25"
}

/// Where a new reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// A new connection: with the messages not yet sent, after a priming event if asked.
    Fresh {
        /// Send a priming event first.
        prime: bool,
    },
    /// A client resuming after the event at this position.
    After(u64),
}

/// Why a reader could not attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AttachError {
    /// Another connection reads the stream and this one may not take it over.
    #[error("another connection reads this stream")]
    Busy,
    /// Events after the position asked for are gone (or the position was never reached).
    #[error("the events after this position are no longer kept")]
    NotResumable,
}

/// One SSE stream towards a client.
#[derive(Debug)]
pub(crate) struct ResumableStream {
    id: StreamId,
    state: Mutex<State>,
    /// Bumped on every change, for readers waiting for events and producers for room.
    changed: watch::Sender<()>,
}

#[derive(Debug)]
struct State {
    buffer: ReplayBuffer,
    /// The answer is in: nothing follows it.
    finished: bool,
    /// A reader sent everything up to the answer: the stream is done with.
    complete: bool,
    /// The attached reader's number, 0 when none.
    reader: u64,
    /// Readers attached so far.
    readers: u64,
}

impl ResumableStream {
    fn new(limits: ReplayBufferConfig) -> Arc<ResumableStream> {
        let id = StreamId::mint();
        let state =
            State { buffer: ReplayBuffer::new(id, limits), finished: false, complete: false, reader: 0, readers: 0 };
        Arc::new(ResumableStream { id, state: Mutex::new(state), changed: watch::Sender::new(()) })
    }

    /// The stream's identity, the first half of its event ids.
    pub(crate) fn id(&self) -> StreamId {
        self.id
    }

    fn wake(&self) {
        self.changed.send_replace(());
    }

    /// Queues a message. While a connection reads the stream this waits until the
    /// unsent messages leave room (the client's pace holds the producer back, as a
    /// channel would); with nobody reading it never waits, and the oldest events give
    /// way instead.
    pub(crate) async fn push(&self, message: String) {
        loop {
            let mut changed = self.changed.subscribe();
            {
                let mut state = self.state.lock();
                if state.reader == 0 || state.buffer.has_room(message.len()) {
                    let lost = state.buffer.push(message);
                    drop(state);
                    if lost > 0 {
                        tracing::warn!(stream = %self.id, lost, "dropped messages nobody read: the replay buffer is full");
                    }
                    self.wake();
                    return;
                }
            }
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// Queues the answer, the stream's last message; with none (withheld), the stream
    /// ends after what was queued before.
    pub(crate) async fn finish(&self, answer: Option<String>) {
        if let Some(answer) = answer {
            self.push(answer).await;
        }
        self.state.lock().finished = true;
        self.wake();
    }

    /// Attaches a reader starting at `start`. `take_over` lets it end the reader already
    /// attached (a client resuming); without it a reader already attached is `Busy`.
    pub(crate) fn attach(self: &Arc<Self>, start: Start, take_over: bool) -> Result<Reader, AttachError> {
        let mut state = self.state.lock();
        if state.reader != 0 && !take_over {
            return Err(AttachError::Busy);
        }
        let (cursor, priming) = match start {
            Start::After(seq) if state.buffer.resumable(seq) => (seq, None),
            Start::After(_) => return Err(AttachError::NotResumable),
            Start::Fresh { prime: true } => {
                let id = state.buffer.prime();
                (id.seq, Some(id))
            }
            Start::Fresh { prime: false } => (state.buffer.position(), None),
        };
        state.readers += 1;
        state.reader = state.readers;
        let number = state.reader;
        drop(state);
        // A reader taken over sees it on its next poll.
        self.wake();
        Ok(Reader { stream: Arc::clone(self), number, cursor, priming })
    }

    /// Whether a reader is attached.
    pub(crate) fn is_attached(&self) -> bool {
        self.state.lock().reader != 0
    }

    /// Whether the answer is in.
    #[cfg(test)]
    pub(crate) fn is_finished(&self) -> bool {
        self.state.lock().finished
    }

    /// Events held and their bytes.
    #[cfg(test)]
    pub(crate) fn held(&self) -> (usize, usize) {
        let state = self.state.lock();
        (state.buffer.len(), state.buffer.bytes())
    }
}

/// The connection attached to a stream: yields its encoded events, ends when the
/// answer has been sent or another connection took the stream over.
#[derive(Debug)]
pub(crate) struct Reader {
    stream: Arc<ResumableStream>,
    number: u64,
    cursor: u64,
    priming: Option<EventId>,
}

impl Reader {
    /// The next event to write, waiting for one; `None` at the end.
    pub(crate) async fn next(&mut self) -> Option<Bytes> {
        if let Some(id) = self.priming.take() {
            return Some(sse::encode_priming(&id.to_string(), RETRY));
        }
        loop {
            let mut changed = self.stream.changed.subscribe();
            {
                let mut state = self.stream.state.lock();
                if state.reader != self.number {
                    return None;
                }
                if let Some((seq, frame)) = state.buffer.next_after(self.cursor) {
                    self.cursor = seq;
                    drop(state);
                    self.stream.wake();
                    return Some(frame);
                }
                if state.finished {
                    // Everything up to the answer went out on this connection.
                    state.complete = true;
                    state.buffer.release();
                    return None;
                }
            }
            if changed.changed().await.is_err() {
                return None;
            }
        }
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let mut state = self.stream.state.lock();
        if state.reader == self.number {
            state.reader = 0;
            drop(state);
            // Producers held back by this connection's pace may go on.
            self.stream.wake();
        }
    }
}

/// The streams of one session.
#[derive(Debug, Default)]
pub(crate) struct Streams {
    /// The GET stream, made when the client first opens it.
    get: OnceLock<Arc<ResumableStream>>,
    /// POST streams not yet released, by id (oldest first).
    posts: Mutex<BTreeMap<StreamId, Arc<ResumableStream>>>,
}

impl Streams {
    /// The session's GET stream, and whether this call made it.
    pub(crate) fn get_stream(&self, limits: ReplayBufferConfig) -> (Arc<ResumableStream>, bool) {
        let mut made = false;
        let stream = self.get.get_or_init(|| {
            made = true;
            ResumableStream::new(limits)
        });
        (Arc::clone(stream), made)
    }

    /// Whether a connection reads the GET stream now.
    pub(crate) fn get_stream_read(&self) -> bool {
        self.get.get().is_some_and(|s| s.is_attached())
    }

    /// The GET stream's id, if it was opened.
    pub(crate) fn get_stream_id(&self) -> Option<StreamId> {
        self.get.get().map(|s| s.id)
    }

    /// A new stream for a POST answered with SSE.
    pub(crate) fn open_post(&self, limits: ReplayBufferConfig) -> Arc<ResumableStream> {
        let stream = ResumableStream::new(limits);
        let mut posts = self.posts.lock();
        prune(&mut posts);
        posts.insert(stream.id, Arc::clone(&stream));
        stream
    }

    /// The POST stream `id`, unless it was released (or is not this session's).
    pub(crate) fn post(&self, id: StreamId) -> Option<Arc<ResumableStream>> {
        let mut posts = self.posts.lock();
        prune(&mut posts);
        posts.get(&id).cloned()
    }

    /// How many POST streams are held.
    #[cfg(test)]
    pub(crate) fn posts(&self) -> usize {
        let mut posts = self.posts.lock();
        prune(&mut posts);
        posts.len()
    }

    /// Releases every POST stream (the session ends). Readers and producers that hold
    /// one finish with it; nothing new can find it.
    pub(crate) fn clear(&self) {
        self.posts.lock().clear();
    }
}

/// Releases the complete streams, and the oldest finished ones nobody reads beyond
/// [`RETAINED_FINISHED`].
fn prune(posts: &mut BTreeMap<StreamId, Arc<ResumableStream>>) {
    let mut unread = Vec::new();
    posts.retain(|id, stream| {
        let state = stream.state.lock();
        if state.complete {
            return false;
        }
        if state.finished && state.reader == 0 {
            unread.push(*id);
        }
        true
    });
    let excess = unread.len().saturating_sub(RETAINED_FINISHED);
    for id in unread.into_iter().take(excess) {
        if let Some(stream) = posts.remove(&id) {
            tracing::debug!(stream = %id, "released a finished stream nobody resumed");
            stream.state.lock().buffer.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn limits(messages: usize) -> ReplayBufferConfig {
        ReplayBufferConfig { messages, bytes: 1 << 20 }
    }

    /// The id and data of an encoded event.
    fn parse(frame: &Bytes) -> (String, String) {
        let text = String::from_utf8_lossy(frame);
        let id = text.lines().find_map(|l| l.strip_prefix("id: ")).unwrap_or_default().to_owned();
        let data = text.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
        (id, data)
    }

    async fn next(reader: &mut Reader) -> Option<(String, String)> {
        tokio::time::timeout(Duration::from_secs(5), reader.next())
            .await
            .expect("an event or the end")
            .map(|f| parse(&f))
    }

    fn seq_of(id: &str) -> u64 {
        id.parse::<EventId>().unwrap().seq
    }

    #[tokio::test]
    async fn a_dropped_reader_is_resumed_with_exactly_the_rest_then_the_stream_ends() {
        let streams = Streams::default();
        let stream = streams.open_post(limits(16));
        let mut first = stream.attach(Start::Fresh { prime: true }, false).unwrap();
        let (primed, data) = next(&mut first).await.unwrap();
        assert_eq!(data, "", "the priming event carries no data");
        assert_eq!(primed, format!("{}-1", stream.id()));
        stream.push("p1".into()).await;
        stream.push("p2".into()).await;
        let (seen, data) = next(&mut first).await.unwrap();
        assert_eq!(data, "p1");
        drop(first);
        assert!(!stream.is_attached());
        // Nobody reads: the rest and the answer are kept.
        stream.push("p3".into()).await;
        stream.finish(Some("answer".into())).await;
        assert!(stream.is_finished());

        let found = streams.post(stream.id()).expect("kept for a resume");
        let mut resumed = found.attach(Start::After(seq_of(&seen)), true).unwrap();
        let mut rest = Vec::new();
        while let Some((id, data)) = next(&mut resumed).await {
            rest.push(data);
            assert!(id.starts_with(&format!("{}-", stream.id())));
        }
        assert_eq!(rest, ["p2", "p3", "answer"]);
        drop(resumed);
        assert!(streams.post(stream.id()).is_none(), "released once its answer was sent");
        assert_eq!(streams.posts(), 0);
    }

    #[tokio::test]
    async fn a_resume_takes_the_stream_over_and_a_plain_reader_does_not() {
        let streams = Streams::default();
        let (stream, made) = streams.get_stream(limits(16));
        assert!(made);
        assert!(!streams.get_stream(limits(16)).1, "one GET stream per session");
        let mut old = stream.attach(Start::Fresh { prime: false }, false).unwrap();
        assert_eq!(stream.attach(Start::Fresh { prime: false }, false).unwrap_err(), AttachError::Busy);
        stream.push("a".into()).await;
        let (id, _) = next(&mut old).await.unwrap();
        let mut new = stream.attach(Start::After(seq_of(&id)), true).unwrap();
        assert_eq!(next(&mut old).await, None, "the old connection ends");
        stream.push("b".into()).await;
        assert_eq!(next(&mut new).await.map(|e| e.1), Some("b".into()));
        drop(old);
        assert!(stream.is_attached(), "dropping the old reader leaves the new one attached");
    }

    #[tokio::test]
    async fn a_position_the_buffer_no_longer_covers_is_not_resumable() {
        let streams = Streams::default();
        let (stream, _) = streams.get_stream(limits(2));
        let mut reader = stream.attach(Start::Fresh { prime: false }, false).unwrap();
        let mut ids = Vec::new();
        for i in 0..4 {
            stream.push(format!("m{i}")).await;
            ids.push(next(&mut reader).await.unwrap().0);
        }
        drop(reader);
        assert_eq!(stream.attach(Start::After(seq_of(&ids[0])), true).unwrap_err(), AttachError::NotResumable);
        assert_eq!(stream.attach(Start::After(99), true).unwrap_err(), AttachError::NotResumable, "never reached");
        let mut resumed = stream.attach(Start::After(seq_of(&ids[1])), true).unwrap();
        assert_eq!(next(&mut resumed).await.map(|e| e.1), Some("m2".into()));
        assert_eq!(next(&mut resumed).await.map(|e| e.1), Some("m3".into()));
        assert_eq!(stream.held().0, 2);
    }

    #[tokio::test]
    async fn producers_keep_the_pace_of_an_attached_reader_only() {
        let streams = Streams::default();
        let stream = streams.open_post(limits(2));
        // Nobody reads: pushes never wait, the oldest give way.
        for i in 0..5 {
            tokio::time::timeout(Duration::from_secs(1), stream.push(format!("m{i}"))).await.expect("no wait");
        }
        assert_eq!(stream.held().0, 2);
        let mut reader = stream.attach(Start::Fresh { prime: false }, false).unwrap();
        let blocked = tokio::time::timeout(Duration::from_millis(100), stream.push("m5".into())).await;
        assert!(blocked.is_err(), "a full queue waits for the reader");
        let producer = {
            let stream = Arc::clone(&stream);
            tokio::spawn(async move { stream.push("m6".into()).await })
        };
        assert_eq!(next(&mut reader).await.map(|e| e.1), Some("m3".into()));
        tokio::time::timeout(Duration::from_secs(5), producer).await.expect("room made").unwrap();
        assert_eq!(next(&mut reader).await.map(|e| e.1), Some("m4".into()));
        assert_eq!(next(&mut reader).await.map(|e| e.1), Some("m6".into()));
    }

    #[tokio::test]
    async fn finished_streams_nobody_reads_are_bounded_per_session() {
        let streams = Streams::default();
        let mut ids = Vec::new();
        for i in 0..RETAINED_FINISHED + 4 {
            let stream = streams.open_post(limits(4));
            stream.finish(Some(format!("answer {i}"))).await;
            ids.push(stream.id());
        }
        streams.open_post(limits(4));
        assert_eq!(streams.posts(), RETAINED_FINISHED + 1, "the retained ones and the open one");
        assert!(streams.post(ids[0]).is_none(), "the oldest went first");
        assert!(streams.post(ids[ids.len() - 1]).is_some());
        streams.clear();
        assert_eq!(streams.posts(), 0);
    }

    #[test]
    fn priming_starts_with_2025_11_25() {
        assert!(primes("2025-11-25"));
        assert!(!primes("2025-06-18"));
        assert!(!primes("2025-03-26"));
    }
}
