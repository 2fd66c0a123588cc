//! The `rate_limits:` section: GCRA limits per principal, tool, upstream or for the whole
//! gateway, and the store that holds their state.

use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::locate::{FieldPath, Problem};

/// Rate limits on client requests. Default: no limits.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RateLimitsConfig {
    /// Where limit state lives: `memory` (this process only) or a `redis://host:port[/db]`
    /// URL (shared by every replica using it). Default `memory`.
    pub backend: String,
    /// With a Redis backend, what to do while Redis cannot be reached: `allow` (fail
    /// open) or `deny` (fail closed, -32013). Default `allow`.
    pub on_backend_error: OnBackendError,
    /// With a Redis backend, the prefix of every key seawall writes. Default `seawall:rl:`.
    pub key_prefix: String,
    /// The limits; a request must pass every limit that applies to it. Default: none.
    pub limits: Vec<LimitConfig>,
}

impl Default for RateLimitsConfig {
    fn default() -> Self {
        RateLimitsConfig {
            backend: "memory".to_owned(),
            on_backend_error: OnBackendError::Allow,
            key_prefix: "seawall:rl:".to_owned(),
            limits: Vec::new(),
        }
    }
}

/// Where limit state lives, parsed from `backend`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RateBackend {
    /// In this process (governor's keyed GCRA limiters).
    Memory,
    /// In Redis at this URL.
    Redis(String),
}

impl RateLimitsConfig {
    /// The backend `backend` names.
    pub fn backend(&self) -> Result<RateBackend, String> {
        if self.backend == "memory" {
            return Ok(RateBackend::Memory);
        }
        let why = || format!("expected `memory` or a redis://host:port URL, got {:?}", self.backend);
        if !self.backend.starts_with("redis://") {
            return Err(why());
        }
        redis::Client::open(self.backend.as_str()).map_err(|_| why())?;
        Ok(RateBackend::Redis(self.backend.clone()))
    }
}

/// What to do with requests while the shared store is unreachable.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum OnBackendError {
    /// Admit them (fail open).
    Allow,
    /// Refuse them with -32013 (fail closed).
    Deny,
}

/// What one limit counts separately.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LimitKey {
    /// One budget per authenticated principal; unauthenticated clients get one per
    /// client IP address.
    Principal,
    /// One budget per tool name as the client sees it (`tools/call` only).
    Tool,
    /// One budget per upstream (requests whose upstream is known).
    Upstream,
    /// One budget for the whole gateway.
    Global,
}

/// One GCRA limit.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LimitConfig {
    /// What is counted separately: `principal`, `tool`, `upstream` or `global`. Required.
    pub per: LimitKey,
    /// Glob patterns (`*`, `?`) on tool names as the client sees them; when set, the limit
    /// applies to `tools/call` requests of matching tools only. Default: unset, the limit
    /// applies to every request.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Sustained rate, `<count>/<unit>` with unit `s`, `m` or `h` (e.g. `20/s`). Required.
    pub rate: String,
    /// Requests admitted at once after a quiet spell (count, at least 1). Default: the
    /// rate's count.
    #[serde(default)]
    pub burst: Option<u32>,
}

/// A parsed `rate`: `count` requests per `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rate {
    /// Requests per period (at least 1).
    pub count: u32,
    /// The period.
    pub period: Duration,
}

impl Rate {
    /// Parses `<count>/<unit>` (`20/s`, `100/m`, `5/h`).
    pub fn parse(text: &str) -> Result<Rate, String> {
        let why = || format!("invalid rate {text:?}: expected <count>/<unit> with unit s, m or h, e.g. 20/s");
        let (count, unit) = text.split_once('/').ok_or_else(why)?;
        let count: u32 = count.trim().parse().map_err(|_| why())?;
        let period = match unit.trim() {
            "s" | "sec" => Duration::from_secs(1),
            "m" | "min" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(why()),
        };
        if count == 0 {
            return Err(format!("invalid rate {text:?}: the count must be at least 1"));
        }
        Ok(Rate { count, period })
    }

    /// The time between two admitted requests at the sustained rate.
    pub fn interval(&self) -> Duration {
        self.period / self.count
    }
}

impl LimitConfig {
    /// The limit's rate and burst, once validated.
    pub fn quota(&self) -> Result<(Rate, u32), String> {
        let rate = Rate::parse(&self.rate)?;
        Ok((rate, self.burst.unwrap_or(rate.count)))
    }
}

/// Checks every limit's rate, burst and tool patterns.
pub(crate) fn check_rate_limits(config: &RateLimitsConfig, out: &mut Vec<Problem>) {
    if let Err(why) = config.backend() {
        out.push(Problem::new(FieldPath::root().key("rate_limits").key("backend"), why));
    }
    let list = FieldPath::root().key("rate_limits").key("limits");
    for (i, limit) in config.limits.iter().enumerate() {
        let at = list.index(i);
        if let Err(why) = Rate::parse(&limit.rate) {
            out.push(Problem::new(at.key("rate"), why));
        }
        if limit.burst == Some(0) {
            out.push(Problem::new(at.key("burst"), "must be at least 1"));
        }
        for (j, pattern) in limit.tools.iter().flatten().enumerate() {
            if pattern.is_empty() {
                out.push(Problem::new(at.key("tools").index(j), "must not be empty (use \"*\" for every tool)"));
            }
        }
        if limit.tools.as_ref().is_some_and(Vec::is_empty) {
            out.push(Problem::new(at.key("tools"), "must list at least one pattern (omit it for every request)"));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::{assert_issue, assert_one, issues, ok, with_upstream};

    #[test]
    fn rate_limits_parse_and_default_the_burst_to_the_rate() {
        let config = ok(&with_upstream(&[
            "rate_limits:",
            "  backend: memory",
            "  limits:",
            "    - { per: principal, tools: ['*'], rate: 20/s, burst: 40 }",
            "    - { per: global, rate: 100/m }",
        ]));
        let limits = &config.rate_limits.limits;
        assert_eq!(limits.len(), 2);
        let (rate, burst) = limits[0].quota().unwrap();
        assert_eq!((rate.count, rate.period, burst), (20, std::time::Duration::from_secs(1), 40));
        assert_eq!(limits[1].quota().unwrap().1, 100, "burst defaults to the rate's count");
        assert_eq!(limits[1].tools, None);
    }

    #[test]
    fn bad_rate_limits_are_reported_at_their_line() {
        for (rate, message) in [
            ("20", "invalid rate \"20\": expected <count>/<unit>"),
            ("20/d", "invalid rate \"20/d\""),
            ("x/s", "invalid rate \"x/s\""),
            ("-1/s", "invalid rate \"-1/s\""),
            ("0/s", "the count must be at least 1"),
        ] {
            let line = format!("    - {{ per: tool, rate: '{rate}' }}");
            assert_one(&with_upstream(&["rate_limits:", "  limits:", &line]), 3, "rate_limits.limits[0].rate", message);
        }
        let found = issues(&with_upstream(&[
            "rate_limits:",
            "  limits:",
            "    - per: global",
            "      rate: 1/s",
            "      burst: 0",
            "    - per: tool",
            "      rate: 1/s",
            "      tools: []",
            "    - per: tool",
            "      rate: 1/s",
            "      tools: ['']",
        ]));
        assert_eq!(found.len(), 3, "{found:#?}");
        assert_issue(&found[0], 5, "rate_limits.limits[0].burst", "must be at least 1");
        assert_issue(&found[1], 8, "rate_limits.limits[1].tools", "at least one pattern");
        assert_issue(&found[2], 11, "rate_limits.limits[2].tools[0]", "must not be empty");
    }

    #[test]
    fn rate_limit_keys_and_backends_are_closed_sets() {
        let found = issues(&with_upstream(&["rate_limits:", "  limits:", "    - { per: session, rate: 1/s }"]));
        assert_issue(&found[0], 3, "rate_limits.limits[0].per", "unknown variant `session`");
        assert_one(&with_upstream(&["rate_limits:", "  backend: disk"]), 2, "rate_limits.backend", "expected `memory`");
        let found = issues(&with_upstream(&["rate_limits:", "  on_backend_error: maybe"]));
        assert_issue(&found[0], 2, "rate_limits.on_backend_error", "unknown variant `maybe`");
        let config = ok(&with_upstream(&[
            "rate_limits:",
            "  backend: redis://127.0.0.1:6379",
            "  on_backend_error: deny",
            "  key_prefix: 'a:'",
        ]));
        assert_eq!(
            config.rate_limits.backend(),
            Ok(crate::config::RateBackend::Redis("redis://127.0.0.1:6379".into()))
        );
    }
}
