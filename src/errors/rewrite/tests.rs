use std::sync::Arc;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::upstream::*;
use super::*;
use crate::call::{Answer, UpstreamError};
use crate::catalog::ToolInfo;

/// What the client sees for an upstream's reply, read as the stack reads it.
fn reply(
    r: &Rewriter,
    upstream: &str,
    method: &str,
    tool: Option<&str>,
    info: Option<&ToolInfo>,
    reply: Reply,
) -> Reply {
    r.upstream_reply(upstream, method, tool, &Asked::default(), info, Answer::parse(reply, method == "tools/call"))
}

const SECRETS: &[&str] =
    &["sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c", "/home/deploy", "10.0.3.7", "File \"", "line 3", "eyJhbGci"];

fn raw(v: Value) -> Box<RawValue> {
    jsonrpc::to_raw(&v)
}

fn leak_free(text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{s} leaked in {text}");
    }
}

const RAW_TRACE: &str = "Traceback (most recent call last):\n  File \"/home/deploy/app.py\", line 3, in f\nConnectionRefusedError: [Errno 111] refused http://10.0.3.7:5432 key sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c";

#[test]
fn tool_failures_become_is_error_results_and_others_json_rpc_errors() {
    let r = Rewriter::new(ErrorsConfig::default());
    let timeout = GatewayError::Timeout { upstream: Arc::from("u"), after: Duration::from_secs(2) };
    let result = r.failure(&timeout, Some("u__slow")).unwrap();
    assert!(result.get().contains("\"isError\":true"));
    assert!(result.get().contains("timed out after 2 s; the outcome is unknown"));
    let err = r.failure(&timeout, None).unwrap_err();
    assert!(err.get().starts_with(r#"{"code":-32001,"message":"Request timed out""#));
    let io = GatewayError::Upstream {
        upstream: Arc::from("u"),
        source: UpstreamError::Io(RAW_TRACE.into()),
        endpoint: None,
    };
    leak_free(r.failure(&io, None).unwrap_err().get());
    leak_free(r.failure(&io, Some("t")).unwrap().get());
    let errors_mode = Rewriter::new(ErrorsConfig { tool_failures: Report::Error, ..ErrorsConfig::default() });
    assert!(errors_mode.failure(&timeout, Some("t")).is_err());
}

#[test]
fn upstream_internal_errors_are_replaced_and_client_faults_sanitised() {
    let r = Rewriter::new(ErrorsConfig::default());
    let internal = raw(json!({"code": -32603, "message": RAW_TRACE, "data": RAW_TRACE}));
    let as_tool = reply(&r, "u", "tools/call", Some("u__fail"), None, Err(internal.clone())).unwrap();
    assert!(as_tool.get().contains("reported an internal error") && as_tool.get().contains("correlation id"));
    leak_free(as_tool.get());
    let as_read = reply(&r, "u", "resources/read", None, None, Err(internal)).unwrap_err();
    let v: Value = serde_json::from_str(as_read.get()).unwrap();
    assert_eq!(v["code"], -32603);
    assert_eq!(v["message"], "Internal error in upstream 'u'");
    assert!(v["data"]["correlationId"].is_string());

    let unknown_code = raw(json!({"code": 42, "message": "weird \u{1b}[31mred"}));
    let v: Value =
        serde_json::from_str(reply(&r, "u", "prompts/get", None, None, Err(unknown_code)).unwrap_err().get()).unwrap();
    assert_eq!(v["code"], -32603);

    let invalid = raw(
        json!({"code": -32602, "message": format!("bad argument \u{1b}[31mé {RAW_TRACE}"), "data": {"path": "/home/deploy/x"}}),
    );
    let text = reply(&r, "u", "tools/call", Some("t"), None, Err(invalid)).unwrap_err();
    let v: Value = serde_json::from_str(text.get()).unwrap();
    assert_eq!(v["code"], -32602);
    let message = v["message"].as_str().unwrap();
    assert!(message.starts_with("bad argument") && message.contains("\\xc3\\xa9") && !message.contains('\u{1b}'));
    assert!(message.len() <= 256);
    leak_free(text.get());

    let missing =
        raw(json!({"code": -32002, "message": "Resource not found", "data": {"uri": "file:///home/deploy/secret"}}));
    let v: Value =
        serde_json::from_str(reply(&r, "u", "resources/read", None, None, Err(missing)).unwrap_err().get()).unwrap();
    assert_eq!(v["code"], -32002);
    assert!(v["data"]["uri"].is_string());
}

#[test]
fn is_error_texts_are_scrubbed_and_other_results_untouched() {
    let r = Rewriter::new(ErrorsConfig::default());
    let failed = raw(json!({"content": [{"type": "text", "text": RAW_TRACE}], "isError": true}));
    let out = reply(&r, "u", "tools/call", Some("t"), None, Ok(failed)).unwrap();
    assert!(out.get().contains("ConnectionRefusedError"), "the headline survives: {}", out.get());
    leak_free(out.get());
    // Every text of the content is scrubbed: an embedded resource's, a link's description.
    let attached = raw(json!({"content": [
        {"type": "resource", "resource": {"uri": "file:///home/deploy/log", "mimeType": "text/plain", "text": RAW_TRACE}},
        {"type": "resource_link", "uri": "demo://log", "name": "log", "description": RAW_TRACE},
        {"type": "image", "data": "aGVsbG8=", "mimeType": "image/png"},
    ], "isError": true}));
    let out = reply(&r, "u", "tools/call", Some("t"), None, Ok(attached)).unwrap();
    leak_free(out.get());
    let v: Value = serde_json::from_str(out.get()).unwrap();
    assert!(v["content"][0]["resource"]["text"].as_str().unwrap().contains("ConnectionRefusedError"), "{v}");
    assert_eq!(v["content"][0]["resource"]["mimeType"], "text/plain");
    assert_eq!(v["content"][1]["name"], "log");
    assert_eq!(v["content"][2]["data"], "aGVsbG8=");
    let fine = raw(json!({"content": [{"type": "text", "text": "/home/deploy is fine here"}], "extra": 1.50}));
    let text = fine.get().to_owned();
    assert_eq!(reply(&r, "u", "tools/call", Some("t"), None, Ok(fine)).unwrap().get(), text);
}

#[test]
fn arguments_and_structured_output_are_checked_against_the_schemas() {
    let r = Rewriter::new(ErrorsConfig::default());
    let info = ToolInfo {
        input_schema: Some(Arc::new(
            json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a", "b"]}),
        )),
        output_schema: Some(Arc::new(
            json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]}),
        )),
        ..ToolInfo::default()
    };
    let check = crate::validation::ArgumentCheck::new(true);
    let schema = info.input_schema.as_deref();
    assert!(check.check(schema, None, Some(&json!({"a": 1, "b": 2}))).is_ok());
    let violations = check.check(schema, None, Some(&json!({"a": "x"}))).unwrap_err();
    let invalid = GatewayError::InvalidArguments {
        tool: "t".into(),
        violations: violations
            .into_iter()
            .map(|v| crate::call::ArgumentViolation { pointer: v.pointer, message: v.message })
            .collect(),
    };
    let refused = r.failure(&invalid, Some("t")).unwrap();
    assert!(refused.get().contains("/a") && refused.get().contains("\"isError\":true"), "{}", refused.get());
    let strict = Rewriter::new(ErrorsConfig { argument_errors: Report::Error, ..ErrorsConfig::default() });
    let err = strict.failure(&invalid, Some("t")).unwrap_err();
    let v: Value = serde_json::from_str(err.get()).unwrap();
    assert_eq!(v["code"], -32602);
    assert!(!v["data"]["validation_errors"].as_array().unwrap().is_empty());
    assert!(check.check(None, None, Some(&json!({"a": "x"}))).is_ok(), "no schema known: not checked");
    let off = crate::validation::ArgumentCheck::new(false);
    assert!(off.check(schema, None, Some(&json!({"a": "x"}))).is_ok(), "the check turned off");

    let good = raw(json!({"content": [], "structuredContent": {"sum": 3}}));
    assert!(reply(&r, "u", "tools/call", Some("t"), Some(&info), Ok(good)).unwrap().get().contains("\"sum\":3"));
    let bad = raw(
        json!({"content": [], "structuredContent": {"sum": "three", "secret": "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"}}),
    );
    let out = reply(&r, "u", "tools/call", Some("t"), Some(&info), Ok(bad)).unwrap();
    assert!(out.get().contains("\"isError\":true") && !out.get().contains("three"));
    leak_free(out.get());
}
