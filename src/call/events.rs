//! What an upstream says about a call besides its answer, and where it goes.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::jsonrpc::{Notification, Request};
use crate::mcp::method;

/// Capacity of event channels; a peer that floods beyond it loses notifications, not memory.
pub(crate) const EVENT_BUFFER: usize = 1024;

/// Something an upstream says that is not the answer to a call.
#[derive(Debug, Clone)]
pub(crate) enum UpstreamEvent {
    /// A notification (progress, logging, list_changed, resources/updated, ...).
    Notification(Notification),
    /// A server-initiated request (sampling, elicitation, roots/list, ...); answer it
    /// with [`Transport::respond`](super::Transport::respond) on the link it came from.
    Request(Request),
    /// The upstream chose to answer this call with an SSE stream; a transparent gateway
    /// answers its client the same way.
    Streaming,
}

/// An upstream event tagged with the upstream it came from (so that a session knows
/// which link to answer a server-initiated request on).
#[derive(Debug, Clone)]
pub(crate) struct Tagged {
    /// The upstream's name.
    pub upstream: Arc<str>,
    /// Which of the upstream's endpoints said it (for upstreams with several).
    pub endpoint: Option<u16>,
    /// What it said.
    pub event: UpstreamEvent,
}

/// A queue of tagged events from any number of senders to one receiver, holding at most
/// `capacity` of them: one per client request (what its upstreams say about it) and one
/// per session (what they say about nothing in particular).
///
/// A request's queue is made for every request and almost always stays empty, so it is
/// one small allocation and a lock that is never contended, not a channel with blocks
/// of slots allocated up front.
pub(crate) fn events(capacity: usize) -> (EventTx, EventRx) {
    let shared = Arc::new(Queue {
        capacity,
        state: Mutex::new(QueueState { events: VecDeque::new(), waker: None, senders: 1, receiving: true }),
    });
    (EventTx { queue: Arc::clone(&shared) }, EventRx { queue: shared })
}

#[derive(Debug)]
struct Queue {
    capacity: usize,
    state: Mutex<QueueState>,
}

#[derive(Debug)]
struct QueueState {
    events: VecDeque<Tagged>,
    /// The receiver waiting for an event, if it is.
    waker: Option<Waker>,
    /// Live senders: with none left and nothing queued, the receiver has seen the end.
    senders: usize,
    /// Whether the receiver still exists: events sent after it went are refused.
    receiving: bool,
}

/// Why an event was not queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The queue holds its capacity.
    Full,
    /// The receiver is gone.
    Closed,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Refused::Full => "the queue is full",
            Refused::Closed => "the receiver is gone",
        })
    }
}

/// The sending side of [`events`].
#[derive(Debug)]
pub(crate) struct EventTx {
    queue: Arc<Queue>,
}

impl EventTx {
    /// Queues `event` without waiting.
    pub(crate) fn try_send(&self, event: Tagged) -> Result<(), Refused> {
        let waker = {
            let mut state = self.queue.state.lock();
            if !state.receiving {
                return Err(Refused::Closed);
            }
            if state.events.len() >= self.queue.capacity {
                return Err(Refused::Full);
            }
            state.events.push_back(event);
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl Clone for EventTx {
    fn clone(&self) -> EventTx {
        self.queue.state.lock().senders += 1;
        EventTx { queue: Arc::clone(&self.queue) }
    }
}

impl Drop for EventTx {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.queue.state.lock();
            state.senders -= 1;
            if state.senders == 0 { state.waker.take() } else { None }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

/// The receiving side of [`events`].
#[derive(Debug)]
pub(crate) struct EventRx {
    queue: Arc<Queue>,
}

impl EventRx {
    /// The next event; `None` once every sender is gone and nothing is left.
    pub(crate) async fn recv(&mut self) -> Option<Tagged> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// [`EventRx::recv`] as a poll.
    pub(crate) fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Tagged>> {
        let mut state = self.queue.state.lock();
        if let Some(event) = state.events.pop_front() {
            return Poll::Ready(Some(event));
        }
        if state.senders == 0 {
            return Poll::Ready(None);
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// The next event already queued, if there is one.
    pub(crate) fn try_recv(&mut self) -> Option<Tagged> {
        self.queue.state.lock().events.pop_front()
    }
}

impl Drop for EventRx {
    fn drop(&mut self) {
        let left = {
            let mut state = self.queue.state.lock();
            state.receiving = false;
            state.waker = None;
            std::mem::take(&mut state.events)
        };
        // Dropped outside the lock.
        drop(left);
    }
}

/// Where upstream events go: a queue, the name of the upstream sending into it, and
/// optionally an [`Activity`] that counts them.
#[derive(Debug, Clone)]
pub(crate) struct EventSink {
    upstream: Arc<str>,
    endpoint: Option<u16>,
    tx: EventTx,
    activity: Option<Arc<Activity>>,
}

impl EventSink {
    /// A sink that tags events with `upstream`.
    pub(crate) fn new(upstream: Arc<str>, tx: EventTx) -> EventSink {
        EventSink { upstream, endpoint: None, tx, activity: None }
    }

    /// The same sink, tagging events with the endpoint they come from.
    pub(crate) fn with_endpoint(mut self, endpoint: u16) -> EventSink {
        self.set_endpoint(endpoint);
        self
    }

    /// Tags this sink's events with the endpoint they come from, in place.
    pub(crate) fn set_endpoint(&mut self, endpoint: u16) {
        self.endpoint = Some(endpoint);
    }

    /// Counts this sink's events in `activity` from now on.
    pub(crate) fn set_activity(&mut self, activity: Arc<Activity>) {
        self.activity = Some(activity);
    }

    /// The activity counter, if any.
    pub(crate) fn activity(&self) -> Option<&Arc<Activity>> {
        self.activity.as_ref()
    }

    /// Sends without waiting; a full or closed sink drops the event with a log line.
    pub(crate) fn send(&self, event: UpstreamEvent) {
        if let Some(activity) = &self.activity {
            activity.record(&event);
        }
        let tagged = Tagged { upstream: Arc::clone(&self.upstream), endpoint: self.endpoint, event };
        if let Err(e) = self.tx.try_send(tagged) {
            tracing::debug!(error = %e, "dropped an upstream event: the receiver is gone or full");
        }
    }
}

/// Counts what an upstream says about one call, so the deadline can be extended on
/// progress and the retry layer knows whether anything reached the client.
///
/// Progress is a time, not a signal: the layers whose deadlines it extends read it when
/// their timers fire, so a call costs no channel and a progress notification wakes no one.
#[derive(Debug)]
pub(crate) struct Activity {
    relayed: AtomicU64,
    /// When the last progress notification came, as nanoseconds after `origin` plus one;
    /// 0 while none has.
    progressed: AtomicU64,
    origin: Instant,
}

impl Default for Activity {
    fn default() -> Self {
        Activity { relayed: AtomicU64::new(0), progressed: AtomicU64::new(0), origin: Instant::now() }
    }
}

impl Activity {
    /// Records one event.
    pub(crate) fn record(&self, event: &UpstreamEvent) {
        match event {
            UpstreamEvent::Notification(n) => {
                self.relayed.fetch_add(1, Ordering::Relaxed);
                if n.method == method::PROGRESS {
                    let since = u64::try_from(self.origin.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
                    self.progressed.fetch_max(since + 1, Ordering::AcqRel);
                }
            }
            UpstreamEvent::Request(_) => {
                self.relayed.fetch_add(1, Ordering::Relaxed);
            }
            UpstreamEvent::Streaming => {}
        }
    }

    /// Messages relayed towards the client so far.
    pub(crate) fn relayed(&self) -> u64 {
        self.relayed.load(Ordering::Relaxed)
    }

    /// When the last progress notification came, if one has.
    pub(crate) fn last_progress(&self) -> Option<Instant> {
        match self.progressed.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.origin + Duration::from_nanos(n - 1)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Notification;

    fn event(n: u64) -> Tagged {
        let note = Notification { method: format!("n{n}"), params: None };
        Tagged { upstream: Arc::from("u"), endpoint: None, event: UpstreamEvent::Notification(note) }
    }

    fn method(tagged: Option<Tagged>) -> Option<String> {
        match tagged?.event {
            UpstreamEvent::Notification(n) => Some(n.method),
            _ => None,
        }
    }

    #[test]
    fn events_come_in_order_up_to_the_capacity() {
        let (tx, mut rx) = events(2);
        assert_eq!(tx.try_send(event(1)), Ok(()));
        assert_eq!(tx.clone().try_send(event(2)), Ok(()));
        assert_eq!(tx.try_send(event(3)), Err(Refused::Full));
        assert_eq!(method(rx.try_recv()).as_deref(), Some("n1"));
        assert_eq!(tx.try_send(event(4)), Ok(()));
        assert_eq!(method(rx.try_recv()).as_deref(), Some("n2"));
        assert_eq!(method(rx.try_recv()).as_deref(), Some("n4"));
        assert!(rx.try_recv().is_none());
        drop(rx);
        assert_eq!(tx.try_send(event(5)), Err(Refused::Closed), "no receiver, nothing kept");
    }

    #[tokio::test]
    async fn the_receiver_is_woken_by_an_event_and_sees_the_end_when_the_senders_are_gone() {
        let (tx, mut rx) = events(8);
        let other = tx.clone();
        let waiting = tokio::spawn(async move {
            let first = method(rx.recv().await);
            let second = method(rx.recv().await);
            let end = rx.recv().await.is_none();
            (first, second, end)
        });
        tokio::task::yield_now().await;
        tx.try_send(event(1)).unwrap();
        drop(tx);
        tokio::task::yield_now().await;
        other.try_send(event(2)).unwrap();
        drop(other);
        let (first, second, end) = waiting.await.unwrap();
        assert_eq!((first.as_deref(), second.as_deref(), end), (Some("n1"), Some("n2"), true));
    }
}
