//! List methods: fan-out to every upstream with the capability, and the merge of their
//! pages under one gateway cursor.

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{Router, cursor};
use crate::call::GatewayError;
use crate::catalog::pages::PrefixedPage;
use crate::client::ClientRequest;
use crate::client::Routed;
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
    ) -> Result<Routed, GatewayError> {
        let targets = self.with_capability(ctx, capability).await;
        let span = spans::fan_out(method, targets.len());
        let calls = targets.iter().map(|h| self.forward(ctx, h, method, params.clone()));
        let results = futures::future::join_all(calls).instrument(span.clone()).await;
        if !span.is_none() {
            let answered = results.iter().filter(|r| r.as_ref().is_ok_and(|r| r.as_result().is_some())).count();
            spans::record_fan_out(&span, answered, results.len() - answered);
        }
        let mut first_failure = None;
        for result in results {
            match result {
                Ok(routed) if routed.as_result().is_some() => return Ok(Routed::result(jsonrpc::to_raw(&json!({})))),
                other => {
                    first_failure.get_or_insert(other);
                }
            }
        }
        first_failure.unwrap_or_else(|| Ok(Routed::result(jsonrpc::to_raw(&json!({})))))
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
    ) -> Result<Routed, GatewayError> {
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
            let answered = results.iter().filter(|(_, r)| r.as_ref().is_ok_and(|r| r.as_result().is_some())).count();
            spans::record_fan_out(&span, answered, results.len() - answered);
        }

        let mut items = Vec::new();
        let mut pages = Vec::new();
        let mut next = cursor::Cursors::new();
        let mut failures = Vec::new();
        let mut succeeded = 0usize;
        for (handle, result) in results {
            match result {
                Ok(routed) if routed.as_result().is_some() => {
                    let Some(result) = routed.as_result() else { continue };
                    succeeded += 1;
                    if kind.prefix {
                        let page = self.prefixed_page(handle, kind, result);
                        if let Some(c) = &page.next_cursor {
                            next.insert(handle.name.to_string(), c.clone());
                        }
                        pages.push(page);
                    } else {
                        self.merge_page(ctx, handle, kind, result, &mut items, &mut next);
                    }
                }
                Ok(refused) => {
                    tracing::warn!(upstream = %handle.name, method, "upstream refused a list request");
                    failures.push(Ok(refused));
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
        if kind.prefix {
            return Ok(Routed::result(self.merged.get(kind.key, &pages, &next)));
        }
        let mut result = Map::new();
        result.insert(kind.key.into(), Value::Array(items));
        if !next.is_empty() {
            result.insert("nextCursor".into(), Value::String(cursor::encode(&next)));
        }
        Ok(Routed::result(jsonrpc::to_raw(&result)))
    }

    /// An upstream's page of a prefixed list (tools, prompts) with its names prefixed:
    /// read once per distinct page, then found by its bytes.
    fn prefixed_page(&self, handle: &UpstreamHandle, kind: &ListKind, result: &RawValue) -> Arc<PrefixedPage> {
        let memo = match kind.key {
            "prompts" => &handle.policy.prefixed.prompts,
            _ => &handle.policy.prefixed.tools,
        };
        if let Some(page) = memo.get(result.get()) {
            return page;
        }
        let page = Arc::new(self.prefix_page(handle, kind, result));
        memo.insert(result.get(), Arc::clone(&page));
        page
    }

    fn prefix_page(&self, handle: &UpstreamHandle, kind: &ListKind, result: &RawValue) -> PrefixedPage {
        let Ok(Value::Object(mut page)) = serde_json::from_str::<Value>(result.get()) else {
            tracing::warn!(upstream = %handle.name, "list result is not an object");
            return PrefixedPage::default();
        };
        let next_cursor = match page.remove("nextCursor") {
            Some(Value::String(c)) => Some(c),
            _ => None,
        };
        let Some(Value::Array(found)) = page.remove(kind.key) else {
            return PrefixedPage { entries: Vec::new(), next_cursor };
        };
        let mut entries = Vec::with_capacity(found.len());
        for mut entry in found {
            let Value::Object(obj) = &mut entry else { continue };
            let Some(Value::String(name)) = obj.get("name") else { continue };
            let prefixed = format!("{}{}{name}", handle.name, self.separator);
            obj.insert("name".into(), Value::String(prefixed));
            entries.push(jsonrpc::to_json(&entry));
        }
        PrefixedPage { entries, next_cursor }
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
            match kind.key {
                "resources" => {
                    if let Some(Value::String(uri)) = obj.get("uri") {
                        let owner = catalog.learn_resource(uri, &handle.name);
                        if owner != handle.name {
                            self.duplicates.warn(uri, &owner, &handle.name);
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

/// The last merged results of the prefixed lists, by the pages they were made of: the
/// same pages (the same upstreams answering the same bytes) make the same result, which
/// is then copied rather than written again.
#[derive(Default)]
pub(super) struct MergedLists {
    results: parking_lot::Mutex<Vec<Merged>>,
}

struct Merged {
    key: &'static str,
    pages: Vec<Arc<PrefixedPage>>,
    result: Box<RawValue>,
}

/// Most merged results kept.
const MAX_MERGED: usize = 8;

impl MergedLists {
    /// The merged list of `pages` (in the upstreams' order) under `key`, with the
    /// gateway cursor of `next`.
    fn get(&self, key: &'static str, pages: &[Arc<PrefixedPage>], next: &cursor::Cursors) -> Box<RawValue> {
        let same = |m: &Merged| {
            m.key == key && m.pages.len() == pages.len() && m.pages.iter().zip(pages).all(|(a, b)| Arc::ptr_eq(a, b))
        };
        if let Some(m) = self.results.lock().iter().find(|m| same(m)) {
            return m.result.clone();
        }
        let result = merge(key, pages, next);
        let mut results = self.results.lock();
        if results.len() >= MAX_MERGED {
            results.remove(0);
        }
        results.push(Merged { key, pages: pages.to_vec(), result: result.clone() });
        result
    }
}

/// `{"<key>": [the pages' entries], "nextCursor": ...}`, written from the entries' text.
fn merge(key: &str, pages: &[Arc<PrefixedPage>], next: &cursor::Cursors) -> Box<RawValue> {
    let size: usize = pages.iter().flat_map(|p| &p.entries).map(|e| e.len() + 1).sum();
    let mut text = String::with_capacity(size + key.len() + 64);
    text.push_str("{\"");
    text.push_str(key);
    text.push_str("\":[");
    let mut first = true;
    for entry in pages.iter().flat_map(|p| &p.entries) {
        if !first {
            text.push(',');
        }
        first = false;
        text.push_str(entry);
    }
    text.push(']');
    if !next.is_empty() {
        text.push_str(",\"nextCursor\":");
        text.push_str(&jsonrpc::to_json(&cursor::encode(next)));
    }
    text.push('}');
    RawValue::from_string(text).unwrap_or_else(|e| {
        // Every part is serde_json's own output: this does not happen.
        tracing::error!(error = %e, list = key, "a merged list is not valid JSON");
        jsonrpc::to_raw(&json!({ key: [] }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(entries: &[&str], next_cursor: Option<&str>) -> Arc<PrefixedPage> {
        Arc::new(PrefixedPage {
            entries: entries.iter().map(|e| (*e).to_owned()).collect(),
            next_cursor: next_cursor.map(str::to_owned),
        })
    }

    #[test]
    fn merged_pages_are_one_valid_list_with_the_gateway_cursor() {
        let a = page(&[r#"{"name":"a__x"}"#, r#"{"name":"a__y"}"#], Some("2"));
        let b = page(&[], None);
        let c = page(&[r#"{"name":"c__z","inputSchema":{"type":"object"}}"#], None);
        let next: cursor::Cursors = [("a".to_owned(), "2".to_owned())].into();
        let merged = MergedLists::default();
        let first = merged.get("tools", &[Arc::clone(&a), Arc::clone(&b), Arc::clone(&c)], &next);
        let value: Value = serde_json::from_str(first.get()).unwrap();
        let names: Vec<&str> = value["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["a__x", "a__y", "c__z"]);
        assert_eq!(cursor::decode(value["nextCursor"].as_str().unwrap()), Some(next.clone()));
        // The same pages give the same result; other pages another one.
        assert_eq!(merged.get("tools", &[Arc::clone(&a), Arc::clone(&b), Arc::clone(&c)], &next).get(), first.get());
        let other = merged.get("tools", &[Arc::clone(&c)], &cursor::Cursors::new());
        assert_eq!(other.get(), r#"{"tools":[{"name":"c__z","inputSchema":{"type":"object"}}]}"#);
        assert_eq!(merged.get("prompts", &[], &cursor::Cursors::new()).get(), r#"{"prompts":[]}"#);
    }
}
