//! Tool overrides (`upstreams[].tools.<name>`) through the real binary: the official SDK
//! clients see the names, descriptions, annotations and schemas seawall gives the demo
//! upstream's tools and call them with the arguments the gateway sets; fixed arguments
//! from the environment and from the caller; `list_changed` on a reload that changes what
//! clients see; `check-config` reporting overrides by line.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mcp_client::Client;
use crate::support::sse_client::SseClient;
use crate::support::{DemoUpstream, Interop, Seawall, TestDir, run_script, seawall_bin, text_of};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// The demo upstream `demo` at `url` with `tools` (YAML lines indented under `tools:`),
/// and `extra` appended at the top level.
fn config(url: &str, tools: &str, extra: &str) -> String {
    format!(
        "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: demo\n    url: {url}\n    tools:\n{tools}{extra}"
    )
}

/// What the SDK scripts expect (see their headers).
const SHAPED: &str = "      add:
        name: plus_forty
        title: Plus forty
        description: Adds forty to a.
        annotations: { idempotentHint: true }
        arguments:
          b: { value: 40 }
      echo:
        name: say
        arguments:
          message: { default: nothing to say }
      fail: { hidden: true }
";

/// The official Python and TypeScript SDK clients, on the aggregate endpoint (names
/// prefixed) and on `/mcp/demo`, see the overridden tools and call them; so does the
/// Python client in the modern era.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_clients_see_the_overridden_tools_and_call_them_with_the_gateways_arguments() {
    let interop = Interop::from_env();
    let demo = DemoUpstream::start(false, &[]).await;
    let seawall = Seawall::start(&config(&demo.url, SHAPED, "")).await;
    let python = interop.path("python/overrides_test.py");
    let ts = interop.path("ts/overrides_test.mjs");
    for (url, upstream) in [(seawall.url.clone(), "demo"), (seawall.upstream_url("demo"), "")] {
        let cmd = interop.python_command([python.as_os_str(), url.as_ref(), "--upstream".as_ref(), upstream.as_ref()]);
        run_script(&format!("python overrides {url}"), cmd, SCRIPT_TIMEOUT)
            .await
            .assert_success(&format!("python SDK client (tests/interop/python/overrides_test.py) at {url}"));
        let cmd = interop.node_command([ts.as_os_str(), url.as_ref(), "--upstream".as_ref(), upstream.as_ref()]);
        run_script(&format!("ts overrides {url}"), cmd, SCRIPT_TIMEOUT)
            .await
            .assert_success(&format!("TypeScript SDK client (tests/interop/ts/overrides_test.mjs) at {url}"));
    }
    // The modern era (2026-07-28, stateless) reaches the same catalog.
    let cmd =
        interop.python_command([python.as_os_str(), seawall.url.as_ref(), "--mode".as_ref(), "2026-07-28".as_ref()]);
    run_script("python overrides (modern)", cmd, SCRIPT_TIMEOUT)
        .await
        .assert_success("python SDK client (tests/interop/python/overrides_test.py) in mode 2026-07-28");
}

/// A fixed argument from seawall's environment reaches the upstream (from clients of
/// both HTTP transports), never the log; the metric keeps the upstream's tool name, the
/// access log the client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_value_is_sent_and_metrics_keep_the_upstreams_name() {
    let demo = DemoUpstream::start(false, &[]).await;
    let tools =
        "      echo:\n        name: region\n        arguments:\n          message: { env: SEAWALL_TEST_REGION }\n";
    let yaml = config(&demo.url, tools, "");
    let seawall = Seawall::start_with(&yaml, &[], &[("SEAWALL_TEST_REGION", "eu-west-1")]).await;
    let c = Client::connect(&seawall.url, json!({})).await;
    let listed = c.request(1, "tools/list", json!({})).await;
    let region = listed.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "demo__region").cloned();
    let region = region.unwrap_or_else(|| panic!("demo__region is not listed: {}", listed.raw));
    assert_eq!(region["inputSchema"]["properties"], json!({}), "the fixed argument is not advertised: {region}");
    assert_eq!(text_of(&c.call_tool(2, "demo__region", json!({})).await), "eu-west-1");
    let metrics = seawall.metrics().await;
    let line = r#"seawall_requests_total{upstream="demo",method="tools/call",tool="echo",outcome="ok"} 1"#;
    assert!(metrics.lines().any(|l| l == line), "no {line} in\n{metrics}");
    assert!(!metrics.contains("eu-west-1"), "the value is in the metrics");
    crate::support::until_logged(&seawall, &["demo__region"]).await;
    assert!(!seawall.proc.output().contains("eu-west-1"), "the value is in the log:\n{}", seawall.proc.output());

    // A client of the HTTP+SSE era (2024-11-05) sees and calls the same.
    let root = seawall.url.trim_end_matches("/mcp");
    let mut sse = SseClient::open(&format!("{root}/sse")).await;
    sse.initialize().await;
    let listed = sse.request(3, "tools/list", json!({})).await;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"demo__region") && !names.contains(&"demo__echo"), "{listed}");
    assert_eq!(text_of(&sse.call_tool(4, "demo__region", json!({})).await), "eu-west-1");
}

/// A fixed argument from the caller: the API key's name with authentication, a clear
/// refusal without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caller_is_a_fixed_argument_and_a_call_without_a_caller_is_refused() {
    let demo = DemoUpstream::start(false, &[]).await;
    let tools = "      echo:\n        name: whoami\n        arguments:\n          message: { principal: name }\n";
    let auth = "auth:\n  api_keys:\n    - { name: ci, key: overrides-test-key-0123456789 }\n";
    let with_auth = Seawall::start(&config(&demo.url, tools, auth)).await;
    let c = Client::with_bearer(&with_auth.url, "overrides-test-key-0123456789").initialize(json!({})).await;
    assert_eq!(text_of(&c.call_tool(1, "demo__whoami", json!({})).await), "ci");
    let sent = c.request(2, "tools/call", json!({"name": "demo__whoami", "arguments": {"message": "root"}})).await;
    assert_eq!(sent.error()["code"], -32602, "{}", sent.raw);

    let without = Seawall::start(&config(&demo.url, tools, "")).await;
    let c = Client::connect(&without.url, json!({})).await;
    let refused = c.request(1, "tools/call", json!({"name": "demo__whoami", "arguments": {}})).await;
    assert_eq!(refused.error()["code"], -32600, "{}", refused.raw);
    let message = refused.error()["message"].as_str().unwrap_or_default();
    assert!(message.contains("needs an authenticated caller"), "{message}");
}

/// An operator's `idempotentHint: true` makes failed calls of a renamed tool retried, as
/// `idempotent: true` does; the retries count under the upstream's tool name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_hint_override_makes_calls_retried() {
    let demo = DemoUpstream::start(true, &[]).await;
    let tools = "      flaky:\n        name: sometimes\n        annotations: { idempotentHint: true }\n";
    let retry = "defaults:\n  retry: { max_attempts: 3, base_delay: 10ms, max_delay: 50ms }\n";
    let seawall = Seawall::start(&config(&demo.url, tools, retry)).await;
    let c = Client::connect(&seawall.url, json!({})).await;
    let listed = c.request(1, "tools/list", json!({})).await;
    let hinted = listed.result()["tools"].as_array().unwrap().iter().find(|t| t["name"] == "demo__sometimes").cloned();
    assert_eq!(hinted.map(|t| t["annotations"]["idempotentHint"].clone()), Some(json!(true)), "{}", listed.raw);
    let retried = c.call_tool(2, "demo__sometimes", json!({"key": "b", "fail_first": 2, "mode": "http_503"})).await;
    assert_eq!(text_of(&retried), "ok after 2 failures", "{retried}");
    assert_eq!(demo.calls("flaky"), 3);
    let metrics = seawall.metrics().await;
    let line = r#"seawall_requests_total{upstream="demo",method="tools/call",tool="flaky",outcome="ok"} 1"#;
    assert!(metrics.lines().any(|l| l == line), "no {line} in\n{metrics}");
}

/// A reload that changes what clients see of a tool tells the sessions their tools
/// changed, and the next list shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_an_override_announces_list_changed() {
    let demo = DemoUpstream::start(false, &[]).await;
    let seawall = Seawall::start(&config(&demo.url, "      echo: { description: before }\n", "")).await;
    let c = Client::connect(&seawall.url, json!({})).await;
    let (_, mut stream) = c.open_stream().await;
    let description = |reply: &crate::support::mcp_client::Reply| -> Value {
        let tools = reply.result()["tools"].as_array().cloned().unwrap_or_default();
        tools.into_iter().find(|t| t["name"] == "demo__echo").map(|t| t["description"].clone()).unwrap_or_default()
    };
    assert_eq!(description(&c.request(1, "tools/list", json!({})).await), "before");

    let yaml = config(&demo.url, "      echo: { description: after }\n", "");
    let tmp = seawall.config_path.with_extension("yaml.new");
    std::fs::write(&tmp, yaml).unwrap();
    std::fs::rename(&tmp, &seawall.config_path).unwrap();
    let http = reqwest::Client::new();
    let reloaded = http.post(format!("{}/admin/reload", seawall.admin_url)).send().await.unwrap();
    assert_eq!(reloaded.status().as_u16(), 200, "{}", reloaded.text().await.unwrap_or_default());
    assert!(crate::support::tools_list_changed(&mut stream).await, "the session hears its tools changed");
    assert_eq!(description(&c.request(2, "tools/list", json!({})).await), "after");
}

/// A renamed prompt on both endpoints: listed, got and completed under its new name, its
/// own name unknown; a reload that hides it tells sessions their prompts changed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_are_renamed_and_hidden() {
    let demo = DemoUpstream::start(false, &[]).await;
    let yaml = |prompt: &str| {
        format!(
            "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\nupstreams:\n  - name: demo\n    url: {}\n    prompts:\n      greet: {prompt}\n",
            demo.url
        )
    };
    let seawall = Seawall::start(&yaml("{ name: hello, description: Greets someone. }")).await;
    for (url, prefix) in [(seawall.url.clone(), "demo__"), (seawall.upstream_url("demo"), "")] {
        let c = Client::connect(&url, json!({})).await;
        let listed = c.request(1, "prompts/list", json!({})).await;
        let prompts = listed.result()["prompts"].as_array().cloned().unwrap_or_default();
        assert_eq!(prompts.len(), 1, "{}", listed.raw);
        assert_eq!(prompts[0]["name"], format!("{prefix}hello"), "{}", listed.raw);
        assert_eq!(prompts[0]["description"], "Greets someone.", "{}", listed.raw);
        let got =
            c.request(2, "prompts/get", json!({"name": format!("{prefix}hello"), "arguments": {"name": "Ada"}})).await;
        assert_eq!(got.result()["messages"][0]["content"]["text"], "Please greet Ada.", "{}", got.raw);
        let old =
            c.request(3, "prompts/get", json!({"name": format!("{prefix}greet"), "arguments": {"name": "Ada"}})).await;
        assert_eq!(old.error()["code"], -32602, "{}", old.raw);
        let completion = json!({"ref": {"type": "ref/prompt", "name": format!("{prefix}hello")}, "argument": {"name": "name", "value": ""}});
        let completed = c.request(4, "completion/complete", completion).await;
        assert!(
            completed.result()["completion"]["values"].as_array().is_some_and(|v| !v.is_empty()),
            "{}",
            completed.raw
        );
    }

    let c = Client::connect(&seawall.url, json!({})).await;
    let (_, mut stream) = c.open_stream().await;
    let tmp = seawall.config_path.with_extension("yaml.new");
    std::fs::write(&tmp, yaml("{ hidden: true }")).unwrap();
    std::fs::rename(&tmp, &seawall.config_path).unwrap();
    let reloaded = reqwest::Client::new().post(format!("{}/admin/reload", seawall.admin_url)).send().await.unwrap();
    assert_eq!(reloaded.status().as_u16(), 200);
    let heard = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(message) = stream.recv().await {
            if message["method"] == "notifications/prompts/list_changed" {
                return;
            }
        }
    })
    .await;
    assert!(heard.is_ok(), "the session hears its prompts changed");
    let listed = c.request(5, "prompts/list", json!({})).await;
    assert_eq!(listed.result()["prompts"], json!([]), "{}", listed.raw);
}

/// `check-config` reports a name clients would see twice and an unset environment
/// variable, each with its file and line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_reports_clashing_names_and_unset_variables_by_line() {
    let dir = TestDir::new("overrides-check");
    let tools = "      add: { name: echo }\n      echo: { timeout: 5s }\n      log:\n        arguments:\n          level: { env: SEAWALL_TEST_UNSET_VARIABLE }\n";
    let file = dir.write("seawall.yaml", &config("http://127.0.0.1:9/mcp", tools, ""));
    let mut check = tokio::process::Command::new(seawall_bin());
    check.arg("check-config").arg(&file).env_remove("SEAWALL_TEST_UNSET_VARIABLE");
    let out = run_script("check-config", check, Duration::from_secs(60)).await;
    assert!(!out.status.success(), "accepted:\n{}", out.stdout);
    let f = file.display();
    for want in [
        format!(
            "{f}:7: upstreams[0].tools.add.name: clients would see two tools named \"echo\": this one and tools.echo"
        ),
        format!(
            "{f}:11: upstreams[0].tools.log.arguments.level.env: environment variable SEAWALL_TEST_UNSET_VARIABLE is not set"
        ),
    ] {
        assert!(out.stderr.lines().any(|l| l == want), "no {want:?} in\n{}", out.stderr);
    }
}
