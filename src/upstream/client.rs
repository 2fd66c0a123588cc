//! The HTTP client of HTTP upstreams: HTTP/1.1 connections of seawall's own, driven by
//! the call that uses them ([`driven`], [`crate::h1`]), plain for `http://` upstreams and
//! TLS ([`tls`]) for `https://` ones. It is the one HTTP client on the request path:
//! Streamable HTTP upstreams and HTTP+SSE ones (the event stream and the POSTs) go
//! through it. HTTP/2 is not spoken towards upstreams: a call is one request and one
//! answer (or one event stream) on a connection of its own, pooled.
//!
//! A proxied call costs one request to its upstream, so this path is kept lean: the
//! URI is parsed once per upstream, the static headers are built once, and nothing
//! between the call and the socket re-parses URLs, matches proxies or follows
//! redirects (an MCP endpoint that redirects is refused as the HTTP status it
//! answered, never followed: a redirect could carry a session to another host).
//! Upstream connections are direct: `HTTP_PROXY` and its kin are not consulted.

mod driven;
mod tls;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use http_body_util::BodyExt;

use crate::call::{Cause, UpstreamError};

/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// One upstream's HTTP client: its own pool of driven HTTP/1.1 connections, plain and
/// TLS.
#[derive(Clone)]
pub(crate) struct UpstreamClient {
    pool: Arc<driven::Pool>,
}

impl UpstreamClient {
    /// A client that gives up connecting (TLS handshake included) after
    /// `connect_timeout`, verifying TLS certificates with the platform's verifier.
    pub(crate) fn new(connect_timeout: Duration) -> anyhow::Result<UpstreamClient> {
        Ok(UpstreamClient { pool: driven::Pool::new(connect_timeout, POOL_IDLE, tls::Connector::new()?) })
    }

    /// Sends one request and waits for the head of its response.
    pub(crate) async fn send(
        &self,
        method: Method,
        uri: &Uri,
        headers: &HeaderMap,
        more: &[(HeaderName, HeaderValue)],
        body: String,
    ) -> Result<UpstreamResponse, UpstreamError> {
        let response = self.pool.send(&method, uri, headers, more, body.as_bytes()).await?;
        Ok(UpstreamResponse(response))
    }
}

/// The head of an upstream's response, with its body still to read.
pub(crate) struct UpstreamResponse(http::Response<driven::DrivenBody>);

impl UpstreamResponse {
    /// The response status.
    pub(crate) fn status(&self) -> StatusCode {
        self.0.status()
    }

    /// The response headers.
    pub(crate) fn headers(&self) -> &HeaderMap {
        self.0.headers()
    }

    /// The body's length, when the upstream declared it.
    pub(crate) fn content_length(&self) -> Option<u64> {
        http_body::Body::size_hint(self.0.body()).exact()
    }

    /// The next piece of the body, `None` at its end.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, UpstreamError> {
        loop {
            match self.0.body_mut().frame().await {
                None => return Ok(None),
                Some(Err(e)) => return Err(UpstreamError::Io(Cause::of(e))),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        return Ok(Some(data));
                    }
                    // Trailers carry no data.
                }
            }
        }
    }

    /// The body as a stream of pieces.
    pub(crate) fn bytes_stream(self) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
        http_body_util::BodyDataStream::new(self.0.into_body())
    }
}
