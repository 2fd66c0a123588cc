//! What an upstream says about a call besides its answer, and where it goes.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::jsonrpc::{Notification, Request};
use crate::mcp::method;

/// Capacity of event channels; a peer that floods beyond it loses notifications, not memory.
pub const EVENT_BUFFER: usize = 1024;

/// Something an upstream says that is not the answer to a call.
#[derive(Debug, Clone)]
pub enum UpstreamEvent {
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
pub struct Tagged {
    /// The upstream's name.
    pub upstream: Arc<str>,
    /// Which of the upstream's endpoints said it (for upstreams with several).
    pub endpoint: Option<u16>,
    /// What it said.
    pub event: UpstreamEvent,
}

/// Where upstream events go: a channel, the name of the upstream sending into it, and
/// optionally an [`Activity`] that counts them.
#[derive(Debug, Clone)]
pub struct EventSink {
    upstream: Arc<str>,
    endpoint: Option<u16>,
    tx: mpsc::Sender<Tagged>,
    activity: Option<Arc<Activity>>,
}

impl EventSink {
    /// A sink that tags events with `upstream`.
    pub fn new(upstream: Arc<str>, tx: mpsc::Sender<Tagged>) -> EventSink {
        EventSink { upstream, endpoint: None, tx, activity: None }
    }

    /// The same sink, tagging events with the endpoint they come from.
    pub fn with_endpoint(mut self, endpoint: u16) -> EventSink {
        self.endpoint = Some(endpoint);
        self
    }

    /// The same sink, also counting its events in `activity`.
    pub fn with_activity(mut self, activity: Arc<Activity>) -> EventSink {
        self.activity = Some(activity);
        self
    }

    /// The activity counter, if any.
    pub fn activity(&self) -> Option<&Arc<Activity>> {
        self.activity.as_ref()
    }

    /// Sends without waiting; a full or closed sink drops the event with a log line.
    pub fn send(&self, event: UpstreamEvent) {
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
pub struct Activity {
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
    pub fn record(&self, event: &UpstreamEvent) {
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
    pub fn relayed(&self) -> u64 {
        self.relayed.load(Ordering::Relaxed)
    }

    /// When the last progress notification came, if one has.
    pub fn last_progress(&self) -> Option<Instant> {
        match self.progressed.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.origin + Duration::from_nanos(n - 1)),
        }
    }
}
