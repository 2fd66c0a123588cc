//! The `breaker_sharing:` section: the Redis through which replicas share the
//! transitions of their breakers marked `shared`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Longest `breaker_sharing.prefix` accepted (bytes).
pub(super) const MAX_PREFIX: usize = 128;

/// Where replicas share their breakers (those with `shared: true`). Default: the rate
/// limits' Redis, if any.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BreakerSharingConfig {
    /// The Redis every replica meets in, a `redis://host:port[/db]` URL. Default: unset,
    /// which means `rate_limits.backend` when that is a Redis URL; with neither, no
    /// breaker may be `shared`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<String>,
    /// The prefix of the pub/sub channel (`<prefix>transitions`) and of the hash of open
    /// breakers (`<prefix>open`). Replicas with the same prefix share breakers, so fleets
    /// on one Redis each take their own. Printable ASCII without spaces, at most 128
    /// bytes. Default `seawall:breakers:`.
    pub prefix: String,
}

impl Default for BreakerSharingConfig {
    fn default() -> Self {
        BreakerSharingConfig { redis: None, prefix: "seawall:breakers:".to_owned() }
    }
}

/// `url` if it is a `redis://` URL the client takes, else why not.
pub(super) fn redis_url(url: &str) -> Result<String, String> {
    let why = || format!("expected a redis://host:port[/db] URL, got {url:?}");
    if !url.starts_with("redis://") {
        return Err(why());
    }
    redis::Client::open(url).map_err(|_| why())?;
    Ok(url.to_owned())
}
