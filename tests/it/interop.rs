//! Interop tests: real MCP peers (official SDK clients, the reference server, the
//! official conformance suite) talking through the real seawall binary.
//!
//! They need what `tests/run` installs (Node 22, npm peers, a Python venv) and fail,
//! rather than skip, without it: run them with `bash tests/run --test it interop::`.

use std::time::Duration;

use crate::support::{
    Comparison, ConformanceCheck, ConformanceUpstream, DemoUpstream, Everything, Interop, Seawall, TestDir, Upstream,
    compare, config_yaml, lines, run_conformance, run_script, tally,
};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(150);

/// The official Python SDK client against seawall's aggregate endpoint, in front of the
/// demo upstream twice: a per-session stdio child (`demo`) and an HTTP server (`remote`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_through_seawall() {
    let interop = Interop::from_env();
    let remote = DemoUpstream::start(false, &[]).await;
    let seawall =
        Seawall::start(&config_yaml(&[Upstream::demo_stdio("demo", true), Upstream::http("remote", &remote.url)], ""))
            .await;

    let script = interop.path("python/client_test.py");
    let cmd = interop.python_command([
        script.as_os_str(),
        seawall.url.as_ref(),
        "--stdio-upstream".as_ref(),
        "demo".as_ref(),
        "--http-upstream".as_ref(),
        "remote".as_ref(),
    ]);
    run_script("python client", cmd, SCRIPT_TIMEOUT)
        .await
        .assert_success("python SDK client (tests/interop/python/client_test.py)");
}

/// The same Python checks against seawall's single-upstream endpoints `/mcp/demo` (stdio,
/// per session) and `/mcp/remote` (HTTP), where names are not prefixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_through_single_upstream_endpoints() {
    let interop = Interop::from_env();
    let remote = DemoUpstream::start(false, &[]).await;
    let seawall =
        Seawall::start(&config_yaml(&[Upstream::demo_stdio("demo", true), Upstream::http("remote", &remote.url)], ""))
            .await;

    let script = interop.path("python/client_test.py");
    for upstream in ["demo", "remote"] {
        let url = seawall.upstream_url(upstream);
        let cmd = interop.python_command([
            script.as_os_str(),
            url.as_ref(),
            "--stdio-upstream".as_ref(),
            "".as_ref(),
            "--http-upstream".as_ref(),
            "".as_ref(),
        ]);
        run_script(&format!("python client /mcp/{upstream}"), cmd, SCRIPT_TIMEOUT)
            .await
            .assert_success(&format!("python SDK client against /mcp/{upstream}"));
    }
}

/// The Python SDK client speaking the modern era (2026-07-28, stateless) to seawall's
/// aggregate endpoint, and in `auto` mode (it probes `server/discover`, then stays
/// modern) to both single-upstream endpoints, in front of legacy upstreams: the same
/// checks pass, sampling and roots included (bridged into `input_required` results).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_modern_client_through_seawall() {
    let interop = Interop::from_env();
    let remote = DemoUpstream::start(false, &[]).await;
    let seawall =
        Seawall::start(&config_yaml(&[Upstream::demo_stdio("demo", true), Upstream::http("remote", &remote.url)], ""))
            .await;

    let script = interop.path("python/client_test.py");
    let cmd =
        interop.python_command([script.as_os_str(), seawall.url.as_ref(), "--mode".as_ref(), "2026-07-28".as_ref()]);
    run_script("python client (modern)", cmd, SCRIPT_TIMEOUT)
        .await
        .assert_success("python SDK client in mode 2026-07-28");
    for upstream in ["demo", "remote"] {
        let url = seawall.upstream_url(upstream);
        let cmd = interop.python_command([
            script.as_os_str(),
            url.as_ref(),
            "--stdio-upstream".as_ref(),
            "".as_ref(),
            "--http-upstream".as_ref(),
            "".as_ref(),
            "--mode".as_ref(),
            "auto".as_ref(),
            "--expect-protocol".as_ref(),
            "2026-07-28".as_ref(),
        ]);
        run_script(&format!("python client (auto) /mcp/{upstream}"), cmd, SCRIPT_TIMEOUT)
            .await
            .assert_success(&format!("python SDK client in mode auto against /mcp/{upstream}"));
    }
}

/// The official TypeScript SDK client against seawall's aggregate endpoint in front of
/// the reference server `server-everything` (HTTP upstream `everything`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sdk_client_through_seawall() {
    let interop = Interop::from_env();
    let everything = Everything::start(&interop).await;
    let seawall = Seawall::start(&config_yaml(&[Upstream::http("everything", &everything.url)], "")).await;

    let script = interop.path("ts/client_test.mjs");
    let cmd =
        interop.node_command([script.as_os_str(), seawall.url.as_ref(), "--upstream".as_ref(), "everything".as_ref()]);
    run_script("ts client", cmd, SCRIPT_TIMEOUT)
        .await
        .assert_success("TypeScript SDK client (tests/interop/ts/client_test.mjs)");
}

/// The official conformance suite, run directly against `server-everything` and then
/// through seawall's `/mcp/everything` (with overrides of two tools the suite does not
/// use): every check that passes directly must pass through seawall too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_loses_no_check_through_seawall() {
    let interop = Interop::from_env();
    let dir = TestDir::new("conformance");
    let everything = Everything::start(&interop).await;
    // Overrides of tools the suite does not use (appended to the upstream's entry): the
    // lists and calls of the tools it uses pass through the overrides' path unchanged.
    let overrides = "    tools:\n      get-env: { hidden: true }\n      gzip-file-as-resource:\n        name: gzip_file\n        \
                     description: Compresses a file.\n        annotations: { readOnlyHint: true }\n";
    let seawall = Seawall::start(&config_yaml(&[Upstream::http("everything", &everything.url)], overrides)).await;

    let direct = run_conformance(&interop, "direct", &everything.url, None, &dir.join("direct")).await;
    let through =
        run_conformance(&interop, "through seawall", &seawall.upstream_url("everything"), None, &dir.join("seawall"))
            .await;

    let Comparison { lost, info, gained } = compare(&direct, &through);
    let summary = format!("conformance direct: {}; through seawall: {}", tally(&direct), tally(&through));
    // Shown for failing runs, and for passing ones with `bash tests/run --test it interop:: -- --nocapture`.
    println!("{summary}");
    if !gained.is_empty() {
        println!("passing only through seawall:\n{}", gained.join("\n"));
    }
    if !info.is_empty() {
        println!("passing directly, INFO (optional behaviour not exercised) through seawall:\n{}", info.join("\n"));
    }
    assert!(
        direct.iter().any(ConformanceCheck::passed),
        "no conformance check passed even directly against server-everything: the harness is broken"
    );
    assert!(
        lost.is_empty(),
        "{} conformance check(s) pass directly against server-everything but not through seawall:\n{}",
        lost.len(),
        lines(&lost)
    );
}

/// The baseline the comparison above relies on: two direct runs against one
/// server-everything pass the same checks (a flapping check would make the comparison
/// through seawall flaky), and the pinned versions pass the checks they are known to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_baseline_is_stable() {
    let interop = Interop::from_env();
    let dir = TestDir::new("conformance-baseline");
    let everything = Everything::start(&interop).await;
    let first = run_conformance(&interop, "direct #1", &everything.url, None, &dir.join("one")).await;
    let second = run_conformance(&interop, "direct #2", &everything.url, None, &dir.join("two")).await;
    let Comparison { lost, info, gained } = compare(&first, &second);
    println!("conformance direct #1: {}; direct #2: {}", tally(&first), tally(&second));
    assert!(
        lost.is_empty() && info.is_empty() && gained.is_empty(),
        "conformance checks flap directly against server-everything:\n{}\n{}\n{}",
        lines(&lost),
        info.join("\n"),
        gained.join("\n")
    );
    // Known to pass with the versions pinned in tests/interop/package-lock.json.
    for key in [
        "server-initialize/server-initialize",
        "ping/ping",
        "tools-list/tools-list",
        "tools-call-simple-text/tools-call-simple-text",
        "prompts-list/prompts-list",
        "resources-list/resources-list",
    ] {
        let c = first.iter().find(|c| c.key() == key);
        assert!(
            c.is_some_and(ConformanceCheck::passed),
            "conformance check {key} does not pass directly: {c:?}; checks seen: {:?}",
            first.iter().map(ConformanceCheck::key).collect::<Vec<_>>()
        );
    }
}

/// The official Python SDK client in its default connect mode (`auto`: 2026-07-28 where
/// offered, as seawall offers it) and in `legacy` mode, directly and through both of
/// seawall's endpoints, in front of the TypeScript SDK conformance upstream, which asks
/// for sampling and elicitation on its session's standalone stream: every relay
/// (sampling, elicitation, progress, logging) reaches the client's callbacks in every
/// combination (`tests/interop/python/relay_test.py`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_client_relays_in_both_modes_through_both_endpoints() {
    let interop = Interop::from_env();
    let upstream = ConformanceUpstream::typescript(&interop).await;
    let seawall = Seawall::start(&config_yaml(&[Upstream::http("conf", &upstream.url)], "")).await;
    let script = interop.path("python/relay_test.py");
    let single = seawall.upstream_url("conf");
    let targets =
        [("directly", upstream.url.as_str(), ""), ("/mcp/conf", &single, ""), ("/mcp", &seawall.url, "conf__")];
    for (label, url, prefix) in targets {
        for mode in ["auto", "legacy"] {
            let cmd = interop.python_command([
                script.as_os_str(),
                url.as_ref(),
                "--mode".as_ref(),
                mode.as_ref(),
                "--prefix".as_ref(),
                prefix.as_ref(),
            ]);
            run_script(&format!("python relays {mode} {label}"), cmd, SCRIPT_TIMEOUT)
                .await
                .assert_success(&format!("python SDK client relays in mode {mode}, {label}"));
        }
    }
}
