//! Server-to-client traffic: upstream notifications and requests, mapped to the ids and
//! progress tokens the client knows.

use std::sync::{Arc, Weak};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::asking::Asked;
use super::replay::ResumableStream;
use super::{ServerRequest, Session};
use crate::call::{EventRx, Tagged, UpstreamEvent};
use crate::jsonrpc::{self, Id};
use crate::mcp::{meta, method};

/// The progress token of one client request: the gateway's upstream-side token and the
/// client's own.
#[derive(Debug, Clone)]
pub(crate) struct ProgressMap {
    /// The token sent upstream.
    pub upstream: Value,
    /// The client's token.
    pub client: Value,
}

/// Maps one upstream event to the message the client sees; `None` when it must not
/// reach the client (progress for a request that is not this one, unknown cancellations).
pub(crate) fn to_client(session: &Session, tagged: Tagged, progress: Option<&ProgressMap>) -> Option<String> {
    match tagged.event {
        UpstreamEvent::Notification(n) if n.method == method::PROGRESS => {
            let map = progress?;
            let p: meta::ProgressParams = jsonrpc::view(n.params.as_deref())?;
            if meta::token_key(&p.progress_token) != meta::token_key(&map.upstream) {
                return None;
            }
            let params = meta::progress_with_token(n.params.as_deref(), &map.client)?;
            Some(jsonrpc::encode_notification(&n.method, Some(&params)))
        }
        UpstreamEvent::Notification(n) if n.method == method::CANCELLED => {
            // The upstream withdraws a request it made of the client.
            let p: meta::CancelledParams = jsonrpc::view(n.params.as_deref())?;
            let upstream_id = Id::from_value(&p.request_id)?;
            let client_id = session.server_request_client_id(&tagged.upstream, tagged.endpoint, &upstream_id)?;
            session.take_server_request(&client_id);
            let params = meta::cancelled_params(&client_id, p.reason.as_deref().unwrap_or("cancelled by the server"));
            Some(jsonrpc::encode_notification(&n.method, Some(&params)))
        }
        UpstreamEvent::Notification(n) => {
            if n.method == method::TOOLS_LIST_CHANGED {
                session.tools_changed(&tagged.upstream);
            }
            Some(jsonrpc::encode_notification(&n.method, n.params.as_deref()))
        }
        UpstreamEvent::Request(r) => {
            let origin = ServerRequest { upstream: Arc::clone(&tagged.upstream), endpoint: tagged.endpoint, id: r.id };
            let id = session.register_server_request(origin);
            Some(jsonrpc::encode_request(&id, &r.method, r.params.as_deref()))
        }
        // An empty message asks the transport to open a stream without sending anything.
        UpstreamEvent::Streaming => Some(String::new()),
    }
}

/// Relays events not tied to a request into the session's GET stream queue. A stateless
/// session's client has no such stream: a server request goes to the one request of the
/// client running (see [`super::asking`]), or is answered with an error.
pub(crate) async fn pump_unrelated(session: Weak<Session>, mut rx: EventRx) {
    while let Some(tagged) = rx.recv().await {
        let Some(session) = session.upgrade() else {
            return;
        };
        let asks = matches!(tagged.event, UpstreamEvent::Request(_)) && session.is_stateless();
        let Some(message) = to_client(&session, tagged, None) else { continue };
        if !asks {
            session.push_outbox(message);
            continue;
        }
        let Some(client_id) = request_id(&message) else { continue };
        if session.askers.ask(message) == Asked::Nobody {
            refuse_server_request(&session, &client_id).await;
        }
    }
}

/// The id of a request as relayed to the client.
fn request_id(message: &str) -> Option<Id> {
    match jsonrpc::decode(message) {
        Ok(jsonrpc::Message::Request(r)) => Some(r.id),
        _ => None,
    }
}

/// Answers a server request relayed under `client_id` that no request of the client can
/// carry, so that the server's call goes on instead of waiting for an answer that
/// cannot come.
async fn refuse_server_request(session: &Session, client_id: &Id) {
    let Some(origin) = session.take_server_request(client_id) else { return };
    let Some(super::Slot::Up(link)) = session.slot(&origin.upstream) else { return };
    tracing::warn!(
        session = session.key,
        upstream = %origin.upstream,
        "a server request on the upstream's standalone stream came while no single request of the client ran: refused"
    );
    let error = jsonrpc::to_raw(&serde_json::json!({
        "code": crate::jsonrpc::code::INTERNAL_ERROR,
        "message": "the client cannot be asked: no single request of it is running to carry the question"
    }));
    if let Err(e) = link.respond(origin.endpoint, origin.id, Err(error)).await {
        tracing::debug!(upstream = %origin.upstream, error = %e, "could not refuse a server request");
    }
}

/// Moves the messages queued for a Streamable HTTP client's GET stream into its
/// resumable stream, until the session ends.
pub(crate) async fn pump_outbox(
    mut rx: mpsc::Receiver<String>,
    stream: Arc<ResumableStream>,
    ended: CancellationToken,
) {
    loop {
        let message = tokio::select! {
            biased;
            () = ended.cancelled() => return,
            message = rx.recv() => message,
        };
        match message {
            // An empty message only asks for a stream to open; the GET stream is open.
            Some(m) if m.is_empty() => {}
            Some(m) => stream.push(m).await,
            None => return,
        }
    }
}
