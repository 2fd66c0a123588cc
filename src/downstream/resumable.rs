//! Resumable SSE streams of the legacy Streamable HTTP era, as HTTP: a POST answered
//! with SSE, the session's GET stream, and `GET` with `Last-Event-ID` resuming either.
//!
//! The streams themselves (ids, replay buffers, readers) are the session's
//! ([`crate::session::replay`]); this module feeds them and turns readers into bodies.
//!
//! `Last-Event-ID` on a GET of a live session:
//!
//! A `GET` without `Last-Event-ID` opens the GET stream, ending a connection still
//! attached to it.
//!
//! | the id | answer |
//! |---|---|
//! | of the session's GET stream, events after it still kept | the GET stream, replaying what followed it (a connection still attached is ended) |
//! | of the session's GET stream, events after it no longer kept | the GET stream, without replay, as a plain GET would get it |
//! | of a POST stream of the session, events after it still kept | that stream: what followed the id, the rest as it comes, ending after the answer |
//! | of a POST stream no longer kept (answer sent, released, too old), of another session, or malformed | 400, -32600 |

use std::convert::Infallible;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::response::Response;
use futures::{Stream, StreamExt};
use tokio::sync::mpsc;

use super::http::{Cx, Final, KEEP_ALIVE, internal_error, json_final, sse_headers};
use super::refusal::Refusal;
use super::run_to_end::RunToEnd;
use crate::jsonrpc::Id;
use crate::session::Session;
use crate::session::replay::{self, AttachError, EventId, Reader, ResumableStream, Start};

/// The header a reconnecting client names its last event in.
const LAST_EVENT_ID: &str = "last-event-id";

/// Runs `run` to its end (see [`RunToEnd`]) and answers with its JSON response, or — as
/// soon as a message arrives on `out_rx` before the response — with a resumable SSE
/// stream of those messages and then the response. The request runs to its end whether
/// or not the client stays: its messages wait in the stream for a resume.
pub(super) async fn json_or_stream(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    mut run: RunToEnd<Final>,
    mut out_rx: mpsc::Receiver<String>,
    id: Id,
) -> Response {
    let first = tokio::select! {
        biased;
        Some(message) = out_rx.recv() => Ok(message),
        response = &mut run => Err(response),
    };
    let (first, answer): (String, AnswerFuture) = match first {
        Ok(message) => {
            let answer = async move {
                match run.await {
                    Some(a) => (!a.withheld).then_some(a.body),
                    None => Some(internal_error(&id)),
                }
            };
            (message, Box::pin(answer))
        }
        Err(response) => match out_rx.try_recv() {
            // Something preceded the answer after all: stream both.
            Ok(message) => {
                let answer = match response {
                    Some(a) => (!a.withheld).then_some(a.body),
                    None => Some(internal_error(&id)),
                };
                (message, Box::pin(futures::future::ready(answer)))
            }
            Err(_) => return json_final(response, &id),
        },
    };
    let stream = session.streams().open_post(cx.st.replay);
    let fed = Arc::clone(&stream);
    tokio::spawn(async move { feed(&fed, first, out_rx, answer).await });
    post_stream(session, &stream)
}

/// The encoded answer of a request, once it is in; `None` when it is withheld (the
/// client cancelled the request).
type AnswerFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send>>;

/// Moves a request's messages, then its answer (unless withheld), into its stream.
async fn feed(stream: &ResumableStream, first: String, mut out_rx: mpsc::Receiver<String>, answer: AnswerFuture) {
    // Empty messages only asked for the stream to open; they carry nothing.
    if !first.is_empty() {
        stream.push(first).await;
    }
    let mut answer = answer;
    let answer = loop {
        tokio::select! {
            biased;
            Some(message) = out_rx.recv() => {
                if !message.is_empty() {
                    stream.push(message).await;
                }
            }
            answer = &mut answer => break answer,
        }
    };
    // Messages sent before the answer go out before it.
    while let Ok(message) = out_rx.try_recv() {
        if !message.is_empty() {
            stream.push(message).await;
        }
    }
    stream.finish(answer).await;
}

/// The answer to a POST: its new stream, from a priming event when the session's
/// version has them.
fn post_stream(session: &Session, stream: &Arc<ResumableStream>) -> Response {
    match stream.attach(Start::Fresh { prime: replay::primes(&session.version) }, false) {
        Ok(reader) => body(reader, None),
        // A stream made a moment ago has no reader: this does not happen.
        Err(why) => {
            tracing::warn!(session = session.key, stream = %stream.id(), error = %why, "could not read a new stream");
            sse_headers(Response::new(Body::empty()))
        }
    }
}

/// `GET` on a session: opens its GET stream, or resumes a stream with `Last-Event-ID`.
pub(super) async fn get(cx: &Cx<'_>, session: &Arc<Session>) -> Response {
    let prime = replay::primes(&session.version);
    let Some(last) = cx.headers.get(LAST_EVENT_ID) else {
        // The newest connection takes the stream over: a client whose connection died
        // unnoticed reconnects at once, and messages still go out on one stream only.
        let stream = session.get_stream(cx.st.replay);
        return match stream.attach(Start::Fresh { prime }, true) {
            Ok(reader) => get_stream(cx, session, reader).await,
            Err(_) => cx.refuse(Refusal::StreamConflict, None),
        };
    };
    let Some(last) = last.to_str().ok().and_then(|text| text.parse::<EventId>().ok()) else {
        return cx.refuse(Refusal::BadRequest(NOT_RESUMABLE), None);
    };
    if session.streams().get_stream_id() == Some(last.stream) {
        let stream = session.get_stream(cx.st.replay);
        let reader = match stream.attach(Start::After(last.seq), true) {
            Ok(reader) => reader,
            Err(_) => {
                tracing::debug!(session = session.key, last_event_id = %last, "the GET stream resumes without replay");
                match stream.attach(Start::Fresh { prime }, true) {
                    Ok(reader) => reader,
                    Err(_) => return cx.refuse(Refusal::StreamConflict, None),
                }
            }
        };
        return get_stream(cx, session, reader).await;
    }
    let Some(stream) = session.streams().post(last.stream) else {
        return cx.refuse(Refusal::BadRequest(NOT_RESUMABLE), None);
    };
    match stream.attach(Start::After(last.seq), true) {
        Ok(reader) => {
            tracing::debug!(session = session.key, last_event_id = %last, "a POST stream resumes");
            body(reader, None)
        }
        Err(AttachError::NotResumable | AttachError::Busy) => cx.refuse(Refusal::BadRequest(NOT_RESUMABLE), None),
    }
}

/// Why a `Last-Event-ID` is refused.
const NOT_RESUMABLE: &str = "Last-Event-ID names no stream of this session that can be resumed";

/// The session's GET stream on this connection; it ends with the session (DELETE,
/// idle expiry) or when the gateway stops.
async fn get_stream(cx: &Cx<'_>, session: &Arc<Session>, reader: Reader) -> Response {
    session.open_upstream_streams().await;
    let ended = session.ended();
    let closing = cx.st.closing.clone();
    let end = async move {
        tokio::select! {
            () = ended.cancelled() => {}
            () = closing.cancelled() => {}
        }
    };
    body(reader, Some(Box::pin(end)))
}

/// An SSE body of `reader`'s events with keep-alive comments between them, ending with
/// the reader or when `end` completes.
fn body(reader: Reader, end: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>) -> Response {
    let events = futures::stream::unfold(reader, |mut reader| async move { reader.next().await.map(|f| (f, reader)) });
    // `None` marks the end of the events: the body ends there, keep-alives too.
    let events = events.map(Some).chain(futures::stream::once(async { None }));
    let keep_alive = futures::stream::unfold((), |()| async {
        tokio::time::sleep(KEEP_ALIVE).await;
        Some((Some(Bytes::from_static(b": keep-alive\n\n")), ()))
    });
    let end = end.unwrap_or_else(|| Box::pin(futures::future::pending()));
    let frames = futures::stream::select(events, keep_alive)
        .take_while(|item| futures::future::ready(item.is_some()))
        .filter_map(futures::future::ready)
        .take_until(end);
    sse_headers(Response::new(Body::from_stream(ok(frames))))
}

fn ok(frames: impl Stream<Item = Bytes> + Send + 'static) -> impl Stream<Item = Result<Bytes, Infallible>> + Send {
    frames.map(Ok)
}
