//! Interop tests: real MCP peers (official SDK clients, the reference server, the
//! official conformance suite) talking through the real seawall binary.
//!
//! They need what `tests/run` installs (Node 22, npm peers, a Python venv) and fail,
//! rather than skip, without it: run them with `bash tests/run --test interop`.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{
    ConformanceCheck, DemoUpstream, Everything, Interop, PythonEverything, Seawall, TestDir, Upstream, config_yaml,
    run_conformance, run_script, tally,
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
/// through seawall's `/mcp/everything`: every check that passes directly must pass
/// through seawall too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_suite_loses_no_check_through_seawall() {
    let interop = Interop::from_env();
    let dir = TestDir::new("conformance");
    let everything = Everything::start(&interop).await;
    let seawall = Seawall::start(&config_yaml(&[Upstream::http("everything", &everything.url)], "")).await;

    let direct = run_conformance(&interop, "direct", &everything.url, None, &dir.join("direct")).await;
    let through =
        run_conformance(&interop, "through seawall", &seawall.upstream_url("everything"), None, &dir.join("seawall"))
            .await;

    let Comparison { lost, info, gained } = compare(&direct, &through);
    let summary = format!("conformance direct: {}; through seawall: {}", tally(&direct), tally(&through));
    // Shown for failing runs, and for passing ones with `bash tests/run --test interop -- --nocapture`.
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

/// The conformance suite against the dual-era Python server
/// (`tests/interop/python/everything_server.py`), directly and through seawall's
/// `/mcp/everything` in front of it (an HTTP upstream), once in its default run
/// (2025-11-25: every check that passes directly must pass through seawall) and once with
/// `--requirements 2026-07-28` (modern clients: every check that passes directly must
/// pass through seawall, except the ones in [`KNOWN_GAPS`]). Each run gets a seawall of
/// its own, so calls a run leaves waiting for input cannot trip a breaker in the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_both_eras_through_seawall_on_the_python_server() {
    let interop = Interop::from_env();
    let dir = TestDir::new("conformance-python");
    let server = PythonEverything::start(&interop).await;

    let default = run_both(&interop, &server, None, &dir).await;
    let modern = run_both(&interop, &server, Some(MODERN), &dir).await;

    // The server itself: every check of the default run passes directly, and every check
    // of 2026-07-28 except the tasks extension's, which it does not implement.
    let failing = |checks: &[ConformanceCheck], allowed: &dyn Fn(&ConformanceCheck) -> bool| {
        checks.iter().filter(|c| !c.passed() && c.status != "INFO" && !allowed(c)).map(ConformanceCheck::key).collect()
    };
    let direct_default: Vec<String> = failing(&default.direct, &|_| false);
    let direct_modern: Vec<String> = failing(&modern.direct, &|c| c.scenario.starts_with("tasks-"));
    assert!(
        direct_default.is_empty() && direct_modern.is_empty(),
        "the Python everything server fails checks directly (default run: {direct_default:?}; 2026-07-28: \
         {direct_modern:?}): fix tests/interop/python/everything_server.py before judging seawall"
    );

    assert!(default.lost.is_empty(), "the default run loses checks through seawall:\n{}", lines(&default.lost));
    let unexpected: Vec<&Lost> = modern.lost.iter().filter(|l| gap(&l.key).is_none()).collect();
    let closed: Vec<&str> =
        KNOWN_GAPS.iter().map(|g| g.0).filter(|key| !modern.lost.iter().any(|l| l.key == *key)).collect();
    if !closed.is_empty() {
        println!("KNOWN_GAPS entries that passed through seawall this time (remove them once fixed): {closed:?}");
    }
    assert!(
        unexpected.is_empty(),
        "{} check(s) of 2026-07-28 pass directly but not through seawall and are not in KNOWN_GAPS:\n{}",
        unexpected.len(),
        unexpected.iter().map(|l| l.line.as_str()).collect::<Vec<_>>().join("\n")
    );
}

const MODERN: &str = "2026-07-28";

/// One requirement set run directly and through a fresh seawall.
struct Runs {
    direct: Vec<ConformanceCheck>,
    lost: Vec<Lost>,
}

/// Runs the suite (`requirements`, or its default run) directly against `server` and
/// through a seawall started for it, prints the tallies and every lost check with what
/// the suite saw on the wire in both runs.
async fn run_both(interop: &Interop, server: &PythonEverything, requirements: Option<&str>, dir: &TestDir) -> Runs {
    let label = requirements.unwrap_or("default");
    let seawall = Seawall::start(&config_yaml(&[Upstream::http("everything", &server.url)], "")).await;
    let direct = run_conformance(
        interop,
        &format!("{label} direct"),
        &server.url,
        requirements,
        &dir.join(&format!("{label}-direct")),
    )
    .await;
    let through = run_conformance(
        interop,
        &format!("{label} through seawall"),
        &seawall.upstream_url("everything"),
        requirements,
        &dir.join(&format!("{label}-seawall")),
    )
    .await;
    let Comparison { lost, info, gained } = compare(&direct, &through);
    let passed = |c: &[ConformanceCheck]| c.iter().filter(|c| c.passed()).count();
    // Shown for failing runs, and for passing ones with `bash tests/run --test interop -- --nocapture`.
    println!(
        "conformance {label}: passed directly {}, through seawall {}, lost {} ({} allowed); direct: {}; through: {}",
        passed(&direct),
        passed(&through),
        lost.len(),
        lost.iter().filter(|l| gap(&l.key).is_some()).count(),
        tally(&direct),
        tally(&through)
    );
    let by_key = |checks: &[ConformanceCheck]| -> BTreeMap<String, ConformanceCheck> {
        checks.iter().map(|c| (c.key(), c.clone())).collect()
    };
    let (d, t) = (by_key(&direct), by_key(&through));
    for l in &lost {
        let why = gap(&l.key).map_or("NOT A KNOWN GAP".to_owned(), |reason| format!("known gap: {reason}"));
        println!("lost {label}:{}\n    ({why})", l.line);
        println!("    direct:  {}", wire(d.get(&l.key)));
        println!("    through: {}", wire(t.get(&l.key)));
    }
    if !gained.is_empty() {
        println!("{label}: passing only through seawall:\n{}", gained.join("\n"));
    }
    if !info.is_empty() {
        println!("{label}: passing directly, INFO through seawall:\n{}", info.join("\n"));
    }
    Runs { direct, lost }
}

/// A check's `details` (what the suite saw), on one line and cut to a readable length.
fn wire(check: Option<&ConformanceCheck>) -> String {
    let Some(details) = check.and_then(|c| c.details.as_ref()) else {
        return "(no details)".to_owned();
    };
    let text = details.to_string();
    match text.char_indices().nth(900) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn gap(key: &str) -> Option<&'static str> {
    KNOWN_GAPS.iter().find(|g| g.0 == key).map(|g| g.1)
}

/// Checks of `--requirements 2026-07-28` that pass directly against the Python server but
/// not yet through seawall, each with its cause. seawall does not speak the modern era to
/// upstreams: it bridges modern clients onto a legacy session of the upstream, so what
/// only a modern upstream can say (its own `input_required` keys and `requestState`,
/// several questions in one round, `subscriptions/listen`) is an expected gap; the
/// entries marked "seawall:" are defects of the bridge. (The upstream's caching hints are
/// lost too, replaced by seawall's `ttlMs: 0`, `cacheScope: "private"`, but the suite
/// only checks that hints are present.) An entry that starts passing is printed by the
/// test: remove it then.
const KNOWN_GAPS: &[(&str, &str)] = &[
    // --- the upstream speaks the legacy era --------------------------------------------
    (
        "input-required-result-basic-elicitation/sep-2322-elicitation-incomplete",
        "the inputRequests key is seawall's (the relayed request's id, `seawall-N`), not the upstream's `user_name`",
    ),
    (
        "input-required-result-basic-elicitation/sep-2322-elicitation-complete",
        "not reached: its first round failed (above)",
    ),
    (
        "input-required-result-multiple-input-requests/sep-2322-multiple-inputs-incomplete",
        "the legacy upstream asks its three questions as three server requests; seawall answers input_required \
         with those already queued when the first arrives, i.e. one",
    ),
    (
        "input-required-result-multiple-input-requests/sep-2322-multiple-inputs-complete",
        "not reached: its first round failed (above)",
    ),
    (
        "input-required-result-ignore-extra-params/sep-2322-ignore-unexpected-params",
        "inputResponses without a requestState: only the upstream that chose the keys could read them; seawall \
         starts a fresh upstream call, which asks again",
    ),
    (
        "server-stateless/sep-2575-server-sends-subscription-ack",
        "subscriptions/listen is answered -32601 while discover advertises resources.subscribe",
    ),
    ("server-stateless/sep-2575-server-tags-subscription-id", "subscriptions/listen is answered -32601"),
    ("server-stateless/sep-2575-server-honors-notification-filter", "subscriptions/listen is answered -32601"),
    (
        "server-stateless/sep-2575-server-sends-prompts-list-changed-on-subscription",
        "SKIPPED: discover does not declare prompts.listChanged (the legacy upstream session does not)",
    ),
    (
        "server-stateless/sep-2575-server-sends-tools-list-changed-on-subscription",
        "SKIPPED: discover does not declare tools.listChanged (the legacy upstream session does not)",
    ),
    // --- seawall: defects of the bridge ---------------------------------------------------
    (
        "server-stateless/sep-2575-request-meta-client-info-optional",
        "seawall: a context whose envelope has no clientInfo initializes the upstream with `clientInfo: null`, \
         which it refuses; the request is answered -32010",
    ),
    (
        "server-stateless/sep-2575-server-rejects-undeclared-capability",
        "seawall: the upstream's -32021 (missing client capability) is rewritten into an isError result",
    ),
    (
        "server-stateless/sep-2575-missing-capability-http-400",
        "seawall: no -32021 reaches the client (above), so no HTTP 400",
    ),
    (
        "server-stateless/sep-2575-http-server-method-not-found-404",
        "seawall: the upstream's -32601 for an unknown method is answered over SSE (HTTP 200) because the upstream \
         answered over SSE; a JSON answer would carry 404",
    ),
    (
        "server-stateless/sep-2575-server-no-log-without-loglevel",
        "seawall: the legacy upstream session's notifications/message is relayed to a request that did not opt in \
         with _meta logLevel",
    ),
    (
        "sep-2164-resource-not-found/sep-2164-error-code",
        "seawall: the legacy upstream's -32002 reaches the modern client unchanged; 2026-07-28 says -32602",
    ),
    // --- seawall: Mcp-Param-* headers are not validated (a pending scenario, not scored) --
    ("http-custom-header-server-validation/sep-2243-server-reject-invalid-param-chars", MCP_PARAM),
    ("http-custom-header-server-validation/sep-2243-server-reject-invalid-param-chars#2", MCP_PARAM),
    ("http-custom-header-server-validation/sep-2243-server-reject-param-mismatch", MCP_PARAM),
    ("http-custom-header-server-validation/sep-2243-server-reject-param-mismatch#2", MCP_PARAM),
    ("http-custom-header-server-validation/sep-2243-server-reject-param-mismatch#3", MCP_PARAM),
    ("http-custom-header-server-validation/sep-2243-server-validate-param-match#3", MCP_PARAM),
];

const MCP_PARAM: &str = "seawall: Mcp-Param-* headers are not checked against the tool's x-mcp-header arguments (a \
                         malformed base64 value, a mismatch or a missing header is served); the legacy upstream \
                         cannot check them";

/// How `other` compares with `base`, check by check.
#[derive(Debug, Default)]
struct Comparison {
    /// SUCCESS in `base`; FAILURE, WARNING, SKIPPED, anything unknown, or missing in
    /// `other`.
    lost: Vec<Lost>,
    /// SUCCESS in `base`, INFO in `other`: the suite's word for "optional behaviour not
    /// exercised", e.g. a server answering JSON where SSE is optional. Not a failure (the
    /// suite itself only fails on FAILURE and WARNING), but listed.
    info: Vec<String>,
    /// SUCCESS only in `other`.
    gained: Vec<String>,
}

/// A check that passes in the base run but not in the other.
#[derive(Debug)]
struct Lost {
    /// `scenario/check-id`.
    key: String,
    /// `  scenario/check-id: STATUS: message`.
    line: String,
}

fn lines(lost: &[Lost]) -> String {
    lost.iter().map(|l| l.line.as_str()).collect::<Vec<_>>().join("\n")
}

fn compare(base: &[ConformanceCheck], other: &[ConformanceCheck]) -> Comparison {
    let other_by_key: BTreeMap<String, &ConformanceCheck> = other.iter().map(|c| (c.key(), c)).collect();
    let mut cmp = Comparison::default();
    for b in base {
        let o = other_by_key.get(&b.key());
        let line = |o: &ConformanceCheck| {
            let detail = o.error.as_deref().or(o.description.as_deref()).unwrap_or("(no message)");
            format!("  {}: {}: {}", b.key(), o.status, detail)
        };
        match o {
            None if b.passed() => cmp.lost.push(Lost { key: b.key(), line: format!("  {}: missing", b.key()) }),
            Some(o) if b.passed() && o.status == "INFO" => cmp.info.push(line(o)),
            Some(o) if b.passed() && !o.passed() => cmp.lost.push(Lost { key: b.key(), line: line(o) }),
            Some(o) if !b.passed() && o.passed() => cmp.gained.push(format!("  {}", b.key())),
            _ => {}
        }
    }
    cmp
}
