//! Sealed session ids through the real binary: replicas that share `session.key` serve
//! any legacy session request by request — tools, progress, a server request answered
//! on the other replica, the official Python SDK client behind a round-robin nginx —
//! while ids that do not open (tampered, forged, of another key,
//! expired) are unknown sessions everywhere, a rotated key still opens the old ids, a
//! keyless process serves its own sessions only, a resumed session still belongs to its
//! principal and counts against the caps, and an upstream session that is gone is
//! re-initialised transparently.

use std::time::Duration;

use crate::support::mcp_client::{Client, Reply};
use crate::support::{DemoUpstream, Interop, Nginx, Seawall, TestDir, Upstream, config_yaml, run_script};
use base64::Engine as _;
use serde_json::{Value, json};

/// Three session keys (32 bytes each, base64).
const KEY: &str = "ERERERERERERERERERERERERERERERERERERERERERE=";
const NEW_KEY: &str = "IiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiIiI=";
const OTHER_KEY: &str = "MzMzMzMzMzMzMzMzMzMzMzMzMzMzMzMzMzMzMzMzMzM=";

const CI_KEY: &str = "ci-key-0123456789abcdef";
const OPS_KEY: &str = "ops-key-0123456789abcdef";

/// Two replicas behind nothing but the test: one reads the key from a file, the other
/// from `${SEAWALL_TEST_SESSION_KEY}`.
struct Replicas {
    a: Seawall,
    b: Seawall,
    _keys: TestDir,
}

/// The `session:` section with `settings` (YAML flow-mapping entries).
fn session_yaml(settings: &str) -> String {
    format!("session: {{ {settings} }}\n")
}

async fn replicas(demo: &DemoUpstream, extra: &str) -> Replicas {
    replicas_of(&[Upstream::http("remote", &demo.url)], extra).await
}

async fn replicas_of(upstreams: &[Upstream], extra: &str) -> Replicas {
    let keys = TestDir::new("session-keys");
    let key_file = keys.write("session.key", &format!("{KEY}\n"));
    let a = config_yaml(upstreams, &format!("{}{extra}", session_yaml(&format!("key_file: {:?}", key_file))));
    let b = config_yaml(upstreams, &format!("{}{extra}", session_yaml("key: \"${SEAWALL_TEST_SESSION_KEY}\"")));
    let (a, b) = tokio::join!(Seawall::start(&a), Seawall::start_with(&b, &[], &[("SEAWALL_TEST_SESSION_KEY", KEY)]));
    Replicas { a, b, _keys: keys }
}

/// One gateway in front of `demo` with `session` settings.
async fn gateway(demo: &DemoUpstream, session: String, extra: &str) -> Seawall {
    let upstreams = [Upstream::http("remote", &demo.url)];
    Seawall::start(&config_yaml(&upstreams, &format!("{}{extra}", session_yaml(&session)))).await
}

/// The same client session, aimed at another replica.
fn at(client: &Client, url: &str) -> Client {
    Client { url: url.to_owned(), ..client.clone() }
}

/// The same client, naming another session id.
fn naming(client: &Client, id: &str) -> Client {
    Client { session: Some(id.to_owned()), ..client.clone() }
}

fn text_of(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_else(|| panic!("no text in {result}"))
}

fn tool_names(reply: &Reply) -> Vec<String> {
    let tools = reply.result()["tools"].as_array().unwrap_or_else(|| panic!("no tools in {}", reply.raw));
    tools.iter().filter_map(|t| t["name"].as_str()).map(str::to_owned).collect()
}

/// How many requests of `method` the demo upstream has seen.
async fn upstream_requests(demo: &DemoUpstream, method: &str) -> u64 {
    let stats = Client::get_json(&demo.url.replace("/mcp", "/admin/stats")).await;
    stats["requests"][method].as_u64().unwrap_or(0)
}

/// A request that must be answered as an unknown session is: 404, the same body.
async fn assert_unknown(client: &Client, what: &str) {
    let reply = client.request(90, "tools/list", json!({})).await;
    assert_eq!(reply.status, 404, "{what}: {}", reply.raw);
    let unknown = naming(client, "no-such-session").request(90, "tools/list", json!({})).await;
    assert_eq!(reply.error(), unknown.error(), "{what}: answered exactly as an unknown session");
}

/// `tools/call` of `demo`'s `sample` through `asking`, the client's answer POSTed to
/// `answering`: the call's result.
async fn sample_answered_elsewhere(asking: &Client, answering: &Client, id: u64) -> Reply {
    let answering = answering.clone();
    let mut asked = Vec::new();
    let reply = asking
        .request_with(json!(id), "tools/call", json!({"name": "remote__sample", "arguments": {"prompt": "hi"}}), |m| {
            assert_eq!(m["method"], "sampling/createMessage", "{m}");
            asked.push(m["id"].clone());
            let answer = json!({"jsonrpc": "2.0", "id": m["id"], "result": {
                "role": "assistant", "content": {"type": "text", "text": "from the other replica"}, "model": "test"}});
            let answering = answering.clone();
            tokio::spawn(async move {
                let status = answering.post(answer).await.status;
                assert_eq!(status, 202, "the answer is accepted by the replica that did not ask");
            });
            None
        })
        .await;
    assert_eq!(asked.len(), 1, "{}", reply.raw);
    let gateway_id = asked[0].as_str().expect("a string id");
    assert!(gateway_id.starts_with("seawall-") && gateway_id.len() > 40, "a sealed gateway id: {gateway_id}");
    reply
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_alternating_between_two_replicas_completes_every_kind_of_request() {
    let demo = DemoUpstream::start(false, &[]).await;
    let replicas = replicas(&demo, "").await;
    let on_a = Client::connect(&replicas.a.url, json!({"sampling": {}})).await;
    let id = on_a.session.clone().expect("a session id");
    assert!(id.len() > 100 && id.len() <= 2048, "a sealed id, within the cap: {} characters", id.len());
    assert!(id.bytes().all(|c| (0x21..=0x7e).contains(&c)), "visible ASCII: {id}");
    let on_b = at(&on_a, &replicas.b.url);

    // B has never seen the session: it resumes it, without initialising upstream again.
    let listed = on_b.request(1, "tools/list", json!({})).await;
    assert_eq!(listed.status, 200, "{}", listed.raw);
    assert!(tool_names(&listed).contains(&"remote__sample".to_owned()), "{}", listed.raw);
    assert_eq!(upstream_requests(&demo, "initialize").await, 1, "B re-attached to A's upstream session");

    // Every request goes to the other replica than the one before.
    let echoed = on_a.call_tool(2, "remote__echo", json!({"message": "on A"})).await;
    assert_eq!(text_of(&echoed), "on A");
    let slow = on_b
        .request(
            3,
            "tools/call",
            json!({"name": "remote__sleep", "arguments": {"ms": 300}, "_meta": {"progressToken": "p-1"}}),
        )
        .await;
    assert!(slow.sse, "{}", slow.raw);
    let progress = slow.notifications("notifications/progress");
    assert!(progress.len() >= 2, "progress arrives on the resumed session: {}", slow.raw);
    assert!(progress.iter().all(|p| p["params"]["progressToken"] == "p-1"));
    assert_eq!(text_of(slow.result()), "slept 300 ms");

    // The upstream asks for sampling through one replica; the client answers the other.
    for (asking, answering, id) in [(&on_a, &on_b, 4), (&on_b, &on_a, 5)] {
        let reply = sample_answered_elsewhere(asking, answering, id).await;
        assert_eq!(text_of(reply.result()), "sampled: from the other replica", "{}", reply.raw);
    }
    assert_eq!(upstream_requests(&demo, "initialize").await, 1, "one upstream session all along");

    // A DELETE on either replica ends the upstream session; the replica that ended it
    // knows the id no more.
    assert_eq!(on_b.delete().await, 200);
    assert_unknown(&on_b, "after DELETE on the same replica").await;
    assert_eq!(demo_sessions(&demo).await, 0, "the upstream session was deleted");
}

async fn demo_sessions(demo: &DemoUpstream) -> u64 {
    let stats = Client::get_json(&demo.url.replace("/mcp", "/admin/stats")).await;
    stats["sessions"].as_u64().unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_session_that_is_gone_is_initialised_again_on_resume() {
    let demo = DemoUpstream::start(false, &[]).await;
    let replicas = replicas(&demo, "").await;
    let on_a = Client::connect(&replicas.a.url, json!({})).await;
    // A ends the session and its upstream session; within the id's lifetime B still
    // resumes it (there is no shared store to tell B), re-attaches to the upstream
    // session, is told 404 and initialises a new one.
    assert_eq!(on_a.delete().await, 200);
    assert_eq!(demo_sessions(&demo).await, 0);
    let on_b = at(&on_a, &replicas.b.url);
    let echoed = on_b.call_tool(1, "remote__echo", json!({"message": "again"})).await;
    assert_eq!(text_of(&echoed), "again");
    assert_eq!(upstream_requests(&demo, "initialize").await, 2, "initialised again, transparently");
    assert_eq!(demo_sessions(&demo).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_that_do_not_open_are_unknown_sessions_on_every_replica() {
    let demo = DemoUpstream::start(false, &[]).await;
    let replicas = replicas(&demo, "").await;
    let (other_key, short_lived) = tokio::join!(
        gateway(&demo, format!("key: {OTHER_KEY:?}"), ""),
        gateway(&demo, format!("key: {KEY:?}, id_lifetime: 1s"), ""),
    );
    let on_a = Client::connect(&replicas.a.url, json!({})).await;
    let id = on_a.session.clone().expect("id");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&id).expect("base64url");

    let mut tampered = raw.clone();
    let middle = tampered.len() / 2;
    tampered[middle] ^= 0x01;
    let tampered = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(tampered);
    let mut forged = raw.clone();
    forged[13..].iter_mut().for_each(|b| *b = rand_byte(*b));
    let forged = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(forged);
    let foreign = Client::connect(&other_key.url, json!({})).await.session.expect("id");
    let expiring = Client::connect(&short_lived.url, json!({})).await.session.expect("id");
    tokio::time::sleep(Duration::from_millis(2100)).await;

    for (what, bad) in
        [("tampered", &tampered), ("forged", &forged), ("sealed under another key", &foreign), ("expired", &expiring)]
    {
        for replica in [&replicas.a, &replicas.b] {
            assert_unknown(&naming(&at(&on_a, &replica.url), bad), what).await;
        }
    }
    // The genuine id still works on both.
    for replica in [&replicas.b, &replicas.a] {
        assert_eq!(at(&on_a, &replica.url).request(1, "tools/list", json!({})).await.status, 200);
    }
}

/// A byte unlike `b`.
fn rand_byte(b: u8) -> u8 {
    b.wrapping_add(1 + rand::random::<u8>() % 255)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_still_opens_the_ids_of_the_old_one() {
    let demo = DemoUpstream::start(false, &[]).await;
    let (old, rotated) = tokio::join!(
        gateway(&demo, format!("key: {KEY:?}"), ""),
        gateway(&demo, format!("key: {NEW_KEY:?}, previous_keys: [{KEY:?}]"), ""),
    );
    let minted_old = Client::connect(&old.url, json!({})).await;
    let resumed = at(&minted_old, &rotated.url).call_tool(1, "remote__echo", json!({"message": "rotated"})).await;
    assert_eq!(text_of(&resumed), "rotated");
    // New ids are sealed with the new key: a replica that has only the old one does not
    // open them.
    let minted_new = Client::connect(&rotated.url, json!({})).await;
    assert_unknown(&at(&minted_new, &old.url), "sealed under a key the replica does not have").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_each_process_serves_its_own_sessions_only() {
    let demo = DemoUpstream::start(false, &[]).await;
    let (one, two) = tokio::join!(gateway(&demo, String::new(), ""), gateway(&demo, String::new(), ""));
    let on_one = Client::connect(&one.url, json!({})).await;
    assert_unknown(&at(&on_one, &two.url), "a keyless process's id on another").await;
    assert_eq!(text_of(&on_one.call_tool(1, "remote__echo", json!({"message": "home"})).await), "home");
    assert_eq!(on_one.delete().await, 200);
    assert_unknown(&on_one, "after DELETE").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_still_belongs_to_its_principal() {
    let demo = DemoUpstream::start(false, &[]).await;
    let auth =
        format!("auth:\n  api_keys:\n    - {{ name: ci, key: {CI_KEY} }}\n    - {{ name: ops, key: {OPS_KEY} }}\n");
    let replicas = replicas(&demo, &auth).await;
    let ci_on_a = Client::with_bearer(&replicas.a.url, CI_KEY).initialize(json!({})).await;
    let id = ci_on_a.session.clone().expect("id");

    // Before and after the owner's first request on B, another principal finds nothing.
    let mut ops_on_b = Client::with_bearer(&replicas.b.url, OPS_KEY);
    ops_on_b.session = Some(id.clone());
    assert_unknown(&ops_on_b, "another principal, before B resumed it").await;
    let ci_on_b = at(&ci_on_a, &replicas.b.url);
    assert_eq!(ci_on_b.request(1, "tools/list", json!({})).await.status, 200);
    assert_unknown(&ops_on_b, "another principal, once B holds it").await;
    assert_eq!(ops_on_b.delete().await, 404);
    let mut anonymous = Client::new(&replicas.b.url);
    anonymous.session = Some(id);
    assert_eq!(anonymous.request(2, "tools/list", json!({})).await.status, 401);
    assert_eq!(ci_on_b.request(3, "tools/list", json!({})).await.status, 200, "the owner's session is untouched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_takes_a_place_under_the_session_caps() {
    let demo = DemoUpstream::start(false, &[]).await;
    let (a, b) = tokio::join!(
        gateway(&demo, format!("key: {KEY:?}"), ""),
        gateway(&demo, format!("key: {KEY:?}, max_sessions: 1"), ""),
    );
    let first = Client::connect(&a.url, json!({})).await;
    let second = Client::connect(&a.url, json!({})).await;
    assert_eq!(at(&first, &b.url).request(1, "tools/list", json!({})).await.status, 200, "B resumes one");
    // It reads its GET stream on B: busy, so it cannot make room there.
    let (status, _stream) = at(&first, &b.url).open_stream().await;
    assert_eq!(status, 200);
    let refused = at(&second, &b.url).request(2, "tools/list", json!({})).await;
    assert_eq!(refused.status, 503, "the second finds B full: {}", refused.raw);
    assert!(refused.header("retry-after").is_some());
    assert_eq!(refused.error()["code"], -32012);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_on_a_replica_resume_one_session() {
    let demo = DemoUpstream::start(false, &[]).await;
    let replicas = replicas(&demo, "").await;
    let on_a = Client::connect(&replicas.a.url, json!({})).await;
    let on_b = at(&on_a, &replicas.b.url);
    let calls = (0..8).map(|i| {
        let c = on_b.clone();
        async move { c.call_tool(10 + i, "remote__echo", json!({"message": format!("n{i}")})).await }
    });
    let answers = futures::future::join_all(calls).await;
    for (i, answer) in answers.iter().enumerate() {
        assert_eq!(text_of(answer), format!("n{i}"));
    }
    let ready = Client::get_json(&format!("{}/readyz", replicas.b.admin_url)).await;
    assert_eq!(ready["sessions"], 1, "one local session on B: {ready}");
}

/// The official Python SDK client (tests/interop/python/client_test.py, every check)
/// through nginx, which sends each request to the next of two replicas as a Kubernetes
/// Service may, with the demo upstream over HTTP: its session is re-attached by
/// whichever replica a request reaches. (A stdio child is one per replica: a server
/// request it makes is answered only when the answer reaches the replica that asked.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_client_through_a_round_robin_over_two_replicas() {
    let interop = Interop::from_env();
    let demo = DemoUpstream::start(false, &[]).await;
    let replicas = replicas(&demo, "").await;
    let roots = [replicas.a.url.trim_end_matches("/mcp"), replicas.b.url.trim_end_matches("/mcp")];
    let nginx = Nginx::round_robin(&roots).await;

    let script = interop.path("python/client_test.py");
    let url = format!("{}/mcp", nginx.url);
    let cmd = interop.python_command([
        script.as_os_str(),
        url.as_ref(),
        "--stdio-upstream".as_ref(),
        "remote".as_ref(),
        "--http-upstream".as_ref(),
        "remote".as_ref(),
    ]);
    run_script("python client", cmd, Duration::from_secs(150))
        .await
        .assert_success("python SDK client through nginx over two replicas");
    assert_eq!(upstream_requests(&demo, "initialize").await, 1, "one upstream session for both replicas");
}
