//! Interop over HTTP+SSE (the transport of protocol version 2024-11-05): the official
//! TypeScript SDK's `SSEClientTransport` and the Python SDK's `sse_client` through the
//! real seawall binary, in front of the demo upstream (stdio, Streamable HTTP and
//! HTTP+SSE) and of a server on the official Python SDK's HTTP+SSE transport.
//!
//! They need what `tests/run` installs (Node 22, the npm peers, the Python venv) and fail,
//! rather than skip, without it: `bash tests/run --test it interop_sse::`.

use std::ffi::OsString;
use std::time::Duration;

use crate::support::{DemoUpstream, Interop, PythonSseServer, Seawall, Stream, Upstream, config_yaml, run_script};

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(150);

/// Runs `tests/interop/ts/sse_client_test.mjs URL ARGS...` to success.
async fn ts_client(interop: &Interop, what: &str, url: &str, args: &[&str]) {
    let script = interop.path("ts/sse_client_test.mjs");
    let mut argv: Vec<OsString> = vec![script.into(), url.into()];
    argv.extend(args.iter().map(OsString::from));
    let cmd = interop.node_command(argv);
    run_script(what, cmd, SCRIPT_TIMEOUT)
        .await
        .assert_success(&format!("{what} (tests/interop/ts/sse_client_test.mjs)"));
}

/// `SSEClientTransport` pointed at seawall's `/sse`, at `/mcp` (what it does when given
/// the Streamable HTTP URL) and at `/mcp/old/sse`, in front of the demo as a per-session
/// stdio child (`demo`), over Streamable HTTP (`remote`) and over HTTP+SSE (`old`):
/// tools, progress, a resource, a prompt, concurrent calls, and sampling requests that
/// reach the client on its stream and its answers the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_sse_client_through_seawall() {
    let interop = Interop::from_env();
    let remote = DemoUpstream::start(false, &[]).await;
    let old = DemoUpstream::start(false, &[]).await;
    let upstreams = [
        Upstream::demo_stdio("demo", true),
        Upstream::http("remote", &remote.url),
        Upstream::sse("old", &old.sse_url()),
    ];
    let seawall = Seawall::start(&config_yaml(&upstreams, "")).await;
    let root = seawall.url.trim_end_matches("/mcp").to_owned();

    let every = ["--upstream", "old", "--upstream", "remote", "--upstream", "demo", "--sampling"];
    ts_client(&interop, "ts sse client /sse", &format!("{root}/sse"), &every).await;
    ts_client(&interop, "ts sse client GET /mcp", &seawall.url, &["--upstream", "old"]).await;
    ts_client(
        &interop,
        "ts sse client /mcp/old/sse",
        &format!("{root}/mcp/old/sse"),
        &["--upstream", "", "--sampling"],
    )
    .await;
}

/// The Python SDK's `sse_client` at seawall's `/sse` and `/mcp/old/sse`, in front of the
/// demo over HTTP+SSE (`old`), in the SDK's default mode (`auto`: it asks
/// `server/discover` on the stream before `initialize`, is refused, and falls back to the
/// handshake) and in `legacy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sse_client_through_seawall() {
    let interop = Interop::from_env();
    let old = DemoUpstream::start(false, &[]).await;
    let seawall = Seawall::start(&config_yaml(&[Upstream::sse("old", &old.sse_url())], "")).await;
    let root = seawall.url.trim_end_matches("/mcp").to_owned();
    let script = interop.path("python/sse_client_test.py");
    for (url, upstream, mode) in [
        (format!("{root}/sse"), "old", "auto"),
        (format!("{root}/sse"), "old", "legacy"),
        (format!("{root}/mcp/old/sse"), "", "auto"),
    ] {
        let argv: Vec<OsString> = vec![
            script.clone().into(),
            url.clone().into(),
            "--upstream".into(),
            upstream.into(),
            "--mode".into(),
            mode.into(),
        ];
        let what = format!("python sse client {url} ({mode})");
        run_script(&what, interop.python_command(argv), SCRIPT_TIMEOUT)
            .await
            .assert_success(&format!("{what} (tests/interop/python/sse_client_test.py)"));
    }
}

/// seawall in front of a server on the Python SDK's HTTP+SSE transport (`py`): the
/// TypeScript SDK over HTTP+SSE (a 2024-11-05 client in front of a 2024-11-05 server)
/// and over Streamable HTTP, each on the aggregate and the single-upstream endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_clients_through_seawall_in_front_of_the_python_sdk_sse_server() {
    let interop = Interop::from_env();
    let py = PythonSseServer::start(&interop).await;
    let seawall = Seawall::start(&config_yaml(&[Upstream::sse("py", &py.url)], "")).await;
    let root = seawall.url.trim_end_matches("/mcp").to_owned();

    ts_client(&interop, "ts sse client /sse", &format!("{root}/sse"), &["--upstream", "py"]).await;
    ts_client(&interop, "ts sse client /mcp/py/sse", &format!("{root}/mcp/py/sse"), &["--upstream", ""]).await;
    let streamable = ["--transport", "streamable"];
    ts_client(&interop, "ts streamable client /mcp", &seawall.url, &[&streamable[..], &["--upstream", "py"]].concat())
        .await;
    ts_client(
        &interop,
        "ts streamable client /mcp/py",
        &seawall.upstream_url("py"),
        &[&streamable[..], &["--upstream", ""]].concat(),
    )
    .await;
}

/// The same Python SDK HTTP+SSE server configured as a plain HTTP upstream (`protocol:
/// auto`): seawall is refused `server/discover` and `initialize` at its URL, falls back
/// to HTTP+SSE, says so once in its log, and serves it; a second session goes straight
/// to HTTP+SSE.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auto_http_upstream_that_speaks_only_http_sse_is_detected_and_served() {
    let interop = Interop::from_env();
    let py = PythonSseServer::start(&interop).await;
    let mut seawall = Seawall::start(&config_yaml(&[Upstream::http("py", &py.url)], "")).await;
    let streamable = ["--transport", "streamable"];
    ts_client(
        &interop,
        "ts streamable client /mcp/py",
        &seawall.upstream_url("py"),
        &[&streamable[..], &["--upstream", ""]].concat(),
    )
    .await;
    seawall
        .proc
        .wait_for_line(Stream::Stderr, Duration::from_secs(10), "the era detected", |line| {
            (line.contains("upstream protocol era") && line.contains("HTTP+SSE only")).then_some(())
        })
        .await;
    ts_client(&interop, "ts streamable client /mcp", &seawall.url, &[&streamable[..], &["--upstream", "py"]].concat())
        .await;
    let detections = seawall.proc.output().matches("upstream protocol era").count();
    assert_eq!(detections, 1, "the era is found once and remembered:\n{}", seawall.proc.output());
}
