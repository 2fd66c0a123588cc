//! Admission of client requests, in one place: a second `initialize` in a session, a
//! request id already in flight, and the in-flight caps per session and for the whole
//! gateway. Every overload refusal is the same [`GatewayError::Overloaded`] (-32012,
//! HTTP 503 with `Retry-After`), whichever cap refused.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::Semaphore;
use tower::{Layer, Service};

use crate::call::{GatewayError, Reply};
use crate::client::{ClientFuture, ClientRequest};
use crate::jsonrpc::Id;
use crate::mcp::method;
use crate::session::Session;
use crate::telemetry::metrics;

/// When a refused client may try again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// Applies [`Admission`] with these caps.
#[derive(Clone, Debug)]
pub struct AdmissionLayer {
    gateway: Arc<Semaphore>,
    per_session: usize,
}

impl AdmissionLayer {
    /// At most `max_in_flight` requests in the gateway and `per_session` in one session.
    pub fn new(max_in_flight: usize, per_session: usize) -> AdmissionLayer {
        AdmissionLayer { gateway: Arc::new(Semaphore::new(max_in_flight.max(1))), per_session }
    }
}

impl<S> Layer<S> for AdmissionLayer {
    type Service = Admission<S>;
    fn layer(&self, inner: S) -> Admission<S> {
        Admission { inner, gateway: Arc::clone(&self.gateway), per_session: self.per_session }
    }
}

/// Admits a request, registers it with its session for cancellation, and holds its
/// places until it is answered.
#[derive(Clone, Debug)]
pub struct Admission<S> {
    inner: S,
    gateway: Arc<Semaphore>,
    per_session: usize,
}

impl<S> Admission<S> {
    fn admit(&self, req: &mut ClientRequest) -> Result<(tokio::sync::OwnedSemaphorePermit, InFlight), GatewayError> {
        if &*req.method == method::INITIALIZE {
            return Err(GatewayError::InvalidRequest("the session is already initialized".into()));
        }
        let overloaded = |scope: &str| {
            metrics::load_shed(scope);
            GatewayError::Overloaded { scope: scope.into(), retry_after: RETRY_AFTER }
        };
        if req.session.inflight() >= self.per_session {
            return Err(overloaded("session"));
        }
        let permit = Arc::clone(&self.gateway).try_acquire_owned().map_err(|_| overloaded("gateway"))?;
        let Some(cancel) = req.session.begin_request(&req.id) else {
            return Err(GatewayError::InvalidRequest("a request with this id is already in flight".into()));
        };
        req.cancel = cancel;
        Ok((permit, InFlight { session: Arc::clone(&req.session), id: req.id.clone() }))
    }
}

impl<S> Service<ClientRequest> for Admission<S>
where
    S: Service<ClientRequest, Response = Reply, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Reply;
    type Error = GatewayError;
    type Future = ClientFuture;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: ClientRequest) -> Self::Future {
        let places = match self.admit(&mut req) {
            Ok(places) => places,
            Err(refused) => return Box::pin(std::future::ready(Err(refused))),
        };
        let fut = self.inner.call(req);
        Box::pin(async move {
            let _places = places;
            fut.await
        })
    }
}

/// A request registered with its session, forgotten when it is answered or dropped.
struct InFlight {
    session: Arc<Session>,
    id: Id,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.session.end_request(&self.id);
    }
}
