//! Sealed sessions at the gateway: the id an `initialize` mints, the session a request
//! names — in this replica's table, or resumed here from what its sealed id carries — and
//! how a session leaves a replica without ending for the others.
//!
//! Resuming builds the session locally under the same id: the upstream sessions the id
//! names are re-attached without a handshake (an upstream that forgot one answers 404 and
//! is re-initialised transparently), the others — child processes, event streams — open
//! afresh when first used. Only shared keys resume: a process's own random key has
//! sealed nothing another process could have opened, and a session ended or expired
//! here stays ended.

use std::net::IpAddr;
use std::sync::Arc;

use super::Gateway;
use crate::identity::Principal;
use crate::mcp;
use crate::session::sealed::{SealedSession, unix_now};
use crate::session::table::{Holder, TableFull};
use crate::session::{Front, Scope, Session, Slot};

/// Why no session serves a request that names one.
#[derive(Debug)]
pub(crate) enum NoSession {
    /// Unknown, ended, of another scope or principal, or a sealed id that does not open
    /// (tampered, forged, another key, expired): answered as an unknown session.
    NotFound,
    /// The id opens, but a session cap leaves no place to resume it.
    Full(TableFull),
}

/// What happens to a session's upstream sessions when it leaves this replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Leaving {
    /// The client ended it (DELETE), or it never opened: they end too.
    Ended,
    /// It went idle here, or the replica shuts down: with a sealed id that other
    /// replicas may resume, they stay (only this replica's streams stop).
    Left,
}

impl Gateway {
    /// The session `id` names on `scope` for a request made as `principal` from `peer`:
    /// the live one, or one resumed from the sealed id. A session of another scope or
    /// principal is not found (its existence is not revealed).
    pub(crate) fn find_session(
        &self,
        id: &str,
        scope: &Scope,
        peer: Option<IpAddr>,
        principal: Option<&Arc<Principal>>,
    ) -> Result<Arc<Session>, NoSession> {
        let session = match self.sessions.get(id) {
            Some(session) => session,
            None => self.resume(id, scope, peer, principal)?,
        };
        if &session.scope == scope && session.admits(principal.map(|p| &**p)) {
            Ok(session)
        } else {
            Err(NoSession::NotFound)
        }
    }

    fn resume(
        &self,
        id: &str,
        scope: &Scope,
        peer: Option<IpAddr>,
        principal: Option<&Arc<Principal>>,
    ) -> Result<Arc<Session>, NoSession> {
        let keys = self.sessions.keys().filter(|k| k.is_shared()).ok_or(NoSession::NotFound)?;
        if self.sessions.has_ended(id) {
            return Err(NoSession::NotFound);
        }
        let sealed = keys.open_session(id, unix_now()).ok_or(NoSession::NotFound)?;
        let reachable = match scope {
            Scope::Aggregate => true,
            Scope::Single(name) => self.upstreams().get(name).is_some(),
        };
        if sealed.session_scope() != *scope
            || sealed.principal != principal.map(|p| p.label())
            || !mcp::is_supported(&sealed.version)
            || !reachable
        {
            return Err(NoSession::NotFound);
        }
        let holder = Holder { peer, principal: principal.map(|p| p.identity()) };
        let (session, let_go) = self
            .sessions
            .resume(id, holder, || self.resumed(id, &sealed, peer, principal.cloned()))
            .map_err(NoSession::Full)?;
        self.end_let_go(let_go);
        Ok(session)
    }

    /// The session a sealed id carries, rebuilt here under that id.
    fn resumed(
        &self,
        id: &str,
        sealed: &SealedSession,
        peer: Option<IpAddr>,
        principal: Option<Arc<Principal>>,
    ) -> Arc<Session> {
        let scope = sealed.session_scope();
        let session = self.new_session(
            scope.clone(),
            sealed.version.clone(),
            sealed.capabilities.clone(),
            sealed.client_info.clone(),
            principal,
            Front::StreamableHttp,
        );
        session.assign_id(id.to_owned());
        if let Some(keys) = self.sessions.keys() {
            session.seal_requests_with(Arc::clone(keys));
        }
        if let Some(peer) = peer {
            session.bind_peer(peer);
        }
        let router = self.router();
        let upstreams = router.upstreams();
        let handles: Vec<_> = match &scope {
            Scope::Aggregate => upstreams.iter().cloned().collect(),
            Scope::Single(name) => upstreams.get(name).cloned().into_iter().collect(),
        };
        let mut attached = 0;
        for handle in handles {
            let upstream_sessions = sealed.attached(&handle.name);
            if upstream_sessions.is_empty() {
                continue;
            }
            let init = router.init_params(&session, &handle);
            if let Some(link) = handle.attach(&init, &upstream_sessions) {
                session.set_slot(&handle.name, Slot::Up(link));
                attached += 1;
            }
        }
        tracing::info!(session = session.key, scope = ?scope, attached, "session resumed from its sealed id");
        session
    }

    /// Gives a Streamable HTTP session opened here its sealed id, carrying the upstream
    /// sessions it holds now. A state too large to seal keeps a random id: the session
    /// then lives on this replica only.
    pub(super) fn seal_id(&self, session: &Session) {
        let Some(keys) = self.sessions.keys() else { return };
        if session.front() != Front::StreamableHttp {
            return;
        }
        let state = session.sealed_state(unix_now(), keys.lifetime());
        match keys.seal_session(&state).map(|id| session.assign_id(id)) {
            Some(true) => session.seal_requests_with(Arc::clone(keys)),
            Some(false) => tracing::warn!(session = session.key, "the session already had an id: it is not sealed"),
            None => tracing::warn!(
                session = session.key,
                "the session's state is too large to seal into its id: only this replica can serve it"
            ),
        }
    }

    /// Whether a session leaving this replica as `leaving` keeps its upstream sessions
    /// for the replicas that may resume it.
    pub(super) fn keeps_upstream_sessions(&self, session: &Session, leaving: Leaving) -> bool {
        leaving == Leaving::Left && session.is_sealed() && self.sessions.keys().is_some_and(|k| k.is_shared())
    }
}
