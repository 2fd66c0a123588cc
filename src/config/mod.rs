//! Gateway configuration: serde types with documented defaults, loading with `${VAR}`
//! expansion, and validation that reports every problem as `FILE:LINE: FIELD: message`.
//!
//! Loading runs in three passes over one YAML text:
//! 1. yaml_serde deserializes it (syntax, types, unknown fields; stops at the first);
//! 2. `${VAR}` references in upstream `env` and `headers` values are expanded;
//! 3. semantic checks run over the whole config and report all problems together.
//!
//! Problems from passes 2 and 3 know their field path; `locate` finds its line.
//! This module has no behaviour beyond that: it does not open sockets or spawn anything.

mod error;
mod expand;
mod locate;
mod resilience;
mod types;
mod validate;

#[cfg(test)]
mod tests;

use std::path::Path;

pub use error::{ConfigError, ConfigIssue};
pub use resilience::{
    BreakerConfig, BreakerOverrides, ConcurrencyConfig, ConcurrencyOverrides, ErrorsConfig, Report, RetryConfig,
    RetryOverrides, ToolConfig,
};
pub use types::{
    Config, Defaults, LimitsConfig, RestartConfig, SecurityConfig, SessionConfig, StdioShare, TimeoutOverrides,
    Timeouts, UpstreamConfig, UpstreamKind,
};

use validate::Problem;

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
    /// environment. `origin` names the text in errors (usually its file path).
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
        let mut config: Config = yaml_serde::from_str(text).map_err(|err| ConfigError::Invalid {
            origin: origin.to_owned(),
            issues: vec![ConfigIssue::from_yaml(&err)],
        })?;
        let mut problems = expand::expand_config(&mut config, lookup);
        problems.extend(validate::validate(&config, &|path| locate::is_written(text, path)));
        if problems.is_empty() {
            return Ok(config);
        }
        let mut issues: Vec<ConfigIssue> = problems
            .into_iter()
            .map(|p| {
                let line = locate::line_of(text, &p.path);
                issue(p, Some(line))
            })
            .collect();
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
