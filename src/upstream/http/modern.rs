//! The modern era (2026-07-28) towards an HTTP upstream: no session — the link's
//! "handshake" is `server/discover`, and every request is one self-contained POST
//! carrying the client's envelope in `params._meta` and the routing headers
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).
//!
//! - A modern client gets the upstream's `input_required` results untouched (it retries
//!   with `inputResponses` itself, on the same upstream). For a legacy client each
//!   input request becomes a request of the client's own, relayed like any server
//!   request; its answers go back in the retry the link makes, round after round.
//! - A call is cancelled by dropping it: its response stream closes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use futures::stream::BoxStream;
use http::HeaderValue;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

use super::upstream::{LEGACY_ONLY, MODERN_ONLY};
use super::{HttpLink, Outcome, SessionState, UpstreamResponse};
use crate::call::{EventSink, Reply, UpstreamCall, UpstreamError, UpstreamEvent, fresh_id};
use crate::config::UpstreamProtocol;
use crate::jsonrpc::{self, Id, Request};
use crate::mcp::init::{InitParams, InitResult};
use crate::mcp::method;
use crate::mcp::modern::{self as era, MODERN_VERSIONS};

/// The modern version the link speaks.
const VERSION: &str = "2026-07-28";

/// Longest wait for the upstream to acknowledge a (re)opened listen stream (a client is
/// told it is subscribed only once the upstream listens, unless the upstream takes longer
/// than this: on a loaded machine 2 s was seen not to be enough).
const LISTEN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The first message of a `subscriptions/listen` stream.
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// Most `input_required` rounds one call may take before it fails.
const MAX_ROUNDS: usize = 10;

static NEXT_INPUT: AtomicU64 = AtomicU64::new(1);

/// The envelope every modern request of a link carries.
pub(super) fn envelope(init: &InitParams) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(era::PROTOCOL_VERSION_KEY.into(), json!(VERSION));
    meta.insert(era::CLIENT_CAPABILITIES_KEY.into(), init.capabilities.clone());
    meta.insert(era::CLIENT_INFO_KEY.into(), init.client_info.clone());
    meta
}

/// `params` (an object, or none) with `envelope` merged into its `_meta`.
fn with_envelope(params: Option<&RawValue>, envelope: &Map<String, Value>) -> Box<RawValue> {
    let mut map = match jsonrpc::view::<Value>(params) {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let meta = map.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
    if let Value::Object(meta) = meta {
        for (k, v) in envelope {
            meta.insert(k.clone(), v.clone());
        }
    }
    jsonrpc::to_raw(&map)
}

/// The `Mcp-Name` value of a request: its tool or prompt name or resource URI,
/// base64-wrapped when it would not survive as a header value.
fn name_header(method_name: &str, params: Option<&RawValue>) -> Option<String> {
    let key = match method_name {
        method::TOOLS_CALL | method::PROMPTS_GET => "name",
        method::RESOURCES_READ => "uri",
        _ => return None,
    };
    let params = jsonrpc::view::<Map<String, Value>>(params)?;
    params.get(key)?.as_str().map(era::encode_header_value)
}

/// The result of `server/discover` as the initialize result the rest of seawall reads.
fn init_from_discover(result: &RawValue) -> Option<InitResult> {
    let map = jsonrpc::view::<Map<String, Value>>(Some(result))?;
    let supported = map.get("supportedVersions")?.as_array()?;
    if !supported.iter().any(|v| v.as_str().is_some_and(|v| MODERN_VERSIONS.contains(&v))) {
        return None;
    }
    let server_info = map
        .get("_meta")
        .and_then(|m| m.get(era::SERVER_INFO_KEY))
        .cloned()
        .unwrap_or_else(|| json!({"name": "unknown", "version": "0"}));
    let mut init = json!({
        "protocolVersion": VERSION,
        "capabilities": map.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        "serverInfo": server_info,
    });
    if let Some(instructions) = map.get("instructions").filter(|i| i.is_string()) {
        init["instructions"] = instructions.clone();
    }
    InitResult::parse(jsonrpc::to_raw(&init))
}

impl HttpLink {
    /// The eras the next handshake tries, in order (`true`: modern). A pinned
    /// `protocol` tries only its own; `auto` tries the client's own era first — a server
    /// that speaks both then serves every client in its own era, with nothing to
    /// bridge — unless the upstream was found to refuse it, and the other one next.
    pub(super) fn eras_to_try(&self) -> Vec<bool> {
        match self.up.protocol {
            UpstreamProtocol::Legacy => vec![false],
            UpstreamProtocol::Modern => vec![true],
            UpstreamProtocol::Auto => match self.up.detected.load(Ordering::Relaxed) {
                LEGACY_ONLY => vec![false, true],
                MODERN_ONLY => vec![true, false],
                _ => vec![self.init_params.modern_client, !self.init_params.modern_client],
            },
        }
    }

    /// The modern "handshake": `server/discover`, whose answer stands for the
    /// initialize result.
    pub(super) async fn discover(self: &Arc<Self>) -> Result<(), UpstreamError> {
        let state =
            SessionState { version: Some(HeaderValue::from_static(VERSION)), modern: true, ..SessionState::default() };
        let id = fresh_id();
        let params = with_envelope(None, &self.envelope);
        let body = jsonrpc::encode_request(&id, era::DISCOVER, Some(&params));
        let headers = [(era::METHOD_HEADER.to_owned(), era::DISCOVER.to_owned())];
        let resp = self.post_with(body, &state, &headers).await?;
        let reply = match self.read_answer(resp, &id, None, &state).await? {
            Outcome::Reply(reply) => reply,
            _ => return Err(UpstreamError::Handshake("no answer to server/discover".into())),
        };
        let result = reply.map_err(|e| UpstreamError::Handshake(format!("server/discover refused: {}", e.get())))?;
        let init = init_from_discover(&result)
            .ok_or_else(|| UpstreamError::Handshake("server/discover names no modern version seawall speaks".into()))?;
        let mut st = self.state.lock();
        *st = SessionState { init: Some(Arc::new(init)), generation: st.generation + 1, ..state };
        Ok(())
    }

    /// One modern call: a POST per round until the answer is not an `input_required`
    /// this link must resolve for a legacy client.
    pub(super) async fn call_modern(
        self: &Arc<Self>,
        call: &UpstreamCall,
        state: &SessionState,
    ) -> Result<Reply, UpstreamError> {
        if let Some(answer) = self.answer_locally(call).await {
            return Ok(Ok(answer));
        }
        let mut envelope = self.envelope.clone();
        if let Some(level) = self.log_level.lock().clone() {
            envelope.insert(era::LOG_LEVEL_KEY.into(), json!(level));
        }
        let mut params = with_envelope(call.params.as_deref(), &envelope);
        let mut headers = vec![(era::METHOD_HEADER.to_owned(), call.method.to_string())];
        if let Some(name) = name_header(&call.method, call.params.as_deref()) {
            headers.push((era::NAME_HEADER.to_owned(), name));
        }
        headers.extend(call.headers.iter().cloned());
        headers.extend(super::super::trace_headers(call));
        for _ in 0..MAX_ROUNDS {
            let id = fresh_id();
            let body = jsonrpc::encode_request(&id, &call.method, Some(&params));
            let resp = self.post_with(body, state, &headers).await?;
            let reply = match self.read_answer(resp, &id, Some(&call.events), state).await? {
                Outcome::Reply(reply) => reply,
                Outcome::Accepted | Outcome::SessionExpired => {
                    return Err(UpstreamError::Protocol("the upstream accepted a request without answering it".into()));
                }
            };
            let Ok(result) = &reply else { return Ok(reply) };
            if self.init_params.modern_client {
                return Ok(reply);
            }
            if !is_input_required(result) {
                return Ok(Ok(without_result_type(result)));
            }
            match self.ask_client(result, &call.events).await {
                Ok(retry) => params = with_retry(&params, retry),
                Err(client_error) => return Ok(Err(client_error)),
            }
        }
        Err(UpstreamError::Protocol(format!("the upstream asked for input more than {MAX_ROUNDS} times")))
    }

    /// The legacy methods the modern era removed, answered by the link itself:
    /// `ping`; `logging/setLevel`, which becomes the envelope's log level of every later
    /// request; `resources/subscribe` and `resources/unsubscribe`, kept for the link's
    /// `subscriptions/listen` stream.
    async fn answer_locally(self: &Arc<Self>, call: &UpstreamCall) -> Option<Box<RawValue>> {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Params {
            level: Option<String>,
            uri: Option<String>,
        }
        let params = || jsonrpc::view::<Params>(call.params.as_deref()).unwrap_or_default();
        match &*call.method {
            method::PING => {}
            method::LOGGING_SET_LEVEL => *self.log_level.lock() = params().level,
            method::RESOURCES_SUBSCRIBE => {
                if let Some(uri) = params().uri {
                    self.subscriptions.lock().insert(uri);
                    let generation = self.relisten();
                    self.listening(generation).await;
                }
            }
            method::RESOURCES_UNSUBSCRIBE => {
                if let Some(uri) = params().uri {
                    self.subscriptions.lock().remove(&uri);
                    self.relisten();
                }
            }
            _ => return None,
        }
        Some(jsonrpc::to_raw(&json!({})))
    }

    /// Asks the (legacy) client each of an `input_required` result's questions, as
    /// requests of its own, and waits for every answer. `Ok`: the retry's
    /// `inputResponses` and `requestState`; `Err`: the client's error.
    async fn ask_client(&self, result: &RawValue, events: &EventSink) -> Result<Retry, Box<RawValue>> {
        let map = jsonrpc::view::<Map<String, Value>>(Some(result)).unwrap_or_default();
        let state = map.get("requestState").cloned();
        let requests = map.get("inputRequests").and_then(Value::as_object).cloned().unwrap_or_default();
        let mut waiting = Vec::new();
        for (key, request) in requests {
            let id = Id::string(&format!("seawall-input-{}", NEXT_INPUT.fetch_add(1, Ordering::Relaxed)));
            let (tx, rx) = oneshot::channel();
            self.inputs.lock().insert(id.clone(), tx);
            let method_name = request.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
            let params = request.get("params").map(jsonrpc::to_raw);
            events.send(UpstreamEvent::Request(Request { id: id.clone(), method: method_name, params }));
            waiting.push((key, id, rx));
        }
        let mut responses = Map::new();
        for (key, id, rx) in waiting {
            let answer = rx.await;
            self.inputs.lock().remove(&id);
            match answer {
                Ok(Ok(result)) => {
                    responses.insert(key, jsonrpc::view::<Value>(Some(&result)).unwrap_or(Value::Null));
                }
                Ok(Err(error)) => return Err(error),
                Err(_) => {
                    let error = jsonrpc::error_object(jsonrpc::code::INTERNAL_ERROR, "the client did not answer", None);
                    return Err(error);
                }
            }
        }
        Ok(Retry { responses, state })
    }

    /// Hands the client's answer to an input request to the call waiting for it;
    /// `false` when none is.
    pub(super) fn answer_input(&self, id: &Id, body: Reply) -> bool {
        match self.inputs.lock().remove(id) {
            Some(tx) => tx.send(body).is_ok(),
            None => false,
        }
    }
}

impl HttpLink {
    /// (Re)starts the link's `subscriptions/listen` stream with the current filter, when
    /// the client listens or has subscriptions; stops it otherwise.
    pub(super) fn relisten(self: &Arc<Self>) -> u64 {
        let generation = self.listen_generation.fetch_add(1, Ordering::SeqCst) + 1;
        let wanted = self.get_wanted.load(Ordering::SeqCst) || !self.subscriptions.lock().is_empty();
        let task = wanted.then(|| tokio::spawn(listen_loop(Arc::downgrade(self), generation)).abort_handle());
        let old = std::mem::replace(&mut *self.get_stream.lock(), task);
        if let Some(old) = old {
            old.abort();
        }
        generation
    }

    /// Waits (at most [`LISTEN_WAIT`]) until the upstream acknowledged the listen stream
    /// of `generation`, so what the client is told is subscribed is.
    pub(super) async fn listening(&self, generation: u64) {
        let mut acked = self.listen_acked.subscribe();
        let wait = acked.wait_for(|g| *g >= generation);
        if tokio::time::timeout(LISTEN_WAIT, wait).await.is_err() {
            tracing::debug!(upstream = %self.up.name, "the upstream did not acknowledge subscriptions/listen in time");
        }
    }

    /// The `subscriptions/listen` params: every list change, and updates of the
    /// subscribed resources.
    fn listen_params(&self) -> Box<RawValue> {
        let uris: Vec<String> = self.subscriptions.lock().iter().cloned().collect();
        let mut filter = json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true});
        if !uris.is_empty() {
            filter["resourceSubscriptions"] = json!(uris);
        }
        let params = jsonrpc::to_raw(&json!({ "notifications": filter }));
        with_envelope(Some(&params), &self.envelope)
    }
}

/// Keeps one `subscriptions/listen` stream open, re-opening it with backoff; its
/// notifications reach the link's sessions as messages tied to no request. Ends when
/// the link closes or the upstream does not know the method.
async fn listen_loop(weak: std::sync::Weak<HttpLink>, generation: u64) {
    const BASE: std::time::Duration = std::time::Duration::from_millis(500);
    const MAX: std::time::Duration = std::time::Duration::from_secs(30);
    let mut failures: u32 = 0;
    loop {
        let Some(link) = weak.upgrade() else { return };
        if link.closed.load(Ordering::SeqCst) {
            return;
        }
        let state = link.snapshot();
        let id = fresh_id();
        let body = jsonrpc::encode_request(&id, era::LISTEN, Some(&link.listen_params()));
        let headers = [(era::METHOD_HEADER.to_owned(), era::LISTEN.to_owned())];
        match link.post_with(body, &state, &headers).await {
            Ok(resp) if resp.status() == http::StatusCode::NOT_FOUND => {
                tracing::debug!(upstream = %link.up.name, "the upstream does not offer subscriptions/listen");
                link.listen_acked.send_replace(generation);
                return;
            }
            Ok(resp) if resp.status().is_success() => {
                failures = 0;
                let stream = listen_events(resp, link.up.max_message_bytes);
                drop(link);
                let mut stream = Box::pin(stream);
                while let Some(event) = futures::StreamExt::next(&mut stream).await {
                    let Some(link) = weak.upgrade() else { return };
                    // The acknowledgement is for the link, not its clients.
                    if let Ok(jsonrpc::Message::Notification(n)) = jsonrpc::decode(&event.data)
                        && n.method == ACKNOWLEDGED
                    {
                        link.listen_acked.send_if_modified(|g| {
                            let newer = *g < generation;
                            if newer {
                                *g = generation;
                            }
                            newer
                        });
                        continue;
                    }
                    link.dispatch_event(&event, None, None);
                }
            }
            Ok(resp) => {
                tracing::debug!(upstream = %link.up.name, status = %resp.status(), "upstream refused subscriptions/listen");
            }
            Err(e) => tracing::debug!(upstream = %link.up.name, error = %e, "subscriptions/listen failed"),
        }
        tokio::time::sleep(crate::backoff::doubling(BASE, MAX, failures)).await;
        failures = failures.saturating_add(1);
    }
}

/// The messages of a `subscriptions/listen` answer: an SSE stream, or newline-delimited
/// JSON in an `application/json` body that stays open (both are in use). Ends at the
/// first broken event.
fn listen_events(resp: UpstreamResponse, limit: usize) -> BoxStream<'static, crate::sse::Event> {
    let json = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"));
    if json {
        let lines = crate::ndjson::decode_stream(resp.bytes_stream(), limit);
        return Box::pin(futures::StreamExt::map(lines, |data| crate::sse::Event { data, ..Default::default() }));
    }
    let events = crate::sse::decode_stream(resp.bytes_stream(), limit);
    let whole = futures::StreamExt::take_while(events, |e| std::future::ready(e.is_ok()));
    Box::pin(futures::StreamExt::filter_map(whole, |e| std::future::ready(e.ok())))
}

/// What a retry adds to the request.
struct Retry {
    responses: Map<String, Value>,
    state: Option<Value>,
}

/// `params` with a retry's `inputResponses` and `requestState`.
fn with_retry(params: &RawValue, retry: Retry) -> Box<RawValue> {
    let mut map = jsonrpc::view::<Map<String, Value>>(Some(params)).unwrap_or_default();
    map.insert("inputResponses".into(), Value::Object(retry.responses));
    match retry.state {
        Some(state) => map.insert("requestState".into(), state),
        None => map.remove("requestState"),
    };
    jsonrpc::to_raw(&map)
}

/// A result as a legacy client reads it: without `resultType: "complete"`, which only
/// the modern era defines (the same text when it has none).
fn without_result_type(result: &RawValue) -> Box<RawValue> {
    let text = result.get();
    if !text.contains("\"resultType\"") {
        return result.to_owned();
    }
    match jsonrpc::view::<Map<String, Value>>(Some(result)) {
        Some(mut map) if map.get("resultType").and_then(Value::as_str) == Some("complete") => {
            map.remove("resultType");
            jsonrpc::to_raw(&map)
        }
        _ => result.to_owned(),
    }
}

fn is_input_required(result: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind {
        #[serde(rename = "resultType")]
        result_type: Option<String>,
    }
    jsonrpc::view::<Kind>(Some(result)).and_then(|k| k.result_type).as_deref() == Some("input_required")
}

/// Pending input requests of a link's calls, by the id the client answers.
pub(super) type Inputs = parking_lot::Mutex<HashMap<Id, oneshot::Sender<Reply>>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_wrapped_only_when_needed() {
        assert_eq!(era::encode_header_value("demo__echo"), "demo__echo");
        assert_eq!(era::encode_header_value("file:///ä b"), "=?base64?ZmlsZTovLy/DpCBi?=");
        assert_eq!(era::encode_header_value(" x"), "=?base64?IHg=?=");
        assert_eq!(era::decode_header_value(&era::encode_header_value("naïve")).as_deref(), Some("naïve"));
    }

    #[test]
    fn a_discover_result_stands_for_an_initialize_result() {
        let raw = jsonrpc::to_raw(&json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "instructions": "hi", "_meta": {era::SERVER_INFO_KEY: {"name": "up", "version": "2"}}}));
        let init = init_from_discover(&raw).expect("modern");
        assert_eq!(init.protocol_version, "2026-07-28");
        assert_eq!(init.capabilities, json!({"tools": {}}));
        assert_eq!(init.instructions.as_deref(), Some("hi"));
        let other = jsonrpc::to_raw(&json!({"supportedVersions": ["2099-01-01"], "capabilities": {}}));
        assert!(init_from_discover(&other).is_none());
    }

    #[test]
    fn the_envelope_joins_the_params_meta_and_a_retry_adds_its_members() {
        let init = InitParams::gateway_own();
        let params = jsonrpc::to_raw(&json!({"name": "x", "_meta": {"progressToken": 1}}));
        let out = with_envelope(Some(&params), &envelope(&init));
        let out: Value = serde_json::from_str(out.get()).unwrap();
        assert_eq!(out["_meta"]["progressToken"], 1);
        assert_eq!(out["_meta"][era::PROTOCOL_VERSION_KEY], "2026-07-28");
        let retry = Retry { responses: Map::from_iter([("k".to_owned(), json!({"a": 1}))]), state: Some(json!("s")) };
        let again = with_retry(&jsonrpc::to_raw(&out), retry);
        let again: Value = serde_json::from_str(again.get()).unwrap();
        assert_eq!((again["inputResponses"]["k"]["a"].clone(), again["requestState"].clone()), (json!(1), json!("s")));
        assert_eq!(
            name_header("resources/read", Some(&jsonrpc::to_raw(&json!({"uri": "a://b"})))).as_deref(),
            Some("a://b")
        );
    }
}
