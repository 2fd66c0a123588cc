//! Modern-era (2026-07-28) clients in front of legacy upstreams: each request is
//! self-contained, so seawall keeps the upstream sessions itself, in a *context*
//! (`context.rs`) that every modern client sharing a scope, a principal and an envelope
//! uses.
//!
//! Requests run through the same client stack as legacy ones, under an id of seawall's
//! own (modern clients of one context choose their ids independently), and are
//! answered under the client's id with the members the era requires.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::context::internal_id;
use super::{Gateway, ModernCaller};
use crate::client::{Answered, HttpHint};
use crate::identity::Principal;
use crate::jsonrpc::{self, Id, Message, Request, code};
use crate::mcp::modern::{self, Envelope};
use crate::mcp::trace_context::{self, RequestTrace, TraceContext};
use crate::mcp::{self as mcp_era, meta, method};
use crate::session::{Scope, Session, Slot};
use crate::telemetry::trace::spans;

/// One running upstream call of a modern request.
struct Call {
    /// The context it runs in.
    session: Arc<Session>,
    /// The context's key: a retry must come from the same context.
    context: String,
    /// seawall's id for it.
    internal: Id,
    /// The method (a retry must repeat it).
    method: String,
    /// Messages related to it, as the client would see them.
    events: mpsc::Receiver<String>,
    /// Its answer.
    answer: oneshot::Receiver<Answered>,
}

/// The start of every `requestState` seawall mints.
const STATE_PREFIX: &str = "seawall.";

/// How long a call waits for the client's `inputResponses`; then it is cancelled (a
/// client that never retries is not the upstream's fault, so no breaker counts it). Short
/// of the default `tool_call` timeout, so the call's own deadline does not end it first.
const PARK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long further input requests of one round are waited for after the first.
const GATHER: std::time::Duration = std::time::Duration::from_millis(25);

/// Related messages buffered per call.
const EVENTS: usize = 64;

/// Calls waiting for the client's input, by `requestState`.
#[derive(Default)]
pub(super) struct Parked(Arc<Mutex<HashMap<String, Call>>>);

impl Parked {
    /// Parks `call` under a fresh unguessable `requestState`; cancels it if no retry
    /// takes it within [`PARK_TIMEOUT`].
    fn park(&self, call: Call) -> String {
        let state = format!("{STATE_PREFIX}{}", crate::session::mint_id());
        self.0.lock().insert(state.clone(), call);
        let parked = Arc::downgrade(&self.0);
        let key = state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(PARK_TIMEOUT).await;
            let expired = parked.upgrade().and_then(|p| p.lock().remove(&key));
            if let Some(call) = expired {
                tracing::debug!(session = call.session.key, "a call waiting for the client's input expired");
                call.session.cancel_request(&call.internal);
            }
        });
        state
    }

    /// The call parked under `state`, if it belongs to `context` and `method`.
    fn unpark(&self, state: &str, context: &str, method: &str) -> Option<Call> {
        let mut parked = self.0.lock();
        let call = parked.get(state)?;
        if call.context != context || call.method != method {
            return None;
        }
        parked.remove(state)
    }
}

/// One modern request as the transport read it.
pub(crate) struct ModernRequest {
    /// The endpoint it came to.
    pub(crate) scope: Scope,
    /// Who sent it, when clients authenticate.
    pub(crate) principal: Option<Arc<Principal>>,
    /// Its envelope, past the ladder.
    pub(crate) envelope: Envelope,
    /// The request.
    pub(crate) req: Request,
    /// Its `Mcp-Param-*` headers (lowercase names, in order).
    pub(crate) param_headers: Vec<(String, String)>,
    /// The client's address, when the transport knows it.
    pub(crate) peer: Option<std::net::IpAddr>,
    /// The trace context of its HTTP request's headers.
    pub(crate) trace: Option<TraceContext>,
}

/// The answer to one modern request.
#[derive(Debug)]
pub(crate) struct ModernAnswer {
    /// The JSON-RPC response, under the client's id.
    pub(crate) body: String,
    /// The HTTP status a plain JSON answer rides (the modern table: 400 for envelope and
    /// parameter errors, 404 for an unknown method; 503/429 for refusals).
    pub(crate) status: http::StatusCode,
    /// `Retry-After` of a refusal.
    pub(crate) retry_after: Option<std::time::Duration>,
}

impl ModernAnswer {
    /// An error answer under `id`.
    pub(crate) fn error(id: Option<&Id>, code: i64, message: &str, data: Option<Value>) -> ModernAnswer {
        ModernAnswer {
            body: jsonrpc::encode_error(id, code, message, data),
            status: modern::error_status(code),
            retry_after: None,
        }
    }

    pub(super) fn of(id: &Id, reply: &crate::call::Reply, hint: Option<HttpHint>) -> ModernAnswer {
        let status = match (hint, reply) {
            (Some(hint), _) => hint.status,
            (None, Ok(_)) => http::StatusCode::OK,
            (None, Err(error)) => modern::error_status(error_code(error)),
        };
        ModernAnswer { body: jsonrpc::encode_reply(Some(id), reply), status, retry_after: hint.map(|h| h.retry_after) }
    }
}

/// Where a modern request's related messages go: its own stream, without the markers
/// that only ask for one, and without log messages the request did not opt in to
/// (`_meta["io.modelcontextprotocol/logLevel"]`; none without it).
struct Relay {
    out: Option<mpsc::Sender<String>>,
    log_level: Option<usize>,
}

impl Relay {
    async fn send(&self, message: String) {
        let Some(out) = &self.out else { return };
        if message.is_empty() {
            return;
        }
        if let Ok(Message::Notification(n)) = jsonrpc::decode(&message)
            && n.method == LOG_MESSAGE
        {
            #[derive(serde::Deserialize)]
            struct Level {
                level: String,
            }
            let level = jsonrpc::view::<Level>(n.params.as_deref()).and_then(|l| level_rank(&l.level));
            if !matches!((level, self.log_level), (Some(level), Some(wanted)) if level >= wanted) {
                return;
            }
        }
        let _ = out.send(message).await;
    }
}

/// `notifications/message`.
const LOG_MESSAGE: &str = "notifications/message";

/// Syslog severities, least severe first.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

fn level_rank(level: &str) -> Option<usize> {
    LEVELS.iter().position(|l| *l == level)
}

/// The log level a request opted in to, if any.
fn requested_log_level(params: Option<&RawValue>) -> Option<usize> {
    let map = jsonrpc::view::<Map<String, Value>>(params)?;
    level_rank(map.get("_meta")?.get(modern::LOG_LEVEL_KEY)?.as_str()?)
}

/// An error as the modern era words it: resource-not-found is -32602 there (the
/// legacy -32002 is still what legacy clients get).
fn modern_error(error: Box<RawValue>) -> Box<RawValue> {
    if error_code(&error) != code::RESOURCE_NOT_FOUND {
        return error;
    }
    let mut map = jsonrpc::view::<Map<String, Value>>(Some(&error)).unwrap_or_default();
    map.insert("code".into(), json!(code::INVALID_PARAMS));
    jsonrpc::to_raw(&map)
}

/// The members of a retry the upstream call does not see.
#[derive(serde::Deserialize, Default)]
struct Retry {
    #[serde(rename = "requestState")]
    request_state: Option<String>,
    #[serde(rename = "inputResponses")]
    input_responses: Option<Map<String, Value>>,
}

/// Whether a server may ask the client something while a request of `method` runs.
fn may_ask(method_name: &str) -> bool {
    matches!(method_name, method::TOOLS_CALL | method::PROMPTS_GET | method::RESOURCES_READ)
}

/// A relayed message that is a request of the client, as an `inputRequests` entry: its
/// id (the key the client answers under) and `{method, params}`.
fn input_request(message: &str) -> Option<(String, Value)> {
    let Ok(Message::Request(req)) = jsonrpc::decode(message) else { return None };
    let key = req.id.to_value().as_str()?.to_owned();
    let params = jsonrpc::view::<Value>(req.params.as_deref()).unwrap_or_else(|| json!({}));
    Some((key, json!({"method": req.method, "params": params})))
}

fn error_code(error: &RawValue) -> i64 {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    jsonrpc::view::<Code>(Some(error)).map_or(code::INTERNAL_ERROR, |c| c.code)
}

impl Gateway {
    /// Answers one modern request of `scope` made as `principal`. `abandoned` fires when
    /// the client closes its response stream: the request is then cancelled upstream.
    ///
    /// A legacy upstream's request of the client (sampling, elicitation, roots) made
    /// while the call runs becomes an `input_required` result whose `inputRequests` carry
    /// it; the upstream call stays open, parked under the result's `requestState`, until
    /// the client's retry brings `inputResponses` (relayed upstream as the answers) and
    /// the same `requestState` — then the retry is answered with what the call gives
    /// next. A parked call whose retry does not come within [`PARK_TIMEOUT`] is
    /// cancelled.
    pub(crate) async fn handle_modern(
        self: Arc<Self>,
        request: ModernRequest,
        out: Option<mpsc::Sender<String>>,
        abandoned: CancellationToken,
    ) -> ModernAnswer {
        let ModernRequest { scope, principal, envelope, req, param_headers, peer, trace } = request;
        let id = req.id.clone();
        let log_level = requested_log_level(req.params.as_deref());
        if modern::is_removed(&req.method) {
            return ModernAnswer::error(Some(&id), code::METHOD_NOT_FOUND, "Method not found", None);
        }
        if req.method == modern::DISCOVER {
            let meta = meta::read(req.params.as_deref());
            let meta = trace_context::from_meta(meta.traceparent.as_ref(), meta.tracestate.as_ref());
            let span = spans::discover(&id, &RequestTrace::new(meta, trace));
            let found = self.context(scope, principal, &envelope, peer, None).instrument(span.clone()).await;
            spans::record_discovered(&span, found.as_ref().map(|(session, _)| session.key));
            return match found {
                Ok((session, _)) => {
                    session.touch();
                    ModernAnswer::of(&id, &Ok(discover(&session)), None)
                }
                Err(error) => ModernAnswer::of(&id, &self.rewriter().failure(&error, None), HttpHint::of(&error)),
            };
        }
        // A context this request opens is part of the client's trace.
        let opening = crate::telemetry::trace::on().then(|| {
            let meta = meta::read(req.params.as_deref());
            let meta = trace_context::from_meta(meta.traceparent.as_ref(), meta.tracestate.as_ref());
            RequestTrace::new(meta, trace.clone())
        });
        let (session, context) = match self.context(scope, principal, &envelope, peer, opening.as_ref()).await {
            Ok(found) => found,
            Err(error) => {
                let reply = self.rewriter().failure(&error, None);
                return ModernAnswer::of(&id, &reply, HttpHint::of(&error));
            }
        };
        session.touch();
        // A `requestState` of seawall's own resumes a parked call; any other (a modern
        // upstream's own) travels to the upstream with the retry, untouched.
        let retry = jsonrpc::view::<Retry>(req.params.as_deref()).unwrap_or_default();
        let call = match retry.request_state.filter(|s| s.starts_with(STATE_PREFIX)) {
            Some(state) => match self.parked.unpark(&state, &context, &req.method) {
                Some(call) => {
                    for (key, response) in retry.input_responses.unwrap_or_default() {
                        let response = jsonrpc::Response { id: Id::string(&key), body: Ok(jsonrpc::to_raw(&response)) };
                        self.handle_response(&call.session, response).await;
                    }
                    call
                }
                None => {
                    let message = "Invalid params: unknown or expired requestState";
                    return ModernAnswer::error(Some(&id), code::INVALID_PARAMS, message, None);
                }
            },
            None => {
                let caller = ModernCaller { param_headers: Arc::from(param_headers), peer };
                self.start(&session, context, req, caller, trace)
            }
        };
        self.drive(call, &id, Relay { out, log_level }, abandoned).await
    }

    /// Starts a request in its own task, under an id of seawall's own.
    fn start(
        self: &Arc<Self>,
        session: &Arc<Session>,
        context: String,
        req: Request,
        caller: ModernCaller,
        trace: Option<TraceContext>,
    ) -> Call {
        let internal = internal_id();
        let method = req.method.clone();
        let params = modern::strip_envelope(req.params);
        let inner = Request { id: internal.clone(), method: req.method, params };
        let (events_tx, events) = mpsc::channel::<String>(EVENTS);
        let (answer_tx, answer) = oneshot::channel();
        let gateway = Arc::clone(self);
        let task_session = Arc::clone(session);
        // A request that may run long may be asked something on the upstream's
        // standalone stream while it runs.
        let running = may_ask(&method).then(|| session.askers.running(events_tx.clone()));
        tokio::spawn(async move {
            let _running = running;
            let answered =
                gateway.answer_request_with(&task_session, inner, Some(events_tx), Some(caller), trace).await;
            let _ = answer_tx.send(answered);
        });
        Call { session: Arc::clone(session), context, internal, method, events, answer }
    }

    /// Follows a running call until it answers (then the client's request is answered
    /// with it) or asks the client for input (then the call is parked and the client
    /// gets `input_required`). Related notifications go to `out`.
    async fn drive(&self, mut call: Call, id: &Id, out: Relay, abandoned: CancellationToken) -> ModernAnswer {
        loop {
            tokio::select! {
                biased;
                answered = &mut call.answer => {
                    let Ok(answered) = answered else {
                        return ModernAnswer::error(Some(id), code::INTERNAL_ERROR, "Internal error", None);
                    };
                    // What the call sent before its answer (progress, logs) is queued
                    // before it: it goes out first, not lost to the answer's arrival.
                    while let Ok(message) = call.events.try_recv() {
                        if input_request(&message).is_none() {
                            out.send(message).await;
                        }
                    }
                    let reply = match answered.reply {
                        Ok(result) => Ok(modern::stamp_result(&call.method, result)),
                        Err(error) => Err(modern_error(error)),
                    };
                    return ModernAnswer::of(id, &reply, answered.http);
                }
                Some(message) = call.events.recv() => {
                    let Some(first) = input_request(&message) else {
                        out.send(message).await;
                        continue;
                    };
                    let mut requests = Map::new();
                    requests.insert(first.0, first.1);
                    // An upstream asks its questions of one round one after another:
                    // gather those that follow at once.
                    while let Ok(Some(next)) = tokio::time::timeout(GATHER, call.events.recv()).await {
                        match input_request(&next) {
                            Some((key, request)) => { requests.insert(key, request); }
                            None => out.send(next).await,
                        }
                    }
                    let state = self.parked.park(call);
                    let result = json!({"resultType": "input_required", "inputRequests": requests, "requestState": state});
                    return ModernAnswer::of(id, &Ok(jsonrpc::to_raw(&result)), None);
                }
                () = abandoned.cancelled(), if !abandoned.is_cancelled() => {
                    call.session.cancel_request(&call.internal);
                }
            }
        }
    }
}

/// The `server/discover` result: the modern versions seawall serves, the capabilities
/// of the context's upstreams (merged on `/mcp`, the upstream's own on
/// `/mcp/<upstream>`), their instructions, and seawall's (or the upstream's) info.
fn discover(session: &Session) -> Box<RawValue> {
    let init = match &session.scope {
        Scope::Single(name) => match session.slot(name) {
            Some(Slot::Up(link)) => link.init_result().map(|i| i.raw.clone()),
            _ => None,
        },
        Scope::Aggregate => None,
    };
    let init = init.unwrap_or_else(|| super::initialize::merged_init(session, mcp_era::LATEST_LEGACY));
    let init = meta::params_object(Some(&init)).unwrap_or_default();
    let mut capabilities = init.get("capabilities").cloned().unwrap_or_else(|| json!({}));
    if let Value::Object(caps) = &mut capabilities {
        caps.remove("tasks");
    }
    let mut result = Map::new();
    result.insert("supportedVersions".into(), json!(modern::MODERN_VERSIONS));
    result.insert("capabilities".into(), capabilities);
    if let Some(instructions) = init.get("instructions").filter(|i| i.is_string()) {
        result.insert("instructions".into(), instructions.clone());
    }
    let server_info = init.get("serverInfo").cloned().unwrap_or_else(|| json!({"name": "seawall"}));
    result.insert("_meta".into(), json!({ modern::SERVER_INFO_KEY: server_info }));
    modern::stamp_result(modern::DISCOVER, jsonrpc::to_raw(&result))
}
