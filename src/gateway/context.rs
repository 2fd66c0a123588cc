//! The contexts of modern-era (2026-07-28) clients. A *context* is a session of
//! seawall's own that stands for every modern client that shares a scope, a principal and
//! an envelope (protocol version, capabilities, client info): it opens the upstream
//! sessions once and is reused by every later request of that kind, and it expires like
//! any idle session. It sits in the session table (so it counts against
//! `session.max_sessions`, is reaped when idle and closed at shutdown) but it is never
//! given to a client, and no client can address it.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use serde_json::{Value, json};
use tracing::Instrument as _;

use super::{Gateway, Leaving};
use crate::call::GatewayError;
use crate::identity::Principal;
use crate::jsonrpc::Id;
use crate::mcp::modern::Envelope;
use crate::mcp::trace_context::RequestTrace;
use crate::mcp::{self as mcp_era};
use crate::session::table::{Holder, TableFull};
use crate::session::{Front, Scope, Session, Slot};
use crate::telemetry::trace::spans;

/// The modern contexts, by what their clients share.
#[derive(Default)]
pub(super) struct Contexts {
    by_key: Mutex<HashMap<String, Arc<Session>>>,
    /// Resource subscriptions made upstream for contexts (`context \0 uri`), counted by
    /// the listen streams that asked for them.
    pub(super) subscribed: Mutex<HashMap<String, usize>>,
}

/// The number of the next id of seawall's own for a request made in a context.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id of seawall's own for a request made in a context: the modern clients of one
/// context choose their ids independently.
pub(super) fn internal_id() -> Id {
    Id::string(&format!("seawall-modern-{}", NEXT_ID.fetch_add(1, Ordering::Relaxed)))
}

impl Contexts {
    fn live(&self, key: &str) -> Option<Arc<Session>> {
        let session = self.by_key.lock().get(key).cloned()?;
        (!session.ended().is_cancelled()).then_some(session)
    }

    /// Keeps `session` under `key` unless a live one got there first (then returns that
    /// one); forgets contexts that have ended.
    fn insert(&self, key: String, session: &Arc<Session>) -> Option<Arc<Session>> {
        let mut map = self.by_key.lock();
        map.retain(|_, s| !s.ended().is_cancelled());
        if let Some(existing) = map.get(&key) {
            return Some(Arc::clone(existing));
        }
        map.insert(key, Arc::clone(session));
        None
    }
}

/// The client capabilities a context offers its upstreams: the client's own, without
/// `tasks` (which the modern era removed).
fn offered_capabilities(capabilities: &Value) -> Value {
    let mut caps = capabilities.as_object().cloned().unwrap_or_default();
    caps.remove("tasks");
    Value::Object(caps)
}

impl Gateway {
    /// The context for `scope`, `principal` and `envelope`: a live one, or a new one
    /// whose upstream sessions are opened now, counted against the session caps of
    /// `peer` (its client's address) like a session it opened. The client info is not
    /// part of the key (the first client's is what the upstreams are told), so a client
    /// cannot open a context per request by varying it.
    pub(super) async fn context(
        &self,
        scope: Scope,
        principal: Option<Arc<Principal>>,
        envelope: &Envelope,
        peer: Option<std::net::IpAddr>,
        trace: Option<&RequestTrace>,
    ) -> Result<(Arc<Session>, String), GatewayError> {
        let key = format!(
            "{scope:?}\u{0}{}\u{0}{}\u{0}{}",
            principal.as_deref().map(Principal::label).unwrap_or_default(),
            envelope.version,
            envelope.capabilities,
        );
        if let Some(session) = self.contexts.live(&key) {
            return Ok((session, key));
        }
        let full =
            |full: TableFull| GatewayError::Overloaded { scope: "session".into(), retry_after: full.retry_after };
        let holder = Holder { peer, principal: principal.as_deref().map(Principal::identity) };
        let reservation = self.reserve(holder).map_err(full)?;
        let capabilities = offered_capabilities(&envelope.capabilities);
        // The client info is optional in the envelope; an upstream session needs one.
        let info = if envelope.client_info.is_object() {
            envelope.client_info.clone()
        } else {
            json!({"name": "seawall", "version": env!("CARGO_PKG_VERSION")})
        };
        let version = mcp_era::LATEST_LEGACY.to_owned();
        let session = self.new_session(scope.clone(), version, capabilities, info, principal, Front::Modern);
        session.mark_stateless();
        // With tracing on, opening it (its upstream sessions) is a span: under the
        // client's trace, or under the current span (a `server/discover`'s).
        let span = spans::context(trace, session.key);
        self.connect_upstreams(&session).instrument(span).await;
        if let Scope::Single(name) = &scope
            && let Some(Slot::Down(reason)) = session.slot(name)
        {
            self.close_session(&session, Leaving::Ended).await;
            return Err(GatewayError::Unavailable { upstream: Arc::clone(name), reason });
        }
        if let Some(existing) = self.contexts.insert(key.clone(), &session) {
            self.close_session(&session, Leaving::Ended).await;
            return Ok((existing, key));
        }
        self.sessions.insert_reserved(reservation, Arc::clone(&session));
        tracing::info!(session = session.key, scope = ?scope, "modern client context opened");
        Ok((session, key))
    }
}
