//! reference/errors.md: one row per way a request can fail, each a [`GatewayError`] put
//! through what the gateway itself does with it: the rewrite layer gives the answer (as
//! a JSON-RPC error, and for `tools/call` by default), [`GatewayError::class`] whether it
//! is retried and its `outcome`, the breakers' split what it counts on, [`HttpHint`] its
//! HTTP status. Only the "when" of each row is written here.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use axum::http::header;
use serde_json::Value;

use super::markdown::{GENERATED, cell, code};
use crate::call::{ArgumentViolation, GatewayError, Health, Retry, UpstreamError};
use crate::client::HttpHint;
use crate::config::{ErrorsConfig, Report};
use crate::downstream::refusal::Refusal;
use crate::errors::Rewriter;
use crate::jsonrpc::DecodeError;
use crate::policy::auth::Unauthenticated;
use crate::policy::origin::OriginRefusal;
use crate::resilience::breaker::classify::{Outcome, Verdict, split};

/// The page.
pub(super) fn page() -> String {
    let mut out = format!("# Errors\n\n{GENERATED}\n\n{INTRO}");
    out.push_str(
        "| when | JSON-RPC error | `tools/call` answer | HTTP | retried | counts on a breaker | `outcome` |\n\
         |---|---|---|---|---|---|---|\n",
    );
    let as_errors = Rewriter::new(ErrorsConfig {
        tool_failures: Report::Error,
        argument_errors: Report::Error,
        ..ErrorsConfig::default()
    });
    let by_default = Rewriter::new(ErrorsConfig::default());
    for (when, failure) in failures() {
        let class = failure.class();
        let error = answer(&as_errors, &failure, Some("t"));
        let tool = match answer(&by_default, &failure, Some("t")) {
            same if same == error => "the same error".to_owned(),
            other => other,
        };
        let http = HttpHint::of(&failure)
            .map_or_else(|| "200".to_owned(), |hint| format!("{} + `Retry-After`", hint.status.as_u16()));
        let _ = writeln!(
            out,
            "| {} | {error} | {tool} | {http} | {} | {} | {} |",
            cell(when),
            retried(class.retry),
            breaker(class.health),
            code(class.outcome)
        );
    }
    let (before, after) = AFTER.split_once(REFUSALS_HERE).unwrap_or((AFTER, ""));
    out.push_str(before);
    refusal_table(&mut out);
    out.push('\n');
    out.push_str(after);
    out
}

/// The table of the HTTP transport's refusals, each answered as the transport answers it.
fn refusal_table(out: &mut String) {
    out.push_str("| refusal | code | HTTP status | message |\n|---|---|---|---|\n");
    for (when, refusal) in refusals() {
        let response = refusal.respond(None, "");
        let mut status = response.status().as_u16().to_string();
        for (name, shown) in [
            (header::WWW_AUTHENTICATE, "WWW-Authenticate"),
            (header::ALLOW, "Allow"),
            (header::RETRY_AFTER, "Retry-After"),
        ] {
            if response.headers().contains_key(name) {
                let _ = write!(status, " + `{shown}`");
            }
        }
        if response.headers().get(header::CONNECTION).is_some_and(|v| v == "close") {
            status.push_str(", then closed");
        }
        let _ =
            writeln!(out, "| {} | {} | {status} | {} |", cell(when), refusal.code(), cell(&code(&refusal.message())));
    }
}

/// Every refusal of the HTTP transport, with when it is made.
fn refusals() -> Vec<(&'static str, Refusal)> {
    let unauthenticated = |scope: Option<&str>| {
        Refusal::Unauthorized(Unauthenticated {
            reason: "",
            token_presented: true,
            metadata_url: None,
            insufficient_scope: scope.map(str::to_owned),
        })
    };
    vec![
        (
            "an HTTP/1.x head that is malformed or framed ambiguously (the connection is closed)",
            Refusal::BadRequest("malformed request head"),
        ),
        ("an HTTP/1.x head over 64 KiB or 100 fields (the connection is closed)", Refusal::HeadTooLarge),
        ("a transfer coding other than `chunked` (the connection is closed)", Refusal::NotImplemented("gzip")),
        ("the body is not JSON", Refusal::Malformed(DecodeError::Parse("…".to_owned()))),
        ("the body is not a JSON-RPC message", Refusal::Malformed(DecodeError::Invalid { id: None, reason: "…" })),
        ("`initialize` without usable params", Refusal::InvalidInitialize("Invalid params: …".to_owned())),
        ("no, a malformed or an unknown bearer token (when `auth` is on)", unauthenticated(None)),
        ("a good credential without a scope of `auth.required_scopes`", unauthenticated(Some("mcp:tools"))),
        (
            "a `Host` or authority that is missing, malformed or ambiguous",
            Refusal::Forbidden(OriginRefusal::Ambiguous("…")),
        ),
        ("a `Host` that is not allowed", Refusal::Forbidden(OriginRefusal::Host)),
        ("an `Origin` that is not allowed", Refusal::Forbidden(OriginRefusal::Origin)),
        ("a request after `initialize` without `Mcp-Session-Id`", Refusal::SessionRequired),
        ("an unknown, ended or expired session, or one of another endpoint or principal", Refusal::SessionNotFound),
        ("an `MCP-Protocol-Version` seawall does not speak", Refusal::UnsupportedVersion),
        ("`/mcp/<name>` names no upstream", Refusal::NoSuchUpstream),
        ("an HTTP method other than GET, POST and DELETE", Refusal::MethodNotAllowed),
        ("an `Accept` that rules out JSON and SSE (a GET: SSE)", Refusal::NotAcceptable { stream: false }),
        ("the body not received within `limits.body_timeout`", Refusal::BodyTimeout),
        ("a second GET stream on a session", Refusal::StreamConflict),
        ("a body over `limits.max_body_bytes`", Refusal::TooLarge { limit: 4_194_304 }),
        ("a `Content-Type` other than `application/json`", Refusal::UnsupportedMediaType),
        (
            "too many sessions (in total, per address, per principal)",
            Refusal::TooManySessions { retry_after: Duration::from_secs(1) },
        ),
        ("too many connections (in total, per address)", Refusal::TooManyConnections),
    ]
}

/// What the client gets for `failure`: the error's code, or an `isError` result.
fn answer(rewriter: &Rewriter, failure: &GatewayError, tool: Option<&str>) -> String {
    let (raw, is_result) = match rewriter.failure(failure, tool) {
        Ok(raw) => (raw, true),
        Err(raw) => (raw, false),
    };
    let value: Value = serde_json::from_str(raw.get()).unwrap_or(Value::Null);
    if is_result {
        return if value["isError"] == Value::Bool(true) {
            "`isError` result".to_owned()
        } else {
            "a result".to_owned()
        };
    }
    value["code"].as_i64().map_or_else(|| "an error".to_owned(), |c| c.to_string())
}

fn retried(retry: Retry) -> &'static str {
    match retry {
        Retry::Never => "no",
        Retry::NotSent => "yes, whatever the method",
        Retry::IfIdempotent => "if idempotent",
        Retry::After(_) => "if idempotent, after `Retry-After`",
    }
}

/// Which breakers a failure counts on as a failure: for a `tools/call` the split between
/// the upstream's breaker and the tool's, for other methods the upstream's alone.
fn breaker(health: Health) -> &'static str {
    if health == Health::Crashed {
        return "the tool's, once the call fails with it";
    }
    let (upstream, tool) = split(health, false, false);
    match ((upstream.outcome, tool.outcome), Verdict::of(health, false).outcome) {
        ((Outcome::Failure, Outcome::Failure), _) => "both",
        ((Outcome::Failure, _), _) => "the upstream's",
        ((_, Outcome::Failure), Outcome::Failure) => "the tool's (for other methods, the upstream's)",
        ((_, Outcome::Failure), _) => "the tool's",
        (_, Outcome::Failure) => "the upstream's",
        _ => "no",
    }
}

/// Every kind of failure, with when it happens.
fn failures() -> Vec<(&'static str, GatewayError)> {
    let up: Arc<str> = Arc::from("x");
    let upstream = |source| GatewayError::Upstream { upstream: Arc::clone(&up), source, endpoint: None };
    let second = Duration::from_secs(1);
    let status = |status, retry_after| upstream(UpstreamError::HttpStatus { status, retry_after });
    vec![
        (
            "params the gateway cannot act on (a malformed cursor, a missing name)",
            GatewayError::InvalidParams(String::new()),
        ),
        (
            "a request not valid in its session: a second `initialize`, an id already in flight",
            GatewayError::InvalidRequest(String::new()),
        ),
        ("a method no upstream of the endpoint serves", GatewayError::MethodNotFound(String::new())),
        (
            "arguments that break the tool's `inputSchema` (`errors.validate_arguments`); nothing is sent",
            GatewayError::InvalidArguments {
                tool: "t".into(),
                violations: Arc::from([ArgumentViolation { pointer: "/a".into(), message: "expected number".into() }]),
            },
        ),
        ("a tool no upstream serves", GatewayError::UnknownTool(String::new())),
        ("a prompt no upstream serves", GatewayError::UnknownPrompt(String::new())),
        ("a resource no upstream serves", GatewayError::ResourceNotFound(String::new())),
        (
            "authorisation refuses the name: answered as the unknown name it stands for",
            GatewayError::Denied { answer: Box::new(GatewayError::UnknownTool(String::new())) },
        ),
        ("the client cancelled the request", GatewayError::Cancelled),
        (
            "the request's deadline passed (`timeouts`); the upstream is sent `notifications/cancelled`",
            GatewayError::Timeout { upstream: Arc::clone(&up), after: second },
        ),
        (
            "one attempt outlived `timeouts.attempt` and no retry followed",
            GatewayError::AttemptTimeout { upstream: Arc::clone(&up), after: second, endpoint: None },
        ),
        (
            "the connection could not be opened (refused, DNS, TLS); nothing was sent",
            upstream(UpstreamError::Connect("".into())),
        ),
        (
            "the stdio process is not running (its last start failed); nothing was sent",
            upstream(UpstreamError::NotRunning(String::new())),
        ),
        (
            "the upstream failed its `initialize` handshake; nothing was sent",
            upstream(UpstreamError::Handshake(String::new())),
        ),
        ("the stdio process is being restarted after a crash; nothing was sent", upstream(UpstreamError::Restarting)),
        ("the connection broke after the request was sent", upstream(UpstreamError::Io("".into()))),
        (
            "the upstream session was lost and could not be opened again",
            upstream(UpstreamError::SessionLost(String::new())),
        ),
        (
            "the stdio process died during the call, alone in flight (or its tool was in flight at the last death too)",
            upstream(UpstreamError::ProcessExited { implicated: true }),
        ),
        (
            "the stdio process died during the call, with other calls in flight",
            upstream(UpstreamError::ProcessExited { implicated: false }),
        ),
        ("HTTP 502, 503 or 504", status(503, None)),
        ("HTTP 503 or 429 with `Retry-After`", status(503, Some(second))),
        ("HTTP 429 without `Retry-After`", status(429, None)),
        ("HTTP 500 and other 5xx", status(500, None)),
        ("another HTTP status that is not an MCP answer (4xx)", status(400, None)),
        (
            "an answer that is not valid MCP (bad JSON, wrong content type, no answer)",
            upstream(UpstreamError::Protocol(String::new())),
        ),
        ("a message over `limits.max_message_bytes`", upstream(UpstreamError::TooLarge { limit: 1 })),
        (
            "the upstream is not connected for the session and cannot be reached",
            GatewayError::Unavailable { upstream: Arc::clone(&up), reason: String::new() },
        ),
        (
            "the circuit breaker of the upstream or tool is open (`data.retryAfterSeconds`)",
            GatewayError::CircuitOpen { upstream: Arc::clone(&up), tool: None, retry_after: second, isolated: None },
        ),
        (
            "the operator isolated the upstream or tool (`data.isolated`, `data.reason`)",
            GatewayError::CircuitOpen {
                upstream: Arc::clone(&up),
                tool: None,
                retry_after: second,
                isolated: Some(Arc::from("maintenance")),
            },
        ),
        (
            "too many requests in flight (gateway, session, principal, upstream) or sessions (`data.retryAfterSeconds`)",
            GatewayError::Overloaded { scope: String::new(), retry_after: second },
        ),
        (
            "a `rate_limits` limit refused it (`data.retryAfterSeconds`)",
            GatewayError::RateLimited { scope: String::new(), retry_after: second },
        ),
        (
            "still in flight when a graceful shutdown's grace period ended; the outcome is unknown",
            GatewayError::ShuttingDown,
        ),
        ("a failure inside seawall", GatewayError::Internal(String::new())),
    ]
}

const INTRO: &str = "\
Every failure becomes one answer in one place, the rewrite layer
([src/errors/rewrite.rs](../../../src/errors/rewrite.rs)). Failures are typed where they
happen, with where they came from and whether the request may have reached the
upstream. The raw detail of an upstream's failure goes to seawall's log next to a
correlation id; the client gets the correlation id (`data.correlationId`, or in the text
of an `isError` result) and never the detail.

A `tools/call` whose tool could not do its job (an upstream exception or internal error,
a crash in the middle of the call, a broken connection, a timeout, an open circuit) is
answered with a result with `isError: true` and one short sentence, which a model can
read and act on:

```text
tool 'demo__sleep' timed out after 30 s; the outcome is unknown (correlation id 5f0c…)
```

`errors.tool_failures: error` (and `errors.argument_errors: error` for arguments) turns
these into the JSON-RPC errors of the second column. Requests that the protocol or a
policy refuses are JSON-RPC errors, and so are the failures of other methods.

## Failures

Each row is one way a request fails, with what the client gets, whether seawall sends
the request again ([Deadlines and retries](../guides/deadlines-and-retries.md)), which
[circuit breaker](../guides/circuit-breakers.md) counts it as a failure, and its
`outcome` label in [the metrics](metrics.md). The HTTP status is that of the session era
and HTTP+SSE; the [modern era](protocol.md#modern-era) answers errors with 400 (404 for
an unknown method), keeping 503 and 429; on stdio there is no status.

";

/// Where [`AFTER`] takes the table of refusals.
const REFUSALS_HERE: &str = "{refusals}\n";

const AFTER: &str = "
seawall's own codes sit in -32000 to -32019, outside the band -32020 to -32099 that the
MCP specification keeps for itself:

| code | meaning |
|---|---|
| -32700 | parse error (id `null`) |
| -32600 | invalid request |
| -32601 | method not found |
| -32602 | invalid params; unknown tool or prompt; arguments that break the schema (`data.validation_errors`: up to 8 `{pointer, message}`) |
| -32002 | resource not found; `data.uri` is the URI the client sent, escaped and cut to 256 bytes |
| -32603 | internal error |
| -32000 | authentication refused (HTTP 401, or 403 for a missing scope) |
| -32001 | request timed out |
| -32800 | request cancelled |
| -32010 | upstream unavailable, or its connection broke |
| -32011 | circuit open, or isolated by the operator |
| -32012 | overloaded |
| -32013 | rate limited |
| -32014 | gateway shutting down |

An idempotent request is a list method, `resources/read`, `resources/templates/list`,
`prompts/get`, `completion/complete`, `ping`, `server/discover`, or a `tools/call` of a
tool marked `idempotent: true` (with `trust_annotations`, also one annotated
`readOnlyHint` or `idempotentHint`). Nothing is retried once part of the answer reached
the client, and a retry starts only when the deadline and the retry budget leave room.

## Errors from upstreams

An upstream's JSON-RPC error whose code describes the client's request (-32600, -32601,
-32602, -32002, -32800, -32042, -32021) keeps its code, with its message sanitised, its
`data` sanitised under `data.upstream`, and a `data.correlationId`. Some get more care
([src/errors/passthrough.rs](../../../src/errors/passthrough.rs)):

- a -32002 whose `data.uri` is the URI the client asked for, or that names none, is
  answered with the client's URI, as seawall's own -32002 is;
- a -32042 (URL elicitation required) keeps only its `data.elicitations` entries of mode
  `url`, each reduced to `mode`, `elicitationId`, `url` and a sanitised `message`;
- a -32021 (missing client capability) keeps its `data.requiredCapabilities`, sanitised.

-32603 and codes seawall does not know become -32603 \"Internal error in upstream 'x'\"
(for a `tools/call`, an `isError` result). An upstream's error is never retried. -32603,
an error without a code, and codes of -32099 to -32000 other than -32002 count as
failures (for a `tools/call` on the tool's breaker, otherwise on the upstream's); -32800
counts on none; the others count as successes. An `isError` result from an upstream is
the tool's answer: its content is scrubbed of credentials, paths and stack traces
(`errors.scrub_tool_errors`), it is never retried and counts as a success. How much the
sanitiser removes is `errors.sanitize`; see
[Error rewriting and the sanitiser](../guides/errors.md).

## Transport refusals

The HTTP transport's own refusals come from one table
([src/downstream/refusal.rs](../../../src/downstream/refusal.rs)). They carry the
request's id whenever the body could be read, and `null` when they are decided from the
headers alone. None is retried or counted by a breaker.

{refusals}
Each is logged once at debug level under the target `seawall::downstream`
(`RUST_LOG=seawall::downstream=debug`) with its status, code, reason, method, path and
the client's address, never the body.
";
