//! The HTTP client of HTTP upstreams: for `http://` ones, HTTP/1.1 connections of
//! seawall's own, driven by the call that uses them ([`driven`], [`crate::h1`]); for `https://`
//! ones, hyper's pooled client (HTTP/1.1 or HTTP/2 by ALPN), straight.
//!
//! A proxied call costs one request to its upstream, so this path is kept lean: the
//! URI is parsed once per upstream, the static headers are built once, and nothing
//! between seawall and hyper re-parses URLs, matches proxies or follows redirects (an
//! MCP endpoint that redirects is refused as the HTTP status it answered, never
//! followed: a redirect could carry a session to another host). Upstream connections
//! are direct: `HTTP_PROXY` and its kin are not consulted.

mod driven;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::call::{Cause, UpstreamError};

/// How long an idle pooled connection is kept.
const POOL_IDLE: Duration = Duration::from_secs(90);

/// One upstream's HTTP client: its own pool of driven plain-HTTP/1.1 connections, and
/// hyper's pool for TLS (HTTP/1.1 or HTTP/2, by ALPN).
#[derive(Clone)]
pub(crate) struct UpstreamClient {
    plain: Arc<driven::Pool>,
    tls: Client<HttpsConnector<HttpConnector>, String>,
}

impl UpstreamClient {
    /// A client that gives up connecting after `connect_timeout`, verifying TLS
    /// certificates with the platform's verifier.
    pub(crate) fn new(connect_timeout: Duration) -> anyhow::Result<UpstreamClient> {
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(connect_timeout));
        http.set_nodelay(true);
        http.enforce_http(false);
        let tls = tls_config()?;
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_all_versions()
            .wrap_connector(http);
        let tls = Client::builder(TokioExecutor::new()).pool_idle_timeout(POOL_IDLE).build(https);
        Ok(UpstreamClient { plain: driven::Pool::new(connect_timeout, POOL_IDLE), tls })
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
        if uri.scheme() == Some(&http::uri::Scheme::HTTP) {
            let response = self.plain.send(&method, uri, headers, more, body.as_bytes()).await?;
            return Ok(UpstreamResponse(response.map(ResponseBody::Driven)));
        }
        let mut request = Request::new(body);
        *request.method_mut() = method;
        *request.headers_mut() = headers.clone();
        for (name, value) in more {
            request.headers_mut().insert(name, value.clone());
        }
        *request.uri_mut() = uri.clone();
        match self.tls.request(request).await {
            Ok(response) => Ok(UpstreamResponse(response.map(ResponseBody::Pooled))),
            Err(e) => Err(classify(e)),
        }
    }
}

/// The crypto provider is named rather than taken from the process default, which is
/// ambiguous when more than one provider is compiled in.
fn tls_config() -> anyhow::Result<rustls::ClientConfig> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_platform_verifier()?
        .with_no_client_auth())
}

/// A failure to get a response: a connect failure never reached the upstream.
fn classify(e: hyper_util::client::legacy::Error) -> UpstreamError {
    if e.is_connect() { UpstreamError::Connect(Cause::of(e)) } else { UpstreamError::Io(Cause::of(e)) }
}

/// The head of an upstream's response, with its body still to read.
pub(crate) struct UpstreamResponse(http::Response<ResponseBody>);

/// An answer's body, from either kind of connection.
pub(crate) enum ResponseBody {
    /// On a connection of seawall's own pool, driven as it is read.
    Driven(driven::DrivenBody),
    /// On a connection of hyper's pool.
    Pooled(Incoming),
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            ResponseBody::Driven(body) => std::pin::Pin::new(body).poll_frame(cx),
            ResponseBody::Pooled(body) => std::pin::Pin::new(body).poll_frame(cx).map_err(std::io::Error::other),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            ResponseBody::Driven(body) => body.is_end_stream(),
            ResponseBody::Pooled(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            ResponseBody::Driven(body) => body.size_hint(),
            ResponseBody::Pooled(body) => body.size_hint(),
        }
    }
}

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
