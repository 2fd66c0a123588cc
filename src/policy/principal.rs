//! Who is calling: the identity authentication establishes and that authorisation, rate
//! limits and sessions are keyed by.

use std::sync::Arc;

use serde_json::{Map, Value};

/// How a principal proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Credential {
    /// A static API key or bearer token from the configuration.
    ApiKey,
    /// A JWT verified against the configured issuer's keys.
    Jwt,
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq)]
pub struct Principal {
    /// The API key's configured name, or the JWT's `sub`.
    pub name: Arc<str>,
    /// How it authenticated.
    pub credential: Credential,
    /// The JWT's claims (empty for API keys).
    pub claims: Map<String, Value>,
}

impl Principal {
    /// A principal authenticated by the API key named `name`.
    pub fn api_key(name: &str) -> Principal {
        Principal { name: Arc::from(name), credential: Credential::ApiKey, claims: Map::new() }
    }

    /// The label used in logs and as a rate-limit key: `key:<name>` or `sub:<subject>`.
    pub fn label(&self) -> String {
        let prefix = match self.credential {
            Credential::ApiKey => "key:",
            Credential::Jwt => "sub:",
        };
        // Built by hand: it is a rate-limit key on every request, and `format!` costs
        // several times as much.
        let mut label = String::with_capacity(prefix.len() + self.name.len());
        label.push_str(prefix);
        label.push_str(&self.name);
        label
    }

    /// What stays the same when the principal renews its credential: the credential
    /// kind and the name. Sessions, per-principal caps and counters are keyed by it.
    pub fn identity(&self) -> Identity {
        Identity { credential: self.credential, name: Arc::clone(&self.name) }
    }
}

/// A principal's identity: cheap to clone and hash (no allocation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    /// How it authenticated.
    pub credential: Credential,
    /// The API key's name or the JWT's `sub`.
    pub name: Arc<str>,
}
