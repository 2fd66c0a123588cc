//! A session as its sealed id carries it ([`SealedSession`]), and back: what another
//! replica needs to resume it.

use std::sync::Arc;
use std::time::Duration;

use super::sealed::{SealedSession, SealedUpstream};
use super::{Scope, Session};
use crate::call::AttachedSession;

impl Session {
    /// The state a sealed id of this session carries, issued at `now` (seconds since the
    /// Unix epoch) and opening for `lifetime`: the upstream sessions it holds now, in
    /// name order.
    pub(crate) fn sealed_state(&self, now: u64, lifetime: Duration) -> SealedSession {
        let mut links = self.links();
        links.sort_by(|a, b| a.0.cmp(&b.0));
        let upstreams = links
            .iter()
            .flat_map(|(name, link)| {
                link.attached().into_iter().map(move |a| SealedUpstream {
                    name: name.to_string(),
                    endpoint: a.endpoint,
                    session_id: a.session_id,
                    version: a.version,
                    capabilities: a.capabilities,
                })
            })
            .collect();
        SealedSession {
            scope: match &self.scope {
                Scope::Aggregate => None,
                Scope::Single(name) => Some(name.to_string()),
            },
            version: self.version.clone(),
            capabilities: self.client_capabilities.clone(),
            client_info: self.client_info.clone(),
            principal: self.principal().map(|p| p.label()),
            upstreams,
            issued: now,
            expires: now.saturating_add(lifetime.as_secs()),
        }
    }
}

impl SealedSession {
    /// Which upstreams the session reaches.
    pub(crate) fn session_scope(&self) -> Scope {
        match &self.scope {
            None => Scope::Aggregate,
            Some(name) => Scope::Single(Arc::from(name.as_str())),
        }
    }

    /// The sessions the id carries of one upstream.
    pub(crate) fn attached(&self, upstream: &str) -> Vec<AttachedSession> {
        self.upstreams
            .iter()
            .filter(|u| u.name == upstream)
            .map(|u| AttachedSession {
                endpoint: u.endpoint,
                session_id: u.session_id.clone(),
                version: u.version.clone(),
                capabilities: u.capabilities.clone(),
            })
            .collect()
    }
}
