//! The child's pipes: stdout read as bounded lines and routed, stdin written one line per
//! message (stderr is `stderr`'s).

use std::sync::{Arc, Weak};

use tokio::io::{AsyncBufRead, AsyncWriteExt};
use tokio::sync::mpsc;

use super::{Proc, StdioLink};
use crate::call::{EventSink, Reply, UpstreamEvent};
use crate::jsonrpc::{self, Id, Message};
use crate::mcp::method;
use crate::ndjson::{Line, framed, read_line_bounded};

/// Reads stdout until EOF, routing each message.
pub(super) async fn read_stdout(link: Weak<StdioLink>, proc: Weak<Proc>, mut stdout: impl AsyncBufRead + Unpin) {
    let mut buf = Vec::new();
    loop {
        let outcome = read_line_bounded(&mut stdout, &mut buf, max_line(&link)).await;
        let (Some(link), Some(proc)) = (link.upgrade(), proc.upgrade()) else {
            return;
        };
        match outcome {
            Line::Eof => return,
            Line::TooLong => {
                tracing::warn!(upstream = %link.up.name, limit = link.up.max_line_bytes, "skipped an over-long line on stdout");
            }
            Line::Text => match jsonrpc::decode(&String::from_utf8_lossy(&buf)) {
                Ok(msg) => route(&link, &proc, msg),
                Err(e) => {
                    tracing::warn!(upstream = %link.up.name, error = %e, "skipped a line on stdout that is not JSON-RPC")
                }
            },
        }
    }
}

fn max_line(link: &Weak<StdioLink>) -> usize {
    link.upgrade().map_or(1024 * 1024, |l| l.up.max_line_bytes)
}

fn route(link: &Arc<StdioLink>, proc: &Arc<Proc>, msg: Message) {
    match msg {
        Message::Response(r) => match proc.pending.lock().remove(&r.id) {
            Some(p) => {
                let _ = p.tx.send(Ok(r.body));
            }
            None => {
                tracing::debug!(upstream = %link.up.name, id = %r.id, "ignored a response to an unknown request")
            }
        },
        Message::Notification(n) => link.shared.deliver_unrelated(UpstreamEvent::Notification(n)),
        Message::Request(r) if r.method == method::PING => {
            answer(proc, &r.id, Ok(jsonrpc::to_raw(&serde_json::json!({}))))
        }
        Message::Request(r) if !link.offers_client_features => {
            let err = jsonrpc::error_object(
                jsonrpc::code::METHOD_NOT_FOUND,
                "client features are not available through a shared upstream",
                None,
            );
            answer(proc, &r.id, Err(err));
        }
        Message::Request(r) => {
            // stdio has no per-request streams: a request made while exactly one call is
            // in flight belongs with that call; otherwise it goes to the session.
            let sole: Option<EventSink> = {
                let pending = proc.pending.lock();
                if pending.len() == 1 { pending.values().next().map(|p| p.related.clone()) } else { None }
            };
            let event = UpstreamEvent::Request(r);
            match sole {
                Some(sink) => link.shared.deliver_related(&sink, event),
                None => link.shared.deliver_unrelated(event),
            }
        }
    }
}

fn answer(proc: &Proc, id: &Id, body: Reply) {
    let line = jsonrpc::encode_reply(Some(id), &body);
    if proc.stdin.try_send(line).is_err() {
        tracing::debug!("could not answer an upstream request: stdin is busy or closed");
    }
}

pub(super) async fn write_lines(mut stdin: tokio::process::ChildStdin, mut rx: mpsc::Receiver<String>) {
    while let Some(message) = rx.recv().await {
        let line = framed(&message);
        if stdin.write_all(line.as_bytes()).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
}
