//! What the gateway knows of each upstream's tools, learnt from the `tools/list` results
//! that pass through it (or that it asks for itself): annotations and schemas.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::hashing::Map as HashMap;
use crate::validation::SchemaKey;

/// What the gateway knows of one tool.
#[derive(Debug, Clone, Default)]
pub(crate) struct ToolInfo {
    /// `annotations.readOnlyHint`.
    pub read_only: bool,
    /// `annotations.idempotentHint`.
    pub idempotent: bool,
    /// `inputSchema`.
    pub input_schema: Option<Arc<Value>>,
    /// The cache key of `input_schema`, computed once here rather than on every call.
    pub input_key: Option<SchemaKey>,
    /// Whether `input_schema` marks any argument with `x-mcp-header` (arguments mirrored
    /// in `Mcp-Param-*` headers), found once here: most tools mark none, and their calls
    /// then skip the schema walk.
    pub mirrors_headers: bool,
    /// `outputSchema`.
    pub output_schema: Option<Arc<Value>>,
    /// The cache key of `output_schema`.
    pub output_key: Option<SchemaKey>,
}

/// Tools of one upstream, learnt from the `tools/list` results that pass through.
#[derive(Debug, Default)]
pub(crate) struct ToolCatalog {
    tools: parking_lot::RwLock<HashMap<String, Arc<ToolInfo>>>,
    /// When seawall last listed the tools itself (to learn an unknown tool's schema).
    refreshed: parking_lot::Mutex<Option<tokio::time::Instant>>,
    /// The upstream said its tools changed since they were last listed.
    stale: std::sync::atomic::AtomicBool,
    /// The pages learnt, with the names of their tools: one of them again teaches
    /// nothing. A new page forgets those that name any of its tools (what they said of
    /// them is no longer what is known).
    learnt: super::pages::PageMemo<Vec<String>>,
}

/// Shortest interval between two listings seawall makes itself for one upstream, so
/// calls of tools that do not exist cannot turn into a stream of `tools/list` requests.
const REFRESH_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Most tools remembered per upstream.
const MAX_TOOLS: usize = 4096;

#[derive(Deserialize)]
struct ListView {
    #[serde(default)]
    tools: Vec<ToolView>,
}

#[derive(Deserialize)]
struct ToolView {
    name: String,
    #[serde(default)]
    annotations: Option<AnnotationsView>,
    #[serde(rename = "inputSchema", default)]
    input_schema: Option<Value>,
    #[serde(rename = "outputSchema", default)]
    output_schema: Option<Value>,
}

#[derive(Deserialize)]
struct AnnotationsView {
    #[serde(rename = "readOnlyHint", default)]
    read_only: Option<bool>,
    #[serde(rename = "idempotentHint", default)]
    idempotent: Option<bool>,
}

impl ToolCatalog {
    /// Learns from one page of a `tools/list` result.
    pub(crate) fn learn(&self, result: &RawValue) {
        if self.learnt.get(result.get()).is_some() {
            return;
        }
        let Ok(list) = serde_json::from_str::<ListView>(result.get()) else { return };
        let named: std::collections::HashSet<&str> = list.tools.iter().map(|t| t.name.as_str()).collect();
        self.learnt.retain(|earlier| !earlier.iter().any(|name| named.contains(name.as_str())));
        let names = list.tools.iter().map(|t| t.name.clone()).collect();
        self.learnt.insert(result.get(), Arc::new(names));
        let mut tools = self.tools.write();
        for t in list.tools {
            if tools.len() >= MAX_TOOLS && !tools.contains_key(&t.name) {
                break;
            }
            let a = t.annotations.as_ref();
            let input_schema = t.input_schema.filter(Value::is_object).map(Arc::new);
            let output_schema = t.output_schema.filter(Value::is_object).map(Arc::new);
            let info = ToolInfo {
                read_only: a.and_then(|a| a.read_only).unwrap_or(false),
                idempotent: a.and_then(|a| a.idempotent).unwrap_or(false),
                input_key: input_schema.as_deref().map(SchemaKey::of),
                mirrors_headers: input_schema.as_deref().is_some_and(crate::mcp::modern::marks_headers),
                input_schema,
                output_key: output_schema.as_deref().map(SchemaKey::of),
                output_schema,
            };
            tools.insert(t.name, Arc::new(info));
        }
    }

    /// Claims the right to list the upstream's tools now; `false` if that happened less
    /// than the refresh interval ago.
    pub(crate) fn begin_refresh(&self) -> bool {
        let mut last = self.refreshed.lock();
        let now = tokio::time::Instant::now();
        if last.is_some_and(|t| now.duration_since(t) < REFRESH_INTERVAL) {
            return false;
        }
        *last = Some(now);
        self.stale.store(false, std::sync::atomic::Ordering::Relaxed);
        true
    }

    /// The upstream announced `notifications/tools/list_changed`: what is known may be out
    /// of date, so the next call lists the tools again (within the refresh interval).
    pub(crate) fn mark_stale(&self) {
        self.stale.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// A tool as last listed; `None` when it is unknown or the list may have changed
    /// since (then seawall lists the tools again before trusting it).
    pub(crate) fn fresh(&self, name: &str) -> Option<Arc<ToolInfo>> {
        if self.stale.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.get(name)
    }

    /// A tool, if listed.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<ToolInfo>> {
        self.tools.read().get(name).cloned()
    }

    /// How many tools are known.
    pub(crate) fn len(&self) -> usize {
        self.tools.read().len()
    }

    /// The names of the known tools, in no particular order.
    pub(crate) fn names(&self) -> Vec<String> {
        self.tools.read().keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn list_changed_makes_the_next_call_list_again_within_the_refresh_interval() {
        let c = ToolCatalog::default();
        c.learn(&crate::jsonrpc::raw_from_str(r#"{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}"#).unwrap());
        assert!(c.fresh("a").is_some());
        assert!(c.begin_refresh());
        c.mark_stale();
        assert!(c.fresh("a").is_none(), "a stale entry is not trusted");
        assert!(c.get("a").is_some(), "but it is still there if no listing can be made");
        assert!(!c.begin_refresh(), "at most one listing per interval");
        tokio::time::advance(REFRESH_INTERVAL).await;
        assert!(c.begin_refresh());
        assert!(c.fresh("a").is_some());
    }
}
