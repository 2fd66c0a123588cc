//! The initialize handshake seen from the gateway's client side.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::jsonrpc;

/// What seawall tells an upstream when it initialises a session with it.
#[derive(Debug, Clone)]
pub(crate) struct InitParams {
    /// The protocol version to ask for.
    pub protocol_version: String,
    /// Client capabilities to declare (the real client's, or none for a shared upstream).
    pub capabilities: Value,
    /// Client info to declare.
    pub client_info: Value,
    /// The client speaks the modern era itself: a modern upstream's `input_required`
    /// results reach it untouched (a legacy client gets them as requests of its own).
    pub modern_client: bool,
}

impl InitParams {
    /// Parameters for a session that no single client owns: no client features offered.
    pub(crate) fn gateway_own() -> InitParams {
        InitParams {
            protocol_version: crate::mcp::LATEST_LEGACY.to_owned(),
            capabilities: json!({}),
            client_info: json!({ "name": "seawall", "version": env!("CARGO_PKG_VERSION") }),
            modern_client: false,
        }
    }

    /// Whether the client declared a feature a server asks for with a request of its own
    /// (`sampling`, `elicitation`, `roots`): such requests may travel on the session's
    /// standalone stream, so the upstream session must have one before its first call.
    pub(crate) fn may_be_asked(&self) -> bool {
        self.capabilities
            .as_object()
            .is_some_and(|caps| ["sampling", "elicitation", "roots"].iter().any(|k| caps.contains_key(*k)))
    }

    /// The `initialize` params.
    pub(crate) fn to_raw(&self) -> Box<RawValue> {
        jsonrpc::to_raw(&json!({
            "protocolVersion": self.protocol_version,
            "capabilities": self.capabilities,
            "clientInfo": self.client_info,
        }))
    }
}

/// The upstream's answer to initialize.
#[derive(Debug, Clone)]
pub(crate) struct InitResult {
    /// The version the upstream chose.
    pub protocol_version: String,
    /// Server capabilities.
    pub capabilities: Value,
    /// Instructions, if any.
    pub instructions: Option<String>,
    /// The result exactly as received.
    pub raw: Box<RawValue>,
}

#[derive(Deserialize)]
struct InitView {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
    #[serde(default)]
    capabilities: Value,
    #[serde(default)]
    instructions: Option<String>,
}

impl InitResult {
    /// Reads an initialize result; `None` if it lacks a protocol version.
    pub(crate) fn parse(raw: Box<RawValue>) -> Option<InitResult> {
        let v: InitView = serde_json::from_str(raw.get()).ok()?;
        Some(InitResult {
            protocol_version: v.protocol_version,
            capabilities: if v.capabilities.is_object() { v.capabilities } else { json!({}) },
            instructions: v.instructions,
            raw,
        })
    }

    /// Whether the server declared a capability (`tools`, `prompts`, `resources`, ...).
    pub(crate) fn has(&self, capability: &str) -> bool {
        self.capabilities.get(capability).is_some_and(|c| !c.is_null())
    }
}
