//! The few typed views of MCP the gateway acts on, and the protocol versions it speaks.
//!
//! Everything else in a message stays raw JSON (see [`crate::jsonrpc`]).

pub mod init;
pub mod meta;

/// Protocol versions of the legacy (session) era that seawall speaks, oldest first.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The newest legacy version; offered when a client asks for one seawall does not know.
pub const LATEST_LEGACY: &str = "2025-11-25";

/// Whether seawall can speak this protocol version.
pub fn is_supported(version: &str) -> bool {
    LEGACY_VERSIONS.contains(&version)
}

/// Picks the version to answer an `initialize` with: the client's if supported, else the latest.
pub fn negotiate(requested: &str) -> &'static str {
    LEGACY_VERSIONS.iter().copied().find(|v| *v == requested).unwrap_or(LATEST_LEGACY)
}

/// Whether JSON-RPC batches are allowed in this version (2025-03-26 only).
pub fn allows_batches(version: &str) -> bool {
    version == "2025-03-26"
}

/// Methods the gateway treats specially.
pub mod method {
    /// Session handshake.
    pub const INITIALIZE: &str = "initialize";
    /// Liveness check.
    pub const PING: &str = "ping";
    /// Tool listing.
    pub const TOOLS_LIST: &str = "tools/list";
    /// Tool invocation.
    pub const TOOLS_CALL: &str = "tools/call";
    /// Prompt listing.
    pub const PROMPTS_LIST: &str = "prompts/list";
    /// Prompt retrieval.
    pub const PROMPTS_GET: &str = "prompts/get";
    /// Resource listing.
    pub const RESOURCES_LIST: &str = "resources/list";
    /// Resource template listing.
    pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    /// Resource read.
    pub const RESOURCES_READ: &str = "resources/read";
    /// Resource subscription.
    pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    /// Resource unsubscription.
    pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    /// Argument completion.
    pub const COMPLETION_COMPLETE: &str = "completion/complete";
    /// Logging level.
    pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    /// Client finished initialising.
    pub const INITIALIZED: &str = "notifications/initialized";
    /// Cancellation of an in-flight request.
    pub const CANCELLED: &str = "notifications/cancelled";
    /// An upstream's tools changed.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// Progress of an in-flight request.
    pub const PROGRESS: &str = "notifications/progress";
}
