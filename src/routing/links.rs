//! The session's link to each upstream, opened (again) on demand.

use std::sync::Arc;

use super::Router;
use crate::call::{GatewayError, Link};
use crate::mcp::init::InitParams;
use crate::session::{Session, Slot};
use crate::upstream::registry::UpstreamHandle;

impl Router {
    /// The session's link to an upstream, connecting (again) if it is down.
    pub(crate) async fn link(&self, session: &Arc<Session>, handle: &UpstreamHandle) -> Result<Link, GatewayError> {
        if let Some(Slot::Up(link)) = session.slot(&handle.name) {
            return Ok(link);
        }
        // Connecting is rare and its future large (the whole handshake): boxed, it stays
        // out of every call's future, which is moved and copied on each call.
        Box::pin(self.connect_link(session, handle)).await
    }

    /// Opens the session's link to `handle`, one connection attempt at a time.
    async fn connect_link(&self, session: &Arc<Session>, handle: &UpstreamHandle) -> Result<Link, GatewayError> {
        let _serial = session.reconnect.lock().await;
        if let Some(Slot::Up(link)) = session.slot(&handle.name) {
            return Ok(link);
        }
        match handle.connect(&self.init_params(session, handle)).await {
            Ok(link) => {
                session.set_slot(&handle.name, Slot::Up(link.clone()));
                Ok(link)
            }
            Err(e) => {
                session.set_slot(&handle.name, Slot::Down(e.to_string()));
                Err(GatewayError::Unavailable { upstream: Arc::clone(&handle.name), reason: e.to_string() })
            }
        }
    }

    /// What the gateway declares when it opens an upstream session for this client session.
    pub(crate) fn init_params(&self, session: &Session, handle: &UpstreamHandle) -> InitParams {
        if handle.is_shared() {
            return InitParams::gateway_own();
        }
        InitParams {
            protocol_version: session.version.clone(),
            capabilities: session.client_capabilities.clone(),
            client_info: session.client_info.clone(),
            modern_client: session.is_stateless(),
        }
    }
}
