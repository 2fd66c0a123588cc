//! Resumable SSE streams towards Streamable HTTP clients through the real binary: event
//! ids per stream, GET and POST streams dropped and resumed with `Last-Event-ID`,
//! priming events from 2025-11-25 on, refusals, and the replay buffer's bound.
//!
//! Messages for the GET stream come from a stdio demo's `log` tool (a stdio upstream's
//! log lines are tied to no request); POST streams are an HTTP demo's `sleep` with
//! progress.

use std::collections::HashSet;
use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, Upstream, config_yaml};
use futures::StreamExt;
use seawall::sse::Event;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// How long a test waits for one event.
const WAIT: Duration = Duration::from_secs(20);

/// seawall in front of a per-session stdio demo (`local`) and an HTTP demo (`remote`).
async fn gateway(remote: &DemoUpstream, extra: &str) -> Seawall {
    let upstreams = [Upstream::demo_stdio("local", true), Upstream::http("remote", &remote.url)];
    Seawall::start(&config_yaml(&upstreams, extra)).await
}

/// A client of protocol `version`, initialised.
async fn connect(gw: &Seawall, version: &str) -> Client {
    let mut c = Client::new(&gw.url);
    c.version = version.to_owned();
    let reply = c
        .post(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "resume-tests", "version": "1"}}}))
        .await;
    assert_eq!(reply.status, 200, "{}", reply.raw);
    assert_eq!(reply.result()["protocolVersion"], version);
    c.session = Some(reply.header("mcp-session-id").expect("Mcp-Session-Id"));
    assert_eq!(c.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status, 202);
    c
}

/// One SSE connection; dropping it closes the connection.
struct Events {
    rx: mpsc::UnboundedReceiver<Event>,
    reader: tokio::task::JoinHandle<()>,
}

impl Drop for Events {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

impl Events {
    fn read(resp: reqwest::Response) -> Events {
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert!(content_type.starts_with("text/event-stream"), "not a stream: {content_type}");
        let (tx, rx) = mpsc::unbounded_channel();
        let reader = tokio::spawn(async move {
            let mut events = Box::pin(seawall::sse::decode_stream(resp.bytes_stream(), 16 << 20));
            while let Some(Ok(event)) = events.next().await {
                if tx.send(event).is_err() {
                    return;
                }
            }
        });
        Events { rx, reader }
    }

    /// The next event; `None` when the stream ended.
    async fn next(&mut self) -> Option<Event> {
        tokio::time::timeout(WAIT, self.rx.recv()).await.expect("an event or the end of the stream")
    }

    /// The next event carrying a message, with its id.
    async fn message(&mut self) -> (String, Value) {
        loop {
            let event = self.next().await.expect("the stream ended");
            if event.data.is_empty() {
                continue;
            }
            let id = event.id.clone().unwrap_or_else(|| panic!("an event without id: {event:?}"));
            let value = serde_json::from_str(&event.data).unwrap_or_else(|e| panic!("{e}: {}", event.data));
            return (id, value);
        }
    }

    /// Every message until the stream ends.
    async fn rest(&mut self) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        while let Some(event) = self.next().await {
            if !event.data.is_empty() {
                let value = serde_json::from_str(&event.data).unwrap_or_else(|e| panic!("{e}: {}", event.data));
                out.push((event.id.unwrap_or_default(), value));
            }
        }
        out
    }

    /// Nothing arrives for `quiet`.
    async fn assert_quiet(&mut self, quiet: Duration) {
        if let Ok(event) = tokio::time::timeout(quiet, self.rx.recv()).await {
            panic!("expected nothing, got {event:?}");
        }
    }
}

fn with_session(c: &Client, b: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    b.header("mcp-session-id", c.session.as_deref().expect("session")).header("mcp-protocol-version", &c.version)
}

/// GET on the session, resuming after `last` when given: the status, and the stream
/// when it is 200.
async fn get(c: &Client, last: Option<&str>) -> (u16, Option<Events>) {
    let mut b =
        with_session(c, c.http.get(&c.url)).header("accept", "text/event-stream").timeout(Duration::from_secs(3600));
    if let Some(last) = last {
        b = b.header("last-event-id", last);
    }
    let resp = b.send().await.expect("GET");
    let status = resp.status().as_u16();
    (status, (status == 200).then(|| Events::read(resp)))
}

/// The stream of a GET that must succeed.
async fn stream(c: &Client, last: Option<&str>) -> Events {
    match get(c, last).await {
        (200, Some(events)) => events,
        (status, _) => panic!("GET with Last-Event-ID {last:?} answered {status}"),
    }
}

/// POSTs a request that is answered with SSE.
async fn post_stream(c: &Client, id: u64, method: &str, params: Value) -> Events {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let resp = with_session(c, c.http.post(&c.url))
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(resp.status(), 200);
    Events::read(resp)
}

/// `remote__sleep` for `ms` with progress, as a stream.
async fn sleep_stream(c: &Client, id: u64, ms: u64) -> Events {
    let params =
        json!({"name": "remote__sleep", "arguments": {"ms": ms}, "_meta": {"progressToken": format!("t{id}")}});
    post_stream(c, id, "tools/call", params).await
}

/// Logs `message` through the stdio demo: it reaches the GET stream.
async fn log(c: &Client, id: u64, message: &str) {
    let result = c.call_tool(id, "local__log", json!({"message": message})).await;
    assert_eq!(result["content"][0]["text"], "logged");
}

/// The log messages among `messages`.
fn logged(messages: &[(String, Value)]) -> Vec<String> {
    messages
        .iter()
        .filter(|(_, m)| m["method"] == "notifications/message")
        .map(|(_, m)| m["params"]["data"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Reads log messages until `count` arrived.
async fn read_logs(events: &mut Events, count: usize) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    while logged(&out).len() < count {
        out.push(events.message().await);
    }
    out
}

fn progress_of(m: &Value) -> Option<u64> {
    (m["method"] == "notifications/progress").then(|| m["params"]["progress"].as_u64()).flatten()
}

/// `<stream>` of an id `<stream>-<seq>`.
fn stream_of(id: &str) -> &str {
    id.split_once('-').unwrap_or_else(|| panic!("not <stream>-<seq>: {id}")).0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_get_stream_resumes_with_exactly_the_messages_it_missed() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, "").await;
    let c = connect(&gw, "2025-11-25").await;

    let mut first = stream(&c, None).await;
    log(&c, 1, "one").await;
    log(&c, 2, "two").await;
    let seen = read_logs(&mut first, 2).await;
    assert_eq!(logged(&seen), ["one", "two"]);
    let last = seen.last().map(|(id, _)| id.clone()).unwrap();
    drop(first);

    // Sent while nobody listens.
    log(&c, 3, "three").await;
    log(&c, 4, "four").await;
    let mut resumed = stream(&c, Some(&last)).await;
    log(&c, 5, "five").await;
    let after = read_logs(&mut resumed, 3).await;
    assert_eq!(logged(&after), ["three", "four", "five"], "the missed messages once, then the stream goes on");
    resumed.assert_quiet(Duration::from_millis(500)).await;
    for (id, _) in &after {
        assert_eq!(stream_of(id), stream_of(&last), "the same stream goes on");
    }

    // A second resume from the same id gets the same messages again (the client lost
    // them, as far as seawall can tell), and takes the stream over.
    let mut again = stream(&c, Some(&last)).await;
    let replayed = read_logs(&mut again, 3).await;
    assert_eq!(
        replayed.iter().map(|(id, _)| id).collect::<Vec<_>>(),
        after.iter().map(|(id, _)| id).collect::<Vec<_>>()
    );
    assert!(resumed.next().await.is_none(), "the connection taken over ends");
    log(&c, 6, "six").await;
    assert_eq!(logged(&read_logs(&mut again, 1).await), ["six"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_stream_dropped_mid_way_resumes_with_the_rest_and_the_answer_once() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, "").await;
    let c = connect(&gw, "2025-11-25").await;

    let mut call = sleep_stream(&c, 7, 2000).await;
    let priming = call.next().await.expect("a priming event");
    assert!(priming.data.is_empty() && priming.id.is_some(), "{priming:?}");
    let (_, p1) = call.message().await;
    let (last, p2) = call.message().await;
    let seen = progress_of(&p2).expect("progress");
    assert!(progress_of(&p1).unwrap() < seen);
    drop(call);

    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut resumed = stream(&c, Some(&last)).await;
    let rest = resumed.rest().await;
    let (answer, progress) = rest.split_last().expect("the answer");
    assert_eq!(answer.1["id"], 7);
    assert_eq!(answer.1["result"]["content"][0]["text"], "slept 2000 ms", "not cancelled: {}", answer.1);
    let values: Vec<u64> =
        progress.iter().map(|(_, m)| progress_of(m).expect("only progress before the answer")).collect();
    assert!(!values.is_empty(), "the rest of the progress");
    assert!(
        values[0] > seen && values.windows(2).all(|w| w[0] < w[1]),
        "each once, in order, after {seen}: {values:?}"
    );
    assert!(rest.iter().all(|(id, _)| stream_of(id) == stream_of(&last)));

    // Its answer sent, the stream is released.
    let (status, _) = get(&c, Some(&last)).await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_stream_answered_while_its_client_was_away_is_resumed_in_2025_03_26() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, "").await;
    let c = connect(&gw, "2025-03-26").await;

    let mut call = sleep_stream(&c, 8, 600).await;
    // No priming event before 2025-11-25: the first event is a message, with an id.
    let first = call.next().await.expect("an event");
    assert!(!first.data.is_empty(), "no priming event in 2025-03-26: {first:?}");
    assert_eq!(first.retry, None);
    let last = first.id.expect("an id");
    let seen = progress_of(&serde_json::from_str(&first.data).unwrap()).expect("progress");
    drop(call);

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut resumed = stream(&c, Some(&last)).await;
    let rest = resumed.rest().await;
    let (answer, progress) = rest.split_last().expect("the answer");
    assert_eq!(answer.1["result"]["content"][0]["text"], "slept 600 ms");
    assert!(progress.iter().all(|(_, m)| progress_of(m).is_some_and(|p| p > seen)));
    let ids: HashSet<&String> = rest.iter().map(|(id, _)| id).collect();
    assert_eq!(ids.len(), rest.len(), "each event once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_ids_are_unique_across_the_streams_of_a_session() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, "").await;
    let c = connect(&gw, "2025-11-25").await;

    let mut ids = Vec::new();
    let mut get_stream = stream(&c, None).await;
    let priming = get_stream.next().await.expect("priming");
    ids.push(priming.id.clone().expect("id"));
    log(&c, 1, "a").await;
    log(&c, 2, "b").await;
    ids.extend(read_logs(&mut get_stream, 2).await.into_iter().map(|(id, _)| id));
    let mut streams = vec![stream_of(&ids[0]).to_owned()];
    for n in 10..12 {
        let mut call = sleep_stream(&c, n, 300).await;
        let priming = call.next().await.expect("priming").id.expect("id");
        let rest = call.rest().await;
        streams.push(stream_of(&priming).to_owned());
        ids.push(priming);
        ids.extend(rest.into_iter().map(|(id, _)| id));
    }
    let distinct: HashSet<&String> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "ids repeat: {ids:?}");
    let distinct_streams: HashSet<&String> = streams.iter().collect();
    assert_eq!(distinct_streams.len(), 3, "each stream its own: {streams:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_id_of_another_session_or_a_malformed_one_is_refused() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, "").await;
    let a = connect(&gw, "2025-11-25").await;
    let b = connect(&gw, "2025-11-25").await;

    let mut b_get = stream(&b, None).await;
    let b_id = b_get.next().await.expect("priming").id.expect("id");
    let mut b_call = sleep_stream(&b, 1, 2000).await;
    let b_post_id = b_call.next().await.expect("priming").id.expect("id");
    drop(b_call);

    for last in [b_id.as_str(), b_post_id.as_str(), "garbage", "1-", "99999999-1"] {
        let resp = with_session(&a, a.http.get(&a.url))
            .header("accept", "text/event-stream")
            .header("last-event-id", last)
            .send()
            .await
            .expect("GET");
        assert_eq!(resp.status(), 400, "Last-Event-ID {last:?}");
        let body: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("a JSON-RPC error");
        assert_eq!(body["error"]["code"], -32600);
        assert!(body["error"]["message"].as_str().unwrap().contains("Last-Event-ID"), "{body}");
    }
    // The other session's streams are untouched, and so is this one's GET.
    let mut b_resumed = stream(&b, Some(&b_post_id)).await;
    assert_eq!(b_resumed.rest().await.last().unwrap().1["result"]["content"][0]["text"], "slept 2000 ms");
    let mut a_get = stream(&a, None).await;
    assert!(a_get.next().await.expect("priming").data.is_empty());
    // Without a session the id says nothing: 404 as for any unknown session.
    let mut stranger = Client::new(&gw.url);
    stranger.session = Some("no-such-session".into());
    assert_eq!(get(&stranger, Some(&b_id)).await.0, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priming_events_start_the_streams_of_2025_11_25_and_not_earlier_ones() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, "").await;
    for version in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let c = connect(&gw, version).await;
        let mut get_stream = stream(&c, None).await;
        let mut call = sleep_stream(&c, 1, 200).await;
        log(&c, 2, "hello").await;
        for (what, events) in [("GET", &mut get_stream), ("POST", &mut call)] {
            let first = events.next().await.expect("a first event");
            let id = first.id.clone().unwrap_or_else(|| panic!("{version} {what}: no id on {first:?}"));
            assert!(id.split_once('-').is_some_and(|(s, q)| s.parse::<u64>().is_ok() && q.parse::<u64>().is_ok()));
            if version == "2025-11-25" {
                assert!(first.data.is_empty(), "{version} {what}: a priming event first: {first:?}");
                assert_eq!(first.retry, Some(1000), "{version} {what}");
            } else {
                assert!(!first.data.is_empty(), "{version} {what}: no priming event: {first:?}");
                assert_eq!(first.retry, None);
            }
        }
        let rest = call.rest().await;
        assert!(rest.iter().all(|(_, m)| m.get("method").is_some() || m["id"] == 1), "{rest:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_buffer_is_bounded_and_an_id_older_than_it_is_not_resumable() {
    let remote = DemoUpstream::start(false, &[]).await;
    let gw = gateway(&remote, "session:\n  replay_buffer:\n    messages: 4\n").await;
    let c = connect(&gw, "2025-11-25").await;

    // The GET stream keeps its last four events.
    let mut first = stream(&c, None).await;
    for n in 0..8 {
        log(&c, 100 + n, &format!("m{n}")).await;
    }
    let seen = read_logs(&mut first, 8).await;
    drop(first);
    let ids: Vec<String> = seen.iter().map(|(id, _)| id.clone()).collect();
    let mut recent = stream(&c, Some(&ids[4])).await;
    assert_eq!(logged(&read_logs(&mut recent, 3).await), ["m5", "m6", "m7"]);
    drop(recent);
    // Too old: the GET stream goes on without replay, from a new priming event.
    let mut fresh = stream(&c, Some(&ids[1])).await;
    let priming = fresh.next().await.expect("priming");
    assert!(priming.data.is_empty());
    assert!(!ids.contains(priming.id.as_ref().unwrap()));
    log(&c, 20, "after").await;
    assert_eq!(logged(&read_logs(&mut fresh, 1).await), ["after"], "nothing replayed");

    // A POST stream nobody reads keeps its newest four: a resume from its start fails.
    let mut call = sleep_stream(&c, 30, 1000).await;
    let start = call.next().await.expect("priming").id.expect("id");
    drop(call);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (status, _) = get(&c, Some(&start)).await;
    assert_eq!(status, 400, "the progress overflowed the buffer");
}
