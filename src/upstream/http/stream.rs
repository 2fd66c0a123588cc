//! What the upstream sends back over HTTP: the answer to a POST (a JSON body, or an SSE
//! stream carrying related messages first, resumed with `Last-Event-ID` when it closes
//! early), and the standalone GET stream for messages tied to no request.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use http::header::CONTENT_TYPE;

use super::{HttpLink, Outcome, SessionState, status_error};
use crate::call::{EventSink, Reply, UpstreamError, UpstreamEvent};
use crate::jsonrpc::{self, Id, Message};
use crate::mcp::method;
use crate::sse;
use crate::upstream::client::UpstreamResponse;

/// How many times a call's stream may be resumed without any new event arriving.
const MAX_IDLE_RESUMES: u32 = 3;
/// Upper bound on a server-requested reconnection delay.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(10);
/// First wait before the standalone GET stream is opened again; doubles on each failure.
const GET_RETRY_BASE: Duration = Duration::from_millis(500);
/// Longest wait before the standalone GET stream is opened again.
const GET_RETRY_MAX: Duration = Duration::from_secs(30);

impl HttpLink {
    /// Reads the answer to a POSTed request: a JSON body, or an SSE stream carrying related
    /// messages before the answer (resumed with `Last-Event-ID` if the upstream closes it early).
    pub(super) async fn read_answer(
        self: &Arc<Self>,
        resp: UpstreamResponse,
        id: &Id,
        related: Option<&EventSink>,
        state: &SessionState,
    ) -> Result<Outcome, UpstreamError> {
        let status = resp.status();
        if status == http::StatusCode::NOT_FOUND && state.session_id.is_some() {
            return Ok(Outcome::SessionExpired);
        }
        if status == http::StatusCode::ACCEPTED || status == http::StatusCode::NO_CONTENT {
            return Ok(Outcome::Accepted);
        }
        let content_type =
            resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
        if !status.is_success() {
            // A modern upstream answers envelope and parameter errors (400) and unknown
            // methods (404) with the JSON-RPC error itself.
            if state.modern && status.is_client_error() && content_type.starts_with("application/json") {
                let retry = status_error(resp.status(), resp.headers());
                let body = read_bounded(resp, self.up.max_message_bytes).await?;
                if let Ok(text) = std::str::from_utf8(&body)
                    && let Ok(Message::Response(r)) = jsonrpc::decode(text)
                    && &r.id == id
                {
                    return Ok(Outcome::Reply(r.body));
                }
                return Err(retry);
            }
            return Err(status_error(resp.status(), resp.headers()));
        }
        if content_type.starts_with("text/event-stream") {
            if let Some(sink) = related {
                sink.send(UpstreamEvent::Streaming);
            }
            return Box::pin(self.read_stream(resp, id, related, state)).await;
        }
        if !content_type.starts_with("application/json") {
            return Err(UpstreamError::Protocol(format!(
                "unexpected content type {:?}",
                content_type.chars().take(64).collect::<String>()
            )));
        }
        let body = read_bounded(resp, self.up.max_message_bytes).await?;
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Outcome::Accepted);
        }
        let text = std::str::from_utf8(&body).map_err(|_| UpstreamError::Protocol("answer is not UTF-8".into()))?;
        match self.up.known.decode(text) {
            Ok(Message::Response(r)) if &r.id == id => Ok(Outcome::Reply(r.body)),
            Ok(_) => Err(UpstreamError::Protocol("the JSON answer is not the response to the request".into())),
            Err(e) => Err(UpstreamError::Protocol(format!("invalid JSON-RPC answer: {e}"))),
        }
    }

    async fn read_stream(
        self: &Arc<Self>,
        resp: UpstreamResponse,
        id: &Id,
        related: Option<&EventSink>,
        state: &SessionState,
    ) -> Result<Outcome, UpstreamError> {
        let mut last_event_id: Option<String> = None;
        let mut retry = Duration::ZERO;
        let mut idle_resumes = 0;
        let mut stream = Box::pin(sse::decode_stream(resp.bytes_stream(), self.up.max_message_bytes));
        loop {
            let mut saw_event = false;
            while let Some(event) = stream.next().await {
                let event = event.map_err(|e| match e {
                    sse::SseError::TooLarge(limit) => UpstreamError::TooLarge { limit },
                    sse::SseError::Body(e) => UpstreamError::Io(e.into()),
                })?;
                saw_event = true;
                if let Some(ms) = event.retry {
                    retry = Duration::from_millis(ms).min(MAX_RETRY_DELAY);
                }
                if event.id.is_some() {
                    last_event_id.clone_from(&event.id);
                }
                if let Some(reply) = self.dispatch_event(&event, Some(id), related) {
                    return Ok(Outcome::Reply(reply));
                }
            }
            // The stream ended without our answer: resume it if the upstream gave event ids.
            let Some(last) = last_event_id.as_deref() else {
                return Err(UpstreamError::Io("the upstream closed the stream before answering".into()));
            };
            idle_resumes = if saw_event { 0 } else { idle_resumes + 1 };
            if idle_resumes > MAX_IDLE_RESUMES {
                return Err(UpstreamError::Io("the upstream stream keeps closing without answering".into()));
            }
            tokio::time::sleep(retry).await;
            let resp = self.get(state, Some(last)).await?;
            if !resp.status().is_success() {
                return Err(status_error(resp.status(), resp.headers()));
            }
            stream = Box::pin(sse::decode_stream(resp.bytes_stream(), self.up.max_message_bytes));
        }
    }

    /// Handles one SSE event; returns the answer when it is the response to `id`.
    pub(super) fn dispatch_event(
        self: &Arc<Self>,
        event: &sse::Event,
        id: Option<&Id>,
        related: Option<&EventSink>,
    ) -> Option<Reply> {
        if event.data.trim().is_empty() {
            return None; // priming or keep-alive event
        }
        match self.up.known.decode(&event.data) {
            Ok(Message::Response(r)) if Some(&r.id) == id => return Some(r.body),
            Ok(Message::Response(r)) => {
                tracing::debug!(upstream = %self.up.name, id = %r.id, "ignored a response to an unknown request");
            }
            Ok(Message::Notification(n)) => self.deliver(UpstreamEvent::Notification(n), related),
            Ok(Message::Request(r)) if r.method == method::PING => {
                let link = Arc::clone(self);
                tokio::spawn(async move {
                    let _ = link.respond(r.id, Ok(jsonrpc::to_raw(&serde_json::json!({})))).await;
                });
            }
            Ok(Message::Request(r)) => self.deliver(UpstreamEvent::Request(r), related),
            Err(e) => {
                tracing::warn!(upstream = %self.up.name, error = %e, "skipped an invalid message from the upstream")
            }
        }
        None
    }

    fn deliver(&self, event: UpstreamEvent, related: Option<&EventSink>) {
        match related {
            Some(sink) => self.shared.deliver_related(sink, event),
            None => self.shared.deliver_unrelated(event),
        }
    }

    /// Keeps a GET stream open for messages not tied to a request, reconnecting with backoff.
    pub(super) fn start_get_stream(self: &Arc<Self>) {
        self.get_opening.send_replace(true);
        let weak = Arc::downgrade(self);
        let handle = tokio::spawn(get_stream_loop(weak));
        if let Some(old) = self.get_stream.lock().replace(handle.abort_handle()) {
            old.abort();
        }
    }
}

async fn get_stream_loop(weak: Weak<HttpLink>) {
    let mut failures: u32 = 0;
    let mut last_event_id: Option<String> = None;
    loop {
        let Some(link) = weak.upgrade() else { return };
        if link.closed.load(Ordering::SeqCst) {
            return;
        }
        let state = link.snapshot();
        let answer = link.get(&state, last_event_id.as_deref()).await;
        // Open, refused or failed: the requests waiting for it go on.
        link.get_opening.send_replace(false);
        match answer {
            Ok(resp) if resp.status() == http::StatusCode::METHOD_NOT_ALLOWED => return,
            Ok(resp) if resp.status() == http::StatusCode::NOT_FOUND => return,
            Ok(resp) if resp.status().is_success() => {
                failures = 0;
                let stream = sse::decode_stream(resp.bytes_stream(), link.up.max_message_bytes);
                drop(link);
                if let Some(last) = pump_unrelated(&weak, stream).await {
                    last_event_id = Some(last);
                }
            }
            Ok(resp) => {
                tracing::debug!(upstream = %link.up.name, status = %resp.status(), "upstream refused the GET stream");
            }
            Err(e) => tracing::debug!(upstream = %link.up.name, error = %e, "GET stream failed"),
        }
        tokio::time::sleep(crate::backoff::doubling(GET_RETRY_BASE, GET_RETRY_MAX, failures)).await;
        failures = failures.saturating_add(1);
    }
}

/// Delivers a standalone stream's events; returns the last event id seen.
async fn pump_unrelated(
    weak: &Weak<HttpLink>,
    stream: impl Stream<Item = Result<sse::Event, sse::SseError>>,
) -> Option<String> {
    let mut stream = Box::pin(stream);
    let mut last = None;
    while let Some(Ok(event)) = stream.next().await {
        let link = weak.upgrade()?;
        if event.id.is_some() {
            last.clone_from(&event.id);
        }
        link.dispatch_event(&event, None, None);
    }
    last
}

/// Reads a body, refusing more than `limit` bytes.
async fn read_bounded(mut resp: UpstreamResponse, limit: usize) -> Result<Vec<u8>, UpstreamError> {
    let declared = resp.content_length();
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(UpstreamError::TooLarge { limit });
    }
    // Sized once when the upstream declared its length (at most `limit`, checked above).
    let mut body = Vec::with_capacity(declared.map_or(0, |n| n as usize));
    while let Some(chunk) = resp.chunk().await? {
        if body.len() + chunk.len() > limit {
            return Err(UpstreamError::TooLarge { limit });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
