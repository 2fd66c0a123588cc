//! Requests an upstream sends the client, relayed under ids of the gateway's own: sealed
//! with the session's keys so that any replica can route the answer, or counted here.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{ServerRequest, Session, sealed};
use crate::jsonrpc::Id;

impl ServerRequest {
    fn sealed(&self) -> sealed::SealedRoute {
        sealed::SealedRoute {
            upstream: self.upstream.to_string(),
            endpoint: self.endpoint,
            id: self.id.as_json().to_owned(),
        }
    }

    fn from_sealed(route: sealed::SealedRoute) -> Option<ServerRequest> {
        let id = Id::from_value(&serde_json::from_str(&route.id).ok()?)?;
        Some(ServerRequest { upstream: Arc::from(route.upstream), endpoint: route.endpoint, id })
    }
}

/// What the gateway's ids for server requests start with.
const SERVER_REQUEST_PREFIX: &str = "seawall-";

impl Session {
    /// Remembers a server-initiated request relayed to the client; returns the client-side
    /// id: sealed with the session's keys (`seawall-<sealed route>`), so that any replica
    /// can route the answer, else `seawall-<n>`.
    pub(crate) fn register_server_request(&self, origin: ServerRequest) -> Id {
        let sealed = self.keys.get().and_then(|keys| keys.seal_request(self.id(), &origin.sealed()));
        let id = match sealed {
            Some(sealed) => Id::string(&format!("{SERVER_REQUEST_PREFIX}{sealed}")),
            None => {
                let n = self.next_server_request.fetch_add(1, Ordering::Relaxed);
                Id::string(&format!("{SERVER_REQUEST_PREFIX}{n}"))
            }
        };
        self.server_requests.lock().insert(id.clone(), origin);
        id
    }

    /// Takes the route of a server-initiated request the client has answered: from the
    /// requests relayed here, else from the id itself when another replica sealed it.
    pub(crate) fn take_server_request(&self, id: &Id) -> Option<ServerRequest> {
        if let Some(origin) = self.server_requests.lock().remove(id) {
            return Some(origin);
        }
        let keys = self.keys.get()?;
        let text: String = serde_json::from_str(id.as_json()).ok()?;
        let route = keys.open_request(self.id(), text.strip_prefix(SERVER_REQUEST_PREFIX)?)?;
        // Relayed by another replica (or before this one let the session go): a process of
        // this replica's own never made it, so only an upstream session both share can
        // take the answer.
        tracing::debug!(session = self.key, upstream = %route.upstream, "an answer to a server request relayed elsewhere");
        ServerRequest::from_sealed(route)
    }

    /// The client-side id of a server-initiated request, by where it came from.
    pub(crate) fn server_request_client_id(
        &self,
        upstream: &str,
        endpoint: Option<u16>,
        upstream_id: &Id,
    ) -> Option<Id> {
        self.server_requests
            .lock()
            .iter()
            .find(|(_, r)| &*r.upstream == upstream && r.endpoint == endpoint && &r.id == upstream_id)
            .map(|(id, _)| id.clone())
    }
}
