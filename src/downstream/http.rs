//! What every HTTP front shares: the listener's state, one request's context, content
//! negotiation and the body's limits, and the shapes of an answer (JSON, or an SSE
//! stream of the messages that precede it).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::connection::PeerAddr;
use super::refusal::{Refusal, RequestInfo};
use super::run_to_end::RunToEnd;
use crate::gateway::Gateway;
use crate::identity::Principal;
use crate::jsonrpc::{self, Id, code};
use crate::policy::auth::Authenticator;
use crate::policy::origin::OriginPolicy;
use crate::sse;

pub(super) const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");
pub(super) const VERSION_HEADER: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// Interval of SSE comments that keep idle streams (and their proxies) alive.
pub(super) const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Shared state of the HTTP listener.
#[derive(Clone)]
pub(crate) struct HttpState {
    /// The gateway core.
    pub gateway: Arc<Gateway>,
    /// Host/Origin validation.
    pub origin: OriginPolicy,
    /// Client authentication (off unless `auth:` is configured); a reload may replace it.
    pub(crate) auth: Arc<arc_swap::ArcSwap<Authenticator>>,
    /// Largest accepted body.
    pub max_body_bytes: usize,
    /// Longest wait for a whole POST body.
    pub body_timeout: Duration,
    /// Fired when the gateway begins to shut down: GET streams end, so connections drain.
    pub closing: CancellationToken,
    /// The HTTP+SSE (2024-11-05) sessions, by the `sessionId` of their endpoint URL.
    pub(crate) sse: Arc<super::sse_legacy::channel::Channels>,
    /// What each SSE stream keeps for a client that resumes it (`session.replay_buffer`).
    pub replay: crate::config::ReplayBufferConfig,
}

pub(super) fn info_of(req: &Request) -> RequestInfo {
    RequestInfo {
        method: req.method().clone(),
        uri: req.uri().clone(),
        peer: req.extensions().get::<PeerAddr>().map(|p| p.0),
    }
}

/// One request's context: who asked, and how to refuse them.
pub(super) struct Cx<'a> {
    /// The listener's state.
    pub(super) st: &'a HttpState,
    /// The request line and peer.
    pub(super) info: RequestInfo,
    /// The request's headers.
    pub(super) headers: HeaderMap,
    /// Who is calling, when clients authenticate.
    pub(super) principal: Option<Arc<Principal>>,
}

impl Cx<'_> {
    /// The refusal's answer.
    pub(super) fn refuse(&self, refusal: Refusal, id: Option<&Id>) -> Response {
        self.info.refuse(&refusal, id)
    }
}

/// What the client's `Accept` header allows.
pub(super) struct Accepts {
    /// `application/json`.
    pub(super) json: bool,
    /// `text/event-stream`.
    pub(super) sse: bool,
}

pub(super) fn accepts(headers: &HeaderMap) -> Accepts {
    let mut accepts = Accepts { json: false, sse: false };
    let mut any = false;
    // Values that are not visible ASCII are passed over, as if they were not there.
    for value in headers.get_all(header::ACCEPT) {
        let value = value.as_bytes();
        // What MCP clients send (the SDKs, word for word), taken without reading it apart.
        if value == b"application/json, text/event-stream" {
            return Accepts { json: true, sse: true };
        }
        if !value.iter().all(|&b| b == b'\t' || (b' '..=b'~').contains(&b)) {
            continue;
        }
        any = true;
        for item in value.split(|&b| b == b',') {
            let media = media_type(item);
            accepts.json |= covers(media, b"application/json");
            accepts.sse |= covers(media, b"text/event-stream");
        }
    }
    if any { accepts } else { Accepts { json: true, sse: true } }
}

/// Whether the media range `range` of an `Accept` header (`type/subtype`, `type/*` or
/// `*/*`, in any case) takes the media type `ty` (lower case).
fn covers(range: &[u8], ty: &[u8]) -> bool {
    range.eq_ignore_ascii_case(ty)
        || range == b"*/*"
        || range.strip_suffix(b"/*").is_some_and(|main| {
            ty.len() > main.len() && ty[main.len()] == b'/' && ty[..main.len()].eq_ignore_ascii_case(main)
        })
}

/// Exactly one `Content-Type`, of media type `application/json` (parameters allowed).
fn is_json(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all(header::CONTENT_TYPE).iter();
    let (Some(value), None) = (values.next(), values.next()) else { return false };
    media_type(value.as_bytes()).eq_ignore_ascii_case(b"application/json")
}

/// The media type of a media range or `Content-Type` value: what precedes its
/// parameters, without the spaces around it.
fn media_type(value: &[u8]) -> &[u8] {
    match memchr::memchr(b';', value) {
        Some(at) => &value[..at],
        None => value,
    }
    .trim_ascii()
}

/// The declared `Content-Length`, when there is exactly one valid value.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
}

/// The body of a POST that declares JSON (`Content-Type`), read within the limits.
pub(super) async fn read_json_body(cx: &Cx<'_>, body: Body) -> Result<Bytes, Refusal> {
    if !is_json(&cx.headers) {
        return Err(Refusal::UnsupportedMediaType);
    }
    read_body(cx, body).await
}

/// Reads the body within the size and time limits. A declared length over the limit
/// is refused before the body is polled, so hyper sends no `100 Continue` for it.
async fn read_body(cx: &Cx<'_>, body: Body) -> Result<Bytes, Refusal> {
    let limit = cx.st.max_body_bytes;
    if declared_length(&cx.headers).is_some_and(|n| n > limit as u64) {
        return Err(Refusal::TooLarge { limit });
    }
    let read = async {
        let mut stream = body.into_data_stream();
        // A body of one piece (the usual, read with its head) is kept as it is; pieces
        // are copied together from the second on.
        let mut first: Option<Bytes> = None;
        let mut joined = Vec::new();
        let mut len = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|_| Refusal::BadRequest("the body could not be read"))?;
            len += chunk.len();
            if len > limit {
                return Err(Refusal::TooLarge { limit });
            }
            match first.take() {
                Some(earlier) => {
                    joined.reserve(len);
                    joined.extend_from_slice(&earlier);
                    joined.extend_from_slice(&chunk);
                }
                None if joined.is_empty() => first = Some(chunk),
                None => joined.extend_from_slice(&chunk),
            }
        }
        Ok(first.unwrap_or_else(|| Bytes::from(joined)))
    };
    tokio::time::timeout(cx.st.body_timeout, read).await.unwrap_or(Err(Refusal::BodyTimeout))
}

/// The answer to one request, as the transport sends it when nothing preceded it.
pub(super) struct Final {
    /// The JSON-RPC response.
    pub(super) body: String,
    /// The status of a JSON answer.
    pub(super) status: StatusCode,
    /// `Retry-After` of a refusal.
    pub(super) retry_after: Option<Duration>,
    /// The client cancelled the request: nothing is sent for it.
    pub(super) withheld: bool,
}

/// Runs `run` to its end (see [`RunToEnd`]) and answers with its JSON response, or — as
/// soon as a message arrives on `out_rx` before the response — with an SSE stream of
/// those messages and then the response. `abandon`, when given, fires if the client goes
/// away before the response was handed over (the handler or the stream is dropped).
pub(super) async fn json_or_stream(
    mut run: RunToEnd<Final>,
    mut out_rx: mpsc::Receiver<String>,
    id: Id,
    abandon: Option<tokio_util::sync::DropGuard>,
) -> Response {
    let first = tokio::select! {
        biased;
        Some(message) = out_rx.recv() => Some(message),
        response = &mut run => {
            if let Some(guard) = abandon {
                guard.disarm();
            }
            match out_rx.try_recv() {
                Ok(message) => {
                    // Something preceded the answer after all: stream both.
                    let tail = futures::stream::once(async move { message })
                        .chain(tokio_stream::wrappers::ReceiverStream::new(out_rx))
                        .chain(futures::stream::iter(response.map(|a| a.body)));
                    return sse_response(tail);
                }
                Err(_) => return json_final(response, &id),
            }
        }
    };
    // From here on the request runs beside its stream, which ends only when it does.
    let answer = tokio::spawn(run);
    let head = futures::stream::iter(first);
    let rest = tokio_stream::wrappers::ReceiverStream::new(out_rx);
    let last = futures::stream::once(async move {
        let body = answer.await.ok().flatten().map(|a| a.body).unwrap_or_else(|| internal_error(&id));
        if let Some(guard) = abandon {
            guard.disarm();
        }
        body
    });
    sse_response(head.chain(rest).chain(last))
}

/// The JSON answer of a request whose response came before anything else (`None`: the
/// request's work failed without one).
pub(super) fn json_final(response: Option<Final>, id: &Id) -> Response {
    match response {
        Some(Final { withheld: true, .. }) => sse_headers(Response::new(Body::empty())),
        Some(Final { body, status, retry_after, withheld: false }) => {
            let mut resp = json_response(status, body);
            if let Some(after) = retry_after {
                let after = after.as_secs().max(1);
                resp.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(after));
            }
            resp
        }
        None => json_response(StatusCode::OK, internal_error(id)),
    }
}

pub(super) fn internal_error(id: &Id) -> String {
    jsonrpc::encode_error(Some(id), code::INTERNAL_ERROR, "Internal error", None)
}

pub(super) fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

fn sse_response(messages: impl Stream<Item = String> + Send + 'static) -> Response {
    // Empty messages only asked for the stream to open; they carry nothing.
    let body = messages
        .filter(|m| futures::future::ready(!m.is_empty()))
        .map(|m| Ok::<_, Infallible>(sse::encode_message(&m, None)));
    sse_headers(Response::new(Body::from_stream(body)))
}

/// A long-lived SSE stream of `messages`, kept alive with comments, ended with the
/// gateway (`closing`) or when `messages` ends.
pub(super) fn long_stream(
    messages: impl Stream<Item = String> + Send + 'static,
    closing: CancellationToken,
) -> Response {
    // `None` marks the end of the messages: the stream ends there, keep-alives too.
    let events = messages.map(|m| Some(sse::encode_message(&m, None))).chain(futures::stream::once(async { None }));
    let keep_alive = futures::stream::unfold((), |()| async {
        tokio::time::sleep(KEEP_ALIVE).await;
        Some((Some(Bytes::from_static(b": keep-alive\n\n")), ()))
    });
    let end = async move { closing.cancelled().await };
    let body = futures::stream::select(events, keep_alive)
        .take_while(|item| futures::future::ready(item.is_some()))
        .filter_map(futures::future::ready)
        .take_until(Box::pin(end))
        .map(Ok::<_, Infallible>);
    sse_headers(Response::new(Body::from_stream(body)))
}

pub(super) fn sse_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

pub(super) fn json_response(status: StatusCode, body: String) -> Response {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_header_parsing() {
        let mut h = HeaderMap::new();
        h.insert(header::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        let a = accepts(&h);
        assert!(a.json && a.sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("text/html"));
        let a = accepts(&h);
        assert!(!a.json && !a.sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(accepts(&h).sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("application/*;q=0.9"));
        let a = accepts(&h);
        assert!(a.json && !a.sse);
        h.insert(header::ACCEPT, HeaderValue::from_static("Application/JSON; charset=utf-8,TEXT/*"));
        let a = accepts(&h);
        assert!(a.json && a.sse);
        for range in ["applicatio/*", "application*", "/*", "text/event-stream/*"] {
            h.insert(header::ACCEPT, HeaderValue::from_str(range).expect("header"));
            let a = accepts(&h);
            assert!(!a.json && !a.sse, "{range}");
        }
        h.remove(header::ACCEPT);
        h.append(header::ACCEPT, HeaderValue::from_static("text/html"));
        h.append(header::ACCEPT, HeaderValue::from_static("text/event-stream"));
        let a = accepts(&h);
        assert!(!a.json && a.sse);
        // A value that is not visible ASCII counts as absent.
        h.remove(header::ACCEPT);
        h.append(header::ACCEPT, HeaderValue::from_bytes(b"text/\xffhtml").expect("obs-text"));
        let a = accepts(&h);
        assert!(a.json && a.sse);
    }

    #[test]
    fn content_type_is_matched_exactly() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(header::CONTENT_TYPE, HeaderValue::from_static(v));
            is_json(&h)
        };
        assert!(with("application/json"));
        assert!(with("Application/JSON; charset=utf-8"));
        assert!(!with("application/jsonp"));
        assert!(!with("application/json-seq"));
        assert!(!with("text/json"));
        assert!(!is_json(&HeaderMap::new()));
        let mut twice = HeaderMap::new();
        twice.append(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        twice.append(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        assert!(!is_json(&twice));
    }
}
