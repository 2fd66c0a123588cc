//! The stdio transport: one JSON message per line in, one per line out.
//!
//! Requests run concurrently; every outgoing message goes through a single
//! writer task so lines never interleave. At end of input the server stops
//! reading, fails its own pending requests to the client, lets running calls
//! finish, and returns.

use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::rpc;
use super::server::{Accepted, DemoServer, Outcome};
use super::session::{Outbound, Session, Transport};

/// Longest accepted input line, in bytes.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

/// Serve one client over `input`/`output` until `input` ends; `noise` is the fraction of
/// answers followed by a line of noise (`--noise`).
pub(crate) async fn serve<R, W>(server: DemoServer, input: R, output: W, noise: f64) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, rx) = Outbound::channel();
    let writer = tokio::spawn(write_lines(rx, output, noise));
    let session = Session::new(None, Transport::Stdio);
    session.set_standalone(Some(out.clone()));
    let mut input = BufReader::new(input);
    let mut buf = Vec::new();
    loop {
        match read_line(&mut input, &mut buf, MAX_LINE_BYTES).await? {
            Line::Eof => break,
            Line::TooLong => {
                tracing::warn!("demo: input line longer than {MAX_LINE_BYTES} bytes dropped");
                out.send(rpc::parse_error("line too long"));
            }
            Line::Complete => handle_line(&server, &session, &buf, &out),
        }
    }
    // The client is gone: nobody will answer our requests or read unrelated messages.
    session.fail_pending();
    session.set_standalone(None);
    drop(out);
    // The writer ends once every running request has answered and dropped its sink.
    match writer.await {
        Ok(result) => result,
        Err(err) => Err(anyhow::anyhow!("stdout writer failed: {err}")),
    }
}

fn handle_line(server: &DemoServer, session: &std::sync::Arc<Session>, line: &[u8], out: &Outbound) {
    let text = line.strip_suffix(b"\r").unwrap_or(line);
    if text.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let msg: Value = match serde_json::from_slice(text) {
        Ok(msg) => msg,
        Err(err) => {
            tracing::warn!(error = %err, "demo: input line is not JSON");
            out.send(rpc::parse_error(err));
            return;
        }
    };
    match server.accept(session, msg, out.clone()) {
        Accepted::Request(pending) => match pending.ready() {
            Ok(outcome) => send_outcome(out, Some(outcome)),
            Err(pending) => {
                let out = out.clone();
                tokio::spawn(async move { send_outcome(&out, (*pending).outcome().await) });
            }
        },
        Accepted::Consumed => {}
        Accepted::Rejected(reply) => {
            out.send(reply);
        }
    }
}

fn send_outcome(out: &Outbound, outcome: Option<Outcome>) {
    match outcome {
        Some(Outcome::Reply(reply)) => {
            out.send(reply);
        }
        // Cancelled: no answer. Unavailable only comes from HTTP sessions
        // (stdio sessions get -32603 instead).
        Some(Outcome::Unavailable) | None => {}
    }
}

async fn write_lines<W>(mut rx: mpsc::UnboundedReceiver<Value>, mut output: W, noise: f64) -> anyhow::Result<()>
where
    W: AsyncWrite + Unpin,
{
    while let Some(msg) = rx.recv().await {
        let mut line = msg.to_string();
        line.push('\n');
        let is_answer = msg.get("id").is_some() && (msg.get("result").is_some() || msg.get("error").is_some());
        if is_answer && noise > 0.0 && rand::random::<f64>() < noise {
            line.push_str(&noise_after(&msg));
        }
        output.write_all(line.as_bytes()).await?;
        output.flush().await?;
    }
    Ok(())
}

/// One line of noise after the answer `msg`, chosen at random.
fn noise_after(msg: &Value) -> String {
    let mut line = match rand::random_range(0..4u8) {
        0 => "this is not JSON {\"jsonrpc\": \"2.0\",".to_owned(),
        1 => msg.to_string(),
        2 => {
            let mut stray = msg.clone();
            stray["id"] = Value::String(format!("nobody-asked-{}", rand::random::<u32>()));
            stray.to_string()
        }
        _ => serde_json::json!({"jsonrpc": "2.0", "method": "notifications/demo/noise", "params": {}}).to_string(),
    };
    line.push('\n');
    line
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
enum Line {
    /// A line is in the buffer (without its newline).
    Complete,
    /// A line over the limit was read and thrown away.
    TooLong,
    /// End of input.
    Eof,
}

/// Read one line into `buf`, never holding more than `max` bytes of it.
async fn read_line<R>(input: &mut R, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Line>
where
    R: AsyncBufRead + Unpin,
{
    buf.clear();
    let mut too_long = false;
    let mut read_any = false;
    loop {
        let chunk = input.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(match (read_any, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => Line::Complete,
            });
        }
        read_any = true;
        let (piece, used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], i + 1, true),
            None => (chunk, chunk.len(), false),
        };
        if !too_long && buf.len() + piece.len() > max {
            too_long = true;
            buf.clear();
        }
        if !too_long {
            buf.extend_from_slice(piece);
        }
        input.consume(used);
        if done {
            return Ok(if too_long { Line::TooLong } else { Line::Complete });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::DemoConfig;
    use serde_json::json;
    use std::time::Duration;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    #[tokio::test]
    async fn read_line_caps_long_lines() {
        let data: &[u8] = b"short\nthis-line-is-too-long\nok\nlast";
        let mut input = BufReader::with_capacity(4, data);
        let mut buf = Vec::new();
        assert_eq!(read_line(&mut input, &mut buf, 8).await.ok(), Some(Line::Complete));
        assert_eq!(buf, b"short");
        assert_eq!(read_line(&mut input, &mut buf, 8).await.ok(), Some(Line::TooLong));
        assert_eq!(read_line(&mut input, &mut buf, 8).await.ok(), Some(Line::Complete));
        assert_eq!(buf, b"ok");
        assert_eq!(read_line(&mut input, &mut buf, 8).await.ok(), Some(Line::Complete));
        assert_eq!(buf, b"last");
        assert_eq!(read_line(&mut input, &mut buf, 8).await.ok(), Some(Line::Eof));
    }

    #[tokio::test]
    async fn serves_over_pipes_concurrently_and_exits_at_eof() {
        let (client_in, server_out) = tokio::io::duplex(64 * 1024);
        let (mut client_out, server_in) = tokio::io::duplex(64 * 1024);
        let server = DemoServer::new(DemoConfig::default(), None);
        let serving = tokio::spawn(serve(server, server_in, server_out, 0.0));
        let mut lines = BufReader::new(client_in).lines();

        let send = |msg: Value| format!("{msg}\n");
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
        let slow = json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
            "params": {"name": "sleep", "arguments": {"ms": 300}}});
        let fast = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"message": "hi"}}});
        let mut input = String::new();
        for msg in [init, slow, fast] {
            input.push_str(&send(msg));
        }
        input.push_str("not json\n");
        client_out.write_all(input.as_bytes()).await.ok();

        let mut replies = Vec::new();
        for _ in 0..3 {
            let line = tokio::time::timeout(Duration::from_secs(5), lines.next_line())
                .await
                .ok()
                .and_then(Result::ok)
                .flatten()
                .unwrap_or_default();
            replies.push(serde_json::from_str::<Value>(&line).unwrap_or_default());
        }
        // The initialize, the echo and the parse error all overtake the sleep.
        let by_id = |id: Value| replies.iter().find(|r| r["id"] == id).cloned();
        let init = by_id(json!(0)).unwrap_or_default();
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
        let echo = by_id(json!(2)).unwrap_or_default();
        assert_eq!(echo["result"]["content"][0]["text"], "hi");
        let parse = by_id(Value::Null).unwrap_or_default();
        assert_eq!(parse["error"]["code"], -32700);

        // Closing stdin lets the running sleep answer, then the server exits.
        drop(client_out);
        let line = lines.next_line().await.ok().flatten().unwrap_or_default();
        let reply: Value = serde_json::from_str(&line).unwrap_or_default();
        assert_eq!(reply["id"], "slow");
        assert_eq!(reply["result"]["content"][0]["text"], "slept 300 ms");
        let finished = tokio::time::timeout(Duration::from_secs(5), serving).await;
        assert!(matches!(finished, Ok(Ok(Ok(())))));
    }
}
