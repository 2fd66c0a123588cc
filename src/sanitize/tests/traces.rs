//! Stack traces lose their frames and keep their headlines.

use super::big;
use crate::sanitize::scrub;

#[test]
fn python_trace_is_reduced_to_its_headline() {
    let trace = "Traceback (most recent call last):\n  \
        File \"/srv/app/.venv/lib/python3.12/site-packages/httpx/_transports/default.py\", line 69, in map_httpcore_exceptions\n    \
        yield\n  \
        File \"/srv/app/server.py\", line 42, in call_tool\n    \
        return await client.get(url)\n           ^^^^^^^^^^^^^^^^^^^^^\n\
        ConnectionRefusedError: [Errno 111] Connection refused to http://10.0.3.7:5432/db\n";
    assert_eq!(big(trace), "ConnectionRefusedError: [Errno 111] Connection refused to [url]");
}

#[test]
fn chained_python_traces_keep_each_exception_line() {
    let trace = "Traceback (most recent call last):\n  \
        File \"/app/db.py\", line 10, in connect\n    sock.connect(addr)\n\
        ConnectionRefusedError: [Errno 111] Connection refused\n\n\
        During handling of the above exception, another exception occurred:\n\n\
        Traceback (most recent call last):\n  \
        File \"/app/tool.py\", line 5, in run\n    db.connect()\n\
        RuntimeError: database unavailable";
    assert_eq!(
        big(trace),
        "ConnectionRefusedError: [Errno 111] Connection refused\\x0aRuntimeError: database unavailable"
    );
}

#[test]
fn python_trace_header_never_survives() {
    // What a handler or logger put in front of the header stays; the header goes.
    let prefixed = "Error executing tool fetch: Traceback (most recent call last):\n  \
        File \"/srv/app/server.py\", line 42, in call_tool\n    \
        return await client.get(url)\n\
        ConnectionRefusedError: [Errno 111] Connection refused http://10.0.3.7:5432/db";
    assert_eq!(
        big(prefixed),
        "Error executing tool fetch:\\x0aConnectionRefusedError: [Errno 111] Connection refused [url]"
    );
    let chained = "ERROR:root:Traceback (most recent call last):\n  \
        File \"/app/db.py\", line 10, in connect\n\
        ConnectionRefusedError: [Errno 111] Connection refused\n\n\
        During handling of the above exception, another exception occurred:\n\n\
        Traceback (most recent call last):\n  \
        File \"/app/tool.py\", line 5, in run\n\
        RuntimeError: database unavailable";
    assert_eq!(
        big(chained),
        "ERROR:root:\\x0aConnectionRefusedError: [Errno 111] Connection refused\\x0aRuntimeError: database unavailable"
    );
    assert!(!scrub(chained).contains("Traceback"));
    // A line of headers, each judged by what precedes it, does not exhaust the stack.
    let headers = |n| format!("boom {}", "Traceback (most recent call last):".repeat(n));
    assert_eq!(scrub(&headers(30_000)), "boom");
    assert_eq!(big(&headers(1_500)), "boom");
}

#[test]
fn java_trace_is_reduced_to_its_headline() {
    let trace = "java.lang.IllegalStateException: tool 'export' failed\n\
        \tat com.acme.tools.Export.run(Export.java:87)\n\
        \tat com.acme.mcp.Dispatcher.lambda$call$0(Dispatcher.java:41)\n\
        \tat java.base/java.util.concurrent.ThreadPoolExecutor.runWorker(ThreadPoolExecutor.java:1144)\n\
        \tat java.base/java.lang.Thread.run(Native Method)\n\
        Caused by: java.net.ConnectException: Connection refused: db.prod.internal/10.1.2.3:5432\n\
        \tat java.base/sun.nio.ch.Net.connect0(Native Method)\n\
        \t... 12 more\n";
    assert_eq!(big(trace), "java.lang.IllegalStateException: tool 'export' failed");
}

#[test]
fn javascript_trace_is_reduced_to_its_headline() {
    let trace = "TypeError: Cannot read properties of undefined (reading 'id')\n    \
        at getUser (/home/deploy/app/src/users.js:12:19)\n    \
        at async Server.callTool (file:///home/deploy/app/node_modules/@modelcontextprotocol/sdk/dist/server.js:88:7)\n    \
        at async Promise.all (index 0)\n    \
        at /home/deploy/app/src/index.js:5:3\n    \
        at node:internal/process/task_queues:95:5";
    assert_eq!(big(trace), "TypeError: Cannot read properties of undefined (reading 'id')");
}

#[test]
fn rust_panic_keeps_the_message_only() {
    let panic = "thread 'tokio-runtime-worker' panicked at src/tools/fetch.rs:41:18:\n\
        called `Result::unwrap()` on an `Err` value: Timeout\n\
        stack backtrace:\n   \
        0: rust_begin_unwind\n             \
        at /rustc/90b35a6239c3d8bdabc530a6a0816f7ff89a0aaf/library/std/src/panicking.rs:665:5\n   \
        1: core::result::unwrap_failed\n   \
        2: server::tools::fetch\n\
        note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.";
    assert_eq!(big(panic), "called `Result::unwrap()` on an `Err` value: Timeout");
    let old = "thread 'main' panicked at 'index out of bounds', /home/u/src/main.rs:2:5\n\
        note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";
    assert_eq!(big(old), "index out of bounds");
}

#[test]
fn go_panic_keeps_the_panic_line() {
    let panic = "panic: runtime error: index out of range [5] with length 3\n\n\
        goroutine 1 [running]:\n\
        main.(*Server).handle(0xc0000a6000, {0x4b7b8e, 0x3})\n\
        \t/home/ci/go/src/acme/server/main.go:27 +0x1d\n\
        main.main()\n\
        \t/home/ci/go/src/acme/server/main.go:12 +0x25\n\
        created by net/http.(*Server).Serve in goroutine 1\n\
        \t/usr/local/go/src/net/http/server.go:3285 +0x4b4\n\
        exit status 2";
    assert_eq!(big(panic), "panic: runtime error: index out of range [5] with length 3\\x0aexit status 2");
}

#[test]
fn a_trace_without_headline_becomes_a_marker() {
    let frames = "  File \"/app/x.py\", line 1, in <module>\n    main()\n";
    assert_eq!(big(frames), "[trace]");
    let java = "\tat com.x.Y.m(Y.java:12)\n\tat com.x.Z.n(Z.java:3)";
    assert_eq!(big(java), "[trace]");
}

#[test]
fn prose_that_resembles_a_frame_survives() {
    let s = "at least one of 'query' or 'id' is required (see docs)";
    assert_eq!(big(s), s);
    let s = "Error: retry at 5 s (attempt 2)";
    assert_eq!(big(s), s);
}
