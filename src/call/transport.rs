//! What a link to an upstream must do ([`Transport`]), and the service at the bottom of
//! every upstream stack that sends one attempt over it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tower::Service;

use super::answer::{Answer, Reply};
use super::events::EventSink;
use super::failure::{GatewayError, UpstreamError};
use super::request::UpstreamCall;
use crate::jsonrpc::{Id, Notification};
use crate::mcp::init::InitResult;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One client session's connection to one upstream: a Streamable HTTP session, a
/// supervised process, or sessions with several replicas. Dropping the future of
/// [`Transport::send`] cancels the request upstream.
pub trait Transport: Send + Sync {
    /// Sends one attempt of a call and waits for its answer; related messages go to
    /// `call.events`. Sent to `call.endpoint` when the upstream has several.
    fn send<'a>(&'a self, call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>>;

    /// For replicated upstreams: the endpoint for the next attempt, avoiding `avoid`.
    fn pick(&self, _avoid: &[u16]) -> Option<u16> {
        None
    }

    /// For replicated upstreams: how an attempt on an endpoint ended (outlier ejection).
    fn record(&self, _endpoint: u16, _failed: bool) {}

    /// Sends a notification.
    fn notify(&self, n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>>;

    /// Answers a server-initiated request (made by `endpoint`, for replicated upstreams).
    fn respond(&self, endpoint: Option<u16>, id: Id, body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>>;

    /// The upstream's answer to initialize, once the handshake has completed.
    fn init_result(&self) -> Option<Arc<InitResult>>;

    /// Starts receiving events not tied to a call (list_changed, resources/updated, ...).
    fn subscribe(&self, key: u64, sink: EventSink);

    /// Stops receiving unrelated events.
    fn unsubscribe(&self, key: u64);

    /// The client opened its stream for messages not tied to a request: open the
    /// upstream's counterpart (HTTP upstreams open it only then, so an idle session
    /// holds no upstream connection). Nothing to do for a process.
    fn want_unrelated_stream(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Ends the upstream session (HTTP DELETE) or stops the process.
    fn close(&self) -> BoxFuture<'_, ()>;
}

/// A shared link to an upstream.
pub type Link = Arc<dyn Transport>;

/// The future every layer of an upstream stack returns.
pub type CallFuture = BoxFuture<'static, Result<Answer, GatewayError>>;

/// The type-erased stack each upstream's requests go through.
pub type UpstreamService = tower::util::BoxCloneSyncService<UpstreamCall, Answer, GatewayError>;

/// The bottom of every upstream stack: sends the attempt over its link and reads the
/// answer once.
#[derive(Clone, Copy, Debug, Default)]
pub struct SendAttempt;

impl Service<UpstreamCall> for SendAttempt {
    type Response = Answer;
    type Error = GatewayError;
    type Future = CallFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: UpstreamCall) -> Self::Future {
        Box::pin(async move {
            let reply = req.target.send(&req).await.map_err(|source| GatewayError::Upstream {
                upstream: Arc::clone(&req.upstream),
                source,
                endpoint: req.endpoint,
            })?;
            Ok(Answer::parse(reply, req.tool.is_some()))
        })
    }
}
