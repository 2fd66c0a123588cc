//! The client stack's layer of answers: every failure from any layer below, and every
//! upstream's answer, becomes the sanitised answer the client sees here, once, with the
//! HTTP hint its transport needs; every request is counted with its outcome
//! (`seawall_client_requests_total`).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Instant;

use tower::{Layer, Service};

use super::Rewriter;
use crate::call::{GatewayError, Reply};
use crate::client::{Answered, ClientRequest, HttpHint, Routed};
use crate::jsonrpc;
use crate::mcp::method;
use crate::telemetry::metrics;

/// Applies [`Rewrite`] with one rewriter.
#[derive(Clone)]
pub(crate) struct RewriteLayer {
    rewriter: Arc<Rewriter>,
}

impl RewriteLayer {
    /// A layer answering failures with `rewriter`.
    pub(crate) fn new(rewriter: Arc<Rewriter>) -> RewriteLayer {
        RewriteLayer { rewriter }
    }
}

impl<S> Layer<S> for RewriteLayer {
    type Service = Rewrite<S>;
    fn layer(&self, inner: S) -> Rewrite<S> {
        Rewrite { inner, rewriter: Arc::clone(&self.rewriter) }
    }
}

/// Turns every failure into an answer.
#[derive(Clone)]
pub(crate) struct Rewrite<S> {
    inner: S,
    rewriter: Arc<Rewriter>,
}

impl<S> Service<ClientRequest> for Rewrite<S>
where
    S: Service<ClientRequest, Response = Routed, Error = GatewayError>,
    S::Future: Send + 'static,
{
    type Response = Answered;
    type Error = Infallible;
    type Future = Rewritten<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness failures of the layers below are answered per request.
        match self.inner.poll_ready(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(_) => Poll::Ready(Ok(())),
        }
    }

    fn call(&mut self, req: ClientRequest) -> Self::Future {
        let tool = req.tool.clone();
        let method = Arc::clone(&req.method);
        let rewriter = Arc::clone(&self.rewriter);
        let started = Instant::now();
        Rewritten { inner: self.inner.call(req), tool, method, rewriter, started }
    }
}

pin_project_lite::pin_project! {
    /// A request's answer, its failure rewritten, counted when it ends.
    pub(crate) struct Rewritten<F> {
        #[pin]
        inner: F,
        tool: Option<Arc<str>>,
        method: Arc<str>,
        rewriter: Arc<Rewriter>,
        started: Instant,
    }
}

impl<F> Future for Rewritten<F>
where
    F: Future<Output = Result<Routed, GatewayError>>,
{
    type Output = Result<Answered, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answered = match ready!(this.inner.poll(cx)) {
            Ok(routed) => {
                let reply = this.rewriter.routed(this.method, routed);
                Answered { outcome: reply_outcome(this.method, &reply), reply, http: None }
            }
            Err(e) => Answered {
                http: HttpHint::of(&e),
                reply: this.rewriter.failure(&e, this.tool.as_deref()),
                outcome: e.class().outcome,
            },
        };
        metrics::client_request(this.method, answered.outcome, this.started.elapsed());
        Poll::Ready(Ok(answered))
    }
}

/// The outcome of a request answered without a failure: a tool's own error result, an
/// upstream's JSON-RPC error, or a success.
fn reply_outcome(method_name: &str, reply: &Reply) -> &'static str {
    #[derive(serde::Deserialize)]
    struct ToolResult {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    match reply {
        Ok(result) if method_name == method::TOOLS_CALL => {
            let is_error = jsonrpc::may_name(result.get(), "isError")
                && jsonrpc::view::<ToolResult>(Some(result)).is_some_and(|r| r.is_error);
            if is_error { "tool_error" } else { "ok" }
        }
        Ok(_) => "ok",
        Err(_) => "error",
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};
    use tower::{ServiceExt, service_fn};

    use super::*;
    use crate::config::ErrorsConfig;
    use crate::jsonrpc::Id;
    use crate::session::{Scope, Session};

    fn request(method: &str, params: Value) -> ClientRequest {
        let (tx, _rx) = crate::call::events(1);
        let session = Session::new(Scope::Aggregate, "2025-11-25".into(), json!({}), json!({}));
        ClientRequest::new(session, Id::number(1), method, Some(crate::jsonrpc::to_raw(&params)), None, tx)
    }

    #[test]
    fn a_tool_result_is_an_error_only_when_it_says_so_however_it_is_written() {
        let outcome = |text: &str| {
            let reply: Reply = Ok(crate::jsonrpc::raw_from_str(text).unwrap());
            reply_outcome(method::TOOLS_CALL, &reply)
        };
        assert_eq!(outcome(r#"{"content":[]}"#), "ok");
        assert_eq!(outcome(r#"{"content":[],"isError":false}"#), "ok");
        assert_eq!(outcome(r#"{"content":[],"isError":true}"#), "tool_error");
        assert_eq!(outcome(r#"{"content":[],"\u0069sError":true}"#), "tool_error", "an escaped name");
        assert_eq!(outcome(r#"{"content":[{"type":"text","text":"isError"}]}"#), "ok", "the word in a text");
        assert_eq!(outcome(r#"{"content":[{"type":"text","text":"\u00e9"}]}"#), "ok");
        assert_eq!(
            reply_outcome("tools/list", &Ok(crate::jsonrpc::raw_from_str(r#"{"isError":true}"#).unwrap())),
            "ok"
        );
    }

    async fn answer(error: GatewayError, req: ClientRequest) -> Answered {
        let failing = service_fn(move |_req: ClientRequest| {
            let error = error.clone();
            async move { Err::<Routed, _>(error) }
        });
        let layer = RewriteLayer::new(Arc::new(Rewriter::new(ErrorsConfig::default())));
        let Ok(answered) = layer.layer(failing).oneshot(req).await;
        answered
    }

    #[tokio::test]
    async fn failures_become_answers_with_their_http_hint() {
        let overloaded = GatewayError::Overloaded { scope: "session".into(), retry_after: Duration::from_secs(1) };
        let a = answer(overloaded, request("tools/list", json!({}))).await;
        let hint = HttpHint { status: http::StatusCode::SERVICE_UNAVAILABLE, retry_after: Duration::from_secs(1) };
        assert_eq!(a.http, Some(hint));
        assert!(a.reply.unwrap_err().get().contains("-32012"));

        let limited = GatewayError::RateLimited { scope: "tool".into(), retry_after: Duration::from_secs(3) };
        let a = answer(limited, request("tools/call", json!({"name": "u__echo"}))).await;
        let hint = HttpHint { status: http::StatusCode::TOO_MANY_REQUESTS, retry_after: Duration::from_secs(3) };
        assert_eq!(a.http, Some(hint));
        let body = a.reply.unwrap_err();
        assert!(body.get().contains("-32013") && body.get().contains("\"retryAfterSeconds\":3"), "{}", body.get());

        let timeout = GatewayError::Timeout { upstream: Arc::from("u"), after: Duration::from_secs(2) };
        let a = answer(timeout, request("tools/call", json!({"name": "u__slow"}))).await;
        assert_eq!(a.http, None);
        let result = a.reply.unwrap();
        assert!(result.get().contains("\"isError\":true") && result.get().contains("tool 'u__slow' timed out"));
    }
}
