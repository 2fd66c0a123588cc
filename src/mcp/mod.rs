//! The few typed views of MCP the gateway acts on, and the protocol versions it speaks.
//!
//! Everything else in a message stays raw JSON (see [`crate::jsonrpc`]).

pub(crate) mod init;
pub(crate) mod meta;
pub(crate) mod modern;
pub(crate) mod trace_context;

/// Protocol versions of the legacy (session) era that seawall speaks, oldest first.
pub(crate) const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The newest legacy version; offered when a client asks for one seawall does not know.
pub(crate) const LATEST_LEGACY: &str = "2025-11-25";

/// Whether seawall can speak this protocol version.
pub(crate) fn is_supported(version: &str) -> bool {
    LEGACY_VERSIONS.contains(&version)
}

/// Picks the version to answer an `initialize` with: the client's if supported, else the latest.
pub(crate) fn negotiate(requested: &str) -> &'static str {
    LEGACY_VERSIONS.iter().copied().find(|v| *v == requested).unwrap_or(LATEST_LEGACY)
}

/// Whether JSON-RPC batches are allowed in this version (2025-03-26 only).
pub(crate) fn allows_batches(version: &str) -> bool {
    version == "2025-03-26"
}

/// Methods the gateway treats specially.
pub(crate) mod method {
    /// Session handshake.
    pub(crate) const INITIALIZE: &str = "initialize";
    /// Liveness check.
    pub(crate) const PING: &str = "ping";
    /// Tool listing.
    pub(crate) const TOOLS_LIST: &str = "tools/list";
    /// Tool invocation.
    pub(crate) const TOOLS_CALL: &str = "tools/call";
    /// Prompt listing.
    pub(crate) const PROMPTS_LIST: &str = "prompts/list";
    /// Prompt retrieval.
    pub(crate) const PROMPTS_GET: &str = "prompts/get";
    /// Resource listing.
    pub(crate) const RESOURCES_LIST: &str = "resources/list";
    /// Resource template listing.
    pub(crate) const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    /// Resource read.
    pub(crate) const RESOURCES_READ: &str = "resources/read";
    /// Resource subscription.
    pub(crate) const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    /// Resource unsubscription.
    pub(crate) const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    /// Argument completion.
    pub(crate) const COMPLETION_COMPLETE: &str = "completion/complete";
    /// Logging level.
    pub(crate) const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    /// Client finished initialising.
    pub(crate) const INITIALIZED: &str = "notifications/initialized";
    /// Cancellation of an in-flight request.
    pub(crate) const CANCELLED: &str = "notifications/cancelled";
    /// An upstream's tools changed.
    pub(crate) const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// An upstream's prompts changed.
    pub(crate) const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// Progress of an in-flight request.
    pub(crate) const PROGRESS: &str = "notifications/progress";
}
