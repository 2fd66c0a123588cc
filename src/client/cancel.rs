//! The client's own `notifications/cancelled` ends its request at once: the inner
//! future is dropped (which cancels the upstream call) and the answer is -32800. The end
//! of a shutdown's grace period ends every request the same way, answered -32014.

use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::{ClientFuture, ClientRequest};
use crate::call::{GatewayError, Reply};
use crate::signals::Drain;

/// Applies [`Cancel`].
#[derive(Clone, Debug, Default)]
pub struct CancelLayer {
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
pub struct Cancel<S> {
    inner: S,
    drain: Drain,
}

impl<S> Service<ClientRequest> for Cancel<S>
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
        let Some(cancel) = req.cancel.take() else {
            // Not admitted, so not cancellable: nothing to wait for besides the answer.
            return Box::pin(self.inner.call(req));
        };
        let drain = self.drain.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(if drain.is_expired() { GatewayError::ShuttingDown } else { GatewayError::Cancelled }),
                result = fut => result,
            }
        })
    }
}
