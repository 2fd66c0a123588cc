//! Who is calling: the identity authentication establishes and that authorisation, rate
//! limits and sessions are keyed by.

use std::sync::Arc;

use serde_json::{Map, Value};

/// How a principal proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Credential {
    /// A static API key or bearer token from the configuration.
    ApiKey,
    /// A JWT verified against the configured issuer's keys.
    Jwt,
}

/// An authenticated caller.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Principal {
    /// The API key's configured name, or the JWT's `sub`.
    pub name: Arc<str>,
    /// How it authenticated.
    pub credential: Credential,
    /// The JWT's claims (empty for API keys).
    pub claims: Map<String, Value>,
}

impl Principal {
    /// A principal authenticated by the API key named `name`.
    pub(crate) fn api_key(name: &str) -> Principal {
        Principal { name: Arc::from(name), credential: Credential::ApiKey, claims: Map::new() }
    }

    /// A principal authenticated by the API key named `name`, granting `scopes` (kept as
    /// a `scope` claim, space-separated, as a JWT carries them).
    pub(crate) fn api_key_with_scopes(name: &str, scopes: &[String]) -> Principal {
        let mut principal = Principal::api_key(name);
        if !scopes.is_empty() {
            principal.claims.insert("scope".into(), Value::String(scopes.join(" ")));
        }
        principal
    }

    /// Whether the principal holds `scope`: listed in its `scope` claim (space-separated)
    /// or its `scp` claim (an array or a space-separated string).
    pub(crate) fn has_scope(&self, scope: &str) -> bool {
        ["scope", "scp"].iter().any(|claim| match self.claims.get(*claim) {
            Some(Value::String(s)) => s.split(' ').any(|s| s == scope),
            Some(Value::Array(items)) => items.iter().any(|item| item.as_str() == Some(scope)),
            _ => false,
        })
    }

    /// The label used in logs and as a rate-limit key: `key:<name>` or `sub:<subject>`.
    pub(crate) fn label(&self) -> String {
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
    pub(crate) fn identity(&self) -> Identity {
        Identity { credential: self.credential, name: Arc::clone(&self.name) }
    }
}

/// A principal's identity: cheap to clone and hash (no allocation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    /// How it authenticated.
    pub credential: Credential,
    /// The API key's name or the JWT's `sub`.
    pub name: Arc<str>,
}

/// Whether two requests come from the same caller: both unauthenticated, or the same
/// identity (so a client that renews its JWT stays the same caller).
pub(crate) fn same_caller(a: Option<&Principal>, b: Option<&Principal>) -> bool {
    a.map(Principal::identity) == b.map(Principal::identity)
}
