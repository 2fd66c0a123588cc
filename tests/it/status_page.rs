//! The status page on the admin listener, through the real binary: `/status.json` after
//! a breaker opened (its failure rate and the request and error counts, exactly), the
//! page rendered by headless Chromium (the open breaker in its DOM, names from an
//! upstream shown as text, a screenshot kept), and 50 upstreams of 2,000 tools each.

use std::fmt::Write as _;
use std::path::PathBuf;

use crate::support::mcp_client::Client;
use crate::support::{Chromium, DemoUpstream, Seawall};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A tool name no page may turn into markup.
const HOSTILE_TOOL: &str = r#"<img src=x onerror="document.title='pwned'">"#;

fn sum(series: &Value) -> u64 {
    series.as_array().expect("a series").iter().map(|n| n.as_u64().expect("a count")).sum()
}

fn upstream<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["upstreams"].as_array().unwrap().iter().find(|u| u["name"] == name).unwrap_or_else(|| panic!("{name} in {doc}"))
}

/// The start tags of `dom` that carry every one of `attrs` (as serialised: `k="v"`).
fn tags_with<'a>(dom: &'a str, tag: &str, attrs: &[&str]) -> Vec<&'a str> {
    let open = format!("<{tag} ");
    dom.match_indices(&open)
        .map(|(at, _)| &dom[at..at + dom[at..].find('>').unwrap_or(0)])
        .filter(|t| attrs.iter().all(|a| t.contains(a)))
        .collect()
}

/// Where screenshots are kept after the test (cargo's directory for test artefacts).
fn artefact(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("status_page");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir.join(name)
}

/// A Streamable HTTP MCP server with one tool whose name is markup, failing every call.
async fn hostile_upstream() -> String {
    async fn handle(Json(msg): Json<Value>) -> Response {
        let Some(id) = msg.get("id").cloned() else { return StatusCode::ACCEPTED.into_response() };
        let result = match msg["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                                         "serverInfo": {"name": "hostile", "version": "1"}}),
            Some("tools/list") => json!({"tools": [{"name": HOSTILE_TOOL, "inputSchema": {"type": "object"}}]}),
            Some("tools/call") => {
                let error = json!({"code": -32603, "message": "broken"});
                return Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response();
            }
            _ => {
                let error = json!({"code": -32601, "message": "Method not found"});
                return Json(json!({"jsonrpc": "2.0", "id": id, "error": error})).into_response();
            }
        };
        Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
    }
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(handle)
            .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
            .delete(|| async { StatusCode::OK }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    format!("http://{addr}/mcp")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_breaker_is_shown_with_its_failure_rate_and_counts() {
    let chromium = Chromium::find();
    let remote = DemoUpstream::start(false, &[]).await;
    let hostile = hostile_upstream().await;
    let gw = Seawall::start(&format!(
        "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n\
         defaults:\n  breaker: {{ consecutive_failures: 1000, min_calls: 4, failure_rate: 0.5, break: 60s, max_break: 120s }}\n\
         upstreams:\n  - name: remote\n    url: {}\n  - name: hostile\n    url: {hostile}\n    protocol: legacy\n  \
         - name: local\n    command: seawall\n    args: [demo-upstream, --stdio]\n  \
         - name: per\n    command: seawall\n    args: [demo-upstream, --stdio]\n    share: per_session\n",
        remote.url
    ))
    .await;
    let c = Client::connect(&gw.url, json!({})).await;
    let listed = c.request(1, "tools/list", json!({})).await;
    assert!(listed.result()["tools"].as_array().unwrap().len() > 10, "{}", listed.raw);

    // ok, fail, ok, fail: 2 failures in 4 calls reaches the 50 % failure rate.
    let good = json!({"key": "good", "fail_first": 0});
    let bad = json!({"key": "bad", "fail_first": 1000, "mode": "error"});
    for (id, args) in [(2, &good), (3, &bad), (4, &good), (5, &bad)] {
        c.call_tool(id, "remote__flaky", args.clone()).await;
    }
    // Open: refused at once, twice; other tools and upstreams keep working.
    for id in [6, 7] {
        let refused = c.call_tool(id, "remote__flaky", good.clone()).await;
        assert_eq!(refused["isError"], true, "{refused}");
    }
    c.call_tool(8, "remote__echo", json!({"message": "fine"})).await;
    c.call_tool(9, "local__echo", json!({"message": "fine"})).await;
    // The shared process dies mid-call and is restarted.
    let crashed = c.call_tool(14, "local__crash", json!({})).await;
    assert_eq!(crashed["isError"], true, "{crashed}");
    // The hostile tool's breaker opens too (4 failures of 4).
    let hostile_name = format!("hostile__{HOSTILE_TOOL}");
    for id in 10..14 {
        c.call_tool(id, &hostile_name, json!({})).await;
    }

    let status_url = format!("{}/status.json", gw.admin_url);
    let mut doc = Client::get_json(&status_url).await;
    for _ in 0..200 {
        if upstream(&doc, "local")["process"]["state"] == "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        doc = Client::get_json(&status_url).await;
    }
    let listed = doc["breakers"]["listed"].as_array().unwrap();
    let flaky = listed.iter().find(|b| b["tool"] == "flaky").unwrap_or_else(|| panic!("no flaky breaker in {doc}"));
    assert_eq!((flaky["upstream"].as_str(), flaky["state"].as_str()), (Some("remote"), Some("open")));
    assert_eq!(flaky["reason"], "failure_rate");
    assert_eq!(flaky["failure_rate"], 0.5);
    let tripped = &flaky["tripped"];
    assert_eq!((tripped["calls"].as_u64(), tripped["failures"].as_u64()), (Some(4), Some(2)));
    assert_eq!((tripped["reason"].as_str(), tripped["consecutive_failures"].as_u64()), (Some("failure_rate"), Some(1)));
    let retry_in = flaky["retry_in_ms"].as_u64().unwrap();
    assert!(retry_in > 40_000 && retry_in <= 72_000, "a 60 s break ±20 %: {retry_in} ms");
    assert_eq!(flaky["opens"], 1);
    assert_eq!(doc["breakers"]["open"], 2, "remote's flaky and the hostile tool");
    assert_eq!(doc["breakers"]["half_open"], 0);
    assert!(listed.iter().all(|b| b["state"] == "open"), "closed breakers are only counted: {listed:?}");

    // Requests and errors, exactly: remote answered 1 list, 4 flaky calls, 2 refusals
    // and 1 echo; the 2 failures and the 2 refusals are its errors.
    let r = upstream(&doc, "remote");
    assert_eq!((sum(&r["recent"]["requests"]), sum(&r["recent"]["errors"])), (8, 4));
    assert_eq!(r["state"], "degraded");
    assert_eq!(r["tools"]["breakers"]["open"], 1);
    assert_eq!(r["kind"], "http");
    assert_eq!((r["era"]["protocol"].as_str(), r["era"]["speaking"].as_str()), (Some("auto"), Some("legacy")));
    assert_eq!(r["endpoints"][0]["url"], remote.url.as_str());
    let h = upstream(&doc, "hostile");
    assert_eq!((sum(&h["recent"]["requests"]), sum(&h["recent"]["errors"])), (5, 4));
    assert_eq!(h["era"]["protocol"], "legacy");
    let l = upstream(&doc, "local");
    assert_eq!((sum(&l["recent"]["requests"]), sum(&l["recent"]["errors"])), (3, 1), "the crash is an error");
    assert_eq!((l["kind"].as_str(), l["share"].as_str()), (Some("stdio"), Some("shared")));
    assert_eq!((l["process"]["state"].as_str(), l["process"]["restarts"].as_u64()), (Some("running"), Some(1)));
    assert_eq!((l["state"].as_str(), doc["gateway"]["state"].as_str()), (Some("ok"), Some("degraded")));
    let p = upstream(&doc, "per");
    assert_eq!((p["share"].as_str(), p["process"]["running"].as_u64()), (Some("per_session"), Some(1)));
    assert_eq!(p["process"]["available"], 63, "max_processes 64, one held by the session");
    assert_eq!((sum(&p["recent"]["requests"]), sum(&p["recent"]["errors"])), (1, 0));
    assert_eq!((sum(&doc["recent"]["requests"]), sum(&doc["recent"]["errors"])), (17, 9));
    assert_eq!(doc["gateway"]["sessions"]["total"], 1);
    assert_eq!(doc["gateway"]["sessions"]["by_era"]["2025-11-25"], 1);
    assert_eq!(doc["gateway"]["version"], env!("CARGO_PKG_VERSION"));

    // Closed breakers on request; one upstream's tools; bad queries are refused.
    let all = Client::get_json(&format!("{}/status.json?all=1", gw.admin_url)).await;
    let all_listed = all["breakers"]["listed"].as_array().unwrap();
    assert!(all_listed.iter().any(|b| b["tool"] == "echo" && b["state"] == "closed"), "{all}");
    let tools = Client::get_json(&format!("{}/status.json?upstream=remote", gw.admin_url)).await;
    let tools = tools["tools"].as_array().unwrap();
    assert_eq!((tools[0]["tool"].as_str(), tools[0]["state"].as_str()), (Some("flaky"), Some("open")));
    assert_eq!(tools.len(), 10, "the demo's tools: {tools:?}");
    for (query, status, error) in [
        ("?all=maybe", 400, "all: expected 1 or 0"),
        ("?upstream=nosuch", 404, "upstream: no upstream of that name"),
        ("?colour=red", 400, "unknown field `colour`"),
    ] {
        let resp = reqwest::get(format!("{}/status.json{query}", gw.admin_url)).await.unwrap();
        assert_eq!(resp.status().as_u16(), status, "{query}");
        let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
        assert!(body["error"].as_str().unwrap().contains(error), "{query}: {body}");
    }

    // The page and its files: self-contained, nothing loaded from elsewhere.
    for (path, kind) in [("/", "text/html"), ("/status.css", "text/css"), ("/status.js", "text/javascript")] {
        let resp = reqwest::get(format!("{}{path}", gw.admin_url)).await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
        assert!(header("content-type").starts_with(kind), "{path}: {}", header("content-type"));
        assert!(header("content-security-policy").starts_with("default-src 'none'"), "{path}");
        let body = resp.text().await.unwrap();
        for external in
            ["src=\"http", "href=\"http", "url(", "@import", "innerHTML", "insertAdjacentHTML", "document.write"]
        {
            assert!(!body.contains(external), "{path} contains {external}");
        }
    }

    // The page in a browser: the open breaker is a row with its state in an attribute,
    // and the hostile name is text, never markup.
    let page = format!("{}/", gw.admin_url);
    let dom = chromium.dump_dom(&page).await;
    let rows = tags_with(&dom, "tr", &["class=\"breaker\"", "data-breaker-state=\"open\"", "data-tool=\"flaky\""]);
    assert_eq!(rows.len(), 1, "one open breaker row for flaky in:\n{dom}");
    assert!(rows[0].contains("data-upstream=\"remote\""), "{}", rows[0]);
    assert!(dom.contains(">50 %<"), "its failure rate is shown");
    assert!(dom.contains("data-updates=\""), "the page rendered a status");
    assert_eq!(tags_with(&dom, "tr", &["class=\"upstream\""]).len(), 4);
    assert!(!dom.contains("<img"), "a tool name became markup:\n{dom}");
    assert!(dom.contains("&lt;img src=x onerror=\"document.title='pwned'\"&gt;"), "the hostile name shown as text");
    assert!(!dom.contains("pwned</title>"));

    let shot = artefact("status-page.png");
    chromium.screenshot(&page, &shot, 1400, 900).await;
    println!("status page screenshot: {}", shot.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_upstreams_of_two_thousand_tools_keep_the_page_bounded() {
    let _alone = crate::support::one_at_a_time().await;
    const UPSTREAMS: usize = 50;
    let chromium = Chromium::find();
    // The demo's 10 tools and 1,990 more.
    let demo = DemoUpstream::start(false, &["--extra-tools", "1990"]).await;
    let mut yaml = String::from(
        "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n\
         defaults:\n  breaker: { consecutive_failures: 2, break: 60s, max_break: 120s }\nupstreams:\n",
    );
    for i in 0..UPSTREAMS {
        let _ = writeln!(yaml, "  - name: up-{i:02}\n    url: {}", demo.url);
    }
    let gw = Seawall::start(&yaml).await;
    // Each upstream's tools listed once (on its own endpoint, passed through as they
    // are), so that seawall knows all 100,000.
    let lists = (0..UPSTREAMS).map(|i| {
        let url = gw.upstream_url(&format!("up-{i:02}"));
        async move {
            let c = Client::connect(&url, json!({})).await;
            c.request(1, "tools/list", json!({})).await.result()["tools"].as_array().map_or(0, Vec::len)
        }
    });
    assert_eq!(futures::future::join_all(lists).await, vec![2000; UPSTREAMS]);
    let c = Client::connect(&gw.url, json!({})).await;
    // A few calls: breakers for some tools, two of them opened.
    let bad = json!({"key": "bad", "fail_first": 1000, "mode": "error"});
    for (id, up) in [(2, "up-07"), (3, "up-07"), (4, "up-31"), (5, "up-31")] {
        c.call_tool(id, &format!("{up}__flaky"), bad.clone()).await;
    }
    for i in 0..20u64 {
        c.call_tool(10 + i, &format!("up-{:02}__extra_{:04}", i % 5, i + 1), json!({})).await;
    }

    let status = reqwest::get(format!("{}/status.json", gw.admin_url)).await.unwrap().text().await.unwrap();
    let one = reqwest::get(format!("{}/status.json?upstream=up-07", gw.admin_url)).await.unwrap().text().await.unwrap();
    println!("/status.json: {} bytes; ?upstream=up-07: {} bytes", status.len(), one.len());
    assert!(status.len() < 128 * 1024, "{} bytes", status.len());
    let doc: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(doc["breakers"]["open"], 2);
    assert_eq!(doc["breakers"]["listed"].as_array().unwrap().len(), 2);
    assert!(doc["upstreams"].as_array().unwrap().iter().all(|u| u["tools"]["listed"] == 2000));
    let tools: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(tools["tools"].as_array().unwrap().len(), 2000);

    // The page: one row per upstream, the two open breakers, and no tool rows until an
    // upstream is expanded — then at most 100 of its 2,000.
    let page = format!("{}/", gw.admin_url);
    let dom = chromium.dump_dom(&page).await;
    println!("page DOM: {} bytes, {} elements", dom.len(), dom.matches('<').count());
    assert_eq!(tags_with(&dom, "tr", &["class=\"upstream\""]).len(), UPSTREAMS);
    assert_eq!(tags_with(&dom, "tr", &["class=\"breaker\"", "data-breaker-state=\"open\""]).len(), 2);
    assert!(tags_with(&dom, "tr", &["class=\"tool\""]).is_empty());
    assert!(dom.len() < 400 * 1024 && dom.matches('<').count() < 6000, "the DOM grew with the tools");

    let expanded = chromium.dump_dom(&format!("{page}#upstream=up-07")).await;
    println!("page DOM with up-07 expanded: {} bytes", expanded.len());
    let tool_rows = tags_with(&expanded, "tr", &["class=\"tool\""]);
    assert_eq!(tool_rows.len(), 100, "the first 100 of up-07's tools");
    assert!(tool_rows[0].contains("data-tool=\"flaky\"") && tool_rows[0].contains("data-breaker-state=\"open\""));
    assert!(expanded.contains("1,900 more tools match"), "the rest are counted");
    assert!(expanded.len() < 600 * 1024, "{} bytes", expanded.len());

    // The filter narrows the tools, and the upstreams, to the ones that match.
    let filtered = chromium.dump_dom(&format!("{page}#upstream=up-07&filter=extra_199")).await;
    assert_eq!(tags_with(&filtered, "tr", &["class=\"tool\""]).len(), 1, "extra_1990");
    assert_eq!(tags_with(&filtered, "tr", &["class=\"upstream\""]).len(), 1, "only the upstream with a match");
}
