//! stdout: one writer task, so lines never interleave, and the relay of the session's
//! messages that are not tied to a request.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::ndjson;
use crate::session::Session;

/// Messages waiting for the writer. A client that reads slowly makes requests wait to
/// send their answers (and upstream events wait behind them) instead of growing memory.
const QUEUE: usize = 256;

/// Where every message for the client goes, in the order sent; cheap to clone.
#[derive(Clone)]
pub(super) struct Output {
    tx: mpsc::Sender<String>,
}

impl Output {
    /// Queues a message; dropped when the client has stopped reading.
    pub(super) async fn send(&self, message: String) {
        if self.tx.send(message).await.is_err() {
            tracing::debug!("dropped a message for the stdio client: stdout is closed");
        }
    }

    /// The queue itself, for the gateway's related messages (progress, logging, server
    /// requests), which must precede their request's answer.
    pub(super) fn sender(&self) -> mpsc::Sender<String> {
        self.tx.clone()
    }
}

/// Starts the writer of `output`. `gone` fires when a write fails (the client closed
/// its end). The task ends when every [`Output`] is dropped and the queue is written.
pub(super) fn start<W>(output: W, gone: CancellationToken) -> (Output, JoinHandle<()>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(QUEUE);
    (Output { tx }, tokio::spawn(write_lines(rx, output, gone)))
}

async fn write_lines<W: AsyncWrite + Unpin>(mut rx: mpsc::Receiver<String>, mut output: W, gone: CancellationToken) {
    while let Some(message) = rx.recv().await {
        // Empty messages only ask HTTP to open a stream; stdio always has one.
        if message.is_empty() {
            continue;
        }
        let line = ndjson::framed(&message);
        if let Err(e) = async {
            output.write_all(line.as_bytes()).await?;
            output.flush().await
        }
        .await
        {
            tracing::info!(error = %e, "stdout is closed; the stdio client is gone");
            gone.cancel();
            return;
        }
    }
}

/// Copies the session's queue of messages not tied to a request (list_changed, logging,
/// server requests without a call in flight) to the output, until the session ends.
/// While the client is connected its session never idles out: it is marked used every
/// third of `idle_timeout`.
pub(super) async fn relay_session(
    session: Arc<Session>,
    mut queue: mpsc::Receiver<String>,
    out: Output,
    idle_timeout: Duration,
) {
    let ended = session.ended();
    let mut keep_alive =
        tokio::time::interval((idle_timeout / 3).clamp(Duration::from_millis(50), Duration::from_secs(15)));
    loop {
        tokio::select! {
            () = ended.cancelled() => return,
            _ = keep_alive.tick() => session.touch(),
            message = queue.recv() => match message {
                Some(message) => out.send(message).await,
                None => return,
            },
        }
    }
}
