//! The client's own `notifications/cancelled` ends its request at once: the inner
//! future is dropped (which cancels the upstream call) and the answer is -32800. The end
//! of a shutdown's grace period ends every request the same way, answered -32014.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::{ClientRequest, Routed};
use crate::call::GatewayError;
use crate::session::signal::CancelSignal;
use crate::signals::Drain;

/// Applies [`Cancel`].
#[derive(Clone, Debug, Default)]
pub(crate) struct CancelLayer {
    drain: Drain,
}

impl CancelLayer {
    /// Requests cancelled once `drain`'s grace period is over are answered as stopped by
    /// the shutdown rather than as cancelled by their client.
    pub(crate) fn new(drain: Drain) -> CancelLayer {
        CancelLayer { drain }
    }
}

impl<S> Layer<S> for CancelLayer {
    type Service = Cancel<S>;
    fn layer(&self, inner: S) -> Cancel<S> {
        Cancel { inner, drain: self.drain.clone() }
    }
}

/// Ends a request when its client cancels it, or when a shutdown's grace period ends.
#[derive(Clone, Debug)]
pub(crate) struct Cancel<S> {
    inner: S,
    drain: Drain,
}

impl<S> Service<ClientRequest> for Cancel<S>
where
    S: Service<ClientRequest, Response = Routed, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Routed;
    type Error = GatewayError;
    type Future = Cancellable<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: ClientRequest) -> Self::Future {
        // A request admission did not take has no cancellation: only its answer is awaited.
        let cancel = req.cancel.take();
        Cancellable { inner: self.inner.call(req), cancel, drain: self.drain.clone() }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer, or its end when its client cancels it first.
    pub(crate) struct Cancellable<F> {
        #[pin]
        inner: F,
        cancel: Option<CancelSignal>,
        drain: Drain,
    }
}

impl<F> Future for Cancellable<F>
where
    F: Future<Output = Result<Routed, GatewayError>>,
{
    type Output = Result<Routed, GatewayError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Some(cancel) = this.cancel.as_ref()
            && std::pin::pin!(cancel.cancelled()).poll(cx).is_ready()
        {
            return Poll::Ready(Err(if this.drain.is_expired() {
                GatewayError::ShuttingDown
            } else {
                GatewayError::Cancelled
            }));
        }
        this.inner.poll(cx)
    }
}
