use proptest::prelude::*;
use serde_json::json;

use super::*;

/// Sanitises with a cap large enough that nothing is cut.
fn big(text: &str) -> String {
    sanitize(text, 4096)
}

fn assert_clean(out: &str, cap: usize) {
    assert!(out.len() <= cap, "{} > {cap}: {out:?}", out.len());
    assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)), "not printable: {out:?}");
    assert_eq!(sanitize(out, cap), out, "not idempotent");
}

// --- escaping and capping --------------------------------------------------------------

#[test]
fn printable_ascii_passes_unchanged() {
    let s = "tool 'search' failed: quota exceeded (try again in 5 s) {a: [1, 2]} ~!@#$%^&*_+|";
    assert_eq!(big(s), s);
}

#[test]
fn bytes_outside_printable_ascii_become_hex_escapes() {
    assert_eq!(big("café"), "caf\\xc3\\xa9");
    assert_eq!(big("a\nb\tc\rd"), "a\\x0ab\\x09c\\x0dd");
    assert_eq!(big("bell\u{7}del\u{7f}nul\0"), "bell\\x07del\\x7fnul\\x00");
    assert_eq!(big("x\u{1b}y"), "x\\x1by");
    assert_eq!(big("\u{1F600}"), "\\xf0\\x9f\\x98\\x80");
}

#[test]
fn surrounding_whitespace_is_trimmed() {
    assert_eq!(big("\n  error: boom \r\n"), "error: boom");
}

#[test]
fn complete_ansi_sequences_are_stripped() {
    assert_eq!(big("\u{1b}[1;31mError\u{1b}[0m: boom"), "Error: boom");
    assert_eq!(big("\u{1b}[?25lhidden\u{1b}[K"), "hidden");
    // OSC 8 hyperlink (the URL inside goes with it) and a window title.
    assert_eq!(big("see \u{1b}]8;;http://10.0.0.1/x\u{1b}\\docs\u{1b}]8;;\u{1b}\\ now"), "see docs now");
    assert_eq!(big("\u{1b}]0;title\u{7}text"), "text");
    // Incomplete sequences stay, visible and harmless.
    assert_eq!(big("a\u{1b}[31"), "a\\x1b[31");
    assert_eq!(big("a\u{1b}]0;never ends"), "a\\x1b]0;never ends");
}

#[test]
fn cap_counts_the_ellipsis() {
    let long = "a".repeat(100);
    let out = sanitize(&long, 10);
    assert_eq!(out, "aaaaaaa...");
    assert_eq!(sanitize(&"a".repeat(10), 10), "a".repeat(10));
    assert_eq!(sanitize(&"a".repeat(11), 10), "aaaaaaa...");
    assert_eq!(ident(&"t".repeat(200)).len(), IDENT_CAP);
    let out = text(&"word ".repeat(200));
    assert!(out.len() <= TEXT_CAP && out.ends_with("word ..."), "{out}");
    // A cut backs off to a space only when one is near.
    assert_eq!(sanitize(&format!("a {}", "b".repeat(100)), 16), "a ...");
    assert_eq!(sanitize(&format!("a {}", "b".repeat(100)), 40), format!("a {}...", "b".repeat(35)));
    // Nor does it leave half a marker.
    assert_eq!(sanitize("value password=hunter2", 22), "value ...");
}

#[test]
fn cap_never_cuts_inside_an_escape() {
    // Each é is two escapes of four bytes; a cap of 12 leaves 9 for content: two escapes.
    let out = sanitize("éééé", 12);
    assert_eq!(out, "\\xc3\\xa9...");
    for cap in 0..40 {
        let out = sanitize("é€\u{1F600}x\ny", cap);
        assert_clean(&out, cap);
        let body = out.trim_end_matches('.');
        let tail = body.rsplit("\\x").next().unwrap_or("");
        assert!(!body.contains("\\x") || tail.len() >= 2, "cut escape: {out:?}");
    }
}

#[test]
fn tiny_caps() {
    assert_eq!(sanitize("hello", 0), "");
    assert_eq!(sanitize("hello", 1), ".");
    assert_eq!(sanitize("hello", 2), "..");
    assert_eq!(sanitize("hello", 3), "...");
    assert_eq!(sanitize("hello", 4), "h...");
    assert_eq!(sanitize("", 10), "");
}

// --- stack traces ------------------------------------------------------------------------

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

// --- paths -------------------------------------------------------------------------------

#[test]
fn absolute_paths_are_redacted() {
    let cases = [
        ("open /home/alice/.ssh/id_rsa: permission denied", "open [path]: permission denied"),
        ("config /srv/app/config.yaml missing", "config [path] missing"),
        ("no such file: '/var/lib/app/db.sqlite'", "no such file: '[path]'"),
        ("read ~/.config/acme/credentials.json", "read [path]"),
        ("see ~deploy/app/logs", "see [path]"),
        ("cannot write /tmp", "cannot write [path]"),
        ("error at /srv/app/x.py:12", "error at [path]:12"),
        (r"C:\Users\bob\AppData\Local\acme\cfg.toml not found", "[path] not found"),
        (r"ran C:\Program Files\Acme Tools\bin\tool.exe today", "ran [path] today"),
        ("C:/Users/bob/x.txt", "[path]"),
        (r"share \\fileserver\finance\q3.xlsx is offline", "share [path] is offline"),
        ("path=/opt/acme/lib", "path=[path]"),
        ("/home/ünïcode/dir/file", "[path]"),
    ];
    for (input, expected) in cases {
        assert_eq!(big(input), expected, "{input}");
    }
}

#[test]
fn things_that_are_not_absolute_paths_stay() {
    for s in [
        "a / b",
        "use / as separator",
        "read/write and TCP/IP",
        "relative src/main.rs:2:5",
        "ratio 1/2",
        "// comment",
        "see ./config.yaml",
        "route /health",
    ] {
        assert_eq!(big(s), s, "{s}");
    }
}

#[test]
fn url_path_parts_are_part_of_the_url() {
    assert_eq!(big("GET https://api.example.com/home/alice/data failed"), "GET [url] failed");
    assert_eq!(big("file:///home/alice/notes.md"), "[url]");
}

// --- URLs and hosts ----------------------------------------------------------------------

#[test]
fn urls_are_redacted() {
    let cases = [
        ("fetch https://admin:hunter2@db.internal:8443/x?token=abc failed", "fetch [url] failed"),
        ("(see http://10.0.0.5/docs).", "(see [url])."),
        ("redis://cache:6379/0, retrying", "[url], retrying"),
        ("link <https://example.com/a_(b)>", "link <[url]>"),
        ("postgres://u:p@h/db", "[url]"),
        ("url: https://ex.com/a?b=c&d=e", "url: [url]"),
    ];
    for (input, expected) in cases {
        assert_eq!(big(input), expected, "{input}");
    }
}

#[test]
fn addresses_and_internal_hosts_are_redacted() {
    let cases = [
        ("dial tcp 10.0.3.7:5432: connect: connection refused", "dial tcp [host]: connect: connection refused"),
        ("from 192.168.1.20 via 10.0.0.0/8", "from [host] via [host]"),
        ("listen [fe80::1]:80 failed", "listen [host] failed"),
        ("peer fe80::1ff:fe23:4567:890a%eth0", "peer [host]%eth0"),
        ("addr 2001:db8:85a3::8a2e:370:7334 down", "addr [host] down"),
        ("mapped ::ffff:10.0.0.1 here", "mapped [host] here"),
        ("loopback ::1 and 1:2:3:4:5:6:7:8", "loopback [host] and [host]"),
        ("connect db.prod.internal:5432 refused", "connect [host] refused"),
        ("host redis.default.svc.cluster.local unreachable", "host [host] unreachable"),
        ("api.example.com:443 timed out", "[host] timed out"),
        ("dial redis:6379: refused", "dial [host]: refused"),
        ("localhost refused", "[host] refused"),
        ("http on localhost:8080", "http on [host]"),
        ("printer.corp is down", "[host] is down"),
        ("mail to ops@mx1.internal", "mail to ops@[host]"),
    ];
    for (input, expected) in cases {
        assert_eq!(big(input), expected, "{input}");
    }
}

#[test]
fn things_that_are_not_hosts_stay() {
    for s in [
        "syntax error at line:12",
        "at 12:30:45 UTC",
        "in app.py:42 and main.go:7",
        "index.js:10:5",
        "version 1.2.3",
        "std::io::Error and Vec::new",
        "ratio 3.14",
        "MAC aa:bb:cc:dd:ee:ff",
        "example.com is public",
        "see section 4.2.1",
        "2024-01-01T12:30:00Z",
    ] {
        assert_eq!(big(s), s, "{s}");
    }
}

// --- credentials -------------------------------------------------------------------------

#[test]
fn credentials_are_redacted() {
    let jwt =
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";
    let cases = [
        ("Authorization: Bearer abc.def-ghi_jkl123".to_owned(), "Authorization: [redacted]".to_owned()),
        ("sent Bearer 7f3c9a0b1e2d4c5f".to_owned(), "sent Bearer [redacted]".to_owned()),
        ("header Basic dXNlcjpwYXNzd29yZA== rejected".to_owned(), "header Basic [redacted] rejected".to_owned()),
        (format!("token {jwt} expired"), "token [redacted] expired".to_owned()),
        ("key sk-proj-4fT9xQ2mLp8RzW1vB6nK3jH0 invalid".to_owned(), "key [redacted] invalid".to_owned()),
        ("sk-live-0123456789abcdefghijkLMN".to_owned(), "[redacted]".to_owned()),
        ("stripe sk_test_4eC39HqLyjWDarjtT1zdp7dc".to_owned(), "stripe [redacted]".to_owned()),
        ("aws AKIAIOSFODNN7EXAMPLE denied".to_owned(), "aws [redacted] denied".to_owned()),
        ("gh ghp_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "gh [redacted]".to_owned()),
        ("gho_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "[redacted]".to_owned()),
        ("ghs_16C7e42F292c6912E7710c838347Ae178B4a".to_owned(), "[redacted]".to_owned()),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop".to_owned(), "[redacted]".to_owned()),
        ("slack xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx".to_owned(), "slack [redacted]".to_owned()),
        ("xoxp-123456789012-abcdefghij".to_owned(), "[redacted]".to_owned()),
        ("password=hunter2 rejected".to_owned(), "password=[redacted] rejected".to_owned()),
        ("DB_PASSWORD: s3cr3t!".to_owned(), "DB_PASSWORD: [redacted]".to_owned()),
        ("passwd:letmein".to_owned(), "passwd:[redacted]".to_owned()),
        ("client_secret=abc&x=1".to_owned(), "client_secret=[redacted]&x=1".to_owned()),
        ("api_key=AbC123 user=bob".to_owned(), "api_key=[redacted] user=bob".to_owned()),
        ("token=deadbeef".to_owned(), "token=[redacted]".to_owned()),
        ("x-api-key: k-123".to_owned(), "x-api-key: [redacted]".to_owned()),
        (
            "{\"password\": \"correct horse battery\", \"user\": \"bob\"}".to_owned(),
            "{\"password\": \"[redacted]\", \"user\": \"bob\"}".to_owned(),
        ),
        ("{'accessToken': 'a\\'b'}".to_owned(), "{'accessToken': '[redacted]'}".to_owned()),
        ("Cookie: session=abc; theme=dark".to_owned(), "Cookie: [redacted]".to_owned()),
        (
            "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".to_owned(),
            "sha [redacted]".to_owned(),
        ),
        ("aws secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY2".to_owned(), "aws secret [redacted]".to_owned()),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----\nafter".to_owned(),
            "[redacted]\\x0aafter".to_owned(),
        ),
    ];
    for (input, expected) in cases {
        assert_eq!(big(&input), expected, "{input}");
    }
}

#[test]
fn words_that_resemble_credentials_stay() {
    for s in [
        "Basic usage: call with a query",
        "the bearer of bad news",
        "max_tokens=100 exceeded",
        "tokens: 5",
        "unexpected token } at position 3",
        "some_long_snake_case_function_name_here_too",
        "getUserAccountSettingsForTenantAndRegion",
        "request 550e8400-e29b-41d4-a716-446655440000 failed",
        "sk-learn-is-a-python-library-for-ml",
        "password must be at least 8 characters",
        "std::io::Error",
    ] {
        assert_eq!(big(s), s, "{s}");
    }
}

// --- scrub, bounding, JSON -----------------------------------------------------------------

#[test]
fn scrub_keeps_layout_and_unicode() {
    let out = scrub("Überprüfung fehlgeschlagen:\n  token=abc\n  path /srv/x/y\n");
    assert_eq!(out, "Überprüfung fehlgeschlagen:\n  token=[redacted]\n  path [path]\n");
}

#[test]
fn a_megabyte_of_input_completes() {
    let adversarial = [
        "sk-".repeat(350_000),
        "eyJ".repeat(350_000),
        "eyJaaaaaaaaaa.".repeat(75_000),
        "[".repeat(1_000_000),
        ":".repeat(1_000_000),
        "/a".repeat(500_000),
        "\u{1b}]".repeat(500_000),
        "\u{1b}[".repeat(500_000),
        "http://".repeat(150_000),
        "password=".repeat(110_000),
        "a-".repeat(500_000),
        "1.".repeat(500_000),
        "at x (y:1)\n".repeat(90_000),
        "C:\\a b".repeat(160_000),
        "é".repeat(500_000),
    ];
    for input in &adversarial {
        let out = text(input);
        assert_clean(&out, TEXT_CAP);
        // The unbounded scrub is linear too.
        let _ = scrub(input);
    }
}

#[test]
fn a_secret_straddling_the_scan_limit_does_not_leak() {
    // Frames that reduce to nothing push the secret to the scan limit while leaving the
    // output short enough that a leftover piece of it would show.
    let secret = "ghp_16C7e42F292c6912E7710c838347Ae178B4a";
    let mut head = String::from("Traceback (most recent call last):\n");
    while head.len() < SCAN_LIMIT - 200 {
        head.push_str("  File \"/x.py\", line 1\n");
    }
    head.push_str("Error: boom ");
    for shift in 1..secret.len() {
        let mut input = head.clone();
        while input.len() < SCAN_LIMIT - shift {
            input.push(' ');
        }
        input.push_str(secret);
        input.push_str(" tail");
        let out = sanitize(&input, 4096);
        assert!(out.starts_with("Error: boom"), "{shift}: {out}");
        assert!(!out.contains("ghp_") && !out.contains("16C7"), "{shift}: {out}");
    }
}

#[test]
fn json_strings_and_keys_are_sanitised() {
    let value = json!({
        "path": "/home/alice/secret.txt",
        "password=hunter2": "x\ny",
        "nested": [{"url": "https://10.0.0.1/a"}, 1, true, null, 2.5],
    });
    assert_eq!(
        sanitize_json(&value, 64),
        json!({
            "path": "[path]",
            "password=[redacted]": "x\\x0ay",
            "nested": [{"url": "[url]"}, 1, true, null, 2.5],
        })
    );
}

#[test]
fn json_is_bounded() {
    let mut deep = json!("bottom");
    for _ in 0..20 {
        deep = json!([deep]);
    }
    let mut expected = json!("[truncated]");
    for _ in 0..8 {
        expected = json!([expected]);
    }
    assert_eq!(sanitize_json(&deep, 64), expected);

    let wide: Vec<u32> = (0..100).collect();
    let out = sanitize_json(&json!(wide), 64);
    let items = out.as_array().unwrap();
    assert_eq!(items.len(), 65);
    assert_eq!(items[64], json!("[36 more]"));

    let object: serde_json::Map<String, Value> = (0..100).map(|n| (format!("k{n}"), json!(n))).collect();
    let out = sanitize_json(&Value::Object(object), 64);
    assert_eq!(out.as_object().unwrap().len(), 65);
    assert_eq!(out["..."], json!("[36 more]"));

    let huge = json!(vec!["x".repeat(1000); 60]);
    let text = serde_json::to_string(&sanitize_json(&huge, 1000)).unwrap();
    assert!(text.len() <= 4096 + 64, "{}", text.len());
    assert!(text.ends_with(" more]\"]"), "{text}");

    let number: Value = serde_json::from_str(&"9".repeat(500)).unwrap();
    assert_eq!(sanitize_json(&number, 64), json!("[number]"));
}

#[test]
fn colliding_keys_keep_the_first() {
    let value = json!({"token=a": 1, "token=b": 2});
    assert_eq!(sanitize_json(&value, 64), json!({"token=[redacted]": 1, "...": "[1 more]"}));
}

#[test]
fn markers_and_fallback_are_fixed_points() {
    for marker in MARKERS {
        assert_eq!(big(marker), marker);
    }
    assert_eq!(
        big("password=[redacted] Bearer [redacted] [url] [path] [host]"),
        "password=[redacted] Bearer [redacted] [url] [path] [host]"
    );
}

#[test]
fn samples_settle_in_one_pass() {
    let samples = [
        "Traceback (most recent call last):\n  File \"/a.py\", line 1\nValueError: x at 10.0.0.1:80",
        "café password=hunter2\nnext /home/a/b",
        "\u{1b}[31mBearer abcdefghijkl\u{1b}[0m é/home/x/y é10.0.0.1",
        "line\n\tat com.x.Y(Y.java:1)\nmore",
    ];
    for s in samples {
        for cap in [16, 40, 80, 256] {
            let once = pass(s, cap);
            assert_eq!(pass(&once, cap), once, "{s:?} @ {cap}");
        }
    }
}

// --- properties --------------------------------------------------------------------------

/// Fragments that exercise every detector and their interplay with escapes and cuts.
const SOUP: &[&str] = &[
    " ",
    " ",
    "\n",
    "\t",
    "\r\n",
    "é",
    "€",
    "\u{1b}[31m",
    "\u{1b}]0;",
    "\u{7}",
    "\\",
    "\\x0a",
    "\\\\",
    "x0a",
    "[redacted]",
    "[url]",
    "[path]",
    "...",
    ".",
    ",",
    ":",
    "::",
    "=",
    "\"",
    "'",
    "(",
    ")",
    "[",
    "]",
    "/",
    "//",
    "~",
    "@",
    "-",
    "_",
    "C:",
    "C:\\",
    "http",
    "://",
    "eyJ",
    "eyJhbGciOiJIUzI1NiJ9",
    "sk-",
    "sk_test_",
    "ghp_",
    "AKIA",
    "ABCDEFGHIJKLMNOP",
    "xoxb-",
    "Bearer",
    "Basic",
    "password",
    "token",
    "Authorization",
    "secret",
    "at ",
    "File \"",
    "\", line 1",
    "Traceback (most recent call last):",
    "  ",
    "goroutine 1 [running]:",
    "stack backtrace:",
    "thread 'main' panicked at '",
    "', ",
    "Caused by:",
    "... 3 more",
    "10.0.0.1",
    "fe80",
    "1",
    "12",
    "5432",
    "localhost",
    ".internal",
    "db",
    "home",
    "srv",
    "0123456789abcdef",
    "A1b2C3d4E5f6",
    "aB3",
    "Zz9",
    "-----BEGIN ",
    "-----END ",
    "-----",
    "line",
    "main.go",
    "a",
    "word",
    "^^^",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(SOUP), 0..60).prop_map(|parts| parts.concat())
}

fn secret_kind() -> impl Strategy<Value = (String, String)> {
    // (text to plant, the part that must not survive)
    let bare = |pattern: &'static str| pattern.prop_map(|s: String| (s.clone(), s));
    prop_oneof![
        "[A-Za-z0-9._~+/-]{19}[0-9]".prop_map(|t| (format!("Bearer {t}"), t)),
        "[A-Za-z0-9+/]{12,30}[0-9]={0,2}".prop_map(|t| (format!("Basic {t}"), t)),
        bare("eyJ[A-Za-z0-9_-]{10,30}\\.eyJ[A-Za-z0-9_-]{10,40}\\.[A-Za-z0-9_-]{20,43}"),
        bare("sk-(proj-|live-|ant-api03-)?[A-Za-z0-9]{19,40}[0-9]"),
        bare("sk_(test|live)_[A-Za-z0-9]{23}[0-9]"),
        bare("AKIA[A-Z0-9]{16}"),
        bare("(ghp|gho|ghs)_[A-Za-z0-9]{36}"),
        bare("github_pat_[A-Za-z0-9_]{22,82}"),
        bare("xox[bp]-[0-9]{10,13}-[0-9]{10,13}-[A-Za-z0-9]{24}"),
        bare("[0-9a-f]{32,64}"),
        ("(password|passwd|secret|api_key|token|DB_PASSWORD|clientSecret)(=|: |:)", "[A-Za-z0-9!#$%*+.^_~-]{11}[0-9]")
            .prop_map(|(k, v)| (format!("{k}{v}"), v)),
        ("(Authorization|authorization|Proxy-Authorization): (Bearer|Token|Basic|Digest) ", "[A-Za-z0-9]{16,32}")
            .prop_map(|(k, v)| (format!("{k}{v}"), v)),
        "[A-Za-z0-9 !#%*+.^_~-]{12,30}".prop_map(|v| (format!("{{\"password\": \"{v}\"}}"), v)),
        "[A-Za-z0-9]{12,20}".prop_map(|v| (format!("https://admin:{v}@db.example.com/x"), v)),
        "[A-Za-z0-9+/]{40}".prop_filter("looks random", |s| looks_like_key(s.as_bytes())).prop_map(|s| (s.clone(), s)),
        "[A-Za-z0-9+/]{64}".prop_map(|s| (format!("-----BEGIN PRIVATE KEY-----\n{s}\n-----END PRIVATE KEY-----"), s)),
        (1u8..=254, 0u8..=255, 0u8..=255, 1u8..=254, 1024u16..).prop_map(|(a, b, c, d, p)| {
            let ip = format!("{a}.{b}.{c}.{d}:{p}");
            (ip.clone(), ip)
        }),
        "[a-z]{3,10}".prop_map(|h| (format!("{h}.prod.internal"), format!("{h}.prod.internal"))),
        "[a-z]{3,10}".prop_map(|u| (format!("/home/{u}/.ssh/id_ed25519"), format!("/home/{u}/.ssh"))),
    ]
}

fn prose() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9 ,.;:()\\n\\té'-]{0,60}", soup(), any::<String>(),]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_input_gives_capped_printable_idempotent_output(input in any::<String>(), cap in 0usize..300) {
        let out = sanitize(&input, cap);
        prop_assert!(out.len() <= cap);
        prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
        prop_assert_eq!(sanitize(&out, cap), out);
    }

    #[test]
    fn adversarial_soup_gives_capped_printable_idempotent_output(input in soup(), cap in 0usize..300) {
        let out = sanitize(&input, cap);
        prop_assert!(out.len() <= cap);
        prop_assert!(out.bytes().all(|c| (0x20..=0x7e).contains(&c)));
        prop_assert_eq!(sanitize(&out, cap), out);
    }

    #[test]
    fn planted_secrets_never_survive(
        before in prose(),
        (planted, secret) in secret_kind(),
        after in prose(),
    ) {
        let input = format!("{before} {planted} {after}");
        for out in [sanitize(&input, 8192), scrub(&input)] {
            prop_assert!(!out.contains(&secret), "{} in {}", secret, out);
            // Nor a recognisable piece of it.
            if secret.len() >= 16 {
                for window in secret.as_bytes().windows(12) {
                    let window = std::str::from_utf8(window).unwrap();
                    prop_assert!(!out.contains(window), "{} of {} in {}", window, secret, out);
                }
            }
        }
    }
}
