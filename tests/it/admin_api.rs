//! The admin API through the real binary: isolating a tool or an upstream by hand (calls
//! refused at once with the operator's reason, the tool hidden from lists, no probe
//! closing it), closing and resetting it, ejecting and restoring a replica, the token,
//! the configuration with its secrets masked, and the schema.

use std::time::{Duration, Instant};

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, text_of};
use serde_json::{Value, json};

const TOKEN: &str = "admin-token-for-the-tests-0123";

/// The admin API of a running gateway.
struct Api {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
}

impl Api {
    fn new(gw: &Seawall, token: Option<&str>) -> Api {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(10)).build().expect("client");
        Api { base: gw.admin_url.clone(), http, token: token.map(str::to_owned) }
    }

    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body.to_string());
        }
        let response = request.send().await.expect("admin request");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: not JSON ({e}): {text}")))
    }

    async fn get(&self, path: &str) -> Value {
        let (status, body) = self.send(reqwest::Method::GET, path, None).await;
        assert_eq!(status, 200, "GET {path}: {body}");
        body
    }

    async fn post(&self, path: &str, body: Option<Value>) -> Value {
        let (status, answer) = self.send(reqwest::Method::POST, path, body).await;
        assert_eq!(status, 200, "POST {path}: {answer}");
        answer
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_tool_or_upstream_is_refused_at_once_with_the_reason_until_closed_or_reset() {
    let remote = DemoUpstream::start(true, &[]).await;
    let config = format!(
        "admin:\n  token: ${{SEAWALL_TEST_ADMIN_TOKEN}}\n\
         upstreams:\n  - name: remote\n    url: {}\n\
         \x20   breaker: {{ hide_open_tools: true, break: 1s, max_break: 1s }}\n\
         \x20 - name: local\n    command: seawall\n    args: [demo-upstream, --stdio]\n",
        remote.url
    );
    let gw = Seawall::start_with(&config, &[], &[("SEAWALL_TEST_ADMIN_TOKEN", TOKEN)]).await;
    let api = Api::new(&gw, Some(TOKEN));
    let c = Client::connect(&gw.url, json!({})).await;
    let (_, mut stream) = c.open_stream().await;
    let listed = c.request(1, "tools/list", json!({})).await.tool_names();
    assert!(listed.iter().any(|n| n == "remote__echo") && listed.iter().any(|n| n == "local__echo"), "{listed:?}");
    assert_eq!(text_of(&c.call_tool(2, "remote__echo", json!({"message": "before"})).await), "before");

    // Isolate one tool: the reason is required and bounded.
    let path = "/admin/upstreams/remote/tools/echo/breaker/open";
    let (status, refused) = api.send(reqwest::Method::POST, path, None).await;
    assert_eq!(status, 400, "{refused}");
    assert!(refused["error"].as_str().unwrap().contains("reason"), "{refused}");
    let (status, _) = api.send(reqwest::Method::POST, path, Some(json!({"reason": "x".repeat(201)}))).await;
    assert_eq!(status, 400);
    let reason = "bad deploy, back at 14:00 UTC";
    let opened = api.post(path, Some(json!({ "reason": reason }))).await;
    assert_eq!(opened["previous"], "closed", "{opened}");
    assert_eq!(opened["breaker"]["state"], "open");
    assert_eq!(opened["breaker"]["reason"], "forced_open");
    assert_eq!(opened["breaker"]["forced"], json!({"state": "open", "reason": reason}));
    assert!(crate::support::tools_list_changed(&mut stream).await, "clients hear list_changed when the tool is hidden");

    let started = Instant::now();
    let result = c.call_tool(3, "remote__echo", json!({"message": "during"})).await;
    assert!(started.elapsed() < Duration::from_millis(500), "refused at once: {:?}", started.elapsed());
    assert_eq!(result["isError"], true, "{result}");
    let text = text_of(&result);
    assert!(text.contains("remote__echo") && text.contains(&format!("isolated by the operator: {reason}")), "{text}");
    assert_eq!(remote.calls("echo"), 1, "the upstream sees nothing");
    let listed = c.request(4, "tools/list", json!({})).await.tool_names();
    assert!(!listed.iter().any(|n| n == "remote__echo"), "hidden: {listed:?}");
    assert!(listed.iter().any(|n| n == "remote__sleep"), "the upstream's other tools stay: {listed:?}");
    assert_eq!(text_of(&c.call_tool(5, "remote__sleep", json!({"ms": 1})).await), "slept 1 ms");

    // No probe closes it, however long its break would have been.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let result = c.call_tool(6, "remote__echo", json!({"message": "later"})).await;
    assert!(text_of(&result).contains(reason), "{result}");
    assert_eq!(remote.calls("echo"), 1);
    let open = api.get("/admin/breakers?state=open").await;
    let open = open["breakers"].as_array().unwrap();
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!((&open[0]["upstream"], &open[0]["tool"]), (&json!("remote"), &json!("echo")));
    let status = Client::get_json(&format!("{}/status.json", gw.admin_url)).await;
    assert_eq!(status["breakers"]["listed"][0]["forced"]["reason"], reason, "{status}");

    // Closed by hand: calls go through again and it is listed again.
    let closed = api.post("/admin/upstreams/remote/tools/echo/breaker/close", None).await;
    assert_eq!((&closed["previous"], &closed["breaker"]["state"]), (&json!("open"), &json!("closed")));
    assert_eq!(closed["breaker"]["forced"], json!({"state": "closed"}));
    assert_eq!(text_of(&c.call_tool(7, "remote__echo", json!({"message": "after"})).await), "after");
    assert!(c.request(8, "tools/list", json!({})).await.tool_names().iter().any(|n| n == "remote__echo"));
    let reset = api.post("/admin/upstreams/remote/tools/echo/breaker/reset", None).await;
    assert_eq!((&reset["breaker"]["state"], &reset["breaker"]["forced"]), (&json!("closed"), &Value::Null));

    // The whole upstream, the same way: tools of the other upstream stay listed.
    let reason = "upstream maintenance";
    api.post("/admin/upstreams/remote/breaker/open", Some(json!({ "reason": reason }))).await;
    let result = c.call_tool(9, "remote__sleep", json!({"ms": 1})).await;
    assert!(text_of(&result).contains(&format!("upstream 'remote' is isolated by the operator: {reason}")), "{result}");
    let prompt = c.request(10, "prompts/get", json!({"name": "remote__greet", "arguments": {"name": "x"}})).await;
    let error = prompt.error();
    assert_eq!(error["code"], -32011, "{error}");
    assert_eq!(error["message"], format!("Upstream 'remote' is isolated by the operator: {reason}"));
    assert_eq!(error["data"]["reason"], reason);
    let listed = c.request(11, "tools/list", json!({})).await.tool_names();
    assert!(!listed.iter().any(|n| n.starts_with("remote__")), "{listed:?}");
    assert!(listed.iter().any(|n| n == "local__echo"), "{listed:?}");
    assert_eq!(text_of(&c.call_tool(12, "local__echo", json!({"message": "local"})).await), "local");
    let upstream = api.get("/admin/upstreams/remote").await;
    assert_eq!(upstream["upstream"]["state"], "failing", "{upstream}");
    assert_eq!(upstream["upstream"]["breaker"]["forced"]["reason"], reason);
    api.post("/admin/upstreams/remote/breaker/reset", None).await;
    assert_eq!(text_of(&c.call_tool(13, "remote__echo", json!({"message": "back"})).await), "back");
    assert!(c.request(14, "tools/list", json!({})).await.tool_names().iter().any(|n| n == "remote__echo"));

    // Every forced change of state is a transition in the metrics, and a log line.
    let metrics = reqwest::get(format!("{}/metrics", gw.admin_url)).await.unwrap().text().await.unwrap();
    for line in [
        r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="open"} 1"#,
        r#"seawall_breaker_transitions_total{upstream="remote",scope="tool",to="closed"} 1"#,
        r#"seawall_breaker_transitions_total{upstream="remote",scope="upstream",to="open"} 1"#,
        r#"seawall_breaker_transitions_total{upstream="remote",scope="upstream",to="closed"} 1"#,
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
    crate::support::until_logged(&gw, &["circuit breaker held open by the operator", reason]).await;

    // Mistakes are answered with what is wrong.
    for (path, expected) in [
        ("/admin/upstreams/nobody/breaker/open", 404),
        ("/admin/upstreams/remote/breaker/explode", 404),
        ("/admin/upstreams/remote/tools/no_such_tool/breaker/close", 404),
        ("/admin/upstreams/local/endpoints/0/eject", 409),
    ] {
        let (status, body) = api.send(reqwest::Method::POST, path, Some(json!({"reason": "r"}))).await;
        assert_eq!(status, expected, "{path}: {body}");
        assert!(body["error"].is_string(), "{body}");
    }
    let (status, _) = api.send(reqwest::Method::GET, "/admin/breakers?state=broken", None).await;
    assert_eq!(status, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ejected_endpoint_takes_no_calls_until_restored() {
    let first = DemoUpstream::start(true, &[]).await;
    let second = DemoUpstream::start(true, &[]).await;
    let config = format!(
        "upstreams:\n  - name: pool\n    url: {}\n    endpoints: [{}]\n  - name: single\n    url: {}\n",
        first.url, second.url, first.url
    );
    let gw = Seawall::start(&config).await;
    // No token configured: loopback clients are served without one.
    let api = Api::new(&gw, None);
    let c = Client::connect(&gw.url, json!({})).await;

    let ejected = api.post("/admin/upstreams/pool/endpoints/1/eject", None).await;
    assert_eq!(ejected["endpoints"][1]["ejected"], true, "{ejected}");
    assert_eq!(ejected["endpoints"][1]["ejected_by"], "operator");
    assert_eq!(ejected["endpoints"][0]["ejected"], false);
    let before = second.calls("echo");
    for id in 0..12 {
        assert_eq!(text_of(&c.call_tool(id, "pool__echo", json!({"message": "m"})).await), "m");
    }
    assert_eq!(second.calls("echo"), before, "the ejected endpoint took no call");
    let (status, body) = api.send(reqwest::Method::POST, "/admin/upstreams/pool/endpoints/0/eject", None).await;
    assert_eq!(status, 409, "the last endpoint in service stays: {body}");
    let (status, _) = api.send(reqwest::Method::POST, "/admin/upstreams/pool/endpoints/7/eject", None).await;
    assert_eq!(status, 404);
    let (status, _) = api.send(reqwest::Method::POST, "/admin/upstreams/single/endpoints/0/eject", None).await;
    assert_eq!(status, 409, "a single endpoint is never ejected");
    let listed = api.get("/admin/upstreams").await;
    let pool = listed["upstreams"].as_array().unwrap().iter().find(|u| u["name"] == "pool").cloned().unwrap();
    assert_eq!(pool["state"], "degraded", "{pool}");

    let restored = api.post("/admin/upstreams/pool/endpoints/1/restore", None).await;
    assert_eq!(restored["endpoints"][1]["ejected"], false, "{restored}");
    assert_eq!(restored["endpoints"][1]["ejected_by"], Value::Null);
    for id in 100..140 {
        c.call_tool(id, "pool__echo", json!({"message": "m"})).await;
        if second.calls("echo") > before {
            return;
        }
    }
    panic!("the restored endpoint got no call in 40");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_needs_its_token_and_shows_the_configuration_masked() {
    let remote = DemoUpstream::start(false, &[]).await;
    let config = format!(
        "admin:\n  token: {TOKEN}\n\
         auth:\n  api_keys:\n    - name: ops\n      key: planted-api-key-0123456789\n\
         rate_limits:\n  backend: \"redis://:planted-redis-password@127.0.0.1:1/0\"\n\
         upstreams:\n  - name: remote\n    url: {}\n    headers: {{ X-Api-Key: planted-header-value }}\n\
         \x20 - name: local\n    command: seawall\n    args: [demo-upstream, --stdio]\n\
         \x20   env: {{ LOCAL_SECRET: planted-env-value }}\n",
        remote.url
    );
    let gw = Seawall::start(&config).await;
    // Logged on stderr, which may come in after the `listening` lines on stdout.
    crate::support::until_logged(&gw, &["admin API: every request needs the bearer token"]).await;

    for (token, expected) in [(None, 401), (Some("wrong-token-wrong-token-0123"), 401), (Some(TOKEN), 200)] {
        let api = Api::new(&gw, token);
        for path in ["/admin/upstreams", "/admin/breakers", "/admin/config", "/admin/schema"] {
            let (status, body) = api.send(reqwest::Method::GET, path, None).await;
            assert_eq!(status, expected, "{path} with {token:?}: {body}");
        }
        let (status, body) = api.send(reqwest::Method::POST, "/admin/upstreams/remote/breaker/reset", None).await;
        assert_eq!(status, expected, "an action with {token:?}: {body}");
        // An unknown path is not revealed as unknown before the token is checked.
        let (status, _) = api.send(reqwest::Method::GET, "/admin/nothing-here", None).await;
        assert_eq!(status, if expected == 200 { 404 } else { 401 });
    }
    let response = reqwest::get(format!("{}/admin/config", gw.admin_url)).await.unwrap();
    let challenge = response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_owned);
    assert_eq!(challenge.as_deref(), Some("Bearer realm=\"seawall-admin\""));
    // Probes, scrapers and the status page need no token.
    for path in ["/healthz", "/readyz", "/metrics", "/status.json"] {
        let status = reqwest::get(format!("{}{path}", gw.admin_url)).await.unwrap().status();
        assert_eq!(status, 200, "{path}");
    }

    let api = Api::new(&gw, Some(TOKEN));
    let shown = api.get("/admin/config").await;
    let text = shown.to_string();
    for planted in [TOKEN, "planted-api-key", "planted-redis-password", "planted-header-value", "planted-env-value"] {
        assert!(!text.contains(planted), "{planted} is shown: {text}");
    }
    assert_eq!(shown["admin"]["token"], "***");
    let key = &shown["auth"]["api_keys"][0];
    assert_eq!((&key["name"], &key["key"]), (&json!("ops"), &json!("***")), "{shown}");
    assert_eq!(shown["rate_limits"]["backend"], "redis://:***@127.0.0.1:1/0");
    let upstreams = shown["upstreams"].as_array().unwrap();
    assert_eq!(upstreams[0]["name"], "remote");
    assert_eq!(upstreams[0]["url"], remote.url);
    assert_eq!(upstreams[0]["headers"]["X-Api-Key"], "***");
    assert_eq!(upstreams[1]["env"]["LOCAL_SECRET"], "***");
    assert_eq!(upstreams[1]["args"], json!(["demo-upstream", "--stdio"]));
    assert!(shown["listen"].as_str().unwrap().starts_with("127.0.0.1:"), "the listeners in force: {shown}");
    assert_eq!(shown["shutdown"], json!({"grace": "10s", "drain_delay": "0s"}));

    assert_eq!(api.get("/admin/schema").await, seawall::config::json_schema());
}

/// A stdio server that cannot start says why: its exit status and last stderr lines
/// (credentials removed) are in the warning that it failed to start, in `/readyz`, in
/// `/status.json` and in the admin API's view of the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_that_cannot_start_says_why_everywhere() {
    let script = "echo 'npm error code UNABLE_TO_GET_ISSUER_CERT_LOCALLY' >&2; \
                  echo 'npm error request failed, token=hunter2-Npm-T0ken' >&2; exit 3";
    let config = format!(
        "upstreams:\n  - name: broken\n    command: sh\n    args: [\"-c\", {}]\n\
         \x20   restart: {{ base_delay: 200ms, max_delay: 1s }}\n",
        serde_json::to_string(script).expect("script")
    );
    let mut gw = Seawall::start(&config).await;
    let api = Api::new(&gw, None);
    let said = |lines: &Value| -> String {
        let lines: Vec<&str> =
            lines.as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        lines.join("\n")
    };

    let deadline = Instant::now() + Duration::from_secs(15);
    let ready = loop {
        let resp = reqwest::get(format!("{}/readyz", gw.admin_url)).await.expect("GET /readyz");
        let status = resp.status().as_u16();
        let body: Value = serde_json::from_str(&resp.text().await.expect("body")).expect("JSON");
        if body["upstreams"]["broken"]["exit_status"].is_string() || Instant::now() > deadline {
            assert_eq!(status, 503, "{body}");
            break body["upstreams"]["broken"].clone();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ready["state"], "down", "{ready}");
    assert_eq!(ready["exit_status"], "exit status: 3", "{ready}");
    assert!(ready["reason"].as_str().is_some_and(|r| r.contains("initialize")), "{ready}");
    let stderr = said(&ready["stderr"]);
    assert!(stderr.contains("UNABLE_TO_GET_ISSUER_CERT_LOCALLY") && !stderr.contains("hunter2"), "{ready}");

    let status = Client::get_json(&format!("{}/status.json", gw.admin_url)).await;
    let listed = status["upstreams"].as_array().expect("upstreams").iter().find(|u| u["name"] == "broken").cloned();
    let process = listed.map(|u| u["process"].clone()).unwrap_or_default();
    assert_eq!(process["exit_status"], "exit status: 3", "{status}");
    assert!(said(&process["stderr"]).contains("UNABLE_TO_GET_ISSUER_CERT_LOCALLY"), "{process}");
    let viewed = api.get("/admin/upstreams/broken").await;
    let process = if viewed["process"].is_object() { &viewed["process"] } else { &viewed["upstream"]["process"] };
    assert_eq!(process["exit_status"], "exit status: 3", "{viewed}");
    assert!(said(&process["stderr"]).contains("UNABLE_TO_GET_ISSUER_CERT_LOCALLY"), "{viewed}");

    gw.stop(Duration::from_secs(5)).await;
    let log = gw.proc.output();
    let warning = log
        .lines()
        .find(|l| l.contains("stdio upstream failed to start") && l.contains("exit_status"))
        .unwrap_or_else(|| panic!("no warning with the exit status:\n{log}"));
    assert!(warning.contains("initialize handshake") && warning.contains("exit status: 3"), "{warning}");
    assert!(warning.contains("UNABLE_TO_GET_ISSUER_CERT_LOCALLY") && warning.contains("token=[redacted]"), "{warning}");
    assert!(!log.contains("hunter2"), "a secret reached the log:\n{log}");
}
