//! Helpers of `tests/front.rs`: raw TCP exchanges, a gateway started under a wrapper
//! command or with extra environment, descriptor counts, sessions and GET streams.

use std::net::SocketAddr;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Command;

use crate::support::mcp_client::Client;
use crate::support::{Proc, START_TIMEOUT, Seawall, Stream, TestDir, Upstream, seawall_bin};

/// An HTTP upstream nobody listens on: sessions open (with the upstream down) without
/// any upstream process.
pub fn nowhere() -> Upstream {
    Upstream::http("nowhere", "http://127.0.0.1:9/mcp")
}

pub fn addr_of(url: &str) -> SocketAddr {
    let rest = url.trim_start_matches("http://");
    rest.split('/').next().unwrap_or_default().parse().unwrap_or_else(|e| panic!("{url}: {e}"))
}

/// Reads until the server closes the connection; panics if it stays open for `within`.
pub async fn read_until_closed(stream: &mut TcpStream, within: Duration, what: &str) -> String {
    let mut got = Vec::new();
    let read = async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    if tokio::time::timeout(within, read).await.is_err() {
        panic!("{what}: the connection was still open after {within:?}");
    }
    String::from_utf8_lossy(&got).into_owned()
}

/// Sends raw bytes on a fresh connection and returns everything the server sent back
/// until it closed the connection.
pub async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    s.write_all(request).await.expect("write");
    read_until_closed(&mut s, Duration::from_secs(10), "raw exchange").await
}

pub fn status_of(response: &str) -> u16 {
    response.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("no status line in {response:?}"))
}

pub fn body_of(response: &str) -> Value {
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or_default();
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response:?}"))
}

/// Starts seawall like [`Seawall::start`], optionally under a wrapper command (e.g.
/// `prlimit`) and with extra environment.
pub async fn start_custom(config: &str, wrapper: &[&str], env: &[(&str, &str)]) -> Seawall {
    let dir = TestDir::new("front");
    let config_path = dir.write("seawall.yaml", config);
    let mut cmd = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = Command::new(program);
            c.args(args).arg(seawall_bin());
            c
        }
        None => Command::new(seawall_bin()),
    };
    cmd.arg("run").arg("--config").arg(&config_path).current_dir(dir.path()).env("RUST_LOG", "info");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut proc = Proc::spawn("seawall", cmd);
    let (mut url, mut admin_url) = (None, None);
    while url.is_none() || admin_url.is_none() {
        let line =
            proc.wait_for_line(Stream::Stdout, START_TIMEOUT, "its `listening` lines", |l| Some(l.to_owned())).await;
        if let Some(u) = line.strip_prefix("seawall admin listening on ") {
            admin_url = Some(u.trim().to_owned());
        } else if let Some(u) = line.strip_prefix("seawall listening on ") {
            url = Some(u.trim().to_owned());
        }
    }
    Seawall { proc, url: url.expect("url"), admin_url: admin_url.expect("admin"), config_path, _dir: dir }
}

/// Waits until the process has printed `needle` (lines already consumed included).
pub async fn wait_for_output(proc: &Proc, needle: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !proc.output().contains(needle) {
        assert!(tokio::time::Instant::now() < deadline, "{needle:?} not printed; output:\n{}", proc.output());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn healthz(gw: &Seawall) -> u16 {
    let client = reqwest::Client::builder().timeout(Duration::from_secs(5)).build().expect("client");
    match client.get(format!("{}/healthz", gw.admin_url)).send().await {
        Ok(r) => r.status().as_u16(),
        Err(e) => panic!("/healthz did not answer: {e}"),
    }
}

/// Opens `n` idle connections and waits until the server has surely accepted them (a
/// request on a further connection is answered after them).
pub async fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(TcpStream::connect(addr).await.expect("connect"));
    }
    held
}

pub fn initialize_body(id: Value) -> Value {
    json!({"jsonrpc":"2.0","id":id,"method":"initialize","params":{
        "protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"front","version":"1"}}})
}

/// Opens the GET stream and returns a receiver that yields once when it ends.
pub async fn open_get_stream(c: &Client) -> tokio::sync::oneshot::Receiver<()> {
    let resp = c
        .http
        .get(&c.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", c.session.as_deref().expect("session"))
        .header("mcp-protocol-version", &c.version)
        .timeout(Duration::from_secs(3600))
        .send()
        .await
        .expect("GET");
    assert_eq!(resp.status().as_u16(), 200);
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut bytes = resp.bytes_stream();
        while let Some(Ok(_)) = bytes.next().await {}
        let _ = tx.send(());
    });
    rx
}

/// Open descriptors of a process.
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or_else(|e| panic!("/proc/{pid}/fd: {e}"))
}

/// A session through `base`'s HTTP client (one pooled connection for all of them).
pub async fn session_on(base: &Client) -> Client {
    let mut c = base.clone();
    c.session = None;
    let reply = c.post(initialize_body(json!(0))).await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    c.session = Some(reply.header("mcp-session-id").expect("Mcp-Session-Id"));
    assert_eq!(c.post(json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await.status, 202);
    c
}
