//! Graceful shutdown through the real binary: on SIGTERM `/readyz` fails first, new
//! connections are refused, calls in flight finish with their real answers within the
//! grace period and those still running at its end get -32014; upstream sessions are
//! closed, stdio children are gone, and the exit status is 0. `drain_delay` keeps
//! serving while readiness fails; a second signal ends the grace period at once.

use std::time::{Duration, Instant};

use crate::support::mcp_client::{Client, Reply};
use crate::support::{DemoUpstream, Seawall};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

fn text_of(reply: &Reply) -> String {
    reply.result()["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The processes whose parent is `pid`, from `/proc`.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|child| stat(*child).is_some_and(|(_, ppid)| ppid == pid))
        .collect()
}

/// A process's state letter and parent, from `/proc/PID/stat`.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields follow the last `)`.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

/// Running (a zombie has ended; only its entry is left to reap).
fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != 'Z')
}

/// `/readyz` polled every 50 ms until the admin listener stops answering: every status
/// seen, in order, each with its `status` field.
fn watch_readiness(admin_url: &str) -> tokio::task::JoinHandle<Vec<(u16, String)>> {
    let url = format!("{admin_url}/readyz");
    tokio::spawn(async move {
        let http = reqwest::Client::builder().timeout(Duration::from_secs(2)).build().expect("client");
        let mut seen: Vec<(u16, String)> = Vec::new();
        loop {
            let Ok(response) = http.get(&url).send().await else { return seen };
            let status = response.status().as_u16();
            let text = response.text().await.unwrap_or_default();
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let state = body["status"].as_str().unwrap_or_default().to_owned();
            if seen.last() != Some(&(status, state.clone())) {
                seen.push((status, state));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

async fn refuses_connections(url: &str) -> bool {
    let addr = url.trim_start_matches("http://").split('/').next().unwrap_or_default().to_owned();
    tokio::net::TcpStream::connect(addr).await.is_err()
}

fn sleep_call(c: &Client, id: u64, tool: &str, ms: u64) -> tokio::task::JoinHandle<(Reply, Instant)> {
    let c = c.clone();
    let tool = tool.to_owned();
    tokio::spawn(async move {
        let reply = c.request(id, "tools/call", json!({"name": tool, "arguments": {"ms": ms}})).await;
        (reply, Instant::now())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_calls_in_flight_answers_the_rest_and_stops_every_child() {
    let remote = DemoUpstream::start(true, &[]).await;
    let config = format!(
        "shutdown:\n  grace: 2s\n\
         defaults:\n  timeouts: {{ tool_call: 60s, request: 60s }}\n\
         upstreams:\n  - name: remote\n    url: {}\n    protocol: legacy\n\
         \x20 - name: shared\n    command: seawall\n    args: [demo-upstream, --stdio]\n\
         \x20 - name: solo\n    command: seawall\n    args: [demo-upstream, --stdio]\n    share: per_session\n",
        remote.url
    );
    let mut gw = Seawall::start(&config).await;
    let pid = gw.proc.id().expect("seawall's pid");
    let c = Client::connect(&gw.url, json!({})).await;
    for (id, tool) in [(1, "remote__echo"), (2, "shared__echo"), (3, "solo__echo")] {
        let reply = c.request(id, "tools/call", json!({"name": tool, "arguments": {"message": "up"}})).await;
        assert_eq!(text_of(&reply), "up", "{tool}");
    }
    let children = children_of(pid);
    assert!(children.len() >= 2, "the shared and the per-session stdio processes: {children:?}");
    let ready = Client::get_json(&format!("{}/readyz", gw.admin_url)).await;
    assert_eq!(ready["status"], "ready", "{ready}");

    let quick_http = sleep_call(&c, 10, "remote__sleep", 1000);
    let quick_stdio = sleep_call(&c, 11, "shared__sleep", 800);
    let slow_http = sleep_call(&c, 12, "remote__sleep", 20_000);
    let slow_stdio = sleep_call(&c, 13, "solo__sleep", 20_000);
    // All four are under way.
    let started = Instant::now();
    while remote.recorded().iter().filter(|e| e["event"] == "call" && e["tool"] == "sleep").count() < 2 {
        assert!(started.elapsed() < Duration::from_secs(10), "the calls did not reach the upstream");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let readiness = watch_readiness(&gw.admin_url);
    tokio::time::sleep(Duration::from_millis(100)).await;

    let signalled = Instant::now();
    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).expect("SIGTERM");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(refuses_connections(&gw.url).await, "new connections are refused while draining");

    // Those that end within the grace period get their real answers.
    let (reply, _) = quick_http.await.unwrap();
    assert_eq!(text_of(&reply), "slept 1000 ms", "{}", reply.raw);
    let (reply, _) = quick_stdio.await.unwrap();
    assert_eq!(text_of(&reply), "slept 800 ms", "{}", reply.raw);
    // Those still running at its end get the shutdown's error, at its end.
    for call in [slow_http, slow_stdio] {
        let (reply, at) = call.await.unwrap();
        let error = reply.error();
        assert_eq!(error["code"], -32014, "{}", reply.raw);
        let message = error["message"].as_str().unwrap();
        assert!(message.starts_with("Gateway shutting down") && message.contains("outcome is unknown"), "{message}");
        assert!(error["data"]["correlationId"].is_string(), "{error}");
        let after = at.duration_since(signalled);
        assert!(
            after >= Duration::from_millis(1900) && after < Duration::from_secs(4),
            "answered {after:?} after SIGTERM"
        );
    }

    let status = gw.stop(Duration::from_secs(15)).await.expect("seawall exits");
    let took = signalled.elapsed();
    assert!(status.success(), "exit status {status:?}:\n{}", gw.proc.output());
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let seen = readiness.await.unwrap();
    assert_eq!(seen.first(), Some(&(200, "ready".to_owned())), "{seen:?}");
    assert!(seen.contains(&(503, "draining".to_owned())), "readiness failed before the exit: {seen:?}");
    assert_eq!(seen.last(), Some(&(503, "draining".to_owned())), "and never came back: {seen:?}");

    // The upstream heard the cancellation of the call cut short and the end of its session.
    let events = remote.recorded();
    let cut = events.iter().find(|e| e["event"] == "call" && e["arguments"]["ms"] == 20_000).expect("the long call");
    assert!(events.iter().any(|e| e["event"] == "cancelled" && e["requestId"] == cut["id"]), "{events:?}");
    assert!(events.iter().any(|e| e["event"] == "session_closed" && e["by"] == "DELETE"), "{events:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while children.iter().any(|c| alive(*c)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let left: Vec<u32> = children.iter().copied().filter(|c| alive(*c)).collect();
    assert!(left.is_empty(), "stdio children still running: {left:?}");
    crate::support::until_logged(&gw, &["shutting down: not ready", "grace period over", "shut down"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drain_delay_keeps_serving_while_readiness_fails_and_a_second_signal_cuts_the_grace_short() {
    let remote = DemoUpstream::start(false, &[]).await;
    let config = format!(
        "shutdown:\n  grace: 30s\n  drain_delay: 2s\n\
         defaults:\n  timeouts: {{ tool_call: 60s, request: 60s }}\n\
         upstreams:\n  - name: remote\n    url: {}\n",
        remote.url
    );
    let mut gw = Seawall::start(&config).await;
    let pid = Pid::from_raw(gw.proc.id().expect("pid") as i32);
    let c = Client::connect(&gw.url, json!({})).await;
    let slow = sleep_call(&c, 1, "remote__sleep", 20_000);
    tokio::time::sleep(Duration::from_millis(300)).await;

    let signalled = Instant::now();
    kill(pid, Signal::SIGTERM).expect("SIGTERM");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let response = reqwest::get(format!("{}/readyz", gw.admin_url)).await.expect("readyz");
    assert_eq!(response.status(), 503);
    // Within the delay, new clients are still served.
    let late = Client::connect(&gw.url, json!({})).await;
    let reply = late.request(2, "tools/call", json!({"name": "remote__echo", "arguments": {"message": "late"}})).await;
    assert_eq!(text_of(&reply), "late");
    assert!(signalled.elapsed() < Duration::from_secs(2), "the test took too long to check the delay");
    // Then the listener closes.
    tokio::time::sleep_until((signalled + Duration::from_millis(2300)).into()).await;
    assert!(refuses_connections(&gw.url).await, "the listener closed after the delay");

    // A second signal: the call in flight is answered now, not 30 s from now.
    let second = Instant::now();
    kill(pid, Signal::SIGINT).expect("SIGINT");
    let (reply, at) = slow.await.unwrap();
    assert_eq!(reply.error()["code"], -32014, "{}", reply.raw);
    assert!(at.duration_since(second) < Duration::from_secs(2), "answered {:?} after the second signal", at - second);
    let status = gw.stop(Duration::from_secs(10)).await.expect("seawall exits");
    assert!(status.success(), "exit status {status:?}:\n{}", gw.proc.output());
    crate::support::until_logged(&gw, &["second signal"]).await;
}
