//! Distributed tracing through the real binary, exporting to an OTLP receiver in the
//! test (`support/otlp.rs`): the spans of a proxied call and their parents, retries as
//! sibling attempts, the trace context each upstream receives (HTTP headers, stdio
//! `_meta`), every client front, the `OTEL_*` variables, gRPC export, the flush at
//! shutdown, dropped spans counted, and nothing at all when tracing is off.

use std::path::Path;
use std::time::Duration;

use crate::support::mcp_client::Client;
use crate::support::otlp::{Behaviour, Collector, Received};
use crate::support::{DemoUpstream, Seawall, StdioSeawall, TestDir, seawall_bin};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(20);
const SERVER: i32 = 2;
const CLIENT: i32 = 3;
const ERROR: i32 = 2;

/// The client's trace: its id and the id of the client's own span.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT: &str = "00f067aa0ba902b7";

fn traceparent(trace: &str, span: &str) -> String {
    format!("00-{trace}-{span}-01")
}

/// A config with an HTTP upstream `remote` (its `flaky` tool marked idempotent) and a
/// shared stdio upstream `local` recording to `stdio_record`; `extra` is appended.
fn config(demo_url: &str, stdio_record: &Path, access_log: &Path, extra: &str) -> String {
    let q = |s: &str| serde_json::to_string(s).expect("string");
    let bin = seawall_bin();
    format!(
        "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\naccess_log: {{ path: {} }}\n\
         upstreams:\n  - name: remote\n    url: {}\n    tools: {{ flaky: {{ idempotent: true }} }}\n\
         \x20 - name: local\n    command: {}\n    args: [demo-upstream, --stdio, --record, {}]\n{extra}",
        q(&access_log.to_string_lossy()),
        q(demo_url),
        q(&bin.to_string_lossy()),
        q(&stdio_record.to_string_lossy()),
    )
}

fn tracing_on(collector: &Collector, extra: &str) -> String {
    format!("tracing:\n  enabled: true\n  endpoint: {}\n  batch_delay: 20ms\n{extra}", collector.url)
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect()
}

/// Waits for a line of a JSON-lines file that `pick` accepts.
async fn wait_for_line(path: &Path, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(found) = lines(path).into_iter().find(&pick) {
            return found;
        }
        assert!(tokio::time::Instant::now() < deadline, "no {what} in {}: {:#?}", path.display(), lines(path));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the gateway has logged `text`.
async fn wait_for_log(gw: &Seawall, text: &str) {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !gw.proc.output().contains(text) {
        assert!(tokio::time::Instant::now() < deadline, "no {text:?} in the log:\n{}", gw.proc.output());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn named<'a>(spans: &'a [Received], name: &str, trace: &str) -> Vec<&'a Received> {
    spans.iter().filter(|s| s.name == name && s.trace_id == trace).collect()
}

fn call(id: u64, tool: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_call_is_one_trace_with_sibling_attempts_and_the_upstream_gets_its_context() {
    let collector = Collector::http().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let dir = TestDir::new("tracing");
    let (stdio_record, access) = (dir.join("stdio.jsonl"), dir.join("access.jsonl"));
    let extra = tracing_on(&collector, "  service_name: seawall-under-test\n");
    let mut gw = Seawall::start(&config(&demo.url, &stdio_record, &access, &extra)).await;
    let client = Client::connect(&gw.url, json!({})).await;

    // The client's trace in its HTTP headers; the first attempt gets a 503, the second works.
    let parent = traceparent(TRACE, PARENT);
    let args = json!({"key": "traced", "fail_first": 1, "mode": "http_503"});
    let reply = client
        .post_raw(call(7, "remote__flaky", args).to_string(), &[("traceparent", &parent), ("tracestate", "client=1")])
        .await;
    assert_eq!(reply.result()["content"][0]["text"], "ok after 1 failures", "{}", reply.raw);

    let (request, attempts) = collector
        .wait_for("the call's span and its two attempts", WAIT, |spans| {
            let request = named(spans, "tools/call remote__flaky", TRACE).pop()?.clone();
            let mut attempts: Vec<Received> = named(spans, "tools/call flaky", TRACE).into_iter().cloned().collect();
            attempts.sort_by_key(|a| a.attr("seawall.attempt"));
            (attempts.len() == 2).then_some((request, attempts))
        })
        .await;
    // The request continues the client's trace, as the server of the MCP conventions.
    assert_eq!((request.kind, request.parent_span_id.as_str()), (SERVER, PARENT), "{request:#?}");
    assert_eq!(request.service, "seawall-under-test");
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "remote__flaky"),
        ("gen_ai.operation.name", "execute_tool"),
        ("jsonrpc.request.id", "7"),
        ("mcp.protocol.version", "2025-11-25"),
        ("seawall.outcome", "ok"),
    ] {
        assert_eq!(request.attr(key), value, "{key} of {request:#?}");
    }
    // Its session is seawall's own key, never the secret Mcp-Session-Id.
    let session = request.attr("mcp.session.id");
    assert!(session.parse::<u64>().is_ok(), "{session}");
    assert_ne!(Some(session.clone()), client.session);

    // Two sibling attempts under it, numbered, the first failed with its status.
    let (first, second) = (&attempts[0], &attempts[1]);
    for (n, attempt) in [(1, first), (2, second)] {
        assert_eq!(attempt.parent_span_id, request.span_id, "attempt {n} is a child of the request");
        assert_eq!(attempt.kind, CLIENT);
        assert_eq!(attempt.attributes.get("seawall.attempt"), Some(&json!(n)), "an integer");
        assert_eq!(attempt.attr("seawall.upstream"), "remote");
        assert_eq!(attempt.attr("seawall.breaker"), "closed");
        assert_eq!(attempt.attr("gen_ai.tool.name"), "flaky");
        assert_eq!(attempt.attr("network.transport"), "tcp");
    }
    assert_eq!((first.status, first.attr("error.type").as_str()), (ERROR, "503"), "{first:#?}");
    assert_eq!(first.attr("seawall.outcome"), "upstream_error");
    assert_eq!(first.attr("seawall.retry_reason"), "");
    assert_eq!(
        (second.attr("seawall.retry_reason").as_str(), second.attr("seawall.outcome").as_str()),
        ("http_status", "ok")
    );
    assert_ne!(second.status, ERROR);

    // Each attempt's own context reached the HTTP upstream in its headers.
    let sent: Vec<(Value, Value)> = demo
        .recorded()
        .into_iter()
        .filter(|e| e["event"] == "http_headers" && !e["traceparent"].is_null())
        .map(|e| (e["traceparent"].clone(), e["tracestate"].clone()))
        .collect();
    for attempt in [first, second] {
        let expected = (json!(traceparent(TRACE, &attempt.span_id)), json!("client=1"));
        assert!(sent.contains(&expected), "{expected:?} not among {sent:#?}");
    }

    // The access log names the request's span and the client's trace.
    let line = wait_for_line(&access, "the call's access line", |l| l["id"] == 7).await;
    assert_eq!((line["trace_id"].as_str(), line["span_id"].as_str()), (Some(TRACE), Some(request.span_id.as_str())));
    assert_eq!(line["client_trace_id"], TRACE);
    assert_eq!(line["session"].to_string(), session);

    // The stdio upstream: the client's `_meta` context is the parent (its header one only
    // linked), and the process gets the attempt's context in `_meta`, not the client's.
    let (meta_trace, meta_parent) = ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let mut body = call(8, "local__echo", json!({"message": "hi"}));
    body["params"]["_meta"] = json!({"traceparent": traceparent(meta_trace, meta_parent), "tracestate": "vendor=1"});
    let reply = client.post_raw(body.to_string(), &[("traceparent", &parent)]).await;
    assert_eq!(reply.result()["content"][0]["text"], "hi", "{}", reply.raw);
    let (request, attempt) = collector
        .wait_for("the stdio call's spans", WAIT, |spans| {
            let request = named(spans, "tools/call local__echo", meta_trace).pop()?.clone();
            let attempt = named(spans, "tools/call echo", meta_trace).pop()?.clone();
            Some((request, attempt))
        })
        .await;
    assert_eq!(request.parent_span_id, meta_parent);
    assert_eq!(request.links, [(TRACE.to_owned(), PARENT.to_owned())], "the header's context is linked");
    assert_eq!(
        (attempt.parent_span_id.as_str(), attempt.attr("network.transport").as_str()),
        (request.span_id.as_str(), "pipe")
    );
    let received = wait_for_line(&stdio_record, "the stdio upstream's tools/call", |e| {
        e["event"] == "request" && e["method"] == "tools/call"
    })
    .await;
    assert_eq!(received["traceparent"], traceparent(meta_trace, &attempt.span_id), "{received}");
    assert_eq!(received["tracestate"], "vendor=1");

    // A list fanned out to both upstreams: one span for the fan-out, an attempt per upstream.
    let list_trace = "11111111111111111111111111111111";
    let list = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {}});
    let reply = client.post_raw(list.to_string(), &[("traceparent", &traceparent(list_trace, PARENT))]).await;
    assert!(reply.result()["tools"].as_array().is_some_and(|t| t.len() > 2));
    let (fan_out, listed) = collector
        .wait_for("the fan-out and its attempts", WAIT, |spans| {
            let request = named(spans, "tools/list", list_trace).into_iter().find(|s| s.kind == SERVER)?.clone();
            let fan_out = named(spans, "tools/list fan-out", list_trace).pop()?.clone();
            let attempts: Vec<String> = named(spans, "tools/list", list_trace)
                .into_iter()
                .filter(|s| s.kind == CLIENT && s.parent_span_id == fan_out.span_id)
                .map(|s| s.attr("seawall.upstream"))
                .collect();
            (fan_out.parent_span_id == request.span_id && attempts.len() == 2).then_some((fan_out, attempts))
        })
        .await;
    assert_eq!((fan_out.attr("seawall.upstreams").as_str(), fan_out.attr("seawall.answered").as_str()), ("2", "2"));
    assert!(listed.contains(&"remote".to_owned()) && listed.contains(&"local".to_owned()), "{listed:?}");

    // The client's initialize, the upstream session it opened as its child, and the shared
    // process's own handshake (a trace of its own).
    let spans = collector.spans();
    let initialize = spans.iter().find(|s| s.name == "initialize" && s.kind == SERVER).expect("initialize span");
    assert!(!initialize.attr("mcp.session.id").is_empty() && initialize.attr("mcp.protocol.version") == "2025-11-25");
    let opened = spans
        .iter()
        .find(|s| s.name == "initialize" && s.kind == CLIENT && s.attr("seawall.upstream") == "remote")
        .expect("the upstream session's span");
    assert_eq!(
        (opened.parent_span_id.as_str(), opened.trace_id.as_str()),
        (initialize.span_id.as_str(), initialize.trace_id.as_str())
    );
    let process = spans
        .iter()
        .find(|s| s.name == "initialize" && s.attr("seawall.upstream") == "local")
        .expect("the shared process's handshake span");
    assert_eq!((process.parent_span_id.as_str(), process.attr("network.transport").as_str()), ("", "pipe"));
    gw.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn off_nothing_is_exported_and_the_clients_context_goes_through_unchanged() {
    let collector = Collector::http().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let dir = TestDir::new("tracing-off");
    let (stdio_record, access) = (dir.join("stdio.jsonl"), dir.join("access.jsonl"));
    // The file's `enabled: false` wins over the endpoint variable.
    let extra = format!("tracing:\n  enabled: false\n  endpoint: {}\n", collector.url);
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str())];
    let mut gw = Seawall::start_with(&config(&demo.url, &stdio_record, &access, &extra), &[], &env).await;
    wait_for_log(&gw, "tracing off").await;
    let client = Client::connect(&gw.url, json!({})).await;
    let parent = traceparent(TRACE, PARENT);

    // To the HTTP upstream, the header as the client sent it.
    let reply = client
        .post_raw(
            call(1, "remote__echo", json!({"message": "a"})).to_string(),
            &[("traceparent", &parent), ("tracestate", "c=1")],
        )
        .await;
    assert_eq!(reply.result()["content"][0]["text"], "a");
    let sent = demo.recorded().into_iter().rev().find(|e| e["event"] == "http_headers" && !e["traceparent"].is_null());
    assert_eq!(sent.map(|e| (e["traceparent"].clone(), e["tracestate"].clone())), Some((json!(parent), json!("c=1"))));

    // `_meta` goes to the stdio upstream as it was; a context sent only as a header is
    // written into `_meta` for it (a process has no headers).
    let meta_parent = traceparent("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331");
    let mut body = call(2, "local__echo", json!({"message": "b"}));
    body["params"]["_meta"] = json!({"traceparent": meta_parent, "tracestate": "vendor=1", "other": true});
    let reply = client.post_raw(body.to_string(), &[("traceparent", &parent)]).await;
    assert_eq!(reply.result()["content"][0]["text"], "b");
    let reply =
        client.post_raw(call(3, "local__echo", json!({"message": "c"})).to_string(), &[("traceparent", &parent)]).await;
    assert_eq!(reply.result()["content"][0]["text"], "c");
    let received = |message: &'static str| {
        let path = stdio_record.clone();
        async move {
            let call = wait_for_line(&path, "the stdio call", |e| {
                e["event"] == "call" && e["arguments"]["message"] == message
            })
            .await;
            let id = call["id"].clone();
            wait_for_line(&path, "its request", |e| e["event"] == "request" && e["id"] == id).await
        }
    };
    let with_meta = received("b").await;
    assert_eq!(
        (with_meta["traceparent"].as_str(), with_meta["tracestate"].as_str()),
        (Some(meta_parent.as_str()), Some("vendor=1"))
    );
    assert_eq!(received("c").await["traceparent"], parent);

    // The access log names the client's trace, and no span of seawall's.
    let line = wait_for_line(&access, "the first call's line", |l| l["id"] == 1).await;
    assert_eq!((line["client_trace_id"].as_str(), line.get("trace_id")), (Some(TRACE), None));

    // Stopping would flush an exporter; there is none, so nothing ever arrives.
    gw.stop(Duration::from_secs(10)).await;
    assert_eq!(collector.exports(), 0, "{:#?}", collector.spans());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_otel_variables_alone_switch_it_on_and_shutdown_exports_the_last_spans() {
    let collector = Collector::http().await;
    let demo = DemoUpstream::start(false, &[]).await;
    let dir = TestDir::new("tracing-env");
    let (stdio_record, access) = (dir.join("stdio.jsonl"), dir.join("access.jsonl"));
    // No `enabled`: the endpoint variable decides. A batch would wait an hour: only the
    // flush at shutdown sends it. The file's header wins over the variable's.
    let extra = "tracing:\n  batch_delay: 1h\n  headers: { x-collector-key: from-file }\n";
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.url.as_str()),
        ("OTEL_SERVICE_NAME", "seawall-from-env"),
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-collector-key=from-env,x-tenant=acme"),
    ];
    let mut gw = Seawall::start_with(&config(&demo.url, &stdio_record, &access, extra), &[], &env).await;
    let client = Client::connect(&gw.url, json!({})).await;
    let reply = client
        .post_raw(
            call(1, "remote__echo", json!({"message": "x"})).to_string(),
            &[("traceparent", &traceparent(TRACE, PARENT))],
        )
        .await;
    assert_eq!(reply.result()["content"][0]["text"], "x");
    assert_eq!(collector.exports(), 0, "nothing is sent before the batch is due");

    let status = gw.stop(Duration::from_secs(10)).await;
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    let spans = collector.spans();
    let request = named(&spans, "tools/call remote__echo", TRACE).pop().unwrap_or_else(|| panic!("{spans:#?}")).clone();
    assert_eq!(request.service, "seawall-from-env");
    assert!(named(&spans, "tools/call echo", TRACE).iter().any(|a| a.parent_span_id == request.span_id));
    assert_eq!(collector.header("x-collector-key").as_deref(), Some("from-file"));
    assert_eq!(collector.header("x-tenant").as_deref(), Some("acme"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_export_works() {
    let collector = Collector::grpc().await;
    let demo = DemoUpstream::start(false, &[]).await;
    let dir = TestDir::new("tracing-grpc");
    let (stdio_record, access) = (dir.join("stdio.jsonl"), dir.join("access.jsonl"));
    let extra = tracing_on(&collector, "  protocol: grpc\n  headers: { x-collector-key: secret }\n");
    let mut gw = Seawall::start(&config(&demo.url, &stdio_record, &access, &extra)).await;
    let client = Client::connect(&gw.url, json!({})).await;
    let reply = client
        .post_raw(
            call(1, "remote__echo", json!({"message": "g"})).to_string(),
            &[("traceparent", &traceparent(TRACE, PARENT))],
        )
        .await;
    assert_eq!(reply.result()["content"][0]["text"], "g");
    let request = collector
        .wait_for("the call's span over gRPC", WAIT, |spans| {
            named(spans, "tools/call remote__echo", TRACE).pop().cloned()
        })
        .await;
    assert_eq!((request.parent_span_id.as_str(), request.service.as_str()), (PARENT, "seawall"));
    assert_eq!(collector.header("x-collector-key").as_deref(), Some("secret"));
    assert_eq!(collector.header("content-type").as_deref(), Some("application/grpc"));
    gw.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_front_continues_the_clients_trace() {
    let collector = Collector::http().await;
    let demo = DemoUpstream::start(false, &[]).await;
    let dir = TestDir::new("tracing-fronts");
    let (stdio_record, access) = (dir.join("stdio.jsonl"), dir.join("access.jsonl"));
    let yaml = config(&demo.url, &stdio_record, &access, &tracing_on(&collector, ""));
    let mut gw = Seawall::start(&yaml).await;
    let front_trace = |n: u8| format!("{n:032x}");

    // Modern (2026-07-28): a self-contained POST, its context in the header.
    let modern = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": "remote__echo", "arguments": {"message": "m"},
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "seawall-tests", "version": "1"},
    }}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "remote__echo"),
        ("traceparent", &traceparent(&front_trace(1), PARENT)),
    ];
    let reply = Client::new(&gw.url).post_raw(modern.to_string(), &headers).await;
    assert_eq!(reply.result()["content"][0]["text"], "m", "{}", reply.raw);
    // server/discover, answered by seawall itself, in a span of its own.
    let discover =
        json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": modern["params"]["_meta"]}});
    let headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "server/discover"),
        ("traceparent", &traceparent(&front_trace(2), PARENT)),
    ];
    let reply = Client::new(&gw.url).post_raw(discover.to_string(), &headers).await;
    assert!(reply.result()["supportedVersions"].is_array(), "{}", reply.raw);

    // HTTP+SSE (2024-11-05): the context of the POST that carried the request.
    let mut sse = crate::support::sse_client::SseClient::open(&gw.url.replace("/mcp", "/sse")).await;
    sse.initialize().await;
    let post = sse
        .http
        .post(&sse.post_url)
        .header("content-type", "application/json")
        .header("traceparent", traceparent(&front_trace(3), PARENT))
        .body(call(3, "remote__echo", json!({"message": "s"})).to_string())
        .send()
        .await
        .expect("POST");
    assert_eq!(post.status().as_u16(), 202);
    assert_eq!(sse.response(&json!(3)).await["result"]["content"][0]["text"], "s");

    // `seawall stdio`: the context in `_meta`, the only place a line has for it.
    let mut stdio = StdioSeawall::start(&yaml, &[], &[]);
    stdio.initialize("2025-11-25").await;
    let mut line = call(4, "local__echo", json!({"message": "p"}));
    line["params"]["_meta"] = json!({"traceparent": traceparent(&front_trace(4), PARENT)});
    stdio.send(line).await;
    let (answer, _) = stdio.response(&json!(4)).await;
    assert_eq!(answer["result"]["content"][0]["text"], "p", "{answer}");

    for (n, name) in [
        (1, "tools/call remote__echo"),
        (2, "server/discover"),
        (3, "tools/call remote__echo"),
        (4, "tools/call local__echo"),
    ] {
        let trace = front_trace(n);
        let span = collector
            .wait_for(&format!("{name} of trace {trace}"), WAIT, |spans| {
                spans.iter().find(|s| s.trace_id == trace && s.name == name && s.kind == SERVER).cloned()
            })
            .await;
        assert_eq!(span.parent_span_id, PARENT, "{span:#?}");
    }
    stdio.close_stdin();
    stdio.wait_exit(WAIT).await;
    gw.stop(Duration::from_secs(10)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kind_of_http_upstream_link_gets_the_attempts_context_in_headers() {
    let collector = Collector::http().await;
    let demo = DemoUpstream::start(true, &[]).await;
    let q = |s: &str| serde_json::to_string(s).expect("string");
    let yaml = format!(
        "listen: 127.0.0.1:0\nadmin_listen: 127.0.0.1:0\n{}upstreams:\n\
         \x20 - {{ name: legacy, url: {url}, protocol: legacy }}\n\
         \x20 - {{ name: modern, url: {url}, protocol: modern }}\n\
         \x20 - {{ name: old, url: {sse}, transport: sse }}\n",
        tracing_on(&collector, ""),
        url = q(&demo.url),
        sse = q(&demo.sse_url()),
    );
    let mut gw = Seawall::start(&yaml).await;
    let client = Client::connect(&gw.url, json!({})).await;
    for (n, upstream) in [(1u8, "legacy"), (2, "modern"), (3, "old")] {
        let trace = format!("{n:032x}");
        let body = call(u64::from(n), &format!("{upstream}__echo"), json!({"message": upstream}));
        let reply = client.post_raw(body.to_string(), &[("traceparent", &traceparent(&trace, PARENT))]).await;
        assert_eq!(reply.result()["content"][0]["text"], upstream, "{}", reply.raw);
        let attempt = collector
            .wait_for(&format!("the attempt to {upstream}"), WAIT, |spans| {
                named(spans, "tools/call echo", &trace).pop().cloned()
            })
            .await;
        assert_eq!(attempt.attr("seawall.upstream"), upstream);
        let expected = json!(traceparent(&trace, &attempt.span_id));
        let sent: Vec<Value> = demo
            .recorded()
            .into_iter()
            .filter(|e| e["event"] == "http_headers")
            .map(|e| e["traceparent"].clone())
            .collect();
        assert!(sent.contains(&expected), "{upstream}: {expected} not among {sent:?}");
    }
    gw.stop(Duration::from_secs(10)).await;
}

/// The value of a counter on the admin listener's `/metrics`, by its label text.
async fn counter(admin_url: &str, labels: &str) -> f64 {
    let text = reqwest::get(format!("{admin_url}/metrics")).await.expect("GET /metrics").text().await.expect("body");
    let series = format!("seawall_trace_spans_dropped_total{{{labels}}}");
    text.lines().find_map(|l| l.strip_prefix(&series)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
}

async fn wait_for_counter(admin_url: &str, labels: &str) -> f64 {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let n = counter(admin_url, labels).await;
        if n > 0.0 {
            return n;
        }
        assert!(tokio::time::Instant::now() < deadline, "no {labels} drops counted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spans_dropped_at_a_full_queue_or_a_failing_collector_are_counted() {
    let demo = DemoUpstream::start(false, &[]).await;
    let dir = TestDir::new("tracing-drops");
    let (stdio_record, access) = (dir.join("stdio.jsonl"), dir.join("access.jsonl"));
    // A collector that never answers: one span is out being exported, one waits, the
    // rest find the queue full. The requests themselves are not held up.
    let stalled = Collector::start(false, Behaviour::Stall).await;
    let small = "  queue_size: 1\n  max_batch_size: 1\n  export_timeout: 60s\n  shutdown_timeout: 1s\n";
    let mut gw = Seawall::start(&config(&demo.url, &stdio_record, &access, &tracing_on(&stalled, small))).await;
    let client = Client::connect(&gw.url, json!({})).await;
    let started = std::time::Instant::now();
    for id in 1..=5 {
        assert_eq!(client.call_tool(id, "remote__echo", json!({"message": "q"})).await["content"][0]["text"], "q");
    }
    assert!(started.elapsed() < Duration::from_secs(10), "export never holds a request up");
    assert!(wait_for_counter(&gw.admin_url, "reason=\"queue_full\"").await >= 3.0);
    gw.stop(Duration::from_secs(10)).await;

    // A collector that refuses: each batch's spans are counted as export_failed.
    let refusing = Collector::start(false, Behaviour::Refuse).await;
    let mut gw = Seawall::start(&config(&demo.url, &stdio_record, &access, &tracing_on(&refusing, ""))).await;
    let client = Client::connect(&gw.url, json!({})).await;
    client.call_tool(1, "remote__echo", json!({"message": "r"})).await;
    assert!(wait_for_counter(&gw.admin_url, "reason=\"export_failed\"").await >= 1.0);
    assert!(refusing.exports() >= 1);
    wait_for_log(&gw, "trace export failed").await;
    gw.stop(Duration::from_secs(10)).await;
}
