//! Nothing leaks (issue 14), through the real binary, asserted on raw bytes at both ends.
//!
//! **Upstream → client.** Hostile upstreams — Streamable HTTP answering JSON and SSE in
//! both eras, HTTP+SSE, and stdio processes (`tests/it/support/leaky_upstream.rs`,
//! `tests/it/support/leaky_stdio.py`) — fail every request with the planted set of
//! `tests/it/support/planted.rs` (keys, tokens, DSNs, paths, hosts, addresses, stack traces,
//! escape sequences, SQL, HTML) in the error `message` and in `data`, for every error
//! code, as malformed errors, `isError` results, HTTP error statuses with bodies and
//! headers, SSE comments and event ids, garbage and unknown-id answers, stderr chatter,
//! crashes and refused handshakes. Every method kind (`tools/call`, `prompts/get`,
//! `resources/read`, the list methods, `initialize`) goes through each client front
//! (Streamable HTTP in a legacy session, modern POSTs, HTTP+SSE, `seawall stdio`), on
//! single-upstream endpoints and the aggregate one. Every byte each client receives
//! (through a recording relay, headers and framing included; stdout for stdio) is
//! searched for every planted needle; so are the status page, its JSON API, `/metrics`
//! and the access log.
//!
//! **Client → upstream.** The HTTP clients send a bearer key, cookies,
//! `Proxy-Authorization`, `X-Api-Key` and query-string tokens with every request; every
//! byte seawall sends to the HTTP upstreams (through a recording relay) and the
//! environment and stdin of every stdio upstream process are searched for them, while
//! the configured static header and environment variable must be there.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::front_wire::addr_of;
use crate::support::leak_findings::{Findings, inspect_http_upstreams, inspect_stdio_upstreams, planted_leaks};
use crate::support::leak_fronts::{CLIENT_KEY, Front, Session, StdioCaptures, Target, credentials};
use crate::support::leaky_upstream::LeakyUpstream;
use crate::support::planted::Kind;
use crate::support::tap::Tap;
use crate::support::{Seawall, TestDir};
use parking_lot::Mutex;
use serde_json::{Value, json};

/// The configured upstream credentials: they must reach the upstreams.
const UPSTREAM_HEADER: (&str, &str) = ("x-upstream-token", "up5tream-St4tic-T0ken-Qm2");
const UPSTREAM_ENV: (&str, &str) = ("LEAKS_UPSTREAM_ENV", "up5tream-Env-T0ken-Vx7");

// --- the upstreams ------------------------------------------------------------------------

#[derive(Clone, Copy)]
enum Link {
    /// Streamable HTTP at this path of the hostile server, in this era.
    Http(&'static str, &'static str),
    /// HTTP+SSE at this path.
    Sse(&'static str),
    /// The stdio script with these flags; `true`: one process per session.
    Stdio(&'static [&'static str], bool),
}

struct Up {
    name: &'static str,
    link: Link,
}

/// Upstreams that answer (and fail each request as its kind says).
const SERVING: &[Up] = &[
    Up { name: "http_json", link: Link::Http("/json/mcp", "legacy") },
    Up { name: "http_sse", link: Link::Http("/sse/mcp", "legacy") },
    Up { name: "modern_json", link: Link::Http("/json/mcp", "modern") },
    Up { name: "modern_sse", link: Link::Http("/sse/mcp", "modern") },
    Up { name: "sse", link: Link::Sse("/legacy/sse") },
    Up { name: "stdio", link: Link::Stdio(&[], false) },
];

/// A stdio upstream whose tool `crash` kills it (one process per session).
const CRASHING: Up = Up { name: "crash", link: Link::Stdio(&[], true) };

/// Upstreams that refuse the handshake.
const REFUSING: &[Up] = &[
    Up { name: "badinit_http", link: Link::Http("/badinit/mcp", "legacy") },
    Up { name: "badinit_modern", link: Link::Http("/badinit/mcp", "modern") },
    Up { name: "badinit_500", link: Link::Http("/badinit500/mcp", "legacy") },
    Up { name: "badinit_sse", link: Link::Sse("/badinit/sse") },
    Up { name: "badinit_stdio", link: Link::Stdio(&["--fail-init"], false) },
    Up { name: "badinit_crash", link: Link::Stdio(&["--crash-init"], true) },
];

/// The aggregate endpoint's upstreams: those that answer, and those that refuse over
/// HTTP (at once; a stdio process that cannot start is waited for up to the deadline,
/// which would only slow the suite down).
fn aggregated() -> Vec<&'static Up> {
    SERVING.iter().chain(REFUSING.iter().filter(|u| !matches!(u.link, Link::Stdio(..)))).collect()
}

/// What every generated config needs to know.
struct World {
    dir: TestDir,
    upstream_tap: Tap,
    python: PathBuf,
    script: PathBuf,
    plan: PathBuf,
    records: PathBuf,
}

impl World {
    fn config(&self, ups: &[&Up]) -> String {
        let q = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let mut y = format!(
            "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n\
             access_log: {{ path: {} }}\n\
             auth:\n  api_keys: [{{ name: leaks-client, key: {} }}]\n\
             defaults:\n  retry: {{ max_attempts: 1 }}\n  \
             breaker: {{ min_calls: 1000000, consecutive_failures: 1000000 }}\n  \
             timeouts: {{ request: 10s, tool_call: 10s, tool_idle: 10s }}\n\
             upstreams:\n",
            q(&self.dir.join("access.log").display().to_string()),
            q(CLIENT_KEY),
        );
        for up in ups {
            y.push_str(&format!("  - name: {}\n", up.name));
            match up.link {
                Link::Http(path, protocol) => y.push_str(&format!(
                    "    url: {}\n    protocol: {protocol}\n    headers: {{ {}: {} }}\n",
                    q(&self.upstream_tap.url(path)),
                    UPSTREAM_HEADER.0,
                    q(UPSTREAM_HEADER.1)
                )),
                Link::Sse(path) => y.push_str(&format!(
                    "    url: {}\n    transport: sse\n    headers: {{ {}: {} }}\n",
                    q(&self.upstream_tap.url(path)),
                    UPSTREAM_HEADER.0,
                    q(UPSTREAM_HEADER.1)
                )),
                Link::Stdio(flags, per_session) => {
                    let mut args = vec![self.script.display().to_string(), self.plan.display().to_string()];
                    args.push(self.records.display().to_string());
                    args.extend(flags.iter().map(|f| (*f).to_owned()));
                    let args: Vec<String> = args.iter().map(|a| q(a)).collect();
                    // A crashed process comes back at once; one that cannot start, slowly.
                    let restart = if flags.is_empty() { "{ base_delay: 10ms, max_delay: 50ms }" } else { "{}" };
                    y.push_str(&format!(
                        "    command: {}\n    args: [{}]\n    env: {{ {}: {} }}\n    \
                         restart: {restart}\n    shutdown_grace: 500ms\n",
                        q(&self.python.display().to_string()),
                        args.join(", "),
                        UPSTREAM_ENV.0,
                        q(UPSTREAM_ENV.1)
                    ));
                    if per_session {
                        y.push_str("    share: per_session\n");
                    }
                    if !flags.is_empty() {
                        // Requests wait for a process that never becomes ready: briefly.
                        y.push_str("    timeouts: { request: 2s, tool_call: 2s }\n");
                    }
                }
            }
        }
        y
    }
}

// --- what each cell of the matrix does ----------------------------------------------------

/// What the clients got.
#[derive(Default)]
struct Tally {
    requests: usize,
    results: usize,
    tool_errors: usize,
    errors: BTreeMap<i64, usize>,
    refused_handshakes: usize,
    cells: usize,
}

impl Tally {
    /// Checks that `answer` is one well-formed JSON-RPC response and counts it.
    fn count(&mut self, what: &str, answer: &Value) {
        self.requests += 1;
        assert_eq!(answer["jsonrpc"], "2.0", "{what}: {answer}");
        match (answer.get("result"), answer.get("error")) {
            (Some(result), None) => {
                assert!(result.is_object(), "{what}: {answer}");
                if result["isError"] == true {
                    self.tool_errors += 1;
                } else {
                    self.results += 1;
                }
            }
            (None, Some(error)) => {
                let code = error["code"].as_i64().unwrap_or_else(|| panic!("{what}: no integer code: {answer}"));
                assert!(error["message"].is_string(), "{what}: {answer}");
                *self.errors.entry(code).or_default() += 1;
            }
            _ => panic!("{what}: neither result nor error: {answer}"),
        }
    }
}

/// Kinds for the methods that share a path with another (the list methods besides
/// `tools/list`, and the aggregate endpoint's routing).
fn some_kinds() -> Vec<Kind> {
    vec![
        Kind::Code(-32602),
        Kind::Code(-32603),
        Kind::Code(-32050),
        Kind::ToolResource,
        Kind::Status(500),
        Kind::Garbage,
    ]
}

/// The requests a serving upstream gets: `tools/call` with every kind, `prompts/get`,
/// `resources/read` and `tools/list` with every failure, the other lists with some.
fn requests() -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    for kind in Kind::all() {
        let name = kind.name();
        out.push(("tools/call", json!({"name": name, "arguments": {}})));
        if kind.is_tool_result() {
            continue;
        }
        out.push(("prompts/get", json!({"name": name})));
        out.push(("resources/read", json!({"uri": format!("leak://{name}")})));
        out.push(("tools/list", json!({"cursor": name})));
    }
    for kind in some_kinds() {
        for list in ["prompts/list", "resources/list"] {
            out.push((list, json!({"cursor": kind.name()})));
        }
    }
    out
}

/// The aggregate endpoint's requests: the merged lists, and calls routed by prefixed
/// names (to every upstream, the refusing ones too) and by URI.
fn aggregate_requests() -> Vec<(&'static str, Value)> {
    let mut out = vec![("tools/list", json!({})), ("prompts/list", json!({}))];
    for kind in some_kinds() {
        let name = kind.name();
        for up in aggregated() {
            out.push(("tools/call", json!({"name": format!("{}__{name}", up.name), "arguments": {}})));
        }
        out.push(("prompts/get", json!({"name": format!("stdio__{name}")})));
        out.push(("resources/read", json!({"uri": format!("leak://{name}")})));
    }
    out
}

/// Where a cell's sessions go: a gateway's HTTP listener (through a recording relay;
/// the aggregate endpoint is another gateway's), or `seawall stdio`.
enum Endpoint<'a> {
    Http { single: &'a Tap, aggregate: &'a Tap },
    Stdio(&'a World, &'a StdioCaptures),
}

/// Opens a session on `/mcp[/<upstream>]` (or `seawall stdio [--upstream]`).
async fn open(front: Front, endpoint: &Endpoint<'_>, ups: &[&Up], single: Option<&str>) -> Result<Session, Value> {
    let credentials = credentials();
    match endpoint {
        Endpoint::Http { single: tap, aggregate } => {
            let url = match single {
                Some(up) => tap.url(&format!("/mcp/{up}")),
                None => aggregate.url("/mcp"),
            };
            Session::open(front, Target::Http { url, credentials: &credentials }).await
        }
        Endpoint::Stdio(world, captures) => {
            let name = single.unwrap_or("aggregate");
            let config = world.dir.write(&format!("stdio-{name}.yaml"), &world.config(ups));
            Session::open(front, Target::Stdio { config: &config, upstream: single, captures }).await
        }
    }
}

async fn serving_cell(front: Front, endpoint: &Endpoint<'_>, up: &Up, tally: &Mutex<Tally>) {
    let mut session = open(front, endpoint, &[up], Some(up.name))
        .await
        .unwrap_or_else(|e| panic!("{} on {}: initialize failed: {e}", front.name(), up.name));
    for (method, params) in requests() {
        let answer = session.request(method, params.clone()).await;
        let what = format!("{} {} {method} {params}", front.name(), up.name);
        if method == "tools/call" && params["name"].as_str().and_then(Kind::from_name).is_some_and(Kind::is_tool_result)
        {
            assert_eq!(answer["result"]["isError"], true, "{what}: {answer}");
        }
        tally.lock().count(&what, &answer);
    }
    session.close().await;
    tally.lock().cells += 1;
}

async fn crashing_cell(front: Front, endpoint: &Endpoint<'_>, tally: &Mutex<Tally>) {
    let mut session = open(front, endpoint, &[&CRASHING], Some(CRASHING.name))
        .await
        .unwrap_or_else(|e| panic!("{} on crash: initialize failed: {e}", front.name()));
    for name in ["crash", "e_32603", "crash", "e_32602"] {
        let answer = session.request("tools/call", json!({"name": name, "arguments": {}})).await;
        tally.lock().count(&format!("{} crash {name}", front.name()), &answer);
    }
    session.close().await;
    tally.lock().cells += 1;
}

async fn refusing_cell(front: Front, endpoint: &Endpoint<'_>, up: &Up, tally: &Mutex<Tally>) {
    let what = format!("{} on {}", front.name(), up.name);
    let answer = match open(front, endpoint, &[up], Some(up.name)).await {
        Err(answer) => answer,
        // The modern front has no handshake: its first request meets the refusal.
        Ok(mut session) => {
            assert_eq!(front, Front::Modern, "{what}: initialize succeeded");
            let answer = session.request("tools/call", json!({"name": "e_32602", "arguments": {}})).await;
            session.close().await;
            answer
        }
    };
    assert!(answer.get("error").is_some(), "{what}: {answer}");
    let mut t = tally.lock();
    t.count(&what, &answer);
    t.refused_handshakes += 1;
    t.cells += 1;
}

async fn aggregate_cell(front: Front, endpoint: &Endpoint<'_>, tally: &Mutex<Tally>) {
    let mut session = open(front, endpoint, &aggregated(), None)
        .await
        .unwrap_or_else(|e| panic!("{} on /mcp: initialize failed: {e}", front.name()));
    for (method, params) in aggregate_requests() {
        let answer = session.request(method, params.clone()).await;
        tally.lock().count(&format!("{} /mcp {method} {params}", front.name()), &answer);
    }
    session.close().await;
    tally.lock().cells += 1;
}

/// Every cell of one front, concurrently.
async fn front_cells(front: Front, endpoint: Endpoint<'_>, tally: &Mutex<Tally>) {
    let endpoint = &endpoint;
    let serving = SERVING.iter().map(|up| Box::pin(serving_cell(front, endpoint, up, tally)) as _);
    let refusing = REFUSING.iter().map(|up| Box::pin(refusing_cell(front, endpoint, up, tally)) as _);
    let mut cells: Vec<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>>> =
        serving.chain(refusing).collect();
    cells.push(Box::pin(crashing_cell(front, endpoint, tally)));
    cells.push(Box::pin(aggregate_cell(front, endpoint, tally)));
    futures::future::join_all(cells).await;
}

// --- the inspection -----------------------------------------------------------------------

/// The admin listener's pages and documents.
fn admin_paths() -> Vec<String> {
    let mut paths = vec!["/".to_owned(), "/status.json".into(), "/status.json?all=1".into(), "/metrics".into()];
    paths
        .extend(SERVING.iter().chain(REFUSING).chain([&CRASHING]).map(|u| format!("/status.json?upstream={}", u.name)));
    paths
}

async fn admin_get(gw: &Seawall, path: &str) -> Vec<u8> {
    let http = reqwest::Client::builder().no_proxy().timeout(Duration::from_secs(10)).build().expect("client");
    let resp = http.get(format!("{}{path}", gw.admin_url)).send().await.expect("admin GET");
    resp.bytes().await.expect("admin body").to_vec()
}

/// The admin listener's pages: nothing planted, but for what a page held before any
/// hostile traffic (the status page's own markup). A stdio process's `reason` quotes
/// its handshake refusal sanitised, like any upstream text. Returns the pages read.
async fn inspect_admin(gw: &Seawall, baseline: &BTreeMap<String, Vec<u8>>, findings: &mut Findings) -> usize {
    for path in admin_paths() {
        let body = admin_get(gw, &path).await;
        let before = baseline.get(&path).map(Vec::as_slice).unwrap_or_default();
        let known: Vec<String> = planted_leaks("", before).into_iter().map(|l| l.what).collect();
        let place = format!("admin {path}");
        findings.leaks.extend(planted_leaks(&place, &body).into_iter().filter(|l| !known.contains(&l.what)));
    }
    admin_paths().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_planted_upstream_reaches_a_client_and_no_client_credential_reaches_an_upstream() {
    let _alone = crate::support::one_at_a_time().await;
    let started = Instant::now();
    let dir = TestDir::new("leaks");
    let records = dir.join("records");
    std::fs::create_dir_all(&records).expect("records dir");
    let plan = dir.write("plan.json", &crate::support::planted::plan().to_string());
    let fake = LeakyUpstream::start().await;
    let world = World {
        upstream_tap: Tap::start(fake.addr).await,
        python: std::env::var_os("SEAWALL_TEST_PYTHON").map_or_else(|| PathBuf::from("python3"), PathBuf::from),
        script: PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/leaky_stdio.py")),
        plan,
        records: records.clone(),
        dir,
    };
    let all: Vec<&Up> = SERVING.iter().chain(REFUSING).chain([&CRASHING]).collect();
    let gw = Seawall::start(&world.config(&all)).await;
    let agg = Seawall::start(&world.config(&aggregated())).await;
    let (gateway, aggregate) = (addr_of(&gw.url), addr_of(&agg.url));
    let taps = [Tap::start(gateway).await, Tap::start(gateway).await, Tap::start(gateway).await];
    let agg_taps = [Tap::start(aggregate).await, Tap::start(aggregate).await, Tap::start(aggregate).await];
    let captures = StdioCaptures::default();
    let mut baseline = BTreeMap::new();
    for path in admin_paths() {
        baseline.insert(path.clone(), admin_get(&gw, &path).await);
    }
    let tally = Mutex::new(Tally::default());

    futures::future::join4(
        front_cells(Front::Legacy, Endpoint::Http { single: &taps[0], aggregate: &agg_taps[0] }, &tally),
        front_cells(Front::Modern, Endpoint::Http { single: &taps[1], aggregate: &agg_taps[1] }, &tally),
        front_cells(Front::Sse, Endpoint::Http { single: &taps[2], aggregate: &agg_taps[2] }, &tally),
        front_cells(Front::Stdio, Endpoint::Stdio(&world, &captures), &tally),
    )
    .await;

    let mut findings = Findings::default();
    let http_fronts = [Front::Legacy, Front::Modern, Front::Sse, Front::Legacy, Front::Modern, Front::Sse];
    for (front, tap) in http_fronts.iter().zip(taps.iter().chain(&agg_taps)) {
        findings.bytes_to_clients += tap.byte_count(false);
        for view in tap.views(false) {
            findings.planted(&format!("bytes a {} client received", front.name()), &view);
        }
    }
    for out in captures.stdout.lock().iter() {
        let out = out.lock();
        findings.bytes_to_clients += out.len();
        findings.planted("stdout of seawall stdio", &out);
    }
    let admin_pages = inspect_admin(&gw, &baseline, &mut findings).await;
    let access = std::fs::read(world.dir.join("access.log")).unwrap_or_default();
    assert!(!access.is_empty(), "the access log was written");
    findings.planted("the access log", &access);
    findings.credentials("the access log", &access);
    findings.credentials("seawall's log", gw.proc.output().as_bytes());
    findings.credentials("seawall's log", agg.proc.output().as_bytes());
    for err in captures.stderr.lock().iter() {
        findings.credentials("the log of seawall stdio", &err.lock());
    }
    let sse_streams = |tap: &Tap| -> usize {
        tap.conversations()
            .iter()
            .map(|c| crate::support::leak_findings::count(&c.answered, "\r\ncontent-type: text/event-stream"))
            .sum()
    };
    let sse_to_clients: usize = taps.iter().chain(&agg_taps).map(sse_streams).sum();
    let sse_from_upstreams = sse_streams(&world.upstream_tap);
    let upstream_requests = inspect_http_upstreams(&world.upstream_tap, UPSTREAM_HEADER, &mut findings);
    let processes = inspect_stdio_upstreams(&records, UPSTREAM_ENV, &mut findings);

    let t = tally.lock();
    println!(
        "nothing leaks: {} cells ({} fronts), {:.1} s",
        t.cells,
        Front::ALL.len(),
        started.elapsed().as_secs_f64()
    );
    println!(
        "  client side: {} requests, {} results, {} isError results, {} errors {:?}, {} refused handshakes",
        t.requests,
        t.results,
        t.tool_errors,
        t.errors.values().sum::<usize>(),
        t.errors,
        t.refused_handshakes
    );
    println!("  answered as SSE: {sse_to_clients} responses to clients, {sse_from_upstreams} from the HTTP upstreams");
    println!(
        "  bytes inspected: {} received by clients (+ {admin_pages} admin pages, {} access log), {} received by upstreams",
        findings.bytes_to_clients,
        access.len(),
        findings.bytes_to_upstreams
    );
    println!(
        "  upstream side: {upstream_requests} HTTP requests ({} answered by the hostile server), {processes} stdio processes",
        fake.requests()
    );
    println!("  leaks found: {}", findings.leaks.len());
    findings.assert_none(&world.dir.join("leaks.txt"));
    assert!(upstream_requests > 0 && processes > 0, "the upstreams were reached");
}

/// The credentials among the planted set (the first needle of each): a stdio server's
/// stderr may name paths and hosts in seawall's log, never these.
const STDERR_CREDENTIALS: &[&str] = &[
    "hunter2",
    "sk-live-4f9a",
    "sk_live_51H8",
    "ghp_R2d2",
    "xoxb-1234",
    "AKIAIOSFODNN7EXAMPLE",
    "wJalrXUtnFEMI",
    "Zm9vYmFyYmF6LWJl",
    "tok_9XqLm2Rv",
    "YWRtaW46aHVudGVyMg",
    "eyJzdWIiOiJkZXBsb3ki",
    "c00kie-S3ss10n",
    "Hunter2-Login-Pw",
    "Pa55w0rd-Billing",
    "R3p0rtPw9",
    "Tr0ub4dor",
    "r3dis-pass",
    "Q1w2E3r4T5y6",
    "MIIEpAIBAAKCAQEA7leaks",
];

/// A stdio server's stderr — its start-up line with a DSN, its dying words with every
/// planted secret — reaches seawall's log without the credentials and without raw
/// control bytes; the rest of the line (the host, the variable's name) stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_stderr_reaches_the_log_without_its_credentials() {
    let dir = TestDir::new("stderr-leaks");
    let records = dir.join("records");
    std::fs::create_dir_all(&records).expect("records dir");
    let plan = dir.write("plan.json", &crate::support::planted::plan().to_string());
    let python = std::env::var("SEAWALL_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/leaky_stdio.py");
    let args = [script.to_owned(), plan.display().to_string(), records.display().to_string()];
    let upstream = crate::support::Upstream::Stdio {
        name: "leaky".into(),
        command: python,
        args: args.into(),
        per_session: false,
    };
    let mut gw = Seawall::start(&crate::support::config_yaml(&[upstream], "")).await;
    let client = crate::support::mcp_client::Client::connect(&gw.url, json!({})).await;
    client.request(1, "tools/call", json!({"name": "leaky__crash", "arguments": {}})).await;
    // The process dies, and its successor says its first line again.
    for what in ["stdio upstream exited", "stdio upstream ready"] {
        gw.proc
            .wait_for_line(crate::support::Stream::Stderr, Duration::from_secs(10), what, |l| {
                l.contains(what).then_some(())
            })
            .await;
    }
    gw.stop(Duration::from_secs(5)).await;
    let log = gw.proc.output();
    let stderr_lines: Vec<&str> = log.lines().filter(|l| l.contains("seawall::upstream::stderr")).collect();
    assert!(
        stderr_lines.iter().any(|l| l.contains("DATABASE_URL=postgres://[redacted]@db.internal:5432/orders")),
        "the start-up line is logged, its password removed:\n{log}"
    );
    assert!(stderr_lines.iter().any(|l| l.contains("Traceback")), "the dying words are logged:\n{log}");
    for secret in STDERR_CREDENTIALS {
        assert!(
            crate::support::planted::find(log.as_bytes(), secret).is_none(),
            "{secret:?} reached seawall's log:\n{log}"
        );
    }
    for line in stderr_lines {
        assert!(!line.bytes().any(|b| b.is_ascii_control() && b != b'\t'), "a raw control byte: {line:?}");
    }
}

/// A stdio server that floods its stderr floods no log: a burst of lines is logged, the
/// rest is counted and the count logged (here when its stderr ends, the process being
/// given up after its handshake timed out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_flooding_its_stderr_does_not_flood_the_log() {
    const LINES: usize = 3000;
    let dir = TestDir::new("stderr-flood");
    let marker = dir.join("flooded");
    // Only the first process floods (a restarted one would add its own lines), then it
    // waits without ever answering `initialize`.
    let script = format!(
        "import os, sys\nif not os.path.exists({marker:?}):\n    open({marker:?}, 'w').close()\n    \
         for i in range({LINES}): sys.stderr.write('flood line %d\\n' % i)\n    sys.stderr.flush()\nsys.stdin.read()\n",
        marker = marker.display().to_string()
    );
    let python = std::env::var("SEAWALL_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let upstream = crate::support::Upstream::Stdio {
        name: "flood".into(),
        command: python,
        args: vec!["-c".into(), script],
        per_session: false,
    };
    let extra = "defaults:\n  timeouts: { connect: 2s }\n";
    let mut gw = Seawall::start(&crate::support::config_yaml(&[upstream], extra)).await;
    let left_out: usize = gw
        .proc
        .wait_for_line(crate::support::Stream::Stderr, Duration::from_secs(20), "the count of left-out lines", |l| {
            l.contains("left out of the log")
                .then(|| l.split("lines=").nth(1)?.split_whitespace().next()?.parse().ok())
                .flatten()
        })
        .await;
    gw.stop(Duration::from_secs(5)).await;
    let logged = gw
        .proc
        .output()
        .lines()
        .filter(|l| l.contains("seawall::upstream::stderr") && l.contains("flood line "))
        .count();
    assert_eq!(logged + left_out, LINES, "every line is logged or counted");
    assert!((100..300).contains(&logged), "a burst of 100 lines and 20 a second: {logged} logged");
}
