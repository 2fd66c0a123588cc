//! The client-facing HTTP front through the real binary: connection caps and timeouts,
//! the descriptor budget, session caps, Host/Origin/Content-Type edge cases, GET streams
//! that end with their session, refusals that carry the request's id and are logged.

use std::time::Duration;

use crate::support::front_wire::*;
use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, Stream, Upstream, assert_overloaded, config_yaml};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

// ---------------------------------------------------------------------------------------
// Item 16: timeouts and connection caps
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_slow_bodies_are_cut_off() {
    let extra = "limits: { header_timeout: 1s, body_timeout: 1s, idle_timeout: 60s }\n";
    let gw = Seawall::start(&config_yaml(&[nowhere()], extra)).await;
    let addr = addr_of(&gw.url);

    // Slow-loris: a request head that never ends.
    let mut loris = TcpStream::connect(addr).await.expect("connect");
    loris.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ").await.expect("write");
    read_until_closed(&mut loris, Duration::from_secs(6), "a never-ending request head").await;

    // A body that never arrives in full: 408, then the connection closes.
    let mut slow = TcpStream::connect(addr).await.expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\""
    );
    slow.write_all(head.as_bytes()).await.expect("write");
    let answer = read_until_closed(&mut slow, Duration::from_secs(6), "a body that never ends").await;
    assert_eq!(status_of(&answer), 408, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed() {
    let extra = "limits: { idle_timeout: 1s }\n";
    let gw = Seawall::start(&config_yaml(&[nowhere()], extra)).await;
    let addr = addr_of(&gw.url);

    // Connected, never a byte.
    let mut silent = TcpStream::connect(addr).await.expect("connect");
    read_until_closed(&mut silent, Duration::from_secs(6), "a silent connection").await;

    // Keep-alive after one answered request.
    let mut kept = TcpStream::connect(addr).await.expect("connect");
    kept.write_all(format!("GET /nothing-here HTTP/1.1\r\nHost: {addr}\r\n\r\n").as_bytes()).await.expect("write");
    let answer = read_until_closed(&mut kept, Duration::from_secs(6), "an idle keep-alive connection").await;
    assert_eq!(status_of(&answer), 404, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_are_refused_while_admin_answers() {
    let extra = "limits: { max_connections: 20, max_connections_per_peer: 0, idle_timeout: 120s }\n";
    let gw = Seawall::start(&config_yaml(&[nowhere()], extra)).await;
    let addr = addr_of(&gw.url);
    let mut held = idle_connections(addr, 20).await;

    let mut extra_conn = TcpStream::connect(addr).await.expect("connect");
    let refused = read_until_closed(&mut extra_conn, Duration::from_secs(5), "the connection over the cap").await;
    assert_eq!(status_of(&refused), 503, "{refused}");
    assert!(refused.to_ascii_lowercase().contains("retry-after: 1"), "{refused}");
    assert_eq!(body_of(&refused)["error"]["code"], -32012);
    assert_eq!(healthz(&gw).await, 200, "the admin listener answers while the client side is full");

    // A freed place serves again.
    held.pop();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let answer =
            raw_exchange(addr, format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes())
                .await;
        if status_of(&answer) == 400 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no place freed: {answer}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_cannot_take_every_connection() {
    let extra = "limits: { max_connections: 100, max_connections_per_peer: 5, idle_timeout: 120s }\n";
    let gw = Seawall::start(&config_yaml(&[nowhere()], extra)).await;
    let addr = addr_of(&gw.url);
    let _held = idle_connections(addr, 5).await;
    let mut sixth = TcpStream::connect(addr).await.expect("connect");
    let refused = read_until_closed(&mut sixth, Duration::from_secs(5), "the peer's sixth connection").await;
    assert_eq!(status_of(&refused), 503, "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_low_descriptor_limit_lowers_the_caps_and_keeps_both_listeners_alive() {
    let config = config_yaml(&[Upstream::demo_stdio("demo", false)], "limits: { idle_timeout: 120s }\n");
    let gw = start_custom(&config, &["prlimit", "--nofile=256:256", "--"], &[]).await;
    let addr = addr_of(&gw.url);
    wait_for_output(&gw.proc, "lowered limits.max_connections").await;
    // Far more idle connections than descriptors.
    let held = idle_connections(addr, 300).await;
    let mut probe = TcpStream::connect(addr).await.expect("connect");
    let refused = read_until_closed(&mut probe, Duration::from_secs(5), "a connection past the budget").await;
    assert_eq!(status_of(&refused), 503, "{refused}");
    assert_eq!(healthz(&gw).await, 200);
    drop(held);
    // Once they are gone the gateway serves MCP again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = Client::new(&gw.url).post(initialize_body(json!(1))).await;
        if reply.status == 200 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "initialize still refused: {}", reply.raw);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let out = gw.proc.output();
    assert!(!out.contains("Too many open files"), "the process ran out of descriptors:\n{out}");
}

// ---------------------------------------------------------------------------------------
// Items 17 and 4: session caps, answered like every other overload
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_sessions_is_an_overload_answer() {
    let gw = Seawall::start(&config_yaml(&[nowhere()], "session: { max_sessions: 2 }\n")).await;
    let first = Client::connect(&gw.url, json!({})).await;
    let second = Client::connect(&gw.url, json!({})).await;
    // Both busy (their GET streams read): none of this address's sessions can make room.
    let _streams = [first.open_stream().await, second.open_stream().await];
    let third = Client::new(&gw.url).post(initialize_body(json!("third"))).await;
    assert_overloaded(&third, json!("third"));
    // An ended session gives its place back.
    assert_eq!(first.delete().await, 200);
    let again = Client::new(&gw.url).post(initialize_body(json!(4))).await;
    assert_eq!(again.status, 200, "{}", again.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_peer_cannot_take_every_session() {
    let extra = "session: { max_sessions: 10, max_sessions_per_peer: 2 }\n";
    let gw = Seawall::start(&config_yaml(&[nowhere()], extra)).await;
    let a = Client::connect(&gw.url, json!({})).await;
    let b = Client::connect(&gw.url, json!({})).await;
    let _streams = [a.open_stream().await, b.open_stream().await];
    let third = Client::new(&gw.url).post(initialize_body(json!(3))).await;
    assert_overloaded(&third, json!(3));
    assert_eq!(third.header("retry-after").as_deref(), Some("1"), "a place is made as soon as one goes idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_initialize_calls_opens_no_more_upstream_sessions_than_fit() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&config_yaml(
        &[Upstream::http("remote", &remote.url)],
        "session: { max_sessions: 5, max_sessions_per_peer: 0 }\n",
    ))
    .await;
    let count_inits = || remote.recorded().iter().filter(|e| e["event"] == "initialize").count();
    let before = count_inits();
    // From 40 addresses: no client's own session could make room for another's.
    let burst = (0..40u8).map(|i| {
        let url = gw.url.clone();
        let local = std::net::IpAddr::from([127, 0, 1, i + 1]);
        let http = reqwest::Client::builder().local_address(local).build().expect("client");
        async move { Client { http, ..Client::new(&url) }.post(initialize_body(json!(i))).await.status }
    });
    let statuses = futures::future::join_all(burst).await;
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 5, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 503).count(), 35, "{statuses:?}");
    let opened = count_inits() - before;
    assert!(opened <= 5, "{opened} upstream sessions opened for 5 client sessions");
}

// ---------------------------------------------------------------------------------------
// Item 20: Host, Origin, Content-Type and Content-Length edge cases
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ambiguous_or_foreign_authorities_are_refused() {
    let gw = Seawall::start(&config_yaml(&[nowhere()], "")).await;
    let addr = addr_of(&gw.url);
    let body = initialize_body(json!(1)).to_string();
    let post = |target: &str, host_lines: &[u8]| {
        let mut r = format!("POST {target} HTTP/1.1\r\n").into_bytes();
        r.extend_from_slice(host_lines);
        r.extend_from_slice(
            format!(
                "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .as_bytes(),
        );
        r
    };
    let host = format!("Host: {addr}\r\n");
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("non-ASCII Host", post("/mcp", b"Host: \xe9vil.example\r\n"), 400),
        ("absolute-form to another host", post("http://evil.example/mcp", host.as_bytes()), 400),
        ("absolute-form naming it in Host too", post("http://evil.example/mcp", b"Host: evil.example\r\n"), 403),
        ("duplicate Host", post("/mcp", format!("{host}Host: evil.example\r\n").as_bytes()), 400),
        ("the same Host twice", post("/mcp", format!("{host}{host}").as_bytes()), 400),
        ("no Host on HTTP/1.1", post("/mcp", b""), 400),
        ("Host with user information", post("/mcp", format!("Host: me@{addr}\r\n").as_bytes()), 400),
    ];
    for (what, request, want) in cases {
        let answer = raw_exchange(addr, &request).await;
        assert_eq!(status_of(&answer), want, "{what}: {answer}");
        assert_eq!(body_of(&answer)["error"]["code"], -32600, "{what}: {answer}");
    }
    // The well-formed variants pass.
    let answer = raw_exchange(addr, &post(&format!("http://{addr}/mcp"), host.as_bytes())).await;
    assert_eq!(status_of(&answer), 200, "absolute-form naming this gateway: {answer}");
    let answer = raw_exchange(addr, &post("/mcp", host.as_bytes())).await;
    assert_eq!(status_of(&answer), 200, "{answer}");

    // HTTP/2 with prior knowledge: the authority is all there is.
    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .resolve("evil.example", addr)
        .timeout(Duration::from_secs(10))
        .build()
        .expect("h2 client");
    let send = |url: String| {
        h2.post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.clone())
            .send()
    };
    let evil = send(format!("http://evil.example:{}/mcp", addr.port())).await.expect("h2 POST");
    assert_eq!(evil.status().as_u16(), 403);
    let local = send(format!("http://{addr}/mcp")).await.expect("h2 POST");
    assert_eq!(local.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn media_types_match_exactly_and_oversized_bodies_get_no_continue() {
    let gw = Seawall::start(&config_yaml(&[nowhere()], "limits: { max_body_bytes: 65536 }\n")).await;
    let addr = addr_of(&gw.url);
    let c = Client::new(&gw.url);
    let body = initialize_body(json!(1)).to_string();
    let jsonp = c.post_raw(body.clone(), &[("content-type", "application/jsonp")]).await;
    assert_eq!(jsonp.status, 415, "{}", jsonp.raw);
    let with_charset = c.post_raw(body.clone(), &[("content-type", "application/json; charset=utf-8")]).await;
    assert_eq!(with_charset.status, 200, "{}", with_charset.raw);

    // A declared 50 MB body: 413 at once, never `100 Continue`.
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 52428800\r\nExpect: 100-continue\r\n\r\n"
    );
    let answer = raw_exchange(addr, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(!answer.contains("100 Continue"), "{answer}");
}

/// seawall's own HTTP/1.x: what a request head and its body may look like on the wire,
/// and how the answers come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_requests_are_read_and_answered_as_rfc_9112_says() {
    let gw = Seawall::start(&config_yaml(&[nowhere()], "")).await;
    let addr = addr_of(&gw.url);
    let post = |id: u64, extra: &str| {
        let body = initialize_body(json!(id)).to_string();
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n{extra}Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
    };

    // Two requests in one write: two answers, in order, the second closing.
    let both = format!("{}{}", post(1, ""), post(2, "Connection: close\r\n"));
    let answer = raw_exchange(addr, both.as_bytes()).await;
    assert_eq!(answer.matches("HTTP/1.1 200 OK\r\n").count(), 2, "{answer}");
    let (first, second) = (answer.find(r#""id":1"#).expect("id 1"), answer.find(r#""id":2"#).expect("id 2"));
    assert!(first < second, "{answer}");
    assert!(answer.contains("connection: close\r\n"), "{answer}");

    // A chunked body, in pieces of every size.
    let body = initialize_body(json!(3)).to_string();
    let (a, b) = body.split_at(body.len() / 3);
    let chunked = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n{:x};ext=1\r\n{b}\r\n0\r\n\r\n",
        a.len(),
        b.len()
    );
    let answer = raw_exchange(addr, chunked.as_bytes()).await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    assert_eq!(body_of(&answer)["id"], 3, "{answer}");

    // A head and body in small pieces, split inside the empty line that ends the head.
    let pieces = post(4, "Connection: close\r\n");
    let cut = pieces.find("\r\n\r\n").expect("an empty line") + 3;
    let mut s = TcpStream::connect(addr).await.expect("connect");
    for piece in [&pieces[..7], &pieces[7..cut], &pieces[cut..cut + 1], &pieces[cut + 1..]] {
        s.write_all(piece.as_bytes()).await.expect("write");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let answer = read_until_closed(&mut s, Duration::from_secs(10), "a request in pieces").await;
    assert_eq!(status_of(&answer), 200, "{answer}");
    assert_eq!(body_of(&answer)["id"], 4, "{answer}");

    // HTTP/1.0: answered, then closed (raw_exchange returns only at the close).
    let old = raw_exchange(addr, b"GET /nothing-here HTTP/1.0\r\n\r\n").await;
    assert_eq!(status_of(&old), 404, "{old}");

    // Not HTTP, a length that cannot be trusted, a head too large: refused, then closed.
    assert_eq!(status_of(&raw_exchange(addr, b"HELLO\r\n\r\n").await), 400);
    let twice = format!("POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}");
    assert_eq!(status_of(&raw_exchange(addr, twice.as_bytes()).await), 400);
    let huge = format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nX-Big: {}\r\n\r\n", "a".repeat(70_000));
    assert_eq!(status_of(&raw_exchange(addr, huge.as_bytes()).await), 431);

    // A HEAD has its answer's head only.
    let head = raw_exchange(
        addr,
        format!("HEAD /nothing-here HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(status_of(&head), 404, "{head}");
    assert!(head.ends_with("\r\n\r\n"), "no body after a HEAD's head: {head:?}");
}

// ---------------------------------------------------------------------------------------
// Item 21: the GET stream ends with its session
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_stream_ends_when_its_session_is_deleted_or_expires() {
    let gw = Seawall::start(&config_yaml(&[nowhere()], "session: { idle_timeout: 1s }\n")).await;

    let deleted = Client::connect(&gw.url, json!({})).await;
    let ended = open_get_stream(&deleted).await;
    assert_eq!(deleted.delete().await, 200);
    tokio::time::timeout(Duration::from_secs(5), ended).await.expect("the GET stream outlived DELETE").ok();

    // Idle expiry runs every 15 s.
    let expiring = Client::connect(&gw.url, json!({})).await;
    let ended = open_get_stream(&expiring).await;
    tokio::time::timeout(Duration::from_secs(40), ended).await.expect("the GET stream outlived idle expiry").ok();
    let after = expiring.request(2, "ping", json!({})).await;
    assert_eq!(after.status, 404, "{}", after.raw);
}

// ---------------------------------------------------------------------------------------
// Items 13 and 14: refusals name the request's id, and are logged
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refusals_carry_the_request_id() {
    let gw = Seawall::start(&config_yaml(&[nowhere()], "")).await;
    let c = Client::connect(&gw.url, json!({})).await;
    let ping = |id: Value| json!({"jsonrpc":"2.0","id":id,"method":"ping"}).to_string();

    let bad_version = c.post_raw(ping(json!("v-7")), &[("mcp-protocol-version", "1999-01-01")]).await;
    assert_eq!(bad_version.status, 400, "{}", bad_version.raw);
    assert_eq!(bad_version.response()["id"], "v-7");
    // The client learns what to speak, not that its params lack a modern envelope.
    assert_eq!(bad_version.error()["code"], -32022, "{}", bad_version.raw);
    let supported = json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
    assert_eq!(bad_version.error()["data"], json!({"supported": supported, "requested": "1999-01-01"}));

    let mut anonymous = c.clone();
    anonymous.session = None;
    let missing = anonymous.post_raw(ping(json!(8)), &[]).await;
    assert_eq!(missing.status, 400, "{}", missing.raw);
    assert_eq!(missing.response()["id"], 8);

    let unknown = c.post_raw(ping(json!(9)), &[("mcp-session-id", "no-such-session")]).await;
    assert_eq!(unknown.status, 404, "{}", unknown.raw);
    assert_eq!(unknown.response()["id"], 9);

    // A batch outside 2025-03-26 has no single id to name.
    let batch = c.post_raw(format!("[{}]", ping(json!(10))), &[]).await;
    assert_eq!(batch.status, 400, "{}", batch.raw);
    assert_eq!(batch.response()["id"], Value::Null);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refusals_are_logged_once_at_debug_without_the_body() {
    let config = config_yaml(&[nowhere()], "");
    let mut gw = start_custom(&config, &[], &[("RUST_LOG", "info,seawall::downstream=debug")]).await;
    let c = Client::new(&gw.url);
    let secret = "body-marker-5f1d";
    let body = json!({"jsonrpc":"2.0","id":1,"method":"ping","params":{"note": secret}}).to_string();
    let reply = c.post_raw(body, &[("mcp-session-id", "unknown-session")]).await;
    assert_eq!(reply.status, 404);
    let line = gw
        .proc
        .wait_for_line(Stream::Stderr, Duration::from_secs(5), "the refusal log line", |l| {
            l.contains("refused an HTTP request").then(|| l.to_owned())
        })
        .await;
    for field in ["status=404", "code=-32600", "method=POST", "path=/mcp", "peer=127.0.0.1:", "Session not found"] {
        assert!(line.contains(field), "{field} missing from {line}");
    }
    let origin = c
        .post_raw(json!({"jsonrpc":"2.0","id":2,"method":"ping"}).to_string(), &[("origin", "http://evil.example")])
        .await;
    assert_eq!(origin.status, 403);
    gw.proc
        .wait_for_line(Stream::Stderr, Duration::from_secs(5), "the Origin refusal log line", |l| {
            (l.contains("refused an HTTP request") && l.contains("status=403")).then_some(())
        })
        .await;
    let out = gw.proc.output();
    assert_eq!(out.matches("refused an HTTP request").count(), 2, "{out}");
    assert!(!out.contains(secret), "the request body reached the log:\n{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_get_streams_and_exits_promptly() {
    let mut gw = Seawall::start(&config_yaml(&[nowhere()], "")).await;
    let c = Client::connect(&gw.url, json!({})).await;
    let ended = open_get_stream(&c).await;
    let status = gw.stop(Duration::from_secs(8)).await.expect("exit status");
    assert!(status.success(), "seawall did not exit cleanly on SIGTERM with a GET stream open: {status}");
    tokio::time::timeout(Duration::from_secs(2), ended).await.expect("the GET stream outlived the gateway").ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_open_their_upstream_get_stream_only_when_the_client_listens() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&config_yaml(&[Upstream::http("remote", &remote.url)], "")).await;
    let pid = gw.proc.id().expect("pid");
    let base = Client::new(&gw.url);
    let first = session_on(&base).await;
    let before = open_fds(pid);
    let mut sessions = vec![first];
    for _ in 0..30 {
        sessions.push(session_on(&base).await);
    }
    // Give eagerly opened upstream streams time to show up; none should.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = open_fds(pid);
    assert!(idle < before + 10, "30 idle sessions took {} descriptors", idle - before);

    // Ten clients open their GET streams: ten client connections and ten upstream streams
    // (the first of which may reuse idle pooled upstream connections).
    let mut streams = Vec::new();
    for c in &sessions[..10] {
        streams.push(open_get_stream(c).await);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while open_fds(pid) < idle + 15 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "upstream GET streams did not open: {} -> {}",
            idle,
            open_fds(pid)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
