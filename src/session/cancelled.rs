//! The client's requests in flight on a transport, each with whether the client
//! cancelled it: the answer to a cancelled request is withheld, since the receiver of
//! `notifications/cancelled` sends nothing for that request. The fronts whose answers
//! share one channel (stdio's stdout, an HTTP+SSE stream) keep one per channel; a
//! Streamable HTTP session keeps one, since its cancellations arrive on other POSTs
//! than the requests they cancel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;

use crate::hashing::Map as HashMap;
use crate::jsonrpc::{self, Id, Notification};
use crate::mcp::{meta, method};

/// The requests in flight, by id.
#[derive(Clone, Default)]
pub(crate) struct InFlight(Arc<Mutex<HashMap<Id, Arc<AtomicBool>>>>);

impl InFlight {
    /// Tracks a request until the returned guard drops; `None` when its id is already
    /// in flight (admission refuses that request, and the first one keeps the entry).
    pub(crate) fn track(&self, id: &Id) -> Option<Tracked> {
        let mut map = self.0.lock();
        if map.contains_key(id) {
            return None;
        }
        let flag = Arc::new(AtomicBool::new(false));
        map.insert(id.clone(), Arc::clone(&flag));
        Some(Tracked { inflight: self.clone(), id: id.clone(), flag })
    }

    /// Marks the request a `notifications/cancelled` names, if it is in flight; other
    /// notifications change nothing.
    pub(crate) fn note(&self, n: &Notification) {
        if n.method == method::CANCELLED
            && let Some(p) = jsonrpc::view::<meta::CancelledParams>(n.params.as_deref())
            && let Some(id) = Id::from_value(&p.request_id)
            && let Some(flag) = self.0.lock().get(&id)
        {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

/// One tracked request; forgotten on drop.
pub(crate) struct Tracked {
    inflight: InFlight,
    id: Id,
    flag: Arc<AtomicBool>,
}

impl Tracked {
    /// Whether the client cancelled the request.
    pub(crate) fn cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut map = self.inflight.0.lock();
        if map.get(&self.id).is_some_and(|flag| Arc::ptr_eq(flag, &self.flag)) {
            map.remove(&self.id);
        }
    }
}
