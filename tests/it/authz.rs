//! Authorisation rules through the real binary: a principal sees and calls only the
//! tools its rules allow, a denied tool is answered exactly like an unknown one and never
//! reaches the upstream, `default: deny` denies what no rule allows, and the first
//! matching rule decides; on `/mcp/<upstream>` patterns match the unprefixed names.

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall};
use serde_json::{Value, json};

const CI_KEY: &str = "ci-key-0123456789abcdef";
const ADMIN_KEY: &str = "admin-key-0123456789abcdef";
const OTHER_KEY: &str = "other-key-0123456789abcdef";

/// Upstream `demo` at `url`, keys `ci`, `admin` and `other`, and `authorization`.
fn gateway_yaml(url: &str, authorization: &str) -> String {
    format!(
        "upstreams:\n  - name: demo\n    url: {url}\nauth:\n  api_keys:\n    - {{ name: ci, key: {CI_KEY} }}\n    \
         - {{ name: admin, key: {ADMIN_KEY} }}\n    - {{ name: other, key: {OTHER_KEY} }}\n\
         authorization:\n{authorization}"
    )
}

/// A client that sends `Authorization: Bearer <key>` on every request.
fn client(url: &str, key: &str) -> Client {
    let mut headers = reqwest::header::HeaderMap::new();
    let value = format!("Bearer {key}").parse().expect("header value");
    headers.insert(reqwest::header::AUTHORIZATION, value);
    let http = reqwest::Client::builder().default_headers(headers).build().expect("client");
    Client { http, ..Client::new(url) }
}

/// `initialize` + `notifications/initialized` with `key`.
async fn connect(url: &str, key: &str) -> Client {
    let mut c = client(url, key);
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "seawall-tests", "version": "1"}}});
    let reply = c.post_raw(body.to_string(), &[]).await;
    assert_eq!(reply.status, 200, "initialize failed: {}", reply.raw);
    c.session = Some(reply.header("mcp-session-id").expect("Mcp-Session-Id"));
    assert_eq!(c.post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await.status, 202);
    c
}

/// The names in a list result's `key` array, read by `field`.
async fn names(c: &Client, method: &str, key: &str, field: &str) -> Vec<String> {
    let reply = c.request(50, method, json!({})).await;
    let entries = reply.result()[key].as_array().cloned().unwrap_or_default();
    entries.iter().filter_map(|e| e[field].as_str().map(str::to_owned)).collect()
}

fn error_of(reply: &crate::support::mcp_client::Reply) -> (Value, String) {
    let error = reply.error();
    (error["code"].clone(), error["message"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_sees_and_calls_only_allowed_tools_and_a_denied_tool_looks_unknown() {
    let demo = DemoUpstream::start(true, &[]).await;
    let rules = "  rules:\n    - { principals: [ci], allow: { tools: [demo__echo] } }\n    \
                 - { principals: [ci], deny: { tools: ['*'], prompts: ['*'], resources: ['*'] } }\n    \
                 - { principals: [admin], allow: { tools: ['*'], prompts: ['*'], resources: ['*'] } }\n";
    let gw = Seawall::start(&gateway_yaml(&demo.url, rules)).await;

    let ci = connect(&gw.url, CI_KEY).await;
    assert_eq!(names(&ci, "tools/list", "tools", "name").await, ["demo__echo"]);
    assert!(names(&ci, "prompts/list", "prompts", "name").await.is_empty());
    assert!(names(&ci, "resources/list", "resources", "uri").await.is_empty());
    assert!(names(&ci, "resources/templates/list", "resourceTemplates", "uriTemplate").await.is_empty());
    let echoed = ci.call_tool(1, "demo__echo", json!({"message": "hi"})).await;
    assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");

    let denied = ci.request(2, "tools/call", json!({"name": "demo__add", "arguments": {"a": 1, "b": 2}})).await;
    let unknown = ci.request(3, "tools/call", json!({"name": "demo__nosuch", "arguments": {}})).await;
    assert_eq!(error_of(&denied), (json!(-32602), "Unknown tool: demo__add".to_owned()), "{}", denied.raw);
    assert_eq!(error_of(&unknown), (json!(-32602), "Unknown tool: demo__nosuch".to_owned()), "{}", unknown.raw);
    let prompt = ci.request(4, "prompts/get", json!({"name": "demo__greet", "arguments": {"name": "x"}})).await;
    assert_eq!(error_of(&prompt), (json!(-32602), "Unknown prompt: demo__greet".to_owned()), "{}", prompt.raw);
    let read = ci.request(5, "resources/read", json!({"uri": "demo://readme"})).await;
    assert_eq!(read.error()["code"], -32002, "{}", read.raw);
    assert_eq!(demo.calls("add"), 0, "the upstream never saw the denied call");
    assert_eq!(demo.calls("echo"), 1);

    let admin = connect(&gw.url, ADMIN_KEY).await;
    let tools = names(&admin, "tools/list", "tools", "name").await;
    assert!(tools.len() > 2 && tools.iter().any(|t| t == "demo__add"), "{tools:?}");
    assert_eq!(names(&admin, "prompts/list", "prompts", "name").await, ["demo__greet"]);
    assert!(names(&admin, "resources/list", "resources", "uri").await.iter().any(|u| u == "demo://readme"));
    let sum = admin.call_tool(6, "demo__add", json!({"a": 1, "b": 2})).await;
    assert!(sum["content"][0]["text"].as_str().is_some_and(|t| t.contains('3')), "{sum}");
    let prompt = admin.request(7, "prompts/get", json!({"name": "demo__greet", "arguments": {"name": "x"}})).await;
    assert!(prompt.response().get("result").is_some(), "{}", prompt.raw);
    assert_eq!(demo.calls("add"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_deny_denies_what_no_rule_allows_and_the_first_matching_rule_decides() {
    let demo = DemoUpstream::start(true, &[]).await;
    let rules = "  default: deny\n  rules:\n    \
                 - { principals: ['*'], deny: { tools: ['*__add'] } }\n    \
                 - { principals: [ci], allow: { tools: ['demo__*'] } }\n";
    let gw = Seawall::start(&gateway_yaml(&demo.url, rules)).await;

    // `other` matches only the deny rule; the default denies the rest.
    let other = connect(&gw.url, OTHER_KEY).await;
    assert!(names(&other, "tools/list", "tools", "name").await.is_empty());
    let echo = other.request(1, "tools/call", json!({"name": "demo__echo", "arguments": {"message": "x"}})).await;
    assert_eq!(error_of(&echo), (json!(-32602), "Unknown tool: demo__echo".to_owned()), "{}", echo.raw);

    // For `ci` the deny rule comes first and beats the later allow of `demo__*`.
    let ci = connect(&gw.url, CI_KEY).await;
    let tools = names(&ci, "tools/list", "tools", "name").await;
    assert!(tools.iter().any(|t| t == "demo__echo") && !tools.iter().any(|t| t == "demo__add"), "{tools:?}");
    let add = ci.request(2, "tools/call", json!({"name": "demo__add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(error_of(&add), (json!(-32602), "Unknown tool: demo__add".to_owned()), "{}", add.raw);
    let echoed = ci.call_tool(3, "demo__echo", json!({"message": "hi"})).await;
    assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");
    assert_eq!((demo.calls("add"), demo.calls("echo")), (0, 1), "only the allowed call reached the upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_one_upstreams_endpoint_patterns_match_the_unprefixed_names() {
    let demo = DemoUpstream::start(true, &[]).await;
    let rules = "  default: deny\n  rules:\n    - { principals: [ci], allow: { tools: [echo] } }\n";
    let gw = Seawall::start(&gateway_yaml(&demo.url, rules)).await;

    let single = connect(&gw.upstream_url("demo"), CI_KEY).await;
    assert_eq!(names(&single, "tools/list", "tools", "name").await, ["echo"]);
    let echoed = single.call_tool(1, "echo", json!({"message": "hi"})).await;
    assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");
    let add = single.request(2, "tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})).await;
    assert_eq!(error_of(&add), (json!(-32602), "Unknown tool: add".to_owned()), "{}", add.raw);

    // On `/mcp` the same rule does not match the prefixed `demo__echo`.
    let aggregate = connect(&gw.url, CI_KEY).await;
    assert!(names(&aggregate, "tools/list", "tools", "name").await.is_empty());
    assert_eq!(demo.calls("add"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_compares_numeric_arguments() {
    let demo = DemoUpstream::start(true, &[]).await;
    let rules = "  default: deny\n  rules:\n    \
                 - principals: [ci]\n      allow: { tools: [demo__add] }\n      when: \"args.a < 10 && args.b >= 0.5\"\n";
    let gw = Seawall::start(&gateway_yaml(&demo.url, rules)).await;

    let ci = connect(&gw.url, CI_KEY).await;
    let sum = ci.call_tool(1, "demo__add", json!({"a": 2, "b": 3})).await;
    assert!(sum.to_string().contains('5'), "{sum}");
    let denied = ci.request(2, "tools/call", json!({"name": "demo__add", "arguments": {"a": 12, "b": 3}})).await;
    assert_eq!(error_of(&denied), (json!(-32602), "Unknown tool: demo__add".to_owned()), "{}", denied.raw);
    assert_eq!(demo.calls("add"), 1, "only the allowed call reached the upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_over_arguments_allows_one_call_and_denies_another() {
    let demo = DemoUpstream::start(true, &[]).await;
    let rules = "  default: deny\n  rules:\n    \
                 - { principals: [admin], allow: { tools: ['*'] }, when: \"principal.name == 'admin'\" }\n    \
                 - principals: [ci]\n      allow: { tools: [demo__echo] }\n      \
                 when: \"args.message.startsWith('ok')\"\n";
    let gw = Seawall::start(&gateway_yaml(&demo.url, rules)).await;

    let ci = connect(&gw.url, CI_KEY).await;
    assert_eq!(names(&ci, "tools/list", "tools", "name").await, ["demo__echo"], "listed: some call may pass");
    let echoed = ci.call_tool(1, "demo__echo", json!({"message": "ok then"})).await;
    assert_eq!(echoed["content"][0]["text"], "ok then", "{echoed}");
    let denied = ci.request(2, "tools/call", json!({"name": "demo__echo", "arguments": {"message": "rm -rf"}})).await;
    assert_eq!(error_of(&denied), (json!(-32602), "Unknown tool: demo__echo".to_owned()), "{}", denied.raw);
    let no_args = ci.request(3, "tools/call", json!({"name": "demo__echo"})).await;
    assert_eq!(error_of(&no_args).0, json!(-32602), "a failing condition does not allow: {}", no_args.raw);
    assert_eq!(demo.calls("echo"), 1, "only the allowed call reached the upstream");

    let admin = connect(&gw.url, ADMIN_KEY).await;
    assert!(names(&admin, "tools/list", "tools", "name").await.len() > 3);
    let sum = admin.call_tool(4, "demo__add", json!({"a": 2, "b": 3})).await;
    assert!(sum.to_string().contains('5'), "{sum}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_patterns_cover_tools_prompts_resources_completion_and_the_upstreams_own_endpoint() {
    let demo = DemoUpstream::start(true, &[]).await;
    let vault = DemoUpstream::start(true, &[]).await;
    let yaml = format!(
        "upstreams:\n  - name: demo\n    url: {}\n  - name: vault\n    url: {}\nauth:\n  api_keys:\n    \
         - {{ name: ci, key: {CI_KEY} }}\nauthorization:\n  rules:\n    \
         - {{ principals: [ci], deny: {{ upstreams: [vault], resources: ['demo://echo/*'] }} }}\n",
        demo.url, vault.url
    );
    let gw = Seawall::start(&yaml).await;

    let ci = connect(&gw.url, CI_KEY).await;
    let tools = names(&ci, "tools/list", "tools", "name").await;
    assert!(tools.iter().any(|t| t == "demo__echo") && !tools.iter().any(|t| t.starts_with("vault__")), "{tools:?}");
    assert_eq!(names(&ci, "prompts/list", "prompts", "name").await, ["demo__greet"]);
    let call = ci.request(1, "tools/call", json!({"name": "vault__echo", "arguments": {"message": "x"}})).await;
    assert_eq!(error_of(&call), (json!(-32602), "Unknown tool: vault__echo".to_owned()), "{}", call.raw);
    let prompt = ci.request(2, "prompts/get", json!({"name": "vault__greet", "arguments": {"name": "x"}})).await;
    assert_eq!(error_of(&prompt).0, json!(-32602), "{}", prompt.raw);

    // completion/complete is decided on the prompt or resource it refers to.
    let complete = |id, reference: Value| {
        ci.request(id, "completion/complete", json!({"ref": reference, "argument": {"name": "name", "value": "a"}}))
    };
    let denied = complete(3, json!({"type": "ref/prompt", "name": "vault__greet"})).await;
    assert_eq!(error_of(&denied), (json!(-32602), "Unknown prompt: vault__greet".to_owned()), "{}", denied.raw);
    let allowed = complete(4, json!({"type": "ref/prompt", "name": "demo__greet"})).await;
    assert!(allowed.response().get("result").is_some(), "{}", allowed.raw);
    let template = complete(5, json!({"type": "ref/resource", "uri": "demo://echo/{text}"})).await;
    assert!(template.response().get("error").is_some(), "a denied template: {}", template.raw);

    // resources/unsubscribe is decided like subscribe and read.
    let unsubscribe = ci.request(6, "resources/unsubscribe", json!({"uri": "demo://echo/hi"})).await;
    assert!(unsubscribe.response().get("error").is_some(), "{}", unsubscribe.raw);

    // On the denied upstream's own endpoint nothing is listed and nothing is called.
    let single = connect(&gw.upstream_url("vault"), CI_KEY).await;
    assert!(names(&single, "tools/list", "tools", "name").await.is_empty());
    let echo = single.request(7, "tools/call", json!({"name": "echo", "arguments": {"message": "x"}})).await;
    assert_eq!(error_of(&echo), (json!(-32602), "Unknown tool: echo".to_owned()), "{}", echo.raw);
    let custom = single.request(8, "vault/custom", json!({})).await;
    assert_eq!(error_of(&custom).0, json!(-32601), "another method is unknown: {}", custom.raw);
    let recorded = vault.recorded();
    let reached: Vec<_> = recorded.iter().filter(|e| e["event"] == "call" || e["method"] == "vault/custom").collect();
    assert!(reached.is_empty(), "nothing reached the denied upstream: {reached:?}");
}
