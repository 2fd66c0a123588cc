//! `subscriptions/listen` (2026-07-28): a modern client's stream of list changes and
//! resource updates, served from the context's upstream sessions, with the resource
//! subscriptions made upstream once per context and withdrawn with the last stream.

use std::sync::Arc;

use futures::StreamExt as _;
use serde_json::{Map, Value, json};

use super::Gateway;
use super::context::internal_id;
use super::modern::{ModernAnswer, ModernRequest};
use crate::client::HttpHint;
use crate::jsonrpc::{self, Message, Request, code};
use crate::mcp::method;
use crate::session::Session;

/// The messages of one `subscriptions/listen` stream.
pub(crate) type ListenStream = std::pin::Pin<Box<dyn futures::Stream<Item = String> + Send>>;

#[derive(serde::Deserialize)]
struct ListenParams {
    notifications: Value,
}

/// The first message of a `subscriptions/listen` stream.
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// `notifications/resources/updated`.
const RESOURCE_UPDATED: &str = "notifications/resources/updated";
/// Filter keys and the list changes they select.
const TOOLS_CHANGED: (&str, &str) = ("toolsListChanged", "notifications/tools/list_changed");
const PROMPTS_CHANGED: (&str, &str) = ("promptsListChanged", "notifications/prompts/list_changed");
const RESOURCES_CHANGED: (&str, &str) = ("resourcesListChanged", "notifications/resources/list_changed");

/// A notification tagged with the listen request's id.
fn tagged(method_name: &str, params: &Value, subscription: &Value) -> String {
    let mut params = params.as_object().cloned().unwrap_or_default();
    let meta = params.entry("_meta").or_insert_with(|| json!({}));
    if let Value::Object(meta) = meta {
        meta.insert("io.modelcontextprotocol/subscriptionId".into(), subscription.clone());
    }
    jsonrpc::encode_notification(method_name, Some(&jsonrpc::to_raw(&params)))
}

/// Withdraws a listen stream's resource subscriptions when it closes.
struct Unsubscribe {
    gateway: Arc<Gateway>,
    session: Arc<Session>,
    context: String,
    uris: Vec<String>,
}

impl Drop for Unsubscribe {
    fn drop(&mut self) {
        let mut last = Vec::new();
        {
            let mut counts = self.gateway.contexts.subscribed.lock();
            for uri in self.uris.drain(..) {
                let key = format!("{}\u{0}{uri}", self.context);
                if let Some(n) = counts.get_mut(&key) {
                    *n -= 1;
                    if *n == 0 {
                        counts.remove(&key);
                        last.push(uri);
                    }
                }
            }
        }
        if last.is_empty() || self.session.ended().is_cancelled() {
            return;
        }
        let (gateway, session) = (Arc::clone(&self.gateway), Arc::clone(&self.session));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for uri in last {
                    let internal = internal_id();
                    let params = jsonrpc::to_raw(&json!({ "uri": uri }));
                    let req =
                        Request { id: internal, method: method::RESOURCES_UNSUBSCRIBE.into(), params: Some(params) };
                    let _ = gateway.answer_request(&session, req, None).await;
                }
            });
        }
    }
}

impl Gateway {
    /// Opens a `subscriptions/listen` stream: its acknowledgement (the filter as
    /// honoured), then every list change of the context's upstreams and every update of
    /// the subscribed resources the filter asks for, each tagged with the listen
    /// request's id under `_meta["io.modelcontextprotocol/subscriptionId"]`. Resource
    /// subscriptions are made upstream for the context, counted, and withdrawn when the
    /// last stream that asked for one closes. `Err`: the request's answer instead.
    pub(crate) async fn listen(self: Arc<Self>, request: ModernRequest) -> Result<ListenStream, ModernAnswer> {
        let ModernRequest { scope, principal, envelope, req, peer, .. } = request;
        let id = req.id.clone();
        let filter = jsonrpc::view::<ListenParams>(req.params.as_deref()).map(|p| p.notifications);
        let Some(Value::Object(filter)) = filter else {
            let message = "Invalid params: subscriptions/listen needs params.notifications (an object)";
            return Err(ModernAnswer::error(Some(&id), code::INVALID_PARAMS, message, None));
        };
        let (session, context) = match self.context(scope, principal, &envelope, peer, None).await {
            Ok(found) => found,
            Err(error) => {
                let reply = self.rewriter().failure(&error, None);
                return Err(ModernAnswer::of(&id, &reply, HttpHint::of(&error)));
            }
        };
        let flag = |key: &str| filter.get(key).and_then(Value::as_bool) == Some(true);
        let wanted = [TOOLS_CHANGED, PROMPTS_CHANGED, RESOURCES_CHANGED]
            .into_iter()
            .filter(|(key, _)| flag(key))
            .collect::<Vec<_>>();
        let asked: Vec<String> = filter
            .get("resourceSubscriptions")
            .and_then(Value::as_array)
            .map(|uris| uris.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        let mut subscribed = Vec::new();
        for uri in asked {
            if self.subscribe(&session, &context, &uri).await {
                subscribed.push(uri);
            }
        }
        let mut honoured = Map::new();
        for (key, _) in &wanted {
            honoured.insert((*key).to_owned(), json!(true));
        }
        if !subscribed.is_empty() {
            honoured.insert("resourceSubscriptions".into(), json!(subscribed));
        }
        let rx = session.listen();
        session.open_upstream_streams().await;
        let session_ended = session.ended();
        let tag = id.to_value();
        let ack = tagged(ACKNOWLEDGED, &json!({"notifications": honoured}), &tag);
        let methods: Vec<&'static str> = wanted.iter().map(|(_, m)| *m).collect();
        let guard = Unsubscribe { gateway: Arc::clone(&self), session, context, uris: subscribed.clone() };
        let notes = futures::stream::unfold((rx, guard), move |(mut rx, guard)| {
            let methods = methods.clone();
            let uris = subscribed.clone();
            let tag = tag.clone();
            async move {
                loop {
                    let message = match rx.recv().await {
                        Ok(message) => message,
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                            tracing::debug!(lost = n, "a subscriptions/listen stream lagged");
                            continue;
                        }
                        Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
                    };
                    let Ok(Message::Notification(n)) = jsonrpc::decode(&message) else { continue };
                    let params = jsonrpc::view::<Value>(n.params.as_deref()).unwrap_or_else(|| json!({}));
                    let wanted = methods.contains(&n.method.as_str())
                        || (n.method == RESOURCE_UPDATED
                            && params.get("uri").and_then(Value::as_str).is_some_and(|u| uris.iter().any(|w| w == u)));
                    if wanted {
                        return Some((tagged(&n.method, &params, &tag), (rx, guard)));
                    }
                }
            }
        });
        // The stream ends with its context (idle expiry does not take a listened one;
        // shutdown does).
        let ended = session_ended;
        let until = async move { ended.cancelled().await };
        Ok(Box::pin(futures::stream::once(async move { ack }).chain(notes).take_until(Box::pin(until))))
    }

    /// Subscribes the context to `uri` upstream, unless it already is (counted).
    async fn subscribe(&self, session: &Arc<Session>, context: &str, uri: &str) -> bool {
        let key = format!("{context}\u{0}{uri}");
        if let Some(n) = self.contexts.subscribed.lock().get_mut(&key) {
            *n += 1;
            return true;
        }
        let internal = internal_id();
        let params = jsonrpc::to_raw(&json!({ "uri": uri }));
        let req = Request { id: internal, method: method::RESOURCES_SUBSCRIBE.into(), params: Some(params) };
        let answered = self.answer_request(session, req, None).await;
        if answered.reply.is_err() {
            return false;
        }
        *self.contexts.subscribed.lock().entry(key).or_insert(0) += 1;
        true
    }
}
