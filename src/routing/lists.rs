//! List methods: fan-out to every upstream with the capability, and the merge of their
//! pages under one gateway cursor.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Router, cursor};
use crate::call::{GatewayError, Reply};
use crate::client::ClientRequest;
use crate::jsonrpc;
use crate::mcp::{meta, method};
use crate::telemetry::trace::spans;
use crate::upstream::registry::UpstreamHandle;
use tracing::Instrument as _;

/// The list methods and how their results are merged.
pub(super) struct ListKind {
    /// The array in the result.
    key: &'static str,
    /// The server capability that must be declared.
    capability: &'static str,
    /// Whether item names get the upstream prefix.
    prefix: bool,
}

pub(super) fn list_kind(method: &str) -> Option<ListKind> {
    Some(match method {
        method::TOOLS_LIST => ListKind { key: "tools", capability: "tools", prefix: true },
        method::PROMPTS_LIST => ListKind { key: "prompts", capability: "prompts", prefix: true },
        method::RESOURCES_LIST => ListKind { key: "resources", capability: "resources", prefix: false },
        method::RESOURCE_TEMPLATES_LIST => {
            ListKind { key: "resourceTemplates", capability: "resources", prefix: false }
        }
        _ => return None,
    })
}

impl Router {
    /// Sends a request to every upstream with a capability; `{}` if any accepted it.
    pub(super) async fn broadcast(
        &self,
        ctx: &ClientRequest,
        method: &str,
        params: Option<Box<RawValue>>,
        capability: &str,
    ) -> Result<Reply, GatewayError> {
        let targets = self.with_capability(ctx, capability).await;
        let span = spans::fan_out(method, targets.len());
        let calls = targets.iter().map(|h| self.forward(ctx, h, method, params.clone()));
        let results = futures::future::join_all(calls).instrument(span.clone()).await;
        if !span.is_none() {
            let answered = results.iter().filter(|r| matches!(r, Ok(Ok(_)))).count();
            spans::record_fan_out(&span, answered, results.len() - answered);
        }
        let mut first_failure = None;
        for result in results {
            match result {
                Ok(Ok(_)) => return Ok(Ok(jsonrpc::to_raw(&json!({})))),
                other => {
                    first_failure.get_or_insert(other);
                }
            }
        }
        first_failure.unwrap_or_else(|| Ok(Ok(jsonrpc::to_raw(&json!({})))))
    }

    /// The session's upstreams (connected, or connectable now) that declare a capability.
    pub(super) async fn with_capability(&self, ctx: &ClientRequest, capability: &str) -> Vec<Arc<UpstreamHandle>> {
        let mut out = Vec::new();
        for handle in self.upstreams.iter() {
            let Ok(link) = self.link(&ctx.session, handle).await else {
                continue;
            };
            if link.init_result().is_some_and(|init| init.has(capability)) {
                out.push(Arc::clone(handle));
            }
        }
        out
    }

    /// Fans a list method out to every upstream and merges the pages.
    pub(super) async fn list(
        &self,
        ctx: &ClientRequest,
        method: &str,
        kind: &ListKind,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, GatewayError> {
        let mut base = meta::params_object(params.as_deref()).unwrap_or_default();
        let targets: Vec<(Arc<UpstreamHandle>, Option<String>)> = match base.remove("cursor") {
            None | Some(Value::Null) => {
                self.with_capability(ctx, kind.capability).await.into_iter().map(|h| (h, None)).collect()
            }
            Some(Value::String(c)) => {
                let cursors = cursor::decode(&c).ok_or_else(|| GatewayError::InvalidParams("invalid cursor".into()))?;
                let mut targets = Vec::new();
                for (name, upstream_cursor) in cursors {
                    let handle = self
                        .upstreams
                        .get(&name)
                        .ok_or_else(|| GatewayError::InvalidParams("invalid cursor".into()))?;
                    targets.push((Arc::clone(handle), Some(upstream_cursor)));
                }
                targets
            }
            Some(_) => {
                return Err(GatewayError::InvalidParams("cursor must be a string".into()));
            }
        };
        let calls = targets.iter().map(|(handle, upstream_cursor)| {
            let mut p = base.clone();
            if let Some(c) = upstream_cursor {
                p.insert("cursor".into(), Value::String(c.clone()));
            }
            let params = (!p.is_empty() || params.is_some()).then(|| jsonrpc::to_raw(&p));
            async move { (handle, self.forward(ctx, handle, method, params).await) }
        });
        let span = spans::fan_out(method, targets.len());
        let results = futures::future::join_all(calls).instrument(span.clone()).await;
        if !span.is_none() {
            let answered = results.iter().filter(|(_, r)| matches!(r, Ok(Ok(_)))).count();
            spans::record_fan_out(&span, answered, results.len() - answered);
        }

        let mut items = Vec::new();
        let mut next = cursor::Cursors::new();
        let mut failures = Vec::new();
        let mut succeeded = 0usize;
        for (handle, result) in results {
            match result {
                Ok(Ok(result)) => {
                    succeeded += 1;
                    self.merge_page(ctx, handle, kind, &result, &mut items, &mut next);
                }
                Ok(Err(error)) => {
                    tracing::warn!(upstream = %handle.name, method, error = %error.get(), "upstream refused a list request");
                    failures.push(Ok(Err(error)));
                }
                Err(e) => {
                    tracing::warn!(upstream = %handle.name, method, error = %e, "list request failed");
                    failures.push(Err(e));
                }
            }
        }
        if succeeded == 0
            && let Some(failure) = failures.into_iter().next()
        {
            return failure;
        }
        let mut result = Map::new();
        result.insert(kind.key.into(), Value::Array(items));
        if !next.is_empty() {
            result.insert("nextCursor".into(), Value::String(cursor::encode(&next)));
        }
        Ok(Ok(jsonrpc::to_raw(&result)))
    }

    pub(super) fn merge_page(
        &self,
        ctx: &ClientRequest,
        handle: &UpstreamHandle,
        kind: &ListKind,
        result: &RawValue,
        items: &mut Vec<Value>,
        next: &mut cursor::Cursors,
    ) {
        let Ok(Value::Object(mut page)) = serde_json::from_str::<Value>(result.get()) else {
            tracing::warn!(upstream = %handle.name, "list result is not an object");
            return;
        };
        if let Some(Value::String(c)) = page.remove("nextCursor") {
            next.insert(handle.name.to_string(), c);
        }
        let Some(Value::Array(entries)) = page.remove(kind.key) else {
            return;
        };
        let mut catalog = ctx.session.resources.lock();
        for mut entry in entries {
            let Value::Object(obj) = &mut entry else {
                continue;
            };
            if kind.prefix {
                let Some(Value::String(name)) = obj.get("name") else {
                    continue;
                };
                let prefixed = format!("{}{}{name}", handle.name, self.separator);
                obj.insert("name".into(), Value::String(prefixed));
            }
            match kind.key {
                "resources" => {
                    if let Some(Value::String(uri)) = obj.get("uri") {
                        let owner = catalog.learn_resource(uri, &handle.name);
                        if owner != handle.name {
                            tracing::warn!(
                                upstream = %handle.name,
                                served_by = %owner,
                                uri = %crate::sanitize::ident(uri),
                                "two upstreams list the same resource URI; it is listed and read from the first"
                            );
                            continue;
                        }
                    }
                }
                "resourceTemplates" => {
                    if let Some(Value::String(t)) = obj.get("uriTemplate") {
                        catalog.learn_template(t, &handle.name);
                    }
                }
                _ => {}
            }
            items.push(entry);
        }
        if kind.key == "resourceTemplates" && next.is_empty() {
            catalog.templates_loaded = true;
        }
    }

    /// With `hide_open_tools`, drops tools whose breaker is open from a `tools/list` page.
    pub(super) fn without_open_tools(&self, handle: &UpstreamHandle, result: Box<RawValue>) -> Box<RawValue> {
        if !handle.policy.breaker.hide_open_tools {
            return result;
        }
        let Ok(Value::Object(mut page)) = serde_json::from_str::<Value>(result.get()) else { return result };
        let Some(Value::Array(tools)) = page.get_mut("tools") else { return result };
        let before = tools.len();
        tools.retain(|t| !t["name"].as_str().is_some_and(|name| self.breakers.is_open(&handle.name, Some(name))));
        if tools.len() == before {
            return result;
        }
        jsonrpc::to_raw(&page)
    }
}
