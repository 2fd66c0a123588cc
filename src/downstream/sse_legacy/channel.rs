//! The HTTP+SSE sessions of clients, as the transport holds them: each is one open event
//! stream, named by the `sessionId` of its endpoint URL, bound to the caller that opened
//! it and — once the client's `initialize` has been answered — to one of the gateway's
//! sessions.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::identity::Principal;
use crate::identity::same_caller;
use crate::session::cancelled::InFlight;
use crate::session::{OUTBOX_BUFFER, Scope, Session, mint_id};

/// Every open HTTP+SSE stream, by its `sessionId`.
#[derive(Default)]
pub(crate) struct Channels {
    by_id: Mutex<HashMap<String, Arc<Channel>>>,
}

impl Channels {
    /// A new channel for a stream opened on `scope` by `principal`; the receiver feeds
    /// the stream.
    pub(super) fn open(
        &self,
        scope: Scope,
        principal: Option<Arc<Principal>>,
    ) -> (Arc<Channel>, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(OUTBOX_BUFFER);
        let channel = Arc::new(Channel {
            id: mint_id(),
            scope,
            principal,
            tx,
            phase: Mutex::new(Phase::Fresh),
            ended: CancellationToken::new(),
            inflight: InFlight::default(),
        });
        self.by_id.lock().insert(channel.id.clone(), Arc::clone(&channel));
        (channel, rx)
    }

    /// The channel a POST names, while its stream is open.
    pub(super) fn find(&self, id: &str) -> Option<Arc<Channel>> {
        self.by_id.lock().get(id).filter(|c| !c.ended.is_cancelled()).cloned()
    }

    /// Forgets a channel whose stream closed.
    pub(super) fn remove(&self, id: &str) {
        self.by_id.lock().remove(id);
    }
}

/// Where a channel is in the MCP lifecycle.
enum Phase {
    /// No `initialize` yet.
    Fresh,
    /// The client's `initialize` is being handled.
    Initializing,
    /// The gateway session the channel carries.
    Open(Arc<Session>),
    /// The stream closed.
    Closed,
}

/// One client's HTTP+SSE stream.
pub(crate) struct Channel {
    /// The `sessionId` of its endpoint URL.
    pub(super) id: String,
    /// Which upstreams the endpoint it was opened on reaches.
    pub(super) scope: Scope,
    principal: Option<Arc<Principal>>,
    tx: mpsc::Sender<String>,
    phase: Mutex<Phase>,
    /// Fired when the stream must end (its session ended, or no `initialize` came).
    pub(super) ended: CancellationToken,
    /// The client's requests in flight, so that a cancelled one is not answered.
    pub(super) inflight: InFlight,
}

impl Channel {
    /// Whether a POST made as `principal` may use the channel: the caller that opened it.
    pub(super) fn admits(&self, principal: Option<&Principal>) -> bool {
        same_caller(self.principal.as_deref(), principal)
    }

    /// Queues a message for the stream; false when the stream is gone. Waits while the
    /// queue is full, so a client that stops reading slows its own requests only.
    pub(super) async fn send(&self, message: String) -> bool {
        self.tx.send(message).await.is_ok()
    }

    /// The sender feeding the stream, for messages related to one request.
    pub(super) fn sender(&self) -> mpsc::Sender<String> {
        self.tx.clone()
    }

    /// The gateway session, once `initialize` has been answered.
    pub(super) fn session(&self) -> Option<Arc<Session>> {
        match &*self.phase.lock() {
            Phase::Open(session) => Some(Arc::clone(session)),
            _ => None,
        }
    }

    /// Claims the channel's `initialize`; false when one is running or was answered.
    pub(super) fn begin_initialize(&self) -> bool {
        let mut phase = self.phase.lock();
        if !matches!(*phase, Phase::Fresh) {
            return false;
        }
        *phase = Phase::Initializing;
        true
    }

    /// The `initialize` failed: the client may try again.
    pub(super) fn initialize_failed(&self) {
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Initializing) {
            *phase = Phase::Fresh;
        }
    }

    /// Binds the session `initialize` opened; false (and the caller must end it) when the
    /// stream closed meanwhile.
    pub(super) fn opened(&self, session: Arc<Session>) -> bool {
        let mut phase = self.phase.lock();
        if matches!(*phase, Phase::Closed) {
            return false;
        }
        *phase = Phase::Open(session);
        true
    }

    /// The stream closed: returns the session to end, if one was open.
    pub(super) fn close(&self) -> Option<Arc<Session>> {
        self.ended.cancel();
        match std::mem::replace(&mut *self.phase.lock(), Phase::Closed) {
            Phase::Open(session) => Some(session),
            _ => None,
        }
    }
}
