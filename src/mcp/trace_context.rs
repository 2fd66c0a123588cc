//! W3C Trace Context (`traceparent`, `tracestate`) as seawall reads it from clients and
//! writes it towards upstreams: HTTP headers, and the unprefixed `traceparent` and
//! `tracestate` keys of an MCP request's `params._meta` (SEP-414; OpenTelemetry's MCP
//! conventions).
//!
//! Parsing follows the W3C recommendation strictly and never fails a request: a
//! malformed `traceparent` is ignored (the request simply has no incoming context), a
//! malformed `tracestate` is dropped while its `traceparent` is kept.

use serde_json::Value;
use serde_json::value::RawValue;

use crate::jsonrpc;
use crate::mcp::meta;

/// The header, and `_meta` key, of the trace parent.
pub(crate) const TRACEPARENT: &str = "traceparent";
/// The header, and `_meta` key, of the vendor trace state.
pub(crate) const TRACESTATE: &str = "tracestate";

/// [`TRACEPARENT`] as a header name, looked up without parsing a name per request.
const TRACEPARENT_HEADER: http::HeaderName = http::HeaderName::from_static(TRACEPARENT);
/// [`TRACESTATE`] as a header name.
const TRACESTATE_HEADER: http::HeaderName = http::HeaderName::from_static(TRACESTATE);

/// Longest `tracestate` kept (characters), and most list members, as W3C bounds them.
const MAX_TRACESTATE_LEN: usize = 512;
const MAX_TRACESTATE_MEMBERS: usize = 32;

/// One W3C trace context: a trace id, the id of the span it came from, its flags and
/// the vendors' trace state.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct TraceContext {
    trace_id: u128,
    span_id: u64,
    flags: u8,
    state: Option<String>,
}

impl std::fmt::Debug for TraceContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TraceContext({}", self.traceparent())?;
        if let Some(state) = &self.state {
            write!(f, "; {state}")?;
        }
        f.write_str(")")
    }
}

impl TraceContext {
    /// A context from its parts; `None` when either id is zero (invalid in W3C).
    pub(crate) fn new(trace_id: u128, span_id: u64, flags: u8, state: Option<String>) -> Option<TraceContext> {
        (trace_id != 0 && span_id != 0).then_some(TraceContext { trace_id, span_id, flags, state })
    }

    /// Reads a `traceparent` value and, when given, a `tracestate` value. `None` when the
    /// trace parent is malformed; a malformed trace state is dropped.
    pub(crate) fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let (trace_id, span_id, flags) = parse_traceparent(traceparent)?;
        let state = tracestate.and_then(parse_tracestate);
        TraceContext::new(trace_id, span_id, flags, state)
    }

    /// The trace id.
    pub(crate) fn trace_id(&self) -> u128 {
        self.trace_id
    }

    /// The id of the span this context names as parent.
    pub(crate) fn span_id(&self) -> u64 {
        self.span_id
    }

    /// The trace flags.
    pub(crate) fn flags(&self) -> u8 {
        self.flags
    }

    /// The vendors' trace state, if any.
    pub(crate) fn state(&self) -> Option<&str> {
        self.state.as_deref()
    }

    /// The trace id as 32 lowercase hex digits.
    pub(crate) fn trace_id_hex(&self) -> String {
        format!("{:032x}", self.trace_id)
    }

    /// The span id as 16 lowercase hex digits.
    pub(crate) fn span_id_hex(&self) -> String {
        format!("{:016x}", self.span_id)
    }

    /// The `traceparent` value (version 00).
    pub(crate) fn traceparent(&self) -> String {
        format!("00-{:032x}-{:016x}-{:02x}", self.trace_id, self.span_id, self.flags)
    }
}

/// `version-traceid-parentid-flags`: lowercase hex, ids not all zero, version not `ff`;
/// version 00 is exactly 55 characters, a later version may append `-` and more.
fn parse_traceparent(text: &str) -> Option<(u128, u64, u8)> {
    let text = text.trim_matches([' ', '\t']);
    if !text.is_ascii() {
        return None;
    }
    let bytes = text.as_bytes();
    if bytes.len() < 55 || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    let version = hex_field(&text[..2])? as u8;
    match version {
        0xff => return None,
        0x00 if bytes.len() != 55 => return None,
        _ if bytes.len() > 55 && bytes[55] != b'-' => return None,
        _ => {}
    }
    let trace_id = hex_field(&text[3..35])?;
    let span_id = u64::try_from(hex_field(&text[36..52])?).ok()?;
    let flags = hex_field(&text[53..55])? as u8;
    Some((trace_id, span_id, flags))
}

/// A field of lowercase hex digits (at most 32).
fn hex_field(text: &str) -> Option<u128> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return None;
    }
    u128::from_str_radix(text, 16).ok()
}

/// A `tracestate` value, its members trimmed and empty ones dropped; `None` when it is
/// empty or malformed: too long, too many members, a bad key or value, a key twice.
fn parse_tracestate(text: &str) -> Option<String> {
    if text.len() > MAX_TRACESTATE_LEN {
        return None;
    }
    let mut members: Vec<&str> = Vec::new();
    let mut keys: Vec<&str> = Vec::new();
    for member in text.split(',').map(|m| m.trim_matches([' ', '\t'])).filter(|m| !m.is_empty()) {
        let (key, value) = member.split_once('=')?;
        if !valid_state_key(key) || !valid_state_value(value) || keys.contains(&key) {
            return None;
        }
        keys.push(key);
        members.push(member);
    }
    if members.is_empty() || members.len() > MAX_TRACESTATE_MEMBERS {
        return None;
    }
    Some(members.join(","))
}

/// `simple-key` or `tenant@system`: lowercase letters, digits and `_-*/`, at most 256.
fn valid_state_key(key: &str) -> bool {
    let allowed = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'_' | b'-' | b'*' | b'/');
    let first_ok = |part: &str, digit: bool| {
        part.bytes().next().is_some_and(|b| b.is_ascii_lowercase() || (digit && b.is_ascii_digit()))
    };
    if key.len() > 256 {
        return false;
    }
    match key.split_once('@') {
        None => first_ok(key, false) && key.bytes().all(allowed),
        Some((tenant, system)) => {
            tenant.len() <= 241
                && system.len() <= 14
                && first_ok(tenant, true)
                && first_ok(system, false)
                && tenant.bytes().chain(system.bytes()).all(allowed)
        }
    }
}

/// Printable ASCII except `,` and `=`, at most 256, not ending in a space.
fn valid_state_value(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 256
        && !value.ends_with(' ')
        && value.bytes().all(|b| (0x20..=0x7e).contains(&b) && b != b',' && b != b'=')
}

/// The trace context of an HTTP request's headers: one `traceparent` header (a repeated
/// one is ignored, as W3C asks), and the `tracestate` headers joined.
pub(crate) fn from_headers(headers: &http::HeaderMap) -> Option<TraceContext> {
    let mut parents = headers.get_all(TRACEPARENT_HEADER).iter();
    let (Some(parent), None) = (parents.next(), parents.next()) else { return None };
    let parent = parent.to_str().ok()?;
    let states: Vec<&str> = headers.get_all(TRACESTATE_HEADER).iter().filter_map(|v| v.to_str().ok()).collect();
    let state = (!states.is_empty()).then(|| states.join(","));
    TraceContext::parse(parent, state.as_deref())
}

/// The trace context of `_meta` values: `traceparent` and `tracestate` must be strings.
pub(crate) fn from_meta(traceparent: Option<&Value>, tracestate: Option<&Value>) -> Option<TraceContext> {
    TraceContext::parse(traceparent?.as_str()?, tracestate.and_then(Value::as_str))
}

/// `params` with `context` written into its `_meta` (created when missing), replacing
/// what was there: `traceparent`, and `tracestate` when the context has one (else a
/// stale one is removed). Absent params become `{"_meta": {...}}`. `None` when params
/// are not an object, or hold a `_meta` that is not one: they go on unchanged.
pub(crate) fn with_meta(params: Option<&RawValue>, context: &TraceContext) -> Option<Box<RawValue>> {
    let mut map = match params {
        None => serde_json::Map::new(),
        Some(_) => meta::params_object(params)?,
    };
    let entry = map.entry("_meta").or_insert_with(|| Value::Object(serde_json::Map::new()));
    let Value::Object(fields) = entry else { return None };
    fields.insert(TRACEPARENT.into(), Value::String(context.traceparent()));
    match context.state() {
        Some(state) => fields.insert(TRACESTATE.into(), Value::String(state.to_owned())),
        None => fields.remove(TRACESTATE),
    };
    Some(jsonrpc::to_raw(&map))
}

/// The trace contexts one client request came with, and seawall's span for it. Each is
/// boxed: most requests carry none, and a request is moved into every layer it passes,
/// so its trace takes three pointers in it rather than 192 bytes.
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestTrace {
    /// `params._meta.traceparent` / `tracestate`, as the client wrote them.
    pub meta: Option<Box<TraceContext>>,
    /// The `traceparent` / `tracestate` headers of the HTTP request that carried it.
    pub header: Option<Box<TraceContext>>,
    /// seawall's span for the request, when tracing is on.
    pub span: Option<Box<TraceContext>>,
}

impl RequestTrace {
    /// The contexts of `_meta` and of the HTTP request's headers; no span yet.
    pub(crate) fn new(meta: Option<TraceContext>, header: Option<TraceContext>) -> RequestTrace {
        RequestTrace { meta: meta.map(Box::new), header: header.map(Box::new), span: None }
    }

    /// Seawall's span for the request.
    pub(crate) fn set_span(&mut self, span: Option<TraceContext>) {
        self.span = span.map(Box::new);
    }

    /// The context the request continues: `_meta`'s, else the header's. OpenTelemetry's
    /// MCP conventions make the `_meta` context the parent (one HTTP request may carry
    /// several MCP messages, and one message may travel over several HTTP requests); a
    /// different header context is only linked.
    pub(crate) fn parent(&self) -> Option<&TraceContext> {
        self.meta.as_deref().or(self.header.as_deref())
    }

    /// The header's context when `_meta` also had one that differs (a span link).
    pub(crate) fn linked(&self) -> Option<&TraceContext> {
        match (self.meta.as_deref(), self.header.as_deref()) {
            (Some(meta), Some(header)) if meta.trace_id != header.trace_id || meta.span_id != header.span_id => {
                Some(header)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const PARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_is_read_and_written_back_unchanged() {
        let cx = TraceContext::parse(PARENT, Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE")).unwrap();
        assert_eq!(cx.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(cx.span_id_hex(), "00f067aa0ba902b7");
        assert_eq!(cx.flags() & 1, 1, "sampled");
        assert_eq!(cx.traceparent(), PARENT);
        assert_eq!(cx.state(), Some("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"));
        let unsampled = TraceContext::parse(&PARENT.replace("-01", "-00"), None).unwrap();
        assert_eq!(unsampled.flags() & 1, 0, "not sampled");
        // Surrounding whitespace is not part of the value.
        assert_eq!(TraceContext::parse(&format!(" {PARENT}\t"), None).unwrap().traceparent(), PARENT);
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        let bad = [
            "",
            "00",
            "garbage",
            &PARENT[..54],
            &format!("{PARENT}-"),
            &format!("{PARENT}0"),
            &PARENT.to_uppercase(),
            &PARENT.replace("4bf92f3577b34da6a3ce929d0e0e4736", "00000000000000000000000000000000"),
            &PARENT.replace("00f067aa0ba902b7", "0000000000000000"),
            &PARENT.replacen("00-", "ff-", 1),
            &PARENT.replacen("00-", "0g-", 1),
            &PARENT.replace('-', "_"),
            &PARENT.replace("-01", "-1x"),
            "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\u{e9}",
            "\u{e9}\u{e9}-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-01",
        ];
        for text in bad {
            assert_eq!(TraceContext::parse(text, None), None, "{text:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_as_version_00() {
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds";
        assert_eq!(TraceContext::parse(later, None).unwrap().traceparent(), PARENT);
        assert_eq!(TraceContext::parse(&PARENT.replacen("00-", "01-", 1), None).unwrap().traceparent(), PARENT);
        assert_eq!(TraceContext::parse(&format!("{}x", PARENT.replacen("00-", "01-", 1)), None), None);
    }

    #[test]
    fn a_malformed_tracestate_is_dropped_and_its_traceparent_kept() {
        let state = |s: &str| TraceContext::parse(PARENT, Some(s)).map(|c| c.state().map(str::to_owned));
        assert_eq!(state(" a=1 , ,b@c=2 "), Some(Some("a=1,b@c=2".to_owned())));
        assert_eq!(state("1tenant@sys=x"), Some(Some("1tenant@sys=x".to_owned())));
        let crowded = (0..33).map(|i| format!("k{i}=v")).collect::<Vec<_>>().join(",");
        for bad in ["", " , ", "a", "A=1", "a=1,a=2", "a=x=y", "a=", "a=\u{e9}", "1a=b", "a@=b", &crowded] {
            assert_eq!(state(bad), Some(None), "{bad:?}");
        }
        assert_eq!(state(&format!("a={}", "x".repeat(600))), Some(None));
    }

    #[test]
    fn headers_give_one_traceparent_and_every_tracestate() {
        let mut headers = http::HeaderMap::new();
        assert_eq!(from_headers(&headers), None);
        headers.insert(TRACEPARENT, PARENT.parse().unwrap());
        headers.append(TRACESTATE, "a=1".parse().unwrap());
        headers.append(TRACESTATE, "b=2".parse().unwrap());
        assert_eq!(from_headers(&headers).unwrap().state(), Some("a=1,b=2"));
        headers.append(TRACEPARENT, PARENT.parse().unwrap());
        assert_eq!(from_headers(&headers), None, "two traceparent headers");
        let mut binary = http::HeaderMap::new();
        binary.insert(TRACEPARENT, http::HeaderValue::from_bytes(b"\xff\xfe").unwrap());
        assert_eq!(from_headers(&binary), None);
    }

    #[test]
    fn meta_values_must_be_strings() {
        let (p, s) = (json!(PARENT), json!("a=1"));
        assert_eq!(from_meta(Some(&p), Some(&s)).unwrap().state(), Some("a=1"));
        assert_eq!(from_meta(Some(&p), Some(&json!(7))).unwrap().state(), None);
        assert_eq!(from_meta(Some(&json!(7)), Some(&s)), None);
        assert_eq!(from_meta(None, Some(&s)), None);
    }

    #[test]
    fn meta_injection_replaces_the_context_and_keeps_everything_else() {
        let cx = TraceContext::parse(PARENT, Some("a=1")).unwrap();
        let raw = |v: Value| jsonrpc::to_raw(&v);
        let stale = jsonrpc::raw_from_str(
            r#"{"name":"t","arguments":{"n":1.50},"_meta":{"progressToken":3,"traceparent":"00-stale","tracestate":"old=1"}}"#,
        )
        .unwrap();
        // Order and number text are kept (numbers are not re-formatted).
        assert_eq!(
            with_meta(Some(&stale), &cx).unwrap().get(),
            format!(
                r#"{{"name":"t","arguments":{{"n":1.50}},"_meta":{{"progressToken":3,"traceparent":"{PARENT}","tracestate":"a=1"}}}}"#
            )
        );

        let stateless = TraceContext::parse(PARENT, None).unwrap();
        let out: Value = serde_json::from_str(with_meta(Some(&stale), &stateless).unwrap().get()).unwrap();
        assert_eq!(out["_meta"], json!({"progressToken": 3, "traceparent": PARENT}), "a stale tracestate goes");

        let out: Value = serde_json::from_str(with_meta(None, &cx).unwrap().get()).unwrap();
        assert_eq!(out, json!({"_meta": {"traceparent": PARENT, "tracestate": "a=1"}}));
        let out: Value = serde_json::from_str(with_meta(Some(&raw(json!({"x": 1}))), &cx).unwrap().get()).unwrap();
        assert_eq!(out, json!({"x": 1, "_meta": {"traceparent": PARENT, "tracestate": "a=1"}}));

        assert!(with_meta(Some(&raw(json!([1, 2]))), &cx).is_none(), "not an object: unchanged");
        assert!(with_meta(Some(&raw(json!({"_meta": "x"}))), &cx).is_none(), "_meta not an object: unchanged");
    }

    #[test]
    fn meta_is_the_parent_and_a_different_header_is_linked() {
        let a = TraceContext::parse(PARENT, None).unwrap();
        let b = TraceContext::parse(&PARENT.replace("00f067aa0ba902b7", "00f067aa0ba902b8"), None).unwrap();
        let both = RequestTrace::new(Some(a.clone()), Some(b.clone()));
        assert_eq!((both.parent(), both.linked()), (Some(&a), Some(&b)));
        let same = RequestTrace::new(Some(a.clone()), Some(a.clone()));
        assert_eq!((same.parent(), same.linked()), (Some(&a), None));
        let header = RequestTrace::new(None, Some(b.clone()));
        assert_eq!((header.parent(), header.linked()), (Some(&b), None));
        assert_eq!(RequestTrace::default().parent(), None);
    }
}
