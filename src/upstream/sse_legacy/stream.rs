//! The event stream of an HTTP+SSE upstream: opening it (GET, then the `endpoint` event),
//! the initialize handshake over it, reading and routing its `message` events, and
//! reopening it with backoff when it drops.

use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt};
use http::header::CONTENT_TYPE;
use http::{Method, Uri};
use parking_lot::Mutex;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::{Conn, Pending, Phase, SseLink};
use crate::call::{EventSink, UpstreamError, UpstreamEvent, fresh_id};
use crate::jsonrpc::{self, Message};
use crate::mcp::init::InitResult;
use crate::mcp::method;
use crate::sse;
use crate::upstream::failure::handshake_error;

/// First wait before the stream is reopened; doubles while reopening keeps failing.
const REOPEN_BASE: Duration = Duration::from_millis(250);
/// Longest wait between attempts to reopen the stream when no call needs it.
const REOPEN_MAX: Duration = Duration::from_secs(30);
/// Shortest wait between attempts, even with calls waiting; doubles like the backoff.
const REOPEN_GAP_BASE: Duration = Duration::from_millis(100);
/// Longest such wait: with calls waiting, an attempt at least this often.
const REOPEN_GAP_MAX: Duration = Duration::from_secs(2);

type Events = Pin<Box<dyn Stream<Item = Result<sse::Event, sse::SseError>> + Send>>;

/// Shuts a stream that is being opened unless it is handed over: a failed or abandoned
/// handshake leaves no reader behind.
struct Opening(Option<Arc<Conn>>);

impl Drop for Opening {
    fn drop(&mut self) {
        if let Some(conn) = self.0.take() {
            conn.shut();
        }
    }
}

impl SseLink {
    /// Opens the event stream and initialises a new upstream session on it, within the
    /// connect timeout.
    pub(super) async fn establish(self: &Arc<Self>) -> Result<Arc<Conn>, UpstreamError> {
        match tokio::time::timeout(self.up.connect_timeout, self.open_and_initialize()).await {
            Ok(conn) => conn,
            Err(_) => Err(UpstreamError::Handshake("the event stream and initialize took too long".into())),
        }
    }

    async fn open_and_initialize(self: &Arc<Self>) -> Result<Arc<Conn>, UpstreamError> {
        let (endpoint, events) = self.open_stream().await?;
        let conn = Arc::new(Conn {
            endpoint,
            pending: Mutex::new(Default::default()),
            lost: CancellationToken::new(),
            reader: Mutex::new(None),
        });
        let mut opening = Opening(Some(Arc::clone(&conn)));
        let reader = tokio::spawn(read_events(Arc::downgrade(self), Arc::clone(&conn), events));
        *conn.reader.lock() = Some(reader.abort_handle());
        self.initialize(&conn).await?;
        opening.0 = None;
        Ok(conn)
    }

    /// GETs the event stream and reads up to its `endpoint` event.
    async fn open_stream(&self) -> Result<(Uri, Events), UpstreamError> {
        let up = &self.up;
        let resp = up.client.send(Method::GET, &up.uri, &up.get_headers, &[], String::new()).await;
        let resp = resp.map_err(handshake_error)?;
        let status = resp.status();
        if !status.is_success() {
            return Err(UpstreamError::Handshake(format!("the event stream was refused with HTTP {status}")));
        }
        let content_type = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        if !content_type.to_ascii_lowercase().starts_with("text/event-stream") {
            return Err(UpstreamError::Handshake("the event stream URL did not answer with an event stream".into()));
        }
        let mut events: Events = Box::pin(sse::decode_stream(resp.bytes_stream(), self.up.max_message_bytes));
        loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    return Ok((self.endpoint_url(&event.data)?, events));
                }
                Some(Ok(_)) => tracing::debug!(upstream = %self.up.name, "skipped an event before `endpoint`"),
                Some(Err(e)) => return Err(UpstreamError::Handshake(format!("the event stream failed: {e}"))),
                None => {
                    return Err(UpstreamError::Handshake("the event stream ended before naming its endpoint".into()));
                }
            }
        }
    }

    /// The URL an `endpoint` event names, resolved against the stream's URL. It must
    /// stay on the stream's origin, so an upstream cannot direct seawall's POSTs (and
    /// their configured headers) elsewhere.
    fn endpoint_url(&self, data: &str) -> Result<Uri, UpstreamError> {
        let url = self
            .up
            .url
            .join(data.trim())
            .map_err(|e| UpstreamError::Handshake(format!("the endpoint event is not a URL: {e}")))?;
        if url.origin() != self.up.url.origin() {
            return Err(UpstreamError::Handshake("the endpoint event names another origin".into()));
        }
        url.as_str().parse().map_err(|e| UpstreamError::Handshake(format!("the endpoint event is not a URI: {e}")))
    }

    /// `initialize`, its answer on the stream, then `notifications/initialized`.
    async fn initialize(&self, conn: &Conn) -> Result<(), UpstreamError> {
        let id = fresh_id();
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().insert(id.clone(), Pending { tx, related: None });
        let body = jsonrpc::encode_request(&id, method::INITIALIZE, Some(&self.init_params.to_raw()));
        self.post(conn, body).await.map_err(handshake_error)?;
        let reply = rx
            .await
            .map_err(|_| UpstreamError::Handshake("the event stream closed before the initialize answer".into()))?;
        let result = reply.map_err(|err| UpstreamError::Handshake(format!("initialize refused: {}", err.get())))?;
        let init = InitResult::parse(result)
            .ok_or_else(|| UpstreamError::Handshake("initialize result lacks protocolVersion".into()))?;
        *self.init.lock() = Some(Arc::new(init));
        let note = jsonrpc::encode_notification(method::INITIALIZED, None);
        self.post(conn, note).await.map_err(handshake_error)
    }

    /// Routes one event of the stream: an answer to its call, anything else to the session.
    fn dispatch(self: &Arc<Self>, conn: &Arc<Conn>, event: &sse::Event) {
        if event.event.as_deref().is_some_and(|kind| kind != "message") || event.data.trim().is_empty() {
            return; // another endpoint event, or a keep-alive
        }
        match jsonrpc::decode(&event.data) {
            Ok(Message::Response(r)) => match conn.pending.lock().remove(&r.id) {
                Some(pending) => {
                    let _ = pending.tx.send(r.body);
                }
                None => {
                    tracing::debug!(upstream = %self.up.name, id = %r.id, "ignored a response to an unknown request")
                }
            },
            Ok(Message::Notification(n)) => self.shared.deliver_unrelated(UpstreamEvent::Notification(n)),
            Ok(Message::Request(r)) if r.method == method::PING => {
                let (link, conn) = (Arc::clone(self), Arc::clone(conn));
                tokio::spawn(async move {
                    let body = jsonrpc::encode_reply(Some(&r.id), &Ok(jsonrpc::to_raw(&serde_json::json!({}))));
                    let _ = link.post(&conn, body).await;
                });
            }
            Ok(Message::Request(r)) => {
                // One stream for everything: a request made while exactly one call is in
                // flight belongs with that call; otherwise it goes to the session.
                let sole: Option<EventSink> = {
                    let pending = conn.pending.lock();
                    if pending.len() == 1 { pending.values().next().and_then(|p| p.related.clone()) } else { None }
                };
                let event = UpstreamEvent::Request(r);
                match sole {
                    Some(sink) => self.shared.deliver_related(&sink, event),
                    None => self.shared.deliver_unrelated(event),
                }
            }
            Err(e) => {
                tracing::warn!(upstream = %self.up.name, error = %e, "skipped an invalid message from the upstream")
            }
        }
    }
}

/// Reads the stream until it ends, then shuts it (failing the calls waiting on it).
async fn read_events(link: Weak<SseLink>, conn: Arc<Conn>, mut events: Events) {
    while let Some(event) = events.next().await {
        let Some(link) = link.upgrade() else { break };
        match event {
            Ok(event) => link.dispatch(&conn, &event),
            Err(e) => {
                tracing::warn!(upstream = %link.up.name, error = %e, "the upstream's event stream failed");
                break;
            }
        }
    }
    conn.shut();
}

/// Keeps the link's stream open: whenever it drops, marks the link down and reopens it
/// with backoff (sooner when a call is waiting), initialising a new upstream session.
pub(super) async fn supervise(link: Weak<SseLink>, mut conn: Arc<Conn>) {
    loop {
        conn.lost.cancelled().await;
        conn.shut();
        let wake = {
            let Some(l) = link.upgrade() else { return };
            if !l.set_phase(Phase::Down("the upstream's event stream closed".into())) {
                return;
            }
            tracing::warn!(upstream = %l.up.name, "the upstream's event stream closed; reopening it");
            Arc::clone(&l.wake)
        };
        let mut failures: u32 = 0;
        conn = loop {
            tokio::time::sleep(crate::backoff::doubling(REOPEN_GAP_BASE, REOPEN_GAP_MAX, failures)).await;
            tokio::select! {
                () = tokio::time::sleep(crate::backoff::doubling(REOPEN_BASE, REOPEN_MAX, failures)) => {}
                () = wake.notified() => {}
            }
            let Some(l) = link.upgrade() else { return };
            match l.establish().await {
                Ok(fresh) => {
                    if !l.set_phase(Phase::Ready(Arc::clone(&fresh))) {
                        fresh.shut();
                        return;
                    }
                    tracing::info!(upstream = %l.up.name, attempts = failures + 1, "reopened the upstream's event stream");
                    crate::telemetry::metrics::upstream_restart(&l.up.name);
                    break fresh;
                }
                Err(e) => {
                    tracing::debug!(upstream = %l.up.name, error = %e, "could not reopen the upstream's event stream");
                    if !l.set_phase(Phase::Down(e.to_string())) {
                        return;
                    }
                    failures = failures.saturating_add(1);
                }
            }
        };
    }
}
