//! Gateway configuration: serde types with documented defaults, loading with `${VAR}`
//! expansion, and validation that reports every problem as `FILE:LINE: FIELD: message`.
//!
//! Loading runs in three passes over one YAML text:
//! 1. yaml_serde deserializes it (syntax, types, unknown fields); after a type error or
//!    an unknown key, `collect` takes the offending node out and deserializes the rest
//!    again, so every such problem is found (a syntax error is the only one reported);
//! 2. the servers of `include_mcp_servers` join the upstreams, and `${VAR}` references
//!    in upstream `env` and `headers` values are expanded;
//! 3. semantic checks run over the whole config.
//!
//! Every problem knows its field path; `locate` finds its line. All of them are reported
//! together, in line order.
//! This module has no behaviour beyond that: it does not open sockets or spawn anything.

mod auth;
mod authorization;
mod breaker_sharing;
mod collect;
mod error;
mod expand;
mod include;
mod locate;
mod mcp_servers;
mod operations;
mod rate_limit;
mod resilience;
mod schema;
mod session_key;
mod trace;
mod trusted_proxies;
mod types;
mod upstream;
mod validate;

#[cfg(test)]
mod tests;

use std::path::Path;

pub(crate) use auth::PUBLIC_KEY_ALGORITHMS;
pub use auth::{ApiKeyConfig, AuthConfig, JwtConfig, ResourceMetadataConfig};
pub use authorization::{AuthorizationConfig, AuthzRuleConfig, Decision, PatternsConfig, PrincipalMatcher};
pub use breaker_sharing::BreakerSharingConfig;
pub use error::{ConfigError, ConfigIssue};
pub use mcp_servers::{Imported, McpServers, McpServersFormat, import, parse_mcp_servers, read_mcp_servers};
pub use operations::{AdminConfig, ShutdownConfig};
pub use rate_limit::{LimitConfig, LimitKey, OnBackendError, Rate, RateBackend, RateLimitsConfig};
pub use resilience::{
    BreakerConfig, BreakerOverrides, ConcurrencyConfig, ConcurrencyOverrides, ErrorsConfig, Report, RetryConfig,
    RetryOverrides, SanitizeLevel, ToolConfig, UpstreamErrorsConfig,
};
pub use schema::json_schema;
pub use session_key::{SESSION_KEY_BYTES, SessionKeyMaterial};
pub(crate) use trace::check_endpoint as check_tracing_endpoint;
pub use trace::{TracingConfig, TracingProtocol};
pub use trusted_proxies::{ProxySource, TrustedProxiesConfig};
pub use types::{
    AccessLogConfig, AccessLogFormat, CacheConfig, Config, CorsConfig, LimitsConfig, ReplayBufferConfig,
    SecurityConfig, SessionConfig,
};
pub use upstream::{
    Defaults, HttpTransport, RestartConfig, StdioShare, TimeoutOverrides, Timeouts, UpstreamConfig, UpstreamKind,
    UpstreamProtocol,
};

use locate::Problem;

impl Config {
    /// Reads, expands and validates the configuration file at `path`, taking `${VAR}`
    /// values from the process environment. Errors name `path` as given.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let origin = path.display().to_string();
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Read { origin: origin.clone(), source })?;
        Config::parse(&text, &origin)
    }

    /// Parses, expands and validates `text`, taking `${VAR}` values from the process
    /// environment. `origin` names the text in errors (usually its file path); a relative
    /// `include_mcp_servers` is taken from its directory.
    pub fn parse(text: &str, origin: &str) -> Result<Config, ConfigError> {
        Config::parse_with_env(text, origin, &|name| std::env::var(name).ok())
    }

    /// Like [`Config::parse`], but looks `${VAR}` values up with `lookup`, which returns
    /// `None` for an unset variable.
    pub fn parse_with_env(
        text: &str,
        origin: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Config, ConfigError> {
        let collected = collect::deserialize(text);
        let mut issues = collected.issues;
        if let Some(mut config) = collected.config {
            // Paths of the config are those of the document minus what `collect` left out.
            let indices = &collected.indices;
            let written = |path: &locate::FieldPath| locate::is_written(text, &indices.original(path));
            let mut problems = Vec::new();
            let included = include::include(&mut config, origin, &mut problems);
            problems.extend(expand::expand_config(&mut config, lookup));
            auth::default_resource(config.auth.as_mut());
            problems.extend(validate::validate(&config, &written));
            if let Some(included) = &included {
                problems = problems.into_iter().map(|p| included.attribute(p)).collect();
            }
            if problems.is_empty() && issues.is_empty() {
                return Ok(config);
            }
            for problem in problems {
                let path = indices.original(&problem.path);
                // A node that lost a part may look wrong only for that loss.
                if collected.removed.iter().any(|removed| removed.starts_with(&path)) {
                    continue;
                }
                let line = locate::line_of(text, &path);
                issues.push(issue(Problem { path, ..problem }, Some(line)));
            }
        }
        issues.sort_by_key(|issue| issue.line);
        Err(ConfigError::Invalid { origin: origin.to_owned(), issues })
    }

    /// Checks a configuration built in code (no `${VAR}` expansion). Issues carry field
    /// paths but no lines; `origin` labels them.
    pub fn validate(&self, origin: &str) -> Result<(), ConfigError> {
        let problems = validate::validate(self, &|_| false);
        if problems.is_empty() {
            return Ok(());
        }
        Err(ConfigError::Invalid {
            origin: origin.to_owned(),
            issues: problems.into_iter().map(|p| issue(p, None)).collect(),
        })
    }
}

fn issue(problem: Problem, line: Option<usize>) -> ConfigIssue {
    ConfigIssue { line, field: problem.path.to_string(), message: problem.message }
}
