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

#[cfg(test)]
mod tests {
    //! The stdio transport over in-memory pipes, in front of a gateway without upstreams
    //! whose client stack is a mock: `slow` sleeps `params.ms` (honouring the client's
    //! cancellation, as the real stack does), `log` sends a related notification first,
    //! anything else answers `{"method": …}` at once.

    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};
    use tower::service_fn;

    use super::*;
    use crate::call::{Tagged, UpstreamEvent};
    use crate::client::{Answered, ClientRequest, ClientService};
    use crate::errors::Rewriter;
    use crate::jsonrpc::{self, Notification};
    use crate::resilience::breaker::Breakers;
    use crate::routing::Router;
    use crate::session::SessionTable;
    use crate::upstream::registry::Upstreams;

    fn ok(value: Value) -> Answered {
        Answered { reply: Ok(jsonrpc::to_raw(&value)), http: None, outcome: "ok" }
    }

    async fn mock(req: ClientRequest) -> Result<Answered, std::convert::Infallible> {
        let params: Value = req.params.as_deref().and_then(|p| serde_json::from_str(p.get()).ok()).unwrap_or_default();
        match &*req.method {
            "slow" => {
                let Some(cancel) = req.session.begin_request(&req.id) else {
                    return Ok(ok(json!("duplicate")));
                };
                let ms = params["ms"].as_u64().unwrap_or(0);
                let answer = tokio::select! {
                    () = cancel.cancelled() => Answered {
                        reply: Err(jsonrpc::error_object(-32800, "Request cancelled", None)),
                        http: None,
                        outcome: "cancelled",
                    },
                    () = tokio::time::sleep(Duration::from_millis(ms)) => ok(json!({"slept": ms})),
                };
                req.session.end_request(&req.id);
                Ok(answer)
            }
            "log" => {
                let note = Notification {
                    method: "notifications/message".into(),
                    params: Some(jsonrpc::to_raw(&json!({"level": "info", "data": "before"}))),
                };
                let tagged =
                    Tagged { upstream: Arc::from("up"), endpoint: None, event: UpstreamEvent::Notification(note) };
                let _ = req.related.try_send(tagged);
                Ok(ok(json!({"logged": true})))
            }
            other => Ok(ok(json!({"method": other}))),
        }
    }

    fn gateway() -> Arc<Gateway> {
        let rewriter = Arc::new(Rewriter::new(Default::default()));
        let router =
            Arc::new(Router::new(Arc::new(Upstreams::default()), "__".into(), Arc::new(Breakers::new()), true));
        let client: ClientService = tower::util::BoxCloneSyncService::new(service_fn(mock));
        let routing = crate::gateway::Routing { router, rewriter, client: crate::workers::PerWorker::new(client) };
        Arc::new(Gateway::with_routing(routing, SessionTable::new(8, Duration::from_secs(60))))
    }

    /// A client on the other end of the pipes.
    struct Peer {
        input: Option<DuplexStream>,
        lines: Lines<BufReader<DuplexStream>>,
        serving: tokio::task::JoinHandle<End>,
    }

    impl Peer {
        fn start(max_line_bytes: usize) -> Peer {
            let (input, server_in) = tokio::io::duplex(1024 * 1024);
            let (server_out, output) = tokio::io::duplex(1024 * 1024);
            let client = StdioClient {
                scope: Scope::Aggregate,
                principal: None,
                max_line_bytes,
                idle_timeout: Duration::from_secs(60),
            };
            let serving = tokio::spawn(serve(gateway(), client, server_in, server_out, std::future::pending()));
            Peer { input: Some(input), lines: BufReader::new(output).lines(), serving }
        }

        async fn send_line(&mut self, line: &str) {
            self.send_bytes(format!("{line}\n").as_bytes()).await;
        }

        async fn send_bytes(&mut self, bytes: &[u8]) {
            let input = self.input.as_mut().expect("stdin is open");
            input.write_all(bytes).await.expect("write");
        }

        async fn send(&mut self, message: Value) {
            self.send_line(&message.to_string()).await;
        }

        async fn next(&mut self) -> Value {
            let line = tokio::time::timeout(Duration::from_secs(10), self.lines.next_line())
                .await
                .expect("a line in time")
                .expect("read")
                .expect("a line, not the end");
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON: {line:?}: {e}"))
        }

        async fn initialize(&mut self, version: &str) -> Value {
            self.send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
                .await;
            let answer = self.next().await;
            self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
            answer
        }

        fn close_stdin(&mut self) {
            self.input = None;
        }
    }

    fn request(id: Value, method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    #[tokio::test]
    async fn garbage_and_early_requests_are_refused_and_the_session_goes_on() {
        let mut peer = Peer::start(1024);
        peer.send_line("this is not json").await;
        let parse = peer.next().await;
        assert_eq!(parse["error"]["code"], -32700, "{parse}");
        assert!(parse["id"].is_null(), "{parse}");
        peer.send(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})).await;
        assert_eq!(peer.next().await, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
        peer.send(request(json!(2), "tools/list", json!({}))).await;
        let early = peer.next().await;
        assert_eq!((early["id"].clone(), early["error"]["code"].clone()), (json!(2), json!(-32600)), "{early}");

        let init = peer.initialize("2025-06-18").await;
        assert_eq!(init["id"], 0);
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        assert_eq!(init["result"]["serverInfo"]["name"], "seawall");
        peer.send_line("   ").await; // blank lines are skipped
        peer.send_line(r#"{"jsonrpc": "1.0", "id": 3, "method": "x"}"#).await;
        let invalid = peer.next().await;
        assert_eq!((invalid["id"].clone(), invalid["error"]["code"].clone()), (json!(3), json!(-32600)), "{invalid}");
        peer.send_bytes(b"{\"jsonrpc\": \"2.0\", \"id\": \xff}\n").await;
        assert_eq!(peer.next().await["error"]["code"], -32700);
        peer.send(request(json!(4), "tools/list", json!({}))).await;
        assert_eq!(peer.next().await["result"], json!({"method": "tools/list"}));
        peer.send(request(json!(5), "initialize", json!({}))).await;
        assert_eq!(peer.next().await["id"], 5, "a second initialize is answered, not ignored");
        peer.close_stdin();
        assert_eq!(peer.serving.await.ok(), Some(End::Eof));
    }

    #[tokio::test]
    async fn overlong_lines_are_refused_without_losing_the_next() {
        let mut peer = Peer::start(200);
        peer.initialize("2025-11-25").await;
        let long = request(json!(1), "tools/list", json!({"pad": "x".repeat(500)}));
        peer.send(long).await;
        let refused = peer.next().await;
        assert_eq!(refused["error"]["code"], -32600, "{refused}");
        assert!(refused["id"].is_null());
        peer.send(request(json!(2), "tools/list", json!({}))).await;
        assert_eq!(peer.next().await["id"], 2);
    }

    #[tokio::test]
    async fn a_slow_request_is_overtaken_and_related_messages_precede_their_answer() {
        let mut peer = Peer::start(1024);
        peer.initialize("2025-11-25").await;
        peer.send(request(json!("slow"), "slow", json!({"ms": 300}))).await;
        peer.send(request(json!(1), "ping", json!({}))).await;
        peer.send(request(json!(2), "log", json!({}))).await;
        let first = peer.next().await;
        let second = peer.next().await;
        let third = peer.next().await;
        let log_note = [&first, &second, &third].into_iter().position(|m| m["method"] == "notifications/message");
        let log_answer = [&first, &second, &third].into_iter().position(|m| m["id"] == 2);
        assert!(log_note.is_some() && log_note < log_answer, "{first}\n{second}\n{third}");
        assert!([&first, &second, &third].iter().any(|m| m["id"] == 1));
        assert_eq!(peer.next().await["id"], "slow", "the slow request answers last");
    }

    #[tokio::test]
    async fn a_cancelled_request_gets_no_answer() {
        let mut peer = Peer::start(1024);
        peer.initialize("2025-11-25").await;
        peer.send(request(json!("s"), "slow", json!({"ms": 5000}))).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        peer.send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "s"}})).await;
        peer.send(request(json!(1), "ping", json!({}))).await;
        assert_eq!(peer.next().await["id"], 1);
        peer.close_stdin();
        assert_eq!(peer.serving.await.ok(), Some(End::Eof));
        assert!(peer.lines.next_line().await.ok().flatten().is_none(), "nothing more after the cancellation");
    }

    #[tokio::test]
    async fn batches_need_2025_03_26() {
        let mut peer = Peer::start(1024);
        peer.initialize("2025-06-18").await;
        peer.send_line(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#).await;
        let refused = peer.next().await;
        assert_eq!(refused["error"]["code"], -32600, "{refused}");

        let mut peer = Peer::start(1024);
        peer.initialize("2025-03-26").await;
        peer.send_line(
            r#"[{"jsonrpc":"2.0","id":1,"method":"slow","params":{"ms":50}},{"jsonrpc":"2.0","id":2,"method":"tools/list"},
            {"jsonrpc":"2.0","method":"notifications/roots/list_changed"},{"jsonrpc":"2.0","id":3,"method":"initialize"}]"#
                .replace('\n', "")
                .as_str(),
        )
        .await;
        let answers = peer.next().await;
        let ids: Vec<Value> = answers.as_array().expect("an array").iter().map(|a| a["id"].clone()).collect();
        assert_eq!(ids.len(), 3, "{answers}");
        for id in [1, 2, 3] {
            assert!(ids.contains(&json!(id)), "{answers}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn at_the_end_of_input_requests_finish_within_the_drain_then_are_cancelled() {
        let mut peer = Peer::start(1024);
        peer.initialize("2025-11-25").await;
        peer.send(request(json!("quick"), "slow", json!({"ms": 500}))).await;
        peer.send(request(json!("stuck"), "slow", json!({"ms": 60_000}))).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
        let started = tokio::time::Instant::now();
        peer.close_stdin();
        let quick = peer.next().await;
        assert_eq!(quick["result"], json!({"slept": 500}), "{quick}");
        let stuck = peer.next().await;
        assert_eq!((stuck["id"].clone(), stuck["error"]["code"].clone()), (json!("stuck"), json!(-32800)), "{stuck}");
        assert_eq!(peer.serving.await.ok(), Some(End::Eof));
        let took = started.elapsed();
        assert!(took >= DRAIN && took < DRAIN + Duration::from_secs(1), "{took:?}");
    }

    #[tokio::test]
    async fn a_closed_stdout_ends_serving() {
        let (mut input, server_in) = tokio::io::duplex(1024);
        let (server_out, output) = tokio::io::duplex(1024);
        drop(output);
        let client = StdioClient {
            scope: Scope::Aggregate,
            principal: None,
            max_line_bytes: 1024,
            idle_timeout: Duration::from_secs(60),
        };
        let serving = tokio::spawn(serve(gateway(), client, server_in, server_out, std::future::pending()));
        input.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await.ok();
        let end = tokio::time::timeout(Duration::from_secs(5), serving).await;
        assert_eq!(end.ok().and_then(Result::ok), Some(End::OutputClosed));
    }
}
