//! What the operator configured for one upstream, resolved against the defaults, plus
//! what the gateway learnt about its tools ([`ToolCatalog`]).

use std::collections::BTreeMap;
use std::time::Duration;

use crate::catalog::ToolCatalog;
use crate::config::{BreakerConfig, ConcurrencyConfig, RetryConfig, SanitizeLevel, Timeouts, ToolConfig};
use crate::mcp::method;

/// Resolved settings of one upstream.
#[derive(Debug)]
pub(crate) struct UpstreamSettings {
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
    /// How its text is sanitised before a client sees it.
    pub sanitize: SanitizeLevel,
    /// Per-tool settings.
    pub tools: BTreeMap<String, ToolConfig>,
    /// Tools as the upstream last listed them (kept by a reload that leaves the way to
    /// the upstream alone).
    pub catalog: std::sync::Arc<ToolCatalog>,
    /// Its `tools/list` and `prompts/list` pages as merged lists carry them.
    pub prefixed: crate::catalog::pages::PrefixedLists,
    /// What clients see of its tools where the operator overrides it; `None` (nothing
    /// looked up on the call path) when nothing is overridden.
    pub tool_overrides: Option<std::sync::Arc<crate::catalog::overrides::Overrides>>,
    /// The same for its prompts.
    pub prompt_overrides: Option<std::sync::Arc<crate::catalog::overrides::Overrides>>,
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
        let config = self.tools.get(tool);
        if config.is_some_and(|t| t.idempotent) {
            return true;
        }
        // Each hint as clients see it: the operator's (always believed) over the
        // upstream's (believed with `trust_annotations`), which is looked up only when
        // the operator left a hint to it.
        let set = config.map(|t| t.annotations).unwrap_or_default();
        let left = set.read_only_hint.is_none() || set.idempotent_hint.is_none();
        let listed = (self.trust_annotations && left).then(|| self.catalog.get(tool)).flatten();
        let read_only = set.read_only_hint.unwrap_or_else(|| listed.as_ref().is_some_and(|t| t.read_only));
        let idempotent = set.idempotent_hint.unwrap_or_else(|| listed.as_ref().is_some_and(|t| t.idempotent));
        read_only || idempotent
    }

    /// The overall deadline for a request (for `tools/call`, when no progress arrives).
    pub(crate) fn timeout(&self, method: &str, tool: Option<&str>) -> Duration {
        if method != method::TOOLS_CALL {
            return self.timeouts.request;
        }
        tool.and_then(|t| self.tools.get(t)).and_then(|t| t.timeout).unwrap_or(self.timeouts.tool_call)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ToolAnnotations;

    fn settings(trust: bool) -> UpstreamSettings {
        let mut tools = BTreeMap::new();
        tools.insert(
            "lookup".to_owned(),
            ToolConfig { idempotent: true, timeout: Some(Duration::from_secs(5)), ..ToolConfig::default() },
        );
        let hinted = |read_only_hint, idempotent_hint| ToolConfig {
            annotations: ToolAnnotations { read_only_hint, idempotent_hint, ..ToolAnnotations::default() },
            ..ToolConfig::default()
        };
        tools.insert("marked".to_owned(), hinted(None, Some(true)));
        tools.insert("echo_unmarked".to_owned(), hinted(Some(false), None));
        UpstreamSettings {
            timeouts: Timeouts::default(),
            retry: RetryConfig::default(),
            breaker: BreakerConfig::default(),
            concurrency: ConcurrencyConfig::default(),
            trust_annotations: trust,
            sanitize: SanitizeLevel::default(),
            tools,
            catalog: Default::default(),
            prefixed: Default::default(),
            tool_overrides: None,
            prompt_overrides: None,
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
            assert!(s.is_idempotent("tools/call", Some("marked")), "the operator's hint is believed");
        }
        // The operator's `false` wins over the upstream's `true` (trusted or not).
        let s = settings(true);
        s.catalog.learn(
            &crate::jsonrpc::raw_from_str(
                r#"{"tools":[{"name":"echo_unmarked","annotations":{"readOnlyHint":true}}]}"#,
            )
            .unwrap(),
        );
        assert!(!s.is_idempotent("tools/call", Some("echo_unmarked")));
        let s = settings(false);
        assert_eq!(s.timeout("tools/call", Some("lookup")), Duration::from_secs(5));
        assert_eq!(s.timeout("tools/call", Some("other")), Duration::from_secs(60));
        assert_eq!(s.timeout("prompts/get", None), Duration::from_secs(15));
    }
}
