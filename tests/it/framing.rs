//! HTTP/1.x framing and request smuggling (vectors in `support/h1_vectors.rs`):
//! * through the real binary over raw TCP, each vector followed in the same bytes by
//!   another request: a vector is answered with its status and the follow-up after it,
//!   or refused with a JSON-RPC error and the connection closed, the follow-up never
//!   answered;
//! * the same bytes read by seawall's codec and by hyper's HTTP/1 server (in process,
//!   over an in-memory pipe): they read the same requests (method, target, body), refuse
//!   alike and go on to the follow-up alike, but where seawall is stricter by choice
//!   ([`STRICTER`], each with its reason);
//! * every vector is a seed of the fuzz target `h1`.

use std::sync::Arc;
use std::time::Duration;

use crate::support::front_wire::{addr_of, nowhere, raw_exchange};
use crate::support::h1_vectors::{Expect, FOLLOW_UP, Vector, with_host};
use crate::support::{Seawall, config_yaml};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use seawall::h1_offline::{self, End};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where seawall refuses what hyper reads, and why: each a stricter choice, made because
/// a front proxy may frame the bytes otherwise than either of them.
const STRICTER: &[(&str, &str)] = &[
    (
        "cl-te",
        "Content-Length beside Transfer-Encoding: refused, not read by the chunks (hyper reads them, then closes)",
    ),
    ("te-cl", "the same, the fields the other way round"),
    ("te-chunked-twice", "chunked applied twice (RFC 9112 §6.1 forbids it; hyper looks at the last coding only)"),
    ("te-chunked-two-fields", "the same in two fields"),
    ("te-leading-comma", "an empty element in Transfer-Encoding (the RFC skips it; hyper reads the last element only)"),
    ("te-gzip-chunked", "a coding seawall does not decode: 501 (hyper hands the still-gzipped body on)"),
    ("te-gzip-field-then-chunked", "the same in two fields"),
    ("cl-repeated-same", "Content-Length twice, even with one number: a proxy may take either field"),
    ("chunk-size-leading-zeros", "a chunk size longer than 15 digits, zeros or not"),
    ("chunk-ext-quoted-crlf", "a quoted string left open at the line's end: a quote-aware reader finds other chunks"),
    ("chunk-ext-nul", "a chunk extension that is not the RFC's grammar (hyper skips whatever comes to the CR)"),
    ("chunk-ext-no-name", "the same: `;` without a name"),
    ("head-bare-lf", "lines ended by a bare LF (httparse takes them; a proxy may not)"),
    ("head-one-bare-lf", "the same, one line"),
    ("get-with-length", "a body on a GET, which a proxy may not forward or may read as the next request"),
    ("get-with-chunks", "the same, chunked"),
    ("get-with-smuggled-length", "the same, the body a request"),
    ("head-with-length", "a body on a HEAD"),
    ("delete-with-length", "a body on a DELETE"),
];

// ---------------------------------------------------------------------------------------
// Through the binary
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_vector_is_answered_or_refused_and_nothing_after_a_refusal_is_answered() {
    let gw = Seawall::start(&config_yaml(&[nowhere()], "")).await;
    let addr = addr_of(&gw.url);
    let host = addr.to_string();
    let mut wrong = Vec::new();
    for Vector { name, wire, expect } in crate::support::h1_vectors::all() {
        let bytes = with_host(&[&wire[..], FOLLOW_UP].concat(), &host);
        // raw_exchange returns once the gateway closed the connection: every vector
        // ends with a close, after a refusal or after the follow-up.
        let answers = answers(&raw_exchange(addr, &bytes).await);
        let statuses: Vec<u16> = answers.iter().map(|(status, _)| *status).collect();
        let ok = match expect {
            Expect::Answered(status) => statuses == [status, 404],
            Expect::Refused(status) => {
                statuses == [status]
                    && answers.first().is_some_and(|(_, body)| {
                        let error: Value = serde_json::from_str(body).unwrap_or_default();
                        error["error"]["code"] == -32600 && error["id"].is_null()
                    })
            }
        };
        if !ok {
            wrong.push(format!("{name}: expected {expect:?}, answered {statuses:?}: {answers:?}"));
        }
    }
    assert!(wrong.is_empty(), "{} vectors answered otherwise:\n{}", wrong.len(), wrong.join("\n"));
}

/// The answers in what a connection sent back: each status and body, bodies framed by
/// their `Content-Length` or chunks.
fn answers(mut rest: &str) -> Vec<(u16, String)> {
    let mut out = Vec::new();
    while !rest.is_empty() {
        let Some((head, after)) = rest.split_once("\r\n\r\n") else {
            out.push((0, rest.to_owned()));
            break;
        };
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
        let head = head.to_ascii_lowercase();
        let length = head.lines().find_map(|l| l.strip_prefix("content-length:")).and_then(|n| n.trim().parse().ok());
        let (body, tail) = match length {
            Some(n) if n <= after.len() => (after[..n].to_owned(), &after[n..]),
            _ if head.contains("transfer-encoding: chunked") => unchunk(after),
            _ => (after.to_owned(), ""),
        };
        out.push((status, body));
        rest = tail;
    }
    out
}

fn unchunk(mut rest: &str) -> (String, &str) {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 {
            return (body, after.strip_prefix("\r\n").unwrap_or(after));
        }
        let Some(data) = after.get(..size) else { break };
        body.push_str(data);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
    (body, "")
}

// ---------------------------------------------------------------------------------------
// Against hyper
// ---------------------------------------------------------------------------------------

/// What a server read off a connection: the requests it read whole (method, target,
/// body), and whether it refused something (a head, or a body it could not decode).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Read {
    requests: Vec<(String, String, Vec<u8>)>,
    refused: bool,
}

fn seawall_reads(bytes: &[u8]) -> Read {
    let reading = h1_offline::read_connection(&[bytes]);
    Read {
        requests: reading.requests.into_iter().map(|r| (r.method, r.target, r.body)).collect(),
        refused: matches!(reading.end, End::Refused(_) | End::BadBody),
    }
}

/// The bytes served by hyper's HTTP/1 server, whose service reads each body whole and
/// answers 200: anything else it sent is its own refusal.
async fn hyper_reads(bytes: &[u8]) -> Read {
    type Seen = Arc<parking_lot::Mutex<Vec<Result<(String, String, Vec<u8>), ()>>>>;
    let seen: Seen = Arc::default();
    let (mut client, server) = tokio::io::duplex(1 << 20);
    let service = {
        let seen = Arc::clone(&seen);
        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            let seen = Arc::clone(&seen);
            async move {
                let (parts, body) = request.into_parts();
                let read = body.collect().await.map(|b| b.to_bytes().to_vec());
                let status = if read.is_ok() { 200 } else { 299 };
                seen.lock()
                    .push(read.map(|body| (parts.method.to_string(), parts.uri.to_string(), body)).map_err(drop));
                let mut answer = http::Response::new(Full::new(Bytes::from_static(b"ok")));
                *answer.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
                Ok::<_, std::convert::Infallible>(answer)
            }
        })
    };
    let connection = hyper::server::conn::http1::Builder::new()
        .half_close(true)
        .serve_connection(hyper_util::rt::TokioIo::new(server), service);
    let served = tokio::spawn(connection);
    client.write_all(bytes).await.expect("write to hyper");
    client.shutdown().await.expect("shut the pipe");
    let mut sent = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), client.read_to_end(&mut sent))
        .await
        .expect("hyper closes the connection")
        .expect("read from hyper");
    let _ = tokio::time::timeout(Duration::from_secs(10), served).await;
    let answers = answers(&String::from_utf8_lossy(&sent));
    let seen = std::mem::take(&mut *seen.lock());
    Read {
        refused: answers.iter().any(|(status, _)| *status != 200) || seen.iter().any(Result::is_err),
        requests: seen.into_iter().flatten().collect(),
    }
}

#[tokio::test]
async fn seawall_reads_the_vectors_as_hyper_does_but_where_it_is_stricter_by_choice() {
    let mut wrong = Vec::new();
    let mut differing = Vec::new();
    for Vector { name, wire, .. } in crate::support::h1_vectors::all() {
        let bytes = with_host(&[&wire[..], FOLLOW_UP].concat(), "example.com");
        let (ours, theirs) = (seawall_reads(&bytes), hyper_reads(&bytes).await);
        if ours == theirs {
            continue;
        }
        differing.push(name);
        // Stricter: seawall read a part of what hyper read, then refused.
        let stricter = ours.refused && theirs.requests.starts_with(&ours.requests) && ours != theirs;
        match STRICTER.iter().find(|(n, _)| *n == name) {
            Some(_) if stricter => {}
            Some((_, why)) => wrong.push(format!("{name} ({why}): not stricter: seawall {ours:?}, hyper {theirs:?}")),
            None => wrong.push(format!("{name}: seawall {ours:?}, hyper {theirs:?}")),
        }
    }
    for (name, why) in STRICTER {
        if !differing.contains(name) {
            wrong.push(format!("{name} ({why}): listed as a difference, but read alike"));
        }
    }
    assert!(wrong.is_empty(), "{} differences not documented:\n{}", wrong.len(), wrong.join("\n"));
}

// ---------------------------------------------------------------------------------------
// Fuzz seeds
// ---------------------------------------------------------------------------------------

/// Every vector is a seed of the fuzz target `h1` (fuzz/seeds/h1/<name>: a knob byte 0,
/// which reads a connection, a chunking seed, the bytes). `SEAWALL_WRITE_SEEDS=1`
/// writes them.
#[test]
fn every_vector_seeds_the_fuzz_target() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/h1");
    let write = std::env::var_os("SEAWALL_WRITE_SEEDS").is_some();
    let mut missing = Vec::new();
    for (i, Vector { name, wire, .. }) in crate::support::h1_vectors::all().into_iter().enumerate() {
        let seed = [&[0u8, i as u8][..], &with_host(&[&wire[..], FOLLOW_UP].concat(), "example.com")].concat();
        let path = dir.join(name);
        if write {
            std::fs::create_dir_all(&dir).expect("seed directory");
            std::fs::write(&path, &seed).expect("write seed");
        } else if std::fs::read(&path).ok().as_deref() != Some(&seed[..]) {
            missing.push(name);
        }
    }
    assert!(missing.is_empty(), "seeds missing or stale (SEAWALL_WRITE_SEEDS=1 writes them): {missing:?}");
}
