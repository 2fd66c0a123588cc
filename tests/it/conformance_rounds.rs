//! The official conformance suites through seawall as the outside world runs them:
//! against upstreams that pass every check directly (so that a check lost through
//! seawall shows), several rounds each, with seawall logging at debug level and a steady
//! background load of calls through the same endpoint (races hide in quiet single runs),
//! in the default configuration.
//!
//! * the 0.1.16 suite and the current one (0.2.0-alpha.12), default runs, against the
//!   TypeScript SDK upstream `tests/interop/ts/conformance_server.mjs`, which sends
//!   sampling and elicitation on its session's standalone GET stream;
//! * the current suite with `--requirements 2026-07-28` (modern clients) against the
//!   dual-era Python SDK upstream `tests/interop/python/everything_server.py`, once with
//!   its `subscriptions/listen` streams as server-sent events and once as
//!   newline-delimited JSON.
//!
//! Each round gets a seawall of its own (calls a round leaves waiting for input cannot
//! trip a breaker in the next). A check that passes directly and fails in any round
//! fails the test. `SEAWALL_CONFORMANCE_ROUNDS` sets the rounds (default 3). They need
//! what `tests/run` installs: run them with `bash tests/run --test it conformance_rounds::`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::{
    ConformanceCheck, ConformanceUpstream, Interop, Seawall, Suite, TestDir, Upstream, compare, config_yaml, lines,
    run_suite, tally, wire,
};
use serde_json::json;

const MODERN: &str = "2026-07-28";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suite_0_1_16_on_the_typescript_upstream_loses_no_check() {
    let _alone = crate::support::one_at_a_time().await;
    let interop = Interop::from_env();
    let upstream = ConformanceUpstream::typescript(&interop).await;
    rounds(&interop, &upstream, Suite::V0_1_16, None, "0.1.16", "test_simple_text").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_suite_on_the_typescript_upstream_loses_no_check() {
    let _alone = crate::support::one_at_a_time().await;
    let interop = Interop::from_env();
    let upstream = ConformanceUpstream::typescript(&interop).await;
    rounds(&interop, &upstream, Suite::Current, None, "current", "test_simple_text").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_suite_on_the_python_upstream_loses_no_check() {
    let _alone = crate::support::one_at_a_time().await;
    let interop = Interop::from_env();
    let upstream = ConformanceUpstream::python(&interop, &[]).await;
    rounds(&interop, &upstream, Suite::Current, Some(MODERN), "2026-07-28", "test_simple_text").await;
}

/// The same, with the upstream answering `subscriptions/listen` in newline-delimited JSON
/// (an `application/json` body that stays open), as some modern servers do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_suite_on_an_upstream_with_json_line_listen_streams_loses_no_check() {
    let _alone = crate::support::one_at_a_time().await;
    let interop = Interop::from_env();
    let upstream = ConformanceUpstream::python(&interop, &["--listen-framing", "ndjson"]).await;
    rounds(&interop, &upstream, Suite::Current, Some(MODERN), "2026-07-28 ndjson", "test_simple_text").await;
}

/// Runs `suite` directly against `upstream` (every check must pass but the tasks
/// extension's, which the Python server does not implement), then through a fresh
/// seawall per round under load, and fails on any check lost in any round.
async fn rounds(
    interop: &Interop,
    upstream: &ConformanceUpstream,
    suite: Suite,
    requirements: Option<&str>,
    label: &str,
    load_tool: &str,
) {
    let dir = TestDir::new("conformance-rounds");
    let direct =
        run_suite(interop, suite, &format!("{label} direct"), &upstream.url, requirements, &dir.join("direct")).await;
    let failing: Vec<String> = direct
        .iter()
        .filter(|c| !c.passed() && c.status != "INFO" && !c.scenario.starts_with("tasks-"))
        .map(ConformanceCheck::key)
        .collect();
    assert!(
        failing.is_empty(),
        "the upstream fails {label} checks directly: {failing:?}; fix it before judging seawall"
    );
    assert!(
        direct.iter().filter(|c| c.passed()).count() >= 20,
        "{label}: too few checks ran directly: {}",
        tally(&direct)
    );

    let rounds: usize = std::env::var("SEAWALL_CONFORMANCE_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3);
    let mut failures = Vec::new();
    for round in 1..=rounds {
        let config = config_yaml(&[Upstream::http("conf", &upstream.url)], "");
        let seawall = Seawall::start_with(&config, &[], &[("RUST_LOG", "debug")]).await;
        let url = seawall.upstream_url("conf");
        let load = Load::start(&url, load_tool, 4).await;
        let through = run_suite(
            interop,
            suite,
            &format!("{label} round {round}"),
            &url,
            requirements,
            &dir.join(&format!("r{round}")),
        )
        .await;
        let loaded = load.finish().await;
        let cmp = compare(&direct, &through);
        println!(
            "conformance {label} round {round}: direct {}; through seawall {}; lost {}; background calls {} ({} failed)",
            tally(&direct),
            tally(&through),
            cmp.lost.len(),
            loaded.calls,
            loaded.failed.len()
        );
        for l in &cmp.lost {
            let key = |checks: &[ConformanceCheck]| checks.iter().find(|c| c.key() == l.key).cloned();
            println!("lost {label} round {round}:{}", l.line);
            println!("    direct:  {}", wire(key(&direct).as_ref()));
            println!("    through: {}", wire(key(&through).as_ref()));
        }
        if !cmp.lost.is_empty() {
            failures.push(format!("round {round}:\n{}", lines(&cmp.lost)));
        }
        if !loaded.failed.is_empty() {
            failures.push(format!("round {round}: background calls failed: {:?}", loaded.failed));
        }
        assert!(loaded.calls > 0, "round {round}: the background load made no call");
    }
    assert!(
        failures.is_empty(),
        "{label}: checks that pass directly were lost through seawall:\n{}",
        failures.join("\n")
    );
}

/// A steady background load: `clients` sessions, each calling `tools/list` and `tool`
/// in turn with a short pause, every answer checked.
struct Load {
    stop: Arc<AtomicBool>,
    calls: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

/// What a load did.
struct Loaded {
    calls: u64,
    failed: Vec<String>,
}

impl Load {
    async fn start(url: &str, tool: &str, clients: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let client = Client::connect(url, json!({})).await;
            let (stop, calls, tool) = (Arc::clone(&stop), Arc::clone(&calls), tool.to_owned());
            tasks.push(tokio::spawn(async move {
                let mut failed = Vec::new();
                let mut id = 1;
                while !stop.load(Ordering::Relaxed) {
                    let list = client.request(id, "tools/list", json!({})).await;
                    if list.status != 200 || !list.response()["result"]["tools"].is_array() {
                        failed.push(format!("tools/list: {} {}", list.status, list.raw));
                    }
                    let call = client.request(id + 1, "tools/call", json!({"name": tool, "arguments": {}})).await;
                    if call.status != 200 || call.response()["result"]["content"].as_array().is_none_or(Vec::is_empty) {
                        failed.push(format!("tools/call {tool}: {} {}", call.status, call.raw));
                    }
                    calls.fetch_add(2, Ordering::Relaxed);
                    id += 2;
                    failed.truncate(10);
                    tokio::time::sleep(Duration::from_millis(25)).await;
                }
                failed
            }));
        }
        Load { stop, calls, tasks }
    }

    async fn finish(self) -> Loaded {
        self.stop.store(true, Ordering::Relaxed);
        let mut failed = Vec::new();
        for task in self.tasks {
            failed.extend(task.await.unwrap_or_else(|e| vec![format!("a load task panicked: {e}")]));
        }
        Loaded { calls: self.calls.load(Ordering::Relaxed), failed }
    }
}
