//! What each line from the client does: `initialize` opens the session as on HTTP,
//! requests run in tasks of their own, notifications and the client's answers to server
//! requests go to the gateway, batches (2025-03-26) are answered with one array line.

use std::sync::Arc;

use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use super::StdioClient;
use super::output::{self, Output};
use super::refusal::Refusal;
use crate::gateway::{Gateway, InitError};
use crate::jsonrpc::{self, Id, Message, Notification, Payload, Request};
use crate::mcp::{self, method};
use crate::session::Session;
use crate::session::cancelled::{InFlight, Tracked};

/// The client's side of the stdio connection: its session, once initialized, and its
/// requests in flight.
pub(super) struct Conn {
    gateway: Arc<Gateway>,
    client: StdioClient,
    out: Output,
    session: Option<Arc<Session>>,
    relay: Option<JoinHandle<()>>,
    /// Every task that answers a request; the drain at the end waits for them.
    pub(super) tasks: TaskTracker,
    inflight: InFlight,
}

impl Conn {
    pub(super) fn new(gateway: Arc<Gateway>, client: StdioClient, out: Output) -> Conn {
        Conn {
            gateway,
            client,
            out,
            session: None,
            relay: None,
            tasks: TaskTracker::new(),
            inflight: InFlight::default(),
        }
    }

    /// The session, once `initialize` opened it.
    pub(super) fn session(&self) -> Option<&Arc<Session>> {
        self.session.as_ref()
    }

    /// Stops relaying the session's messages and lets go of the output, so the writer
    /// can finish once the last task has answered.
    pub(super) fn close(self) {
        if let Some(relay) = self.relay {
            relay.abort();
        }
    }

    /// A line over the limit was read and thrown away.
    pub(super) async fn too_large(&self) {
        let limit = self.client.max_line_bytes;
        self.refuse(Refusal::TooLarge { limit }, None).await;
    }

    /// Handles one line (without its terminator).
    pub(super) async fn line(&mut self, bytes: &[u8]) {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match jsonrpc::split_payload(bytes) {
            Err(e) => self.refuse(Refusal::Malformed(e), None).await,
            Ok(Payload::Single(text)) => match jsonrpc::decode(text) {
                Ok(msg) => self.message(msg).await,
                Err(e) => self.refuse(Refusal::Malformed(e), None).await,
            },
            Ok(Payload::Batch(items)) => {
                let items = items.iter().map(|r| r.get().to_owned()).collect();
                self.batch(items).await;
            }
        }
    }

    async fn refuse(&self, refusal: Refusal, id: Option<&Id>) {
        self.out.send(refusal.answer(id)).await;
    }

    async fn message(&mut self, msg: Message) {
        let Some(session) = self.session.clone() else {
            return self.before_initialize(msg).await;
        };
        match msg {
            Message::Request(req) => self.request(session, req),
            Message::Notification(n) => self.notification(&session, n).await,
            Message::Response(r) => self.gateway.handle_response(&session, r).await,
        }
    }

    /// Before `initialize` only `ping` is answered (MCP lifecycle).
    async fn before_initialize(&mut self, msg: Message) {
        match msg {
            Message::Request(req) if req.method == method::INITIALIZE => self.initialize(req).await,
            Message::Request(req) if req.method == method::PING => {
                let empty = jsonrpc::to_raw(&serde_json::json!({}));
                self.out.send(jsonrpc::encode_response(Some(&req.id), Ok(&empty))).await;
            }
            Message::Request(req) => self.refuse(Refusal::NotInitialized, Some(&req.id)).await,
            Message::Notification(n) => tracing::debug!(method = %n.method, "ignored a notification before initialize"),
            Message::Response(r) => tracing::debug!(id = %r.id, "ignored a response before initialize"),
        }
    }

    /// Opens the session as `initialize` on HTTP does (without a peer address). Later
    /// lines wait for it, as a client waits for the answer before it sends more.
    async fn initialize(&mut self, req: Request) {
        let client = &self.client;
        let opened = self
            .gateway
            .initialize(client.scope.clone(), &req, None, client.principal.clone(), crate::session::Front::Stdio, None)
            .await;
        match opened {
            Ok((session, result)) => {
                self.out.send(jsonrpc::encode_response(Some(&req.id), Ok(&result))).await;
                // Messages not tied to a request follow the answer, never precede it.
                if let Some(queue) = session.take_outbox() {
                    let relay =
                        output::relay_session(Arc::clone(&session), queue, self.out.clone(), client.idle_timeout);
                    self.relay = Some(tokio::spawn(relay));
                }
                // The client always listens: upstreams open their streams for messages
                // not tied to a request, as they do when an HTTP client opens its GET stream.
                session.open_upstream_streams().await;
                self.session = Some(session);
            }
            Err(InitError::Invalid(why)) => self.refuse(Refusal::InvalidInitialize(why), Some(&req.id)).await,
            Err(InitError::Full { retry_after }) => {
                crate::telemetry::metrics::load_shed("sessions");
                self.refuse(Refusal::TooManySessions { retry_after }, Some(&req.id)).await;
            }
            Err(InitError::Failed(e)) => {
                let reply = self.gateway.rewriter().failure(&e, None);
                self.out.send(jsonrpc::encode_reply(Some(&req.id), &reply)).await;
            }
        }
    }

    /// Runs a request in its own task, so a slow call blocks nothing else; its answer is
    /// written when it completes. A refusal's HTTP hint (503, 429) has no stdio form: the
    /// JSON-RPC error says it all. The answer to a request the client cancelled is not
    /// sent: the receiver of `notifications/cancelled` sends nothing.
    fn request(&self, session: Arc<Session>, req: Request) {
        let tracked = self.inflight.track(&req.id);
        let gateway = Arc::clone(&self.gateway);
        let out = self.out.clone();
        self.tasks.spawn(async move {
            let answer = gateway.handle_request(&session, req, Some(out.sender()), None).await;
            if tracked.as_ref().is_some_and(Tracked::cancelled) {
                tracing::debug!(session = session.key, "withheld the answer to a request the client cancelled");
                return;
            }
            out.send(answer.body).await;
        });
    }

    async fn notification(&self, session: &Arc<Session>, n: Notification) {
        self.inflight.note(&n);
        self.gateway.handle_notification(session, n).await;
    }

    /// A 2025-03-26 batch: its requests run concurrently and are answered with one array
    /// line; notifications and responses in it are handled at once.
    async fn batch(&self, items: Vec<String>) {
        let Some(session) = self.session.clone() else {
            return self.refuse(Refusal::NotInitialized, None).await;
        };
        if !mcp::allows_batches(&session.version) {
            return self.refuse(Refusal::BatchNotAllowed, None).await;
        }
        let mut answers = Vec::new();
        let mut requests = Vec::new();
        for text in items {
            match jsonrpc::decode(&text) {
                Ok(Message::Request(req)) if req.method == method::INITIALIZE => {
                    answers.push(Refusal::InitializeInBatch.answer(Some(&req.id)));
                }
                Ok(Message::Request(req)) => requests.push(req),
                Ok(Message::Notification(n)) => self.notification(&session, n).await,
                Ok(Message::Response(r)) => self.gateway.handle_response(&session, r).await,
                Err(e) => answers.push(Refusal::Malformed(e).answer(None)),
            }
        }
        if requests.is_empty() && answers.is_empty() {
            return;
        }
        let gateway = Arc::clone(&self.gateway);
        let out = self.out.clone();
        self.tasks.spawn(async move {
            let runs = requests.into_iter().map(|req| gateway.handle_request(&session, req, Some(out.sender()), None));
            answers.extend(futures::future::join_all(runs).await.into_iter().map(|a| a.body));
            out.send(format!("[{}]", answers.join(","))).await;
        });
    }
}
