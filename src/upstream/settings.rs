//! What the operator configured for one upstream, resolved against the defaults, plus
//! what the gateway learnt about its tools.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::{BreakerConfig, ConcurrencyConfig, RetryConfig, Timeouts, ToolConfig};
use crate::mcp::method;
use crate::validation::SchemaKey;

/// Resolved settings of one upstream.
#[derive(Debug)]
pub struct UpstreamSettings {
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries.
    pub retry: RetryConfig,
    /// Circuit breakers.
    pub breaker: BreakerConfig,
    /// Load shedding.
    pub concurrency: ConcurrencyConfig,
    /// Whether tool annotations are believed.
    pub trust_annotations: bool,
    /// Per-tool settings.
    pub tools: BTreeMap<String, ToolConfig>,
    /// Tools as the upstream last listed them.
    pub catalog: ToolCatalog,
}

/// Methods that are safe to send twice.
pub(crate) const IDEMPOTENT_METHODS: &[&str] = &[
    method::PING,
    method::TOOLS_LIST,
    method::PROMPTS_LIST,
    method::RESOURCES_LIST,
    method::RESOURCE_TEMPLATES_LIST,
    method::RESOURCES_READ,
    method::PROMPTS_GET,
    method::COMPLETION_COMPLETE,
    "server/discover",
];

impl UpstreamSettings {
    /// Whether a request may be sent again after a failure that may have reached the upstream.
    pub(crate) fn is_idempotent(&self, method: &str, tool: Option<&str>) -> bool {
        if IDEMPOTENT_METHODS.contains(&method) || method.ends_with("/list") {
            return true;
        }
        if method != method::TOOLS_CALL {
            return false;
        }
        let Some(tool) = tool else { return false };
        if self.tools.get(tool).is_some_and(|t| t.idempotent) {
            return true;
        }
        self.trust_annotations && self.catalog.get(tool).is_some_and(|t| t.read_only || t.idempotent)
    }

    /// The overall deadline for a request (for `tools/call`, when no progress arrives).
    pub(crate) fn timeout(&self, method: &str, tool: Option<&str>) -> Duration {
        if method != method::TOOLS_CALL {
            return self.timeouts.request;
        }
        tool.and_then(|t| self.tools.get(t)).and_then(|t| t.timeout).unwrap_or(self.timeouts.tool_call)
    }
}

/// What the gateway knows of one tool.
#[derive(Debug, Clone, Default)]
pub struct ToolInfo {
    /// `annotations.readOnlyHint`.
    pub read_only: bool,
    /// `annotations.idempotentHint`.
    pub idempotent: bool,
    /// `inputSchema`.
    pub input_schema: Option<Arc<Value>>,
    /// The cache key of `input_schema`, computed once here rather than on every call.
    pub input_key: Option<SchemaKey>,
    /// `outputSchema`.
    pub output_schema: Option<Arc<Value>>,
    /// The cache key of `output_schema`.
    pub output_key: Option<SchemaKey>,
}

/// Tools of one upstream, learnt from the `tools/list` results that pass through.
#[derive(Debug, Default)]
pub struct ToolCatalog {
    tools: parking_lot::RwLock<HashMap<String, Arc<ToolInfo>>>,
    /// When seawall last listed the tools itself (to learn an unknown tool's schema).
    refreshed: parking_lot::Mutex<Option<tokio::time::Instant>>,
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
        let Ok(list) = serde_json::from_str::<ListView>(result.get()) else { return };
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
        true
    }

    /// A tool, if listed.
    pub(crate) fn get(&self, name: &str) -> Option<Arc<ToolInfo>> {
        self.tools.read().get(name).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(trust: bool) -> UpstreamSettings {
        let mut tools = BTreeMap::new();
        tools.insert("lookup".to_owned(), ToolConfig { idempotent: true, timeout: Some(Duration::from_secs(5)) });
        UpstreamSettings {
            timeouts: Timeouts::default(),
            retry: RetryConfig::default(),
            breaker: BreakerConfig::default(),
            concurrency: ConcurrencyConfig::default(),
            trust_annotations: trust,
            tools,
            catalog: ToolCatalog::default(),
        }
    }

    #[test]
    fn idempotency_follows_method_config_and_trusted_annotations() {
        let list = crate::jsonrpc::raw_from_str(
            r#"{"tools":[{"name":"echo","annotations":{"readOnlyHint":true}},{"name":"write","inputSchema":{"type":"object"}}]}"#,
        )
        .unwrap();
        for trust in [false, true] {
            let s = settings(trust);
            s.catalog.learn(&list);
            assert!(s.is_idempotent("resources/read", None));
            assert!(s.is_idempotent("tools/list", None));
            assert!(s.is_idempotent("tools/call", Some("lookup")));
            assert!(!s.is_idempotent("tools/call", Some("write")));
            assert_eq!(s.is_idempotent("tools/call", Some("echo")), trust);
            assert!(!s.is_idempotent("resources/subscribe", None));
        }
        let s = settings(false);
        assert_eq!(s.timeout("tools/call", Some("lookup")), Duration::from_secs(5));
        assert_eq!(s.timeout("tools/call", Some("other")), Duration::from_secs(60));
        assert_eq!(s.timeout("prompts/get", None), Duration::from_secs(15));
    }
}
