//! Trusted proxies through the real binary: behind a real nginx adding
//! `X-Forwarded-For`, the per-address session cap and `addr:` rate-limit budgets count
//! the clients nginx names, not nginx; the same header sent straight from an untrusted
//! address is ignored; a trusted proxy speaking the PROXY protocol (versions 1 and 2,
//! written by the test) names its clients, and a connection that breaks the protocol is
//! closed without an answer.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpSocket;

use crate::support::mcp_client::{Client, Reply, initialize_body};
use crate::support::{DemoUpstream, Nginx, Seawall, assert_overloaded};

/// A client sending `headers` on every request, from the loopback address `local`.
fn client_from(url: &str, local: &str, headers: &[(&str, &str)]) -> Client {
    Client::with(url, headers, Some(local.parse::<IpAddr>().expect("address")))
}

/// A session that is busy (its GET stream open), so that it makes no room for another
/// of its address. The stream stays open while the receiver lives.
async fn busy(c: Client) -> (Client, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let c = c.open().await;
    let (status, stream) = c.open_stream().await;
    assert_eq!(status, 200);
    (c, stream)
}

async fn echo(c: &Client, id: u64) -> Reply {
    c.request(id, "tools/call", json!({"name": "demo__echo", "arguments": {"text": "hi"}})).await
}

/// Two sessions per address, two echoes per address a minute; 127.0.0.1 (where nginx
/// and the PROXY protocol sender connect from) trusted.
fn config(demo: &DemoUpstream, source: &str, hops: usize) -> String {
    format!(
        "trusted_proxies: {{ cidrs: ['127.0.0.1/32'], source: {source}, hops: {hops} }}\n\
         session: {{ max_sessions_per_peer: 2 }}\n\
         rate_limits:\n  limits:\n    - {{ per: principal, tools: ['demo__echo'], rate: 2/m, burst: 2 }}\n\
         upstreams:\n  - name: demo\n    url: {}\n",
        demo.url
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_nginx_caps_and_rate_limits_count_the_clients_it_names() {
    let demo = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&config(&demo, "x_forwarded_for", 1)).await;
    let nginx = Nginx::forwarding_for(gw.url.trim_end_matches("/mcp")).await;
    let url = format!("{}/mcp", nginx.url);

    // Every request reaches seawall from nginx's 127.0.0.1; nginx names the client.
    let (a1, _s1) = busy(client_from(&url, "127.0.0.2", &[])).await;
    let (_a2, _s2) = busy(client_from(&url, "127.0.0.2", &[])).await;
    let (b, _s3) = busy(client_from(&url, "127.0.0.3", &[])).await;
    let (_c, _s4) = busy(client_from(&url, "127.0.0.4", &[])).await;
    let refused = client_from(&url, "127.0.0.2", &[]).post(initialize_body(json!("third"))).await;
    assert_overloaded(&refused, json!("third"));

    // What a client writes itself is left of what nginx adds: a client claiming to be
    // 127.0.0.2 is still its own address, whose cap has room.
    let spoofing = client_from(&url, "127.0.0.5", &[("x-forwarded-for", "127.0.0.2")]);
    let (_d, _s5) = busy(spoofing).await;

    // `addr:` budgets are per named client.
    for id in 1..=2 {
        assert_eq!(echo(&a1, id).await.status, 200);
    }
    assert_eq!(echo(&a1, 3).await.status, 429, "a1's address spent its budget");
    assert_eq!(echo(&b, 1).await.status, 200, "another address has its own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_from_an_untrusted_address_is_ignored() {
    let demo = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&config(&demo, "x_forwarded_for", 1)).await;

    // Straight from 127.0.0.6, which is no trusted proxy: each claims another client.
    let claim = |n: u8| client_from(&gw.url, "127.0.0.6", &[("x-forwarded-for", &format!("192.0.2.{n}"))]);
    let (a, _s1) = busy(claim(1)).await;
    let (_b, _s2) = busy(claim(2)).await;
    let refused = claim(3).post(initialize_body(json!("third"))).await;
    assert_overloaded(&refused, json!("third"));
    for id in 1..=2 {
        assert_eq!(echo(&a, id).await.status, 200);
    }
    let other_claim = claim(4);
    let other = Client { session: a.session.clone(), ..other_claim };
    assert_eq!(echo(&other, 3).await.status, 429, "one budget for the address, whatever it claims");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_names_the_client_hops_from_the_right() {
    let demo = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&config(&demo, "forwarded", 2)).await;
    // The test is the proxy next to seawall (127.0.0.1) and names the one before it
    // last: the client is the element before that.
    let via = |client: &str| format!("for=198.51.100.66, for=\"{client}\";proto=http, for=10.0.0.9");
    let (_a1, _s1) = busy(client_from(&gw.url, "127.0.0.1", &[("forwarded", &via("192.0.2.1"))])).await;
    let (_a2, _s2) = busy(client_from(&gw.url, "127.0.0.1", &[("forwarded", &via("192.0.2.1:4711"))])).await;
    let (_b, _s3) = busy(client_from(&gw.url, "127.0.0.1", &[("forwarded", &via("[2001:db8::1]"))])).await;
    let third = client_from(&gw.url, "127.0.0.1", &[("forwarded", &via("192.0.2.1"))]);
    assert_overloaded(&third.post(initialize_body(json!("third"))).await, json!("third"));
    // Too few hops, or a hidden client: the proxy's own address, which has room once.
    let (_p, _s4) = busy(client_from(&gw.url, "127.0.0.1", &[("forwarded", "for=192.0.2.1")])).await;
    let (_q, _s5) = busy(client_from(&gw.url, "127.0.0.1", &[("forwarded", "for=_hidden, for=10.0.0.9")])).await;
    let own = client_from(&gw.url, "127.0.0.1", &[]);
    assert_overloaded(&own.post(initialize_body(json!("own"))).await, json!("own"));
}

/// One HTTP/1.1 exchange on a fresh connection from `local` to the gateway at `url`:
/// `prefix` (a PROXY header, or nothing) then a POST of `body`; the status line's code,
/// or `None` when the connection closed without an answer.
async fn raw_post(url: &str, local: &str, prefix: &[u8], body: &Value, session: Option<&str>) -> Option<(u16, String)> {
    let addr: SocketAddr = url.trim_start_matches("http://").trim_end_matches("/mcp").parse().expect("address");
    let socket = TcpSocket::new_v4().expect("socket");
    socket.bind(SocketAddr::new(local.parse().expect("local"), 0)).expect("bind");
    let mut stream = socket.connect(addr).await.expect("connect");
    let body = body.to_string();
    let session = session.map(|s| format!("mcp-session-id: {s}\r\nmcp-protocol-version: 2025-11-25\r\n"));
    let request = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\naccept: application/json, text/event-stream\r\n\
         content-type: application/json\r\n{}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        session.unwrap_or_default(),
        body.len()
    );
    let mut bytes = prefix.to_vec();
    bytes.extend_from_slice(request.as_bytes());
    // The gateway may close before reading it all: a write error then is an answer too.
    let _ = stream.write_all(&bytes).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the gateway neither answered nor closed");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text))
}

/// The session id in a raw answer's head.
fn session_of(answer: &str) -> String {
    answer
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("mcp-session-id: ").map(|_| l[16..].trim().to_owned()))
        .unwrap_or_else(|| panic!("no session id: {answer}"))
}

fn v1(client: &str) -> Vec<u8> {
    format!("PROXY TCP4 {client} 127.0.0.1 40000 8080\r\n").into_bytes()
}

/// A version 2 header: `command` 0x20 LOCAL or 0x21 PROXY, and for PROXY the client's
/// IPv4 address.
fn v2(command: u8, client: Option<[u8; 4]>) -> Vec<u8> {
    let mut out = b"\r\n\r\n\0\r\nQUIT\n".to_vec();
    out.push(command);
    match client {
        Some(ip) => {
            out.extend_from_slice(&[0x11, 0, 12]);
            out.extend_from_slice(&ip);
            out.extend_from_slice(&[127, 0, 0, 1, 0x9c, 0x40, 0x1f, 0x90]);
        }
        None => out.extend_from_slice(&[0x00, 0, 0]),
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_protocol_from_a_trusted_peer_names_the_client() {
    let demo = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&format!("limits: {{ header_timeout: 1s }}\n{}", config(&demo, "proxy_protocol", 1))).await;
    let init = initialize_body(json!(0));
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let opened = |answer: Option<(u16, String)>| {
        let (status, text) = answer.expect("an answer");
        assert_eq!(status, 200, "{text}");
        session_of(&text)
    };
    let alive = |session: String, prefix: Vec<u8>| {
        let (url, ping) = (gw.url.clone(), ping.clone());
        async move { raw_post(&url, "127.0.0.1", &prefix, &ping, Some(&session)).await.map(|(s, _)| s) }
    };

    // 192.0.2.1 by version 1, twice, and 192.0.2.2 by version 2: three sessions where
    // the cap is two per address.
    let a1 = opened(raw_post(&gw.url, "127.0.0.1", &v1("192.0.2.1"), &init, None).await);
    let a2 = opened(raw_post(&gw.url, "127.0.0.1", &v1("192.0.2.1"), &init, None).await);
    let b = opened(raw_post(&gw.url, "127.0.0.1", &v2(0x21, Some([192, 0, 2, 2])), &init, None).await);
    // Used last, the sessions of 192.0.2.1 are not the least recently used; a third one
    // of that address lets the older of its own go, never 192.0.2.2's.
    assert_eq!(alive(a1.clone(), v1("192.0.2.1")).await, Some(200));
    assert_eq!(alive(a2.clone(), v1("192.0.2.1")).await, Some(200));
    let _a3 = opened(raw_post(&gw.url, "127.0.0.1", &v1("192.0.2.1"), &init, None).await);
    assert_eq!(alive(a1, v1("192.0.2.1")).await, Some(404), "its address's oldest session made room");
    assert_eq!(alive(a2, v1("192.0.2.1")).await, Some(200));
    assert_eq!(alive(b.clone(), v2(0x21, Some([192, 0, 2, 2]))).await, Some(200), "another address's stays");

    // A LOCAL header (the proxy's own check) is the proxy's own address.
    let local = opened(raw_post(&gw.url, "127.0.0.1", &v2(0x20, None), &init, None).await);
    assert_eq!(alive(local, v2(0x20, None)).await, Some(200));
    assert_eq!(alive(b, v1("192.0.2.2")).await, Some(200));

    // From the trusted peer: no header, or a malformed one, is closed unanswered.
    assert_eq!(raw_post(&gw.url, "127.0.0.1", b"", &init, None).await.map(|(s, _)| s), None);
    let malformed = b"PROXY TCP4 192.0.2.999 127.0.0.1 1 2\r\n";
    assert_eq!(raw_post(&gw.url, "127.0.0.1", malformed, &init, None).await.map(|(s, _)| s), None);
    let bad_v2 = v2(0x2f, Some([192, 0, 2, 3]));
    assert_eq!(raw_post(&gw.url, "127.0.0.1", &bad_v2, &init, None).await.map(|(s, _)| s), None);

    // From anyone else: a PROXY header is a protocol error; plain HTTP is served.
    assert_eq!(raw_post(&gw.url, "127.0.0.7", &v1("192.0.2.9"), &init, None).await.map(|(s, _)| s), None);
    let forged_v2 = v2(0x21, Some([192, 0, 2, 9]));
    assert_eq!(raw_post(&gw.url, "127.0.0.7", &forged_v2, &init, None).await.map(|(s, _)| s), None);
    opened(raw_post(&gw.url, "127.0.0.7", b"", &init, None).await);

    // A header that stops halfway is closed once `limits.header_timeout` has passed.
    let addr: SocketAddr = gw.url.trim_start_matches("http://").trim_end_matches("/mcp").parse().expect("address");
    let mut stalled = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stalled.write_all(b"PROXY TCP4 192.0.2.").await.expect("write");
    let started = std::time::Instant::now();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(8), stalled.read_to_end(&mut rest)).await;
    assert!(closed.is_ok() && rest.is_empty(), "closed without an answer: {rest:?}");
    assert!(started.elapsed() >= Duration::from_millis(500), "not before the timeout: {:?}", started.elapsed());
}
