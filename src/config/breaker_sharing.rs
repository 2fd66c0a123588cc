//! The `breaker_sharing:` section: the Redis through which replicas share the
//! transitions of their breakers marked `shared`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};
use super::rate_limit::RateBackend;
use super::types::Config;

/// Longest `breaker_sharing.prefix` accepted (bytes).
const MAX_PREFIX: usize = 128;

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

impl Config {
    /// The Redis URL breakers are shared through: `breaker_sharing.redis`, else the rate
    /// limits' Redis. `None` when neither is set (or the one set is not a valid URL,
    /// which validation reports).
    pub fn breaker_sharing_redis(&self) -> Option<String> {
        match &self.breaker_sharing.redis {
            Some(url) => redis_url(url).ok(),
            None => match self.rate_limits.backend() {
                Ok(RateBackend::Redis(url)) => Some(url),
                _ => None,
            },
        }
    }

    /// Whether any upstream's breakers are `shared`.
    pub fn shares_breakers(&self) -> bool {
        self.upstreams.iter().any(|up| up.breaker(&self.defaults.breaker).shared)
    }
}

fn redis_url(url: &str) -> Result<String, String> {
    let why = || format!("expected a redis://host:port[/db] URL, got {url:?}");
    if !url.starts_with("redis://") {
        return Err(why());
    }
    redis::Client::open(url).map_err(|_| why())?;
    Ok(url.to_owned())
}

/// Checks the Redis URL and the prefix, and that every `shared: true` has a Redis to
/// share through.
pub(crate) fn check_breaker_sharing(config: &Config, out: &mut Vec<Problem>) {
    let at = FieldPath::root().key("breaker_sharing");
    let sharing = &config.breaker_sharing;
    if let Some(Err(why)) = sharing.redis.as_deref().map(redis_url) {
        out.push(Problem::new(at.key("redis"), why));
    }
    let prefix = &sharing.prefix;
    if prefix.is_empty() || prefix.len() > MAX_PREFIX || !prefix.bytes().all(|b| b.is_ascii_graphic()) {
        let why = format!("must be 1 to {MAX_PREFIX} bytes of printable ASCII without spaces");
        out.push(Problem::new(at.key("prefix"), why));
    }
    // An invalid URL is reported above; a missing one is reported where sharing is asked.
    if sharing.redis.is_some() || config.breaker_sharing_redis().is_some() {
        return;
    }
    let why = "needs a Redis to share through: set breaker_sharing.redis, or a redis:// rate_limits.backend";
    if config.defaults.breaker.shared {
        out.push(Problem::new(FieldPath::root().key("defaults").key("breaker").key("shared"), why));
    }
    for (i, up) in config.upstreams.iter().enumerate() {
        if up.breaker.is_some_and(|b| b.shared == Some(true)) {
            let path = FieldPath::root().key("upstreams").index(i).key("breaker").key("shared");
            out.push(Problem::new(path, why));
        }
    }
}
