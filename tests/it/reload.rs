//! Hot reload through the real binary: a client keeps calling while the configuration
//! changes under it (timeouts tightened, an upstream added, one removed); the new
//! settings apply to new calls, an open breaker of an untouched upstream stays open, a
//! removed stdio server's process is gone, an invalid file or a moved listener leaves the
//! configuration in force serving; SIGHUP and a change of the file reload without being
//! asked; a reload replaces the API keys.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::support::mcp_client::Client;
use crate::support::{DemoUpstream, Seawall, children_of, text_of};
use serde_json::{Value, json};

/// Replaces the configuration file the way editors do: a new file renamed over it.
fn rewrite(gw: &Seawall, yaml: &str) {
    let tmp = gw.config_path.with_extension("yaml.new");
    std::fs::write(&tmp, yaml).expect("write config");
    std::fs::rename(&tmp, &gw.config_path).expect("rename config");
}

/// `POST /admin/reload`: the status and the answer.
async fn reload(gw: &Seawall) -> (u16, Value) {
    let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
    let response = http.post(format!("{}/admin/reload", gw.admin_url)).send().await.expect("reload");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}")))
}

async fn breakers(gw: &Seawall) -> Value {
    Client::get_json(&format!("{}/admin/breakers?upstream=remote", gw.admin_url)).await
}

/// Waits until seawall's output holds `text`.
async fn logged(gw: &Seawall, text: &str, within: Duration) {
    let deadline = Instant::now() + within;
    while !gw.proc.output().contains(text) {
        assert!(Instant::now() < deadline, "the log lacks {text:?}:\n{}", gw.proc.output());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn config(remote: &str, tool_call: &str, local: bool, extra: bool) -> String {
    let mut yaml = format!(
        "defaults:\n  timeouts: {{ tool_call: {tool_call} }}\n\
         upstreams:\n  - name: remote\n    url: {remote}\n\
         \x20   breaker: {{ consecutive_failures: 2, break: 60s, max_break: 60s }}\n"
    );
    if local {
        yaml.push_str("  - name: local\n    command: seawall\n    args: [demo-upstream, --stdio]\n");
    }
    if extra {
        yaml.push_str("  - name: extra\n    command: seawall\n    args: [demo-upstream, --stdio]\n");
    }
    yaml
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_go_on_through_reloads_that_tighten_timeouts_add_and_remove_upstreams() {
    let remote = DemoUpstream::start(true, &[]).await;
    let gw = Seawall::start(&config(&remote.url, "10s", true, false)).await;
    let pid = gw.proc.id().expect("pid");
    let c = Arc::new(Client::connect(&gw.url, json!({})).await);
    let (_, mut stream) = c.open_stream().await;
    let listed = c.request(1, "tools/list", json!({})).await.tool_names();
    assert!(listed.iter().any(|n| n == "local__echo"), "{listed:?}");
    let local_children = children_of(pid);
    assert_eq!(local_children.len(), 1, "one shared demo process: {local_children:?}");

    // Open the breaker of one tool of the upstream that every reload leaves alone.
    for id in 2..4 {
        let failed = c.call_tool(id, "remote__flaky", json!({"key": "b", "fail_first": 99})).await;
        assert_eq!(failed["isError"], true, "{failed}");
    }
    let open = breakers(&gw).await;
    assert!(open.to_string().contains("\"state\":\"open\""), "{open}");
    let flaky_calls = remote.calls("flaky");

    // A client keeps calling while the configuration changes.
    let stop = Arc::new(AtomicBool::new(false));
    let (answered, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut loops = Vec::new();
    for worker in 0..3u64 {
        let (c, stop, answered, failed) =
            (Arc::clone(&c), Arc::clone(&stop), Arc::clone(&answered), Arc::clone(&failed));
        loops.push(tokio::spawn(async move {
            let mut id = 1_000_000 * (worker + 1);
            while !stop.load(Ordering::SeqCst) {
                id += 1;
                let message = format!("m{id}");
                let result = c.call_tool(id, "remote__echo", json!({ "message": message })).await;
                if text_of(&result) == message {
                    answered.fetch_add(1, Ordering::SeqCst);
                } else {
                    failed.fetch_add(1, Ordering::SeqCst);
                    eprintln!("call {id} failed: {result}");
                }
            }
        }));
    }

    // A slow call passes under the first settings.
    let slow = c.call_tool(10, "remote__sleep", json!({"ms": 700})).await;
    assert_eq!(text_of(&slow), "slept 700 ms", "{slow}");

    // Tighten the timeouts, add `extra`, remove `local`.
    rewrite(&gw, &config(&remote.url, "300ms", false, true));
    let (status, answer) = reload(&gw).await;
    assert_eq!(status, 200, "{answer}");
    logged(&gw, "configuration reloaded", Duration::from_secs(5)).await;
    assert!(crate::support::tools_list_changed(&mut stream).await, "sessions hear that their tools changed");

    let listed = c.request(11, "tools/list", json!({})).await.tool_names();
    assert!(listed.iter().any(|n| n == "extra__echo"), "added: {listed:?}");
    assert!(!listed.iter().any(|n| n.starts_with("local__")), "removed: {listed:?}");
    assert_eq!(text_of(&c.call_tool(12, "extra__echo", json!({"message": "new"})).await), "new");
    let gone = c.request(13, "tools/call", json!({"name": "local__echo", "arguments": {"message": "old"}})).await;
    assert_eq!(gone.error()["message"], "Unknown tool: local__echo", "{}", gone.raw);

    // The new timeout applies to new calls.
    let started = Instant::now();
    let slow = c.call_tool(14, "remote__sleep", json!({"ms": 2000})).await;
    assert_eq!(slow["isError"], true, "{slow}");
    assert!(started.elapsed() < Duration::from_millis(1500), "timed out at the new 300 ms: {:?}", started.elapsed());

    // The breaker of the untouched upstream is still open: refused without upstream traffic.
    let refused = c.call_tool(15, "remote__flaky", json!({"key": "b", "fail_first": 99})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    assert_eq!(remote.calls("flaky"), flaky_calls, "an open breaker sends nothing upstream");
    assert!(breakers(&gw).await.to_string().contains("\"state\":\"open\""));

    // The removed upstream's process is gone; the added one runs.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = children_of(pid);
        if local_children.iter().all(|c| !now.contains(c)) && now.len() == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "children {now:?}, removed {local_children:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // An invalid file is refused with the lines `check-config` prints; the old one serves.
    rewrite(
        &gw,
        &format!(
            "{}  - name: broken\n    url: 12\n    retry: {{ max_attempts: lots }}\n",
            config(&remote.url, "300ms", false, true)
        ),
    );
    let (status, answer) = reload(&gw).await;
    assert_eq!(status, 422, "{answer}");
    let problems = answer["problems"].to_string();
    assert!(problems.contains("seawall.yaml:11: upstreams[2].url: not an http(s) URL"), "{answer}");
    assert!(problems.contains("seawall.yaml:12: upstreams[2].retry.max_attempts"), "{answer}");
    assert_eq!(text_of(&c.call_tool(16, "extra__echo", json!({"message": "still"})).await), "still");

    // A moved listener is refused: it needs a restart.
    rewrite(&gw, &config(&remote.url, "300ms", false, true).replace("defaults:", "listen: 127.0.0.1:1\ndefaults:"));
    let (status, answer) = reload(&gw).await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["problems"].to_string().contains("listen: changing the listener address needs a restart"),
        "{answer}"
    );

    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    for l in loops {
        l.await.expect("loop");
    }
    let (answered, failed) = (answered.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
    assert_eq!(failed, 0, "{failed} of {} calls failed through the reloads", answered + failed);
    assert!(answered > 20, "the loop kept calling: {answered}");

    let metrics = reqwest::get(format!("{}/metrics", gw.admin_url)).await.expect("metrics").text().await.expect("text");
    for line in [
        "seawall_config_reloads_total{outcome=\"invalid\"}",
        "seawall_config_reloads_total{outcome=\"refused\"}",
        "seawall_config_last_reload_successful 0",
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
    assert!(!metrics.contains("seawall_config_reloads_total{outcome=\"applied\"} 0"), "{metrics}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_the_file_and_sighup_reload_without_being_asked() {
    let remote = DemoUpstream::start(false, &[]).await;
    let one = format!("upstreams:\n  - name: remote\n    url: {}\n", remote.url);
    let gw = Seawall::start(&one).await;
    let c = Client::connect(&gw.url, json!({})).await;
    assert!(!c.request(1, "tools/list", json!({})).await.tool_names().iter().any(|n| n == "more__echo"));

    // Saved from an editor: read again within a moment.
    rewrite(&gw, &format!("{one}  - name: more\n    command: seawall\n    args: [demo-upstream, --stdio]\n"));
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut id = 2;
    while !c.request(id, "tools/list", json!({})).await.tool_names().iter().any(|n| n == "more__echo") {
        assert!(Instant::now() < deadline, "the change was not picked up:\n{}", gw.proc.output());
        id += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    logged(&gw, "file changed", Duration::from_secs(5)).await;

    // Written in place, then SIGHUP; the watcher is blind to nothing but this proves the
    // signal: the log names it as the cause.
    std::fs::write(&gw.config_path, &one).expect("write");
    let pid = gw.proc.id().expect("pid");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    logged(&gw, "SIGHUP", Duration::from_secs(5)).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.request(id, "tools/list", json!({})).await.tool_names().iter().any(|n| n == "more__echo") {
        assert!(Instant::now() < deadline, "not reloaded:\n{}", gw.proc.output());
        id += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(text_of(&c.call_tool(id + 1, "remote__echo", json!({"message": "alive"})).await), "alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_replaces_the_api_keys() {
    let remote = DemoUpstream::start(false, &[]).await;
    let keyed = |key: &str| {
        format!(
            "auth:\n  api_keys:\n    - name: ci\n      key: {key}\nupstreams:\n  - name: remote\n    url: {}\n",
            remote.url
        )
    };
    let (old, new) = ("old-key-0123456789abcdef", "new-key-0123456789abcdef");
    let gw = Seawall::start(&keyed(old)).await;
    let c = Client::with_bearer(&gw.url, old).initialize(json!({})).await;
    assert_eq!(text_of(&c.call_tool(1, "remote__echo", json!({"message": "a"})).await), "a");

    rewrite(&gw, &keyed(new));
    let (status, answer) = reload(&gw).await;
    assert_eq!(status, 200, "{answer}");
    let refused = c.request(2, "tools/list", json!({})).await;
    assert_eq!(refused.status, 401, "the old key is refused: {}", refused.raw);
    let fresh = Client::with_bearer(&gw.url, new).initialize(json!({})).await;
    assert_eq!(text_of(&fresh.call_tool(3, "remote__echo", json!({"message": "b"})).await), "b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_of_the_included_mcp_servers_file_reloads_too() {
    let files = crate::support::TestDir::new("include");
    let server = |name: &str| json!({ name: {"command": "seawall", "args": ["demo-upstream", "--stdio"]} });
    let servers = files.write("mcp.json", &json!({ "mcpServers": server("first") }).to_string());
    let config = format!("include_mcp_servers: {}\nupstreams: []\n", serde_json::to_string(&servers).expect("path"));
    let gw = Seawall::start(&config).await;
    let c = Client::connect(&gw.url, json!({})).await;
    assert!(c.request(1, "tools/list", json!({})).await.tool_names().iter().any(|n| n == "first__echo"));

    // The desktop client's file gains a server: seawall serves it without being asked.
    let mut both = server("first");
    both["second"] = server("second")["second"].clone();
    files.write("mcp.json", &json!({ "mcpServers": both }).to_string());
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut id = 2;
    while !c.request(id, "tools/list", json!({})).await.tool_names().iter().any(|n| n == "second__echo") {
        assert!(Instant::now() < deadline, "the included file's change was not picked up:\n{}", gw.proc.output());
        id += 1;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(text_of(&c.call_tool(id + 1, "second__echo", json!({"message": "hi"})).await), "hi");
}
