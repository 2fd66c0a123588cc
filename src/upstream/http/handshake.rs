//! Opening a session with a Streamable HTTP upstream: the handshake of the first era that
//! works (`server/discover` or `initialize`), and again when the upstream forgot it.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{HttpLink, Outcome, SESSION_HEADER, SessionState, shared_value, upstream};
use crate::call::{UpstreamError, fresh_id};
use crate::jsonrpc;
use crate::mcp::init::InitResult;
use crate::mcp::method;
use crate::upstream::failure::{handshake_error, refuses_era};

impl HttpLink {
    /// The handshake of the first era that works, of those [`HttpLink::eras_to_try`]
    /// names: `server/discover` (modern) or `initialize` (legacy). An era is given up for
    /// the next only when the server refused it (not when it could not be reached); a
    /// refusal followed by success is remembered, so later sessions go straight to the
    /// era that works.
    pub(super) async fn handshake(self: &Arc<Self>) -> Result<(), UpstreamError> {
        let eras = self.eras_to_try();
        let mut refused = false;
        let mut last = UpstreamError::Handshake("no protocol era to try".into());
        for modern_era in eras {
            let mut attempt = self.handshake_in(modern_era).await;
            if matches!(attempt, Err(UpstreamError::Io(_))) {
                // The connection broke before the answer: most often a pooled one the
                // server closed as it went idle. A handshake opens nothing yet that
                // sending it again could duplicate: once more, on another connection.
                attempt = self.handshake_in(modern_era).await;
            }
            match attempt {
                Ok(()) => {
                    self.up.spoke.store(
                        if modern_era { upstream::SPOKE_MODERN } else { upstream::SPOKE_LEGACY },
                        Ordering::Relaxed,
                    );
                    if refused {
                        self.up.remember(if modern_era { upstream::MODERN_ONLY } else { upstream::LEGACY_ONLY });
                    }
                    if modern_era {
                        self.ready.store(true, Ordering::SeqCst);
                    }
                    return Ok(());
                }
                // An upstream that failed (unreachable, timed out, overloaded) said nothing
                // about the era: the handshake fails as it is, and nothing is remembered.
                Err(e) if !refuses_era(&e) => return Err(handshake_error(e)),
                Err(e) => {
                    let era = if modern_era { "modern" } else { "legacy" };
                    tracing::debug!(upstream = %self.up.name, era, error = %e, "the upstream refused this era");
                    refused = true;
                    last = handshake_error(e);
                }
            }
        }
        self.up.remember(if self.up.sse_fallback.is_some() { upstream::NEITHER } else { upstream::UNKNOWN });
        Err(last)
    }

    /// The handshake of one era: `server/discover` (modern) or `initialize` (legacy).
    async fn handshake_in(self: &Arc<Self>, modern_era: bool) -> Result<(), UpstreamError> {
        if modern_era { self.discover().await } else { self.initialize().await }
    }

    /// The legacy handshake. Its errors are as the exchange failed, for
    /// [`refuses_era`]; the caller makes them handshake errors.
    async fn initialize(self: &Arc<Self>) -> Result<(), UpstreamError> {
        let id = fresh_id();
        let body = jsonrpc::encode_request(&id, method::INITIALIZE, Some(&self.init_params.to_raw()));
        let resp = self.post(body, &SessionState::default()).await?;
        let session_id = resp.headers().get(SESSION_HEADER).and_then(|v| shared_value(v.to_str().ok()?));
        let reply = match self.read_answer(resp, &id, None, &SessionState::default()).await? {
            Outcome::Reply(reply) => reply,
            _ => return Err(UpstreamError::Handshake("no answer to initialize".into())),
        };
        let result = reply.map_err(|err| UpstreamError::Handshake(format!("initialize refused: {}", err.get())))?;
        let init = InitResult::parse(result)
            .ok_or_else(|| UpstreamError::Handshake("initialize result lacks protocolVersion".into()))?;
        let snapshot = {
            let mut st = self.state.lock();
            st.session_id = session_id;
            st.version = shared_value(&init.protocol_version);
            st.init = Some(Arc::new(init));
            st.generation += 1;
            st.clone()
        };
        let note = jsonrpc::encode_notification(method::INITIALIZED, None);
        match self.post(note, &snapshot).await {
            Ok(resp) if resp.status().is_success() => {}
            Ok(resp) => {
                tracing::warn!(upstream = %self.up.name, status = %resp.status(), "upstream refused notifications/initialized")
            }
            Err(e) => return Err(e),
        }
        self.ready.store(true, Ordering::SeqCst);
        // A client that may be asked something gets the stream it will be asked on before
        // its first request reaches the upstream; others get one when they listen.
        if self.init_params.may_be_asked() {
            self.get_wanted.store(true, Ordering::SeqCst);
        }
        if self.get_wanted.load(Ordering::SeqCst) {
            self.start_get_stream();
        }
        Ok(())
    }

    /// Re-initialises after the upstream forgot our session, unless another caller already did.
    pub(super) async fn reinitialize(self: &Arc<Self>, seen_generation: u64) -> Result<(), UpstreamError> {
        let _guard = self.reinit.lock().await;
        if self.snapshot().generation != seen_generation {
            return Ok(());
        }
        tracing::info!(upstream = %self.up.name, "upstream session expired; re-initialising");
        self.handshake().await.map_err(|e| UpstreamError::SessionLost(e.to_string()))
    }
}
