//! The client's own `notifications/cancelled` ends its request at once: the inner
//! future is dropped (which cancels the upstream call) and the answer is -32800.

use std::task::{Context, Poll};

use tower::{Layer, Service};

use super::{ClientFuture, ClientRequest};
use crate::call::{GatewayError, Reply};

/// Applies [`Cancel`].
#[derive(Clone, Copy, Debug, Default)]
pub struct CancelLayer;

impl<S> Layer<S> for CancelLayer {
    type Service = Cancel<S>;
    fn layer(&self, inner: S) -> Cancel<S> {
        Cancel { inner }
    }
}

/// Ends a request when its client cancels it.
#[derive(Clone, Debug)]
pub struct Cancel<S> {
    inner: S,
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

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        let cancel = req.cancel.clone();
        let fut = self.inner.call(req);
        Box::pin(async move {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => Err(GatewayError::Cancelled),
                result = fut => result,
            }
        })
    }
}
