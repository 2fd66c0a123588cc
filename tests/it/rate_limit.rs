//! Rate limits through the real binary: a burst beyond a tool's limit is refused with
//! -32013 and HTTP 429 until the limit refills, limits on tool patterns leave other tools
//! alone, a global limit counts every request, two gateways sharing one real Redis share
//! one limit, and a Redis outage fails open or closed as configured, then heals.

use std::time::Duration;

use crate::support::mcp_client::{Client, Reply};
use crate::support::{DemoUpstream, RedisServer, Seawall};
use serde_json::json;

async fn echo(c: &Client, id: u64, tool: &str) -> Reply {
    c.request(id, "tools/call", json!({"name": tool, "arguments": {"text": "hi"}})).await
}

fn passed(reply: &Reply) -> bool {
    reply.status == 200 && reply.response().get("result").is_some()
}

/// Asserts that `reply` is the rate-limit refusal of request `id`.
#[track_caller]
fn assert_rate_limited(reply: &Reply, id: u64) {
    assert_eq!(reply.status, 429, "{}", reply.raw);
    let response = reply.response();
    assert_eq!(response["id"], json!(id), "{}", reply.raw);
    let error = &response["error"];
    assert_eq!(error["code"], -32013, "{}", reply.raw);
    let after = error["data"]["retryAfterSeconds"].as_u64().unwrap_or(0);
    assert!(after >= 1, "{}", reply.raw);
    assert_eq!(reply.header("retry-after"), Some(after.to_string()));
    assert!(error["data"]["correlationId"].as_str().is_some_and(|s| !s.is_empty()), "{}", reply.raw);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_beyond_a_tool_limit_is_refused_with_429_until_the_limit_refills() {
    let demo = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!(
        "rate_limits:\n  limits:\n    - {{ per: tool, tools: ['demo__echo'], rate: 2/s, burst: 3 }}\nupstreams:\n  - name: demo\n    url: {}\n",
        demo.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    // A burst of 3, then one cell every 500 ms: quick calls after the burst are refused.
    for id in 1..=3 {
        let reply = echo(&c, id, "demo__echo").await;
        assert!(passed(&reply), "call {id} of the burst: {}", reply.raw);
    }
    let refused = echo(&c, 4, "demo__echo").await;
    assert_rate_limited(&refused, 4);
    let mut more = 0;
    for id in 5..=10 {
        more += usize::from(passed(&echo(&c, id, "demo__echo").await));
    }
    assert!(more <= 2, "{more} of 6 quick calls passed after the burst");
    // After waiting, calls pass again, and keep passing at (a little under) the rate.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    for id in 11..=15 {
        let reply = echo(&c, id, "demo__echo").await;
        assert!(passed(&reply), "call {id} at 1 per 600 ms: {}", reply.raw);
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
    let counted = gw.metrics().await;
    assert!(counted.contains("seawall_rate_limited_total{scope=\"tool\"}"), "{counted}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_pattern_limit_leaves_other_tools_alone_and_a_global_limit_counts_all() {
    let demo = DemoUpstream::start(false, &[]).await;
    let gw = Seawall::start(&format!(
        "rate_limits:\n  backend: memory\n  limits:\n    - {{ per: tool, tools: ['demo__ec*'], rate: 1/m, burst: 2 }}\n    - {{ per: global, rate: 1/m, burst: 8 }}\nupstreams:\n  - name: demo\n    url: {}\n",
        demo.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let results: Vec<bool> = {
        let mut out = Vec::new();
        for id in 1..=4 {
            out.push(passed(&echo(&c, id, "demo__echo").await));
        }
        out
    };
    assert_eq!(results, [true, true, false, false], "the tool's own limit");
    // `add` is not matched by `demo__ec*`: only the global limit (8, 2 used) counts it.
    let add = |id: u64| {
        let c = c.clone();
        async move { c.request(id, "tools/call", json!({"name": "demo__add", "arguments": {"a": 1, "b": 2}})).await }
    };
    for id in 10..15 {
        let reply = add(id).await;
        assert!(passed(&reply), "add {id}: {}", reply.raw);
    }
    let list = c.request(20, "tools/list", json!({})).await;
    assert!(list.response().get("result").is_some(), "the 8th request passes: {}", list.raw);
    assert_rate_limited(&add(21).await, 21);
    assert_rate_limited(&c.request(22, "tools/list", json!({})).await, 22);
    let counted = gw.metrics().await;
    assert!(counted.contains("seawall_rate_limited_total{scope=\"global\"} 2"), "{counted}");
    assert!(counted.contains("seawall_rate_limited_total{scope=\"tool\"} 2"), "{counted}");
}

fn redis_config(redis: &RedisServer, on_error: &str, prefix: &str, limit: &str, upstream: &str) -> String {
    format!(
        "rate_limits:\n  backend: {}\n  on_backend_error: {on_error}\n  key_prefix: '{prefix}'\n  limits:\n    - {limit}\nupstreams:\n  - name: demo\n    url: {upstream}\n",
        redis.url
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gateways_sharing_one_redis_admit_together_no_more_than_the_limit() {
    let redis = RedisServer::start().await;
    let demo = DemoUpstream::start(false, &[]).await;
    let config = redis_config(&redis, "deny", "shared:", "{ per: tool, rate: 1/m, burst: 5 }", &demo.url);
    let (a, b) = (Seawall::start(&config).await, Seawall::start(&config).await);
    let (ca, cb) = (Client::connect(&a.url, json!({})).await, Client::connect(&b.url, json!({})).await);
    let mut admitted = [0, 0];
    for id in 0..20 {
        let (client, side) = if id % 2 == 0 { (&ca, 0) } else { (&cb, 1) };
        let reply = echo(client, id, "demo__echo").await;
        if passed(&reply) {
            admitted[side] += 1;
        } else {
            assert_rate_limited(&reply, id);
        }
    }
    assert_eq!(admitted[0] + admitted[1], 5, "across both gateways: {admitted:?}");
    assert!(admitted[0] >= 2 && admitted[1] >= 2, "both gateways admitted some: {admitted:?}");
}

fn outage_lines(gw: &Seawall) -> usize {
    gw.proc.output().lines().filter(|l| l.contains("rate limit store unreachable")).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_fails_open_or_closed_as_configured_and_limits_return_with_redis() {
    let mut redis = RedisServer::start().await;
    let demo = DemoUpstream::start(false, &[]).await;
    let limit = "{ per: global, rate: 1/m, burst: 2 }";
    let open = Seawall::start(&redis_config(&redis, "allow", "open:", limit, &demo.url)).await;
    let closed = Seawall::start(&redis_config(&redis, "deny", "closed:", limit, &demo.url)).await;
    let (co, cc) = (Client::connect(&open.url, json!({})).await, Client::connect(&closed.url, json!({})).await);
    for c in [&co, &cc] {
        assert!(passed(&echo(c, 1, "demo__echo").await));
        assert!(passed(&echo(c, 2, "demo__echo").await));
        assert_rate_limited(&echo(c, 3, "demo__echo").await, 3);
    }

    redis.stop().await;
    for id in 10..14 {
        let reply = echo(&co, id, "demo__echo").await;
        assert!(passed(&reply), "fail open: {}", reply.raw);
        assert_rate_limited(&echo(&cc, id, "demo__echo").await, id);
    }
    assert_eq!((outage_lines(&open), outage_lines(&closed)), (1, 1), "an outage is logged once");

    // Back on the same port, empty: each gateway reconnects by itself and limits apply.
    let _redis = RedisServer::start_on(redis.port).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let (mut open_refused, mut closed_passed, mut closed_refused) = (false, 0, false);
    let mut id = 100;
    while !(open_refused && closed_refused) {
        assert!(std::time::Instant::now() < deadline, "limits did not return: {open_refused} {closed_passed}");
        id += 1;
        open_refused |= !passed(&echo(&co, id, "demo__echo").await);
        let reply = echo(&cc, id, "demo__echo").await;
        if passed(&reply) {
            closed_passed += 1;
        } else if closed_passed > 0 {
            assert_rate_limited(&reply, id);
            closed_refused = true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(closed_passed, 2, "the fresh limit admits its burst, then refuses");
    assert!(closed.proc.output().contains("rate limit store reachable again"));
    assert_eq!((outage_lines(&open), outage_lines(&closed)), (1, 1));
}
