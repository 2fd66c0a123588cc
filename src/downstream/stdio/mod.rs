//! stdio for clients: `seawall stdio`, launched by a local client (an IDE, a desktop
//! app) as its MCP server. One JSON-RPC message per line on stdin and on stdout, UTF-8;
//! stdout carries nothing else (logs go to stderr).
//!
//! The client is one implicit session, opened by its `initialize` as on HTTP, on the
//! aggregated view or one upstream's. Requests run concurrently, each in a task of its
//! own, and every line goes out through one writer, so answers leave as they complete
//! and never interleave; messages related to a request (progress, logging, server
//! requests) precede its answer. The client's answers to server requests and its
//! `notifications/cancelled` are routed as on HTTP (`messages`); lines the transport
//! refuses are answered from one table (`refusal`); stdout is written in `output`.
//!
//! When stdin ends, on SIGINT/SIGTERM, or when stdout closes, reading stops; requests in
//! flight get [`DRAIN`] to finish, then are cancelled (and answered -32800). The caller
//! then closes the upstreams.

mod messages;
mod output;
mod refusal;
#[cfg(test)]
mod tests;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, BufReader};
use tokio_util::sync::CancellationToken;

use crate::gateway::Gateway;
use crate::identity::Principal;
use crate::ndjson::{self, Line};
use crate::session::Scope;
use messages::Conn;

/// How long requests in flight may take to finish once the client is gone.
const DRAIN: Duration = Duration::from_secs(2);
/// How long cancelled requests may take to send their answers.
const CANCEL_WAIT: Duration = Duration::from_millis(500);
/// How long the writer may take to write what is queued.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

/// The one client of `seawall stdio`.
#[derive(Debug, Clone)]
pub(crate) struct StdioClient {
    /// Every upstream with prefixed names (`/mcp`), or one upstream (`/mcp/<upstream>`).
    pub(crate) scope: Scope,
    /// Who the client acts as for authorisation and rate limits (`--principal`); `None`:
    /// anonymous.
    pub(crate) principal: Option<Arc<Principal>>,
    /// Longest accepted line (`limits.max_body_bytes`).
    pub(crate) max_line_bytes: usize,
    /// The session table's idle timeout, which the client's session must never reach.
    pub(crate) idle_timeout: Duration,
}

/// Why serving ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum End {
    /// stdin reached its end.
    Eof,
    /// `stop` completed (SIGINT, SIGTERM).
    Stopped,
    /// stdout could not be written: nobody reads the answers.
    OutputClosed,
}

/// Serves `client` on `input`/`output` until `input` ends, `stop` completes or `output`
/// closes; then drains the requests in flight and returns.
pub(crate) async fn serve<R, W>(
    gateway: Arc<Gateway>,
    client: StdioClient,
    input: R,
    output: W,
    stop: impl Future<Output = ()>,
) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let gone = CancellationToken::new();
    let (out, writer) = output::start(output, gone.clone());
    let max_line = client.max_line_bytes;
    let mut conn = Conn::new(gateway, client, out);
    let end = {
        let reading = read(&mut conn, input, max_line);
        tokio::pin!(reading);
        tokio::pin!(stop);
        tokio::select! {
            biased;
            () = &mut stop => End::Stopped,
            () = gone.cancelled() => End::OutputClosed,
            () = &mut reading => End::Eof,
        }
    };
    tracing::info!(end = ?end, "the stdio client is done; finishing requests in flight");
    drain(&conn, end).await;
    conn.close();
    if tokio::time::timeout(FLUSH_WAIT, writer).await.is_err() {
        tracing::warn!("stdout did not take the last answers in time");
    }
    end
}

/// Reads lines until the input ends.
async fn read<R: AsyncRead + Unpin>(conn: &mut Conn, input: R, max_line: usize) {
    let mut input = BufReader::with_capacity(64 * 1024, input);
    let mut buf = Vec::new();
    loop {
        match ndjson::read_line_bounded(&mut input, &mut buf, max_line).await {
            Line::Eof => return,
            Line::TooLong => conn.too_large().await,
            Line::Text => conn.line(&buf).await,
        }
    }
}

/// Lets the requests in flight finish within [`DRAIN`] (at once when nobody reads their
/// answers), then cancels the rest.
async fn drain(conn: &Conn, end: End) {
    conn.tasks.close();
    let grace = if end == End::OutputClosed { Duration::ZERO } else { DRAIN };
    if tokio::time::timeout(grace, conn.tasks.wait()).await.is_ok() {
        return;
    }
    if let Some(session) = conn.session() {
        tracing::info!(in_flight = conn.tasks.len(), "cancelling requests still in flight");
        session.stop();
    }
    let _ = tokio::time::timeout(CANCEL_WAIT, conn.tasks.wait()).await;
}
