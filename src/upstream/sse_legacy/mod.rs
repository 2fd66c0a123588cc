//! HTTP+SSE upstreams (the transport of protocol version 2024-11-05): one [`SseLink`]
//! per client session.
//!
//! The link GETs the server's event stream, whose first event (`endpoint`) names the URL
//! to POST messages to; every answer and server message then arrives as a `message`
//! event on that one stream, and answers are matched to calls by id. When the stream
//! drops, the calls waiting on it fail at once (the connection broke, so only idempotent
//! ones are retried), and the link opens a new stream — a new upstream session,
//! initialised again — with backoff; calls arriving meanwhile wait for it, up to the
//! connect timeout. Closing the link closes the stream, which ends the upstream session.
//!
//! This file holds the link calls use; `stream` opens the event stream, performs the
//! handshake, reads and routes events, and reopens the stream when it drops; `post`
//! sends messages to the endpoint. Both go through the upstream's
//! [`UpstreamClient`], like Streamable HTTP upstreams.

mod post;
mod stream;

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use http::Uri;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue};
use parking_lot::Mutex;
use tokio::sync::{Notify, oneshot, watch};
use tokio::task::AbortHandle;
use tokio_util::sync::CancellationToken;

use super::LinkShared;
use super::cancel::CancelGuard;
use super::client::UpstreamClient;
use crate::call::{BoxFuture, EventSink, Reply, Transport, UpstreamCall, UpstreamError, fresh_id};
use crate::jsonrpc::{self, Id, Notification};
use crate::mcp::init::{InitParams, InitResult};
use crate::mcp::{meta, method};

/// One configured HTTP+SSE upstream: the URL of its event stream, static headers and
/// the connection pool its requests share.
pub(crate) struct SseUpstream {
    /// The upstream's name (for logs).
    pub name: Arc<str>,
    client: UpstreamClient,
    /// The event stream's URL, which `endpoint` events are resolved against.
    url: url::Url,
    /// `url`, parsed once for requests.
    uri: Uri,
    /// The static headers of the GET: the configured ones and `Accept`.
    get_headers: HeaderMap,
    /// The static headers of a POST: the configured ones and `Content-Type`.
    post_headers: HeaderMap,
    max_message_bytes: usize,
    connect_timeout: Duration,
}

impl SseUpstream {
    /// Builds the upstream and its pooled client.
    pub(crate) fn new(
        name: &str,
        url: &str,
        headers: &std::collections::BTreeMap<String, String>,
        connect_timeout: Duration,
        max_message_bytes: usize,
    ) -> anyhow::Result<SseUpstream> {
        let map = super::header_map(headers)?;
        // No overall timeout: the event stream lives as long as the session.
        let client = UpstreamClient::new(connect_timeout)?;
        let url = url::Url::parse(url)?;
        let uri: Uri = url.as_str().parse()?;
        let mut get_headers = map.clone();
        get_headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let mut post_headers = map;
        post_headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let name = Arc::from(name);
        Ok(SseUpstream { name, client, url, uri, get_headers, post_headers, max_message_bytes, connect_timeout })
    }
}

/// One open event stream: where to POST, and the calls waiting for answers on it.
struct Conn {
    /// The URL the `endpoint` event named.
    endpoint: Uri,
    pending: Mutex<HashMap<Id, Pending>>,
    /// Fired when the stream is gone (closed by either side, or refused by a POST).
    lost: CancellationToken,
    reader: Mutex<Option<AbortHandle>>,
}

/// A call waiting for its answer.
struct Pending {
    tx: oneshot::Sender<Reply>,
    /// Where the call's related messages go (`None` for the handshake).
    related: Option<EventSink>,
}

impl Conn {
    /// Ends the stream: stops its reader and fails every call waiting on it. Idempotent.
    fn shut(&self) {
        self.lost.cancel();
        if let Some(reader) = self.reader.lock().take() {
            reader.abort();
        }
        let waiting: Vec<Pending> = self.pending.lock().drain().map(|(_, p)| p).collect();
        drop(waiting);
    }
}

/// The link's state as calls see it.
#[derive(Clone)]
enum Phase {
    /// The stream is open and the upstream session initialised.
    Ready(Arc<Conn>),
    /// No stream; the reason, for calls that give up waiting.
    Down(String),
    /// The client session ended.
    Closed,
}

/// One client session's HTTP+SSE session with an upstream.
pub(crate) struct SseLink {
    me: Weak<SseLink>,
    up: Arc<SseUpstream>,
    shared: LinkShared,
    init_params: InitParams,
    phase: watch::Sender<Phase>,
    /// The initialize result of the last upstream session.
    init: Mutex<Option<Arc<InitResult>>>,
    /// A call is waiting for the stream: reopen it now rather than after the backoff.
    wake: Arc<Notify>,
    supervisor: Mutex<Option<AbortHandle>>,
}

impl SseLink {
    /// Opens the event stream and initialises the upstream session, within the connect
    /// timeout; from then on the stream is reopened whenever it drops.
    pub(crate) async fn connect(up: Arc<SseUpstream>, init_params: InitParams) -> Result<Arc<SseLink>, UpstreamError> {
        let link = Arc::new_cyclic(|me| SseLink {
            me: me.clone(),
            up,
            shared: LinkShared::default(),
            init_params,
            phase: watch::channel(Phase::Down("the event stream is not open yet".into())).0,
            init: Mutex::new(None),
            wake: Arc::new(Notify::new()),
            supervisor: Mutex::new(None),
        });
        let conn = link.establish().await?;
        link.set_phase(Phase::Ready(Arc::clone(&conn)));
        let task = tokio::spawn(stream::supervise(Arc::downgrade(&link), conn));
        *link.supervisor.lock() = Some(task.abort_handle());
        Ok(link)
    }

    /// The upstream's initialize result.
    pub(crate) fn init_result(&self) -> Option<Arc<InitResult>> {
        self.init.lock().clone()
    }

    /// Moves to `next` unless the link is closed; false when it is.
    fn set_phase(&self, next: Phase) -> bool {
        self.phase.send_if_modified(|phase| {
            if matches!(phase, Phase::Closed) {
                return false;
            }
            *phase = next;
            true
        })
    }

    /// Waits for an open stream, at most `limit`; a link that is down is woken so that it
    /// reopens its stream now.
    async fn ready(&self, limit: Duration) -> Result<Arc<Conn>, UpstreamError> {
        let mut rx = self.phase.subscribe();
        let wait = async {
            loop {
                match &*rx.borrow_and_update() {
                    Phase::Ready(conn) if !conn.lost.is_cancelled() => return Ok(Arc::clone(conn)),
                    Phase::Closed => return Err(UpstreamError::SessionLost("the session is closed".into())),
                    Phase::Ready(_) | Phase::Down(_) => self.wake.notify_one(),
                }
                if rx.changed().await.is_err() {
                    return Err(UpstreamError::NotRunning("the link stopped".into()));
                }
            }
        };
        match tokio::time::timeout(limit, wait).await {
            Ok(conn) => conn,
            Err(_) => Err(UpstreamError::Connect(match &*self.phase.borrow() {
                Phase::Down(why) => why.as_str().into(),
                _ => "the event stream did not reopen in time".into(),
            })),
        }
    }

    /// How long a call may wait for the stream: the connect timeout, within its deadline.
    fn wait_limit(&self, call: &UpstreamCall) -> Duration {
        let deadline = call.attempt_deadline.unwrap_or_else(|| call.clock.deadline());
        deadline.saturating_duration_since(tokio::time::Instant::now()).min(self.up.connect_timeout)
    }

    /// Sends a request and waits for its answer on the stream.
    async fn call(&self, call: &UpstreamCall) -> Result<Reply, UpstreamError> {
        let conn = self.ready(self.wait_limit(call)).await?;
        let _progress = call.progress_token.as_ref().map(|t| self.shared.progress.register(t, call.events.clone()));
        let id = fresh_id();
        let (tx, rx) = oneshot::channel();
        conn.pending.lock().insert(id.clone(), Pending { tx, related: Some(call.events.clone()) });
        if conn.lost.is_cancelled() {
            // The stream went between `ready` and now: nothing was sent.
            conn.pending.lock().remove(&id);
            return Err(UpstreamError::Connect("the upstream's event stream just closed".into()));
        }
        let (link, weak_conn, sent) = (self.me.clone(), Arc::downgrade(&conn), id.clone());
        let mut guard = CancelGuard::new(move |abandoned| end_call(&link, &weak_conn, sent, abandoned));
        let body = jsonrpc::encode_request(&id, &call.method, call.params.as_deref());
        if let Err(e) = self.post_with(&conn, body, &super::trace_headers(call)).await {
            // Refused or not delivered: there is nothing upstream to cancel.
            guard.disarm();
            return Err(e);
        }
        let reply = rx.await;
        guard.disarm();
        reply.map_err(|_| UpstreamError::Io("the upstream's event stream closed before the answer arrived".into()))
    }

    /// Closes the stream (the upstream session ends with it) and stops reopening it.
    pub(crate) async fn close(&self) {
        let previous = self.phase.send_replace(Phase::Closed);
        if let Some(task) = self.supervisor.lock().take() {
            task.abort();
        }
        if let Phase::Ready(conn) = previous {
            conn.shut();
        }
    }
}

impl Drop for SseLink {
    fn drop(&mut self) {
        if let Some(task) = self.supervisor.lock().take() {
            task.abort();
        }
        if let Phase::Ready(conn) = &*self.phase.borrow() {
            conn.shut();
        }
    }
}

impl Transport for SseLink {
    fn send<'a>(&'a self, call: &'a UpstreamCall) -> BoxFuture<'a, Result<Reply, UpstreamError>> {
        Box::pin(self.call(call))
    }

    fn notify(&self, n: Notification) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(self.send_one_way(jsonrpc::encode_notification(&n.method, n.params.as_deref())))
    }

    fn respond(&self, _endpoint: Option<u16>, id: Id, body: Reply) -> BoxFuture<'_, Result<(), UpstreamError>> {
        Box::pin(self.send_one_way(jsonrpc::encode_reply(Some(&id), &body)))
    }

    fn init_result(&self) -> Option<Arc<InitResult>> {
        SseLink::init_result(self)
    }

    fn subscribe(&self, key: u64, sink: EventSink) {
        self.shared.fanout.subscribe(key, sink);
    }

    fn unsubscribe(&self, key: u64) {
        self.shared.fanout.unsubscribe(key);
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(SseLink::close(self))
    }
}

/// Forgets a call that is over; sends `notifications/cancelled` for one abandoned before
/// its answer, while its stream is still open.
fn end_call(link: &Weak<SseLink>, conn: &Weak<Conn>, id: Id, abandoned: bool) {
    let Some(conn) = conn.upgrade() else { return };
    conn.pending.lock().remove(&id);
    if !abandoned || conn.lost.is_cancelled() {
        return;
    }
    let (Some(link), Ok(rt)) = (link.upgrade(), tokio::runtime::Handle::try_current()) else { return };
    rt.spawn(async move {
        let params = meta::cancelled_params(&id, "cancelled by the gateway");
        let body = jsonrpc::encode_notification(method::CANCELLED, Some(&params));
        if let Err(e) = link.post(&conn, body).await {
            tracing::debug!(upstream = %link.up.name, error = %e, "could not deliver a cancellation");
        }
    });
}

#[cfg(test)]
mod tests {
    //! The HTTP+SSE link against the demo server's `/sse` on a real listener, port 0.

    use std::sync::Arc;
    use std::time::Duration;

    use futures::StreamExt as _;
    use serde_json::{Value, json};

    use super::*;
    use crate::call::{Clock, EventRx, UpstreamEvent};
    use crate::demo::{DemoConfig, DemoServer};

    /// Serves `app` on 127.0.0.1, port 0; returns `http://127.0.0.1:PORT`.
    async fn serve(app: axum::Router) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{addr}")
    }

    async fn demo() -> String {
        serve(crate::demo::http::router(DemoServer::new(DemoConfig::default(), None))).await
    }

    fn upstream(url: &str) -> Arc<SseUpstream> {
        Arc::new(SseUpstream::new("old", url, &Default::default(), Duration::from_secs(2), 1 << 20).unwrap())
    }

    fn init() -> InitParams {
        InitParams {
            protocol_version: "2024-11-05".into(),
            capabilities: json!({}),
            client_info: json!({"name": "t", "version": "1"}),
            modern_client: false,
        }
    }

    fn request(link: &Arc<SseLink>, method: &str, params: Value, progress: Option<Value>) -> (UpstreamCall, EventRx) {
        let (tx, rx) = crate::call::events(64);
        let call = UpstreamCall {
            upstream: Arc::from("old"),
            method: Arc::from(method),
            params: Some(Arc::from(jsonrpc::to_raw(&params))),
            progress_token: progress,
            tool: None,
            idempotent: true,
            clock: Clock::new(Duration::from_secs(10)),
            events: EventSink::new(Arc::from("old"), tx),
            target: Arc::clone(link) as crate::call::Link,
            avoid: Vec::new(),
            endpoint: None,
            attempt_deadline: None,
            headers: Arc::from([]),
            trace: Default::default(),
        };
        (call, rx)
    }

    async fn result_of(link: &Arc<SseLink>, method: &str, params: Value) -> Result<Value, UpstreamError> {
        let (call, _rx) = request(link, method, params, None);
        let reply = link.call(&call).await?;
        Ok(serde_json::from_str(reply.unwrap().get()).unwrap())
    }

    async fn sessions(base: &str) -> u64 {
        let stats: Value =
            serde_json::from_str(&reqwest::get(format!("{base}/admin/stats")).await.unwrap().text().await.unwrap())
                .unwrap();
        stats["sessions"].as_u64().unwrap()
    }

    #[tokio::test]
    async fn calls_are_answered_on_the_stream_concurrently_with_progress() {
        let base = demo().await;
        let link = SseLink::connect(upstream(&format!("{base}/sse")), init()).await.unwrap();
        let init = link.init_result().unwrap();
        assert_eq!(init.protocol_version, "2024-11-05");
        assert!(init.raw.get().contains("seawall-demo"), "{}", init.raw.get());

        let echoes = (0..4).map(|n| {
            let link = Arc::clone(&link);
            async move {
                result_of(&link, "tools/call", json!({"name": "echo", "arguments": {"message": format!("m{n}")}})).await
            }
        });
        for (n, result) in futures::future::join_all(echoes).await.into_iter().enumerate() {
            assert_eq!(result.unwrap()["content"][0]["text"], format!("m{n}"));
        }

        let token = json!("tok-1");
        let params = json!({"name": "sleep", "arguments": {"ms": 200}, "_meta": {"progressToken": token}});
        let (call, mut events) = request(&link, "tools/call", params, Some(token));
        let reply = link.call(&call).await.unwrap();
        assert!(reply.is_ok());
        let mut progress = 0;
        while let Some(tagged) = events.try_recv() {
            if matches!(&tagged.event, UpstreamEvent::Notification(n) if n.method == method::PROGRESS) {
                progress += 1;
            }
        }
        assert!(progress >= 2, "progress reached the call: {progress}");

        assert_eq!(sessions(&base).await, 1);
        link.close().await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(sessions(&base).await, 0, "closing the link ends the upstream session");
        assert!(matches!(result_of(&link, "ping", json!({})).await, Err(UpstreamError::SessionLost(_))));
    }

    #[tokio::test]
    async fn a_forgotten_session_is_replaced_by_a_new_stream() {
        let base = demo().await;
        let link = SseLink::connect(upstream(&format!("{base}/sse")), init()).await.unwrap();
        assert!(result_of(&link, "ping", json!({})).await.is_ok());
        // The demo forgets every session and closes their streams: a call racing the close
        // fails as a lost session; the link opens a new stream and upstream session.
        reqwest::Client::new().post(format!("{base}/admin/drop-sessions")).send().await.unwrap();
        match result_of(&link, "ping", json!({})).await {
            Ok(_) | Err(UpstreamError::SessionLost(_)) => {}
            Err(other) => panic!("{other:?}"),
        }
        assert!(result_of(&link, "tools/list", json!({})).await.unwrap()["tools"].is_array());
        assert_eq!(sessions(&base).await, 1, "one new upstream session");
        link.close().await;
    }

    #[tokio::test]
    async fn an_endpoint_on_another_origin_is_refused() {
        use axum::response::sse::{Event, Sse};
        let app = axum::Router::new().route(
            "/sse",
            axum::routing::get(|| async {
                let event = Event::default().event("endpoint").data("http://203.0.113.9/messages?sessionId=x");
                Sse::new(
                    futures::stream::iter([Ok::<_, std::convert::Infallible>(event)]).chain(futures::stream::pending()),
                )
            }),
        );
        let base = serve(app).await;
        let refused = SseLink::connect(upstream(&format!("{base}/sse")), init()).await.err();
        assert!(
            matches!(&refused, Some(UpstreamError::Handshake(why)) if why.contains("another origin")),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn nothing_listening_is_a_connect_failure() {
        let refused = SseLink::connect(upstream("http://127.0.0.1:9/sse"), init()).await.err();
        assert!(matches!(refused, Some(UpstreamError::Connect(_))), "{refused:?}");
    }
}
