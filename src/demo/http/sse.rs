//! The HTTP+SSE transport of protocol version 2024-11-05: `GET /sse` opens a session
//! whose first event (`endpoint`) names `/messages?sessionId=ID`; every message POSTed
//! there is answered 202, and its answer, like every other message to the client,
//! travels as a `message` event on the GET stream. Closing the stream ends the session
//! (recorded as `session_closed` by `stream`).

use std::convert::Infallible;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt as _;
use serde::Deserialize;
use serde_json::Value;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::{SessionError, Shared, json_response};
use crate::demo::rpc;
use crate::demo::server::{Accepted, Outcome};
use crate::demo::session::{Outbound, Transport};

/// The routes of the HTTP+SSE transport.
pub(super) fn routes() -> Router<Shared> {
    Router::new().route("/sse", get(open)).route("/messages", post(message))
}

/// Ends the session when its event stream goes away.
struct StreamGuard {
    state: Shared,
    id: String,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(session) = self.state.remove_session(&self.id) {
            self.state.server.record_session_closed(&session, "stream");
        }
    }
}

async fn open(State(state): State<Shared>, headers: HeaderMap) -> Response {
    let session = state.create_session(Transport::Sse);
    let id = session.id().unwrap_or_default().to_owned();
    state.server.record_headers(&session, &headers);
    let (out, rx) = Outbound::channel();
    session.set_standalone(Some(out));
    let endpoint = Event::default().event("endpoint").data(format!("/messages?sessionId={id}"));
    let guard = StreamGuard { state, id };
    let messages = UnboundedReceiverStream::new(rx).map(|msg| Event::default().event("message").data(msg.to_string()));
    let events = futures::stream::once(async move { endpoint }).chain(messages).map(move |event| {
        let _held = &guard;
        Ok::<_, Infallible>(event)
    });
    Sse::new(events).keep_alive(KeepAlive::default()).into_response()
}

#[derive(Deserialize)]
struct Target {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

async fn message(
    State(state): State<Shared>,
    Query(target): Query<Target>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let session = target.session_id.and_then(|id| state.sessions().get(&id).cloned());
    let Some((session, out)) = session.and_then(|s| s.standalone().map(|out| (s, out))) else {
        return SessionError::Unknown.response(&Value::Null);
    };
    state.server.record_headers(&session, &headers);
    let msg: Value = match serde_json::from_slice(&body) {
        Ok(msg) => msg,
        Err(err) => return json_response(StatusCode::BAD_REQUEST, &rpc::parse_error(err)),
    };
    match state.server.accept(&session, msg, out.clone()) {
        Accepted::Request(pending) if state.server.config().sse_inline => {
            if let Some(Outcome::Reply(reply)) = pending.outcome().await {
                return json_response(StatusCode::OK, &reply);
            }
        }
        Accepted::Request(pending) => {
            tokio::spawn(async move {
                // A cancelled request gets no answer; `Unavailable` is HTTP-only.
                if let Some(Outcome::Reply(reply)) = pending.outcome().await {
                    out.send(reply);
                }
            });
        }
        Accepted::Consumed => {}
        Accepted::Rejected(reply) => return json_response(StatusCode::BAD_REQUEST, &reply),
    }
    StatusCode::ACCEPTED.into_response()
}
