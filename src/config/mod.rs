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
mod prompts;
mod rate_limit;
mod resilience;
mod schema;
mod session_key;
mod tools;
mod trace;
mod trusted_proxies;
mod types;
mod upstream;
mod validate;

#[cfg(test)]
mod test_support;

use std::path::Path;

pub(crate) use auth::PUBLIC_KEY_ALGORITHMS;
pub use auth::{ApiKeyConfig, AuthConfig, JwtConfig, ResourceMetadataConfig};
pub use authorization::{AuthorizationConfig, AuthzRuleConfig, Decision, PatternsConfig, PrincipalMatcher};
pub use breaker_sharing::BreakerSharingConfig;
pub use error::{ConfigError, ConfigIssue};
pub use mcp_servers::{Imported, McpServers, McpServersFormat, import, parse_mcp_servers, read_mcp_servers};
pub use operations::{AdminConfig, ShutdownConfig};
pub use prompts::PromptConfig;
pub use rate_limit::{LimitConfig, LimitKey, OnBackendError, Rate, RateBackend, RateLimitsConfig};
pub use resilience::{
    BreakerConfig, BreakerOverrides, ConcurrencyConfig, ConcurrencyOverrides, ErrorsConfig, Report, RetryConfig,
    RetryOverrides, SanitizeLevel, UpstreamErrorsConfig,
};
pub use schema::json_schema;
pub(crate) use schema::{DURATION_PATTERN, SOCKET_ADDRESS_PATTERN};
pub use session_key::{SESSION_KEY_BYTES, SessionKeyMaterial};
pub(crate) use tools::ArgumentSource;
pub use tools::{ArgumentConfig, PrincipalField, ToolAnnotations, ToolConfig};
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

#[cfg(test)]
mod tests {
    //! Defaults, syntax and type errors, `${VAR}` expansion, error rendering and accessors;
    //! and the shipped YAML files.

    use std::collections::BTreeMap;
    use std::path::Path;
    use std::time::Duration;

    use crate::config::test_support::{ONE_UPSTREAM, assert_issue, assert_one, env, issues, ok, parse, with_upstream};
    use crate::config::{
        Config, ConfigError, RestartConfig, StdioShare, TimeoutOverrides, Timeouts, UpstreamConfig, UpstreamKind,
    };

    #[test]
    fn defaults_match_the_documentation() {
        let c = Config::default();
        assert_eq!(c.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(c.admin_listen, Some("127.0.0.1:9090".parse().unwrap()));
        assert_eq!(c.name_separator, "__");
        assert_eq!(c.session.idle_timeout, Duration::from_secs(30 * 60));
        assert_eq!(c.session.max_sessions, 4096);
        assert_eq!(c.session.max_sessions_per_peer, 256);
        assert_eq!(c.limits.max_connections, 4096);
        assert_eq!(c.limits.max_connections_per_peer, 256);
        assert_eq!(c.limits.header_timeout, Duration::from_secs(10));
        assert_eq!(c.limits.body_timeout, Duration::from_secs(30));
        assert_eq!(c.limits.idle_timeout, Duration::from_secs(60));
        assert_eq!(c.limits.max_body_bytes, 4_194_304);
        assert_eq!(c.limits.max_message_bytes, 16 * 1024 * 1024);
        assert_eq!(c.limits.max_in_flight_per_session, 256);
        assert!(c.security.allowed_origins.is_empty());
        assert!(c.security.allowed_hosts.is_empty());
        assert_eq!(c.defaults.timeouts.connect, Duration::from_secs(5));
        assert_eq!(c.defaults.timeouts.request, Duration::from_secs(15));
        assert_eq!(c.defaults.timeouts.tool_call, Duration::from_secs(60));
        assert!(c.upstreams.is_empty());

        let u = UpstreamConfig::default();
        assert_eq!(u.share, StdioShare::Shared);
        assert_eq!(u.restart.base_delay, Duration::from_millis(250));
        assert_eq!(u.restart.max_delay, Duration::from_secs(30));
        assert_eq!(u.shutdown_grace, Duration::from_secs(2));
        assert_eq!(u.timeouts, None);
    }

    #[test]
    fn minimal_document_takes_every_default() {
        let config = ok(&ONE_UPSTREAM);
        let expected = Config {
            upstreams: vec![UpstreamConfig {
                name: "a".into(),
                command: Some("x".into()),
                ..UpstreamConfig::default()
            }],
            ..Config::default()
        };
        assert_eq!(config, expected);
    }

    #[test]
    fn admin_listen_null_disables_it() {
        let config = ok(&with_upstream(&["admin_listen: null"]));
        assert_eq!(config.admin_listen, None);
    }

    #[test]
    fn durations_use_humantime() {
        let config = ok(&[
            "session:",
            "  idle_timeout: 1h 30m",
            "upstreams:",
            "  - name: a",
            "    command: x",
            "    restart: {base_delay: 100ms, max_delay: 1m}",
            "    timeouts: {request: 3s}",
        ]);
        assert_eq!(config.session.idle_timeout, Duration::from_secs(90 * 60));
        let a = &config.upstreams[0];
        assert_eq!(
            a.restart,
            RestartConfig { base_delay: Duration::from_millis(100), max_delay: Duration::from_secs(60) }
        );
        assert_eq!(
            a.timeouts,
            Some(TimeoutOverrides { request: Some(Duration::from_secs(3)), ..TimeoutOverrides::default() })
        );
    }

    #[test]
    fn unknown_field_in_upstream_is_reported_at_its_line() {
        assert_one(
            &["upstreams:", "  - name: a", "    comand: x"],
            3,
            "upstreams[0]",
            "unknown field `comand`, expected one of",
        );
    }

    #[test]
    fn unknown_field_at_top_level_and_nested() {
        assert_one(&with_upstream(&["listen: 127.0.0.1:1", "lisen: 127.0.0.1:2"]), 2, "", "unknown field `lisen`");
        assert_one(
            &with_upstream(&["defaults:", "  timeouts:", "    connect: 1s", "    tool: 1s"]),
            4,
            "defaults.timeouts",
            "unknown field `tool`",
        );
    }

    #[test]
    fn invalid_socket_address_renders_file_line_field() {
        let err = parse(&with_upstream(&["# comment", "", "listen: abc"])).unwrap_err();
        assert_eq!(err.to_string(), r#"t.yaml:3: listen: invalid socket address "abc""#);
    }

    #[test]
    fn type_errors_carry_their_line_and_field() {
        assert_one(&with_upstream(&["session:", "  idle_timeout: soon"]), 2, "session.idle_timeout", "");
        assert_one(
            &with_upstream(&["limits:", "  max_body_bytes: -1"]),
            2,
            "limits.max_body_bytes",
            "invalid type: integer `-1`, expected usize",
        );
        assert_one(
            &["upstreams:", "  - name: a", "    command: x", "    share: sometimes"],
            4,
            "upstreams[0].share",
            "unknown variant `sometimes`",
        );
    }

    #[test]
    fn missing_name_is_reported_at_the_upstream() {
        assert_one(&["upstreams:", "  - command: x"], 2, "upstreams[0]", "missing field `name`");
    }

    #[test]
    fn yaml_syntax_error_has_a_line() {
        assert_one(
            &["upstreams:", "  - name: a", "    command: x", "  - name: b", "   url: x"],
            5,
            "",
            "did not find expected '-' indicator",
        );
    }

    #[test]
    fn a_syntax_error_at_the_end_of_a_text_without_final_newline_is_on_its_last_line() {
        // libyaml places the end of such a text on a line of its own, past the last. (The
        // invalid `listen` comes first, but a syntax error is the only problem reported.)
        for (text, last) in [("upstreams: [", 1), ("listen: x\r\nupstreams: [", 2), ("listen: x\u{85}upstreams: [", 2)]
        {
            let err = Config::parse_with_env(text, "t.yaml", &env).unwrap_err();
            let lines: Vec<_> = err.errors().iter().map(|issue| issue.line).collect();
            assert_eq!(lines, [Some(last)], "{text:?}: {err}");
        }
    }

    #[test]
    fn env_and_header_values_expand_variables() {
        let config = ok(&[
            "upstreams:",
            "  - name: a",
            "    command: x",
            "    env: {A: '${TOKEN}', B: 'x${EMPTY}y', C: '$$HOME is $5 and $${TOKEN}'}",
            "  - name: b",
            "    url: https://example.com/mcp",
            "    headers: {Authorization: 'Bearer ${TOKEN}'}",
        ]);
        let env = &config.upstreams[0].env;
        assert_eq!(env["A"], "secret");
        assert_eq!(env["B"], "xy");
        assert_eq!(env["C"], "$HOME is $5 and ${TOKEN}");
        assert_eq!(config.upstreams[1].headers["Authorization"], "Bearer secret");
    }

    #[test]
    fn unset_variable_is_an_error_at_its_key() {
        assert_one(
            &["upstreams:", "  - name: a", "    command: x", "    env:", "      OK: fine", "      KEY: ${NOPE}"],
            6,
            "upstreams[0].env.KEY",
            "environment variable NOPE is not set",
        );
    }

    #[test]
    fn malformed_references_are_errors() {
        let found = issues(&[
            "upstreams:",
            "  - name: a",
            "    url: http://h/",
            "    headers:",
            "      X-A: ${OPEN",
            "      X-B: ${1BAD}",
        ]);
        assert_eq!(found.len(), 2, "{found:#?}");
        assert_issue(&found[0], 5, "upstreams[0].headers.X-A", "unterminated");
        assert_issue(&found[1], 6, "upstreams[0].headers.X-B", "invalid variable name");
    }

    #[test]
    fn all_problems_are_reported_in_line_order() {
        let lines = [
            "listen: 127.0.0.1:80",
            "admin_listen: 127.0.0.1:80",
            "upstreams:",
            "  - name: bad name",
            "    url: ftp://x",
            "  - name: ok",
            "    command: x",
            "    restart: {max_delay: 0s}",
        ];
        let err = parse(&lines).unwrap_err();
        let rendered = err.to_string();
        let expected = [
            "t.yaml:2: admin_listen: conflicts with `listen` (127.0.0.1:80); use another port or `null`",
            r#"t.yaml:4: upstreams[0].name: invalid name "bad name": use 1 to 64 of A-Z a-z 0-9 _ -"#,
            r#"t.yaml:5: upstreams[0].url: not an http(s) URL: "ftp://x""#,
            "t.yaml:8: upstreams[1].restart.max_delay: must be longer than 0",
            "t.yaml:8: upstreams[1].restart.base_delay: 250ms is longer than max_delay (0s)",
        ];
        assert_eq!(rendered, expected.join("\n"));
    }

    #[test]
    fn load_reads_a_file_and_names_it_in_errors() {
        let dir = std::env::temp_dir().join(format!("seawall-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.yaml");
        std::fs::write(&path, "upstreams: []\n").unwrap();
        let err = Config::load(&path).unwrap_err();
        let expected = format!("{}:1: upstreams: at least one upstream is required", path.display());
        assert_eq!(err.to_string(), expected);

        let err = Config::load(Path::new("/nonexistent/seawall.yaml")).unwrap_err();
        assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
        assert!(err.errors().is_empty());
        assert!(err.to_string().starts_with("/nonexistent/seawall.yaml: cannot read:"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn kind_and_effective_timeouts() {
        let http = UpstreamConfig {
            name: "h".into(),
            url: Some("http://h/mcp".into()),
            timeouts: Some(TimeoutOverrides { connect: Some(Duration::from_secs(1)), ..TimeoutOverrides::default() }),
            ..UpstreamConfig::default()
        };
        let headers = BTreeMap::new();
        assert_eq!(http.kind(), UpstreamKind::Http { url: "http://h/mcp", headers: &headers });
        let defaults = Timeouts::default();
        let effective = http.timeouts(&defaults);
        assert_eq!(effective.connect, Duration::from_secs(1));
        assert_eq!(effective.request, defaults.request);
        assert_eq!(effective.tool_call, defaults.tool_call);

        let stdio =
            UpstreamConfig { command: Some("seawall".into()), cwd: Some("/tmp".into()), ..UpstreamConfig::default() };
        assert!(matches!(
            stdio.kind(),
            UpstreamKind::Stdio { command: "seawall", cwd: Some(p), .. } if p == Path::new("/tmp")
        ));
        assert_eq!(stdio.timeouts(&defaults), defaults);
    }

    #[test]
    fn serialized_config_parses_back_identical() {
        let config = ok(&[
            "admin_listen: null",
            "upstreams:",
            "  - name: a",
            "    command: x",
            "    share: per_session",
            "    timeouts: {tool_call: 2m}",
            "  - name: b",
            "    url: https://example.com/mcp",
        ]);
        let text = yaml_serde::to_string(&config).unwrap();
        let again = Config::parse_with_env(&text, "round-trip", &|_| None).unwrap();
        assert_eq!(again, config);
    }

    #[test]
    fn validate_checks_configs_built_in_code() {
        let mut config = Config {
            upstreams: vec![UpstreamConfig {
                name: "h".into(),
                url: Some("http://h/mcp".into()),
                share: StdioShare::PerSession,
                ..UpstreamConfig::default()
            }],
            ..Config::default()
        };
        let err = config.validate("built-in").unwrap_err();
        assert_eq!(
            err.to_string(),
            "built-in: upstreams[0].share: applies only to stdio upstreams (`command`), \
             and this one has `url`"
        );
        config.upstreams[0].share = StdioShare::Shared;
        config.validate("built-in").unwrap();
    }

    // --- the shipped YAML files parse, validate and say what they claim ----------------

    const DEMO: &str = include_str!("../../config/demo.yaml");
    const EXAMPLE: &str = include_str!("../../config/example.yaml");

    fn example_env(name: &str) -> Option<String> {
        (name == "UPSTREAM_TOKEN").then(|| "dev-token".to_owned())
    }

    #[test]
    fn demo_yaml_is_valid() {
        let config = Config::parse_with_env(DEMO, "config/demo.yaml", &|_| None).unwrap();
        assert_eq!(config.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(config.admin_listen, Some("127.0.0.1:9090".parse().unwrap()));
        assert_eq!(config.upstreams.len(), 1);
        let demo = config.upstream("demo").unwrap();
        let UpstreamKind::Stdio { command, args, share, .. } = demo.kind() else {
            panic!("demo must be a stdio upstream");
        };
        assert_eq!(command, "seawall");
        assert_eq!(args, ["demo-upstream", "--stdio"]);
        assert_eq!(share, StdioShare::PerSession);
    }

    #[test]
    fn demo_yaml_comments_every_line() {
        for (i, line) in DEMO.lines().enumerate() {
            assert!(line.contains('#'), "line {} has no comment: {line:?}", i + 1);
        }
    }

    #[test]
    fn example_yaml_is_valid_with_token_set() {
        let config = Config::parse_with_env(EXAMPLE, "config/example.yaml", &example_env).unwrap();
        let defaults = Config::default();
        assert_eq!(config.session, defaults.session);
        assert_eq!(config.limits, defaults.limits);
        assert_eq!(config.defaults, defaults.defaults);
        assert_eq!(config.name_separator, defaults.name_separator);

        let files = config.upstream("files").unwrap();
        assert!(matches!(files.kind(), UpstreamKind::Stdio { share: StdioShare::Shared, .. }));
        let timeouts = files.timeouts(&config.defaults.timeouts);
        assert_eq!(timeouts.tool_call, Duration::from_secs(120));
        assert_eq!(timeouts.connect, Duration::from_secs(5));

        let search = config.upstream("search").unwrap();
        let UpstreamKind::Http { url, headers } = search.kind() else {
            panic!("search must be an HTTP upstream");
        };
        assert_eq!(url, "http://127.0.0.1:18080/mcp");
        assert_eq!(headers["Authorization"], "Bearer dev-token");
        let legacy = config.upstream("legacy").unwrap();
        assert!(matches!(legacy.kind(), UpstreamKind::Sse { url: "http://127.0.0.1:18090/sse", .. }));

        let auth = config.auth.unwrap_or_default();
        assert_eq!(auth.api_keys[0].name, "ops");
        assert_eq!(auth.resource_metadata.map(|m| m.resource).as_deref(), Some("https://gw.example/mcp"));
    }

    #[test]
    fn example_yaml_without_token_names_the_variable_and_line() {
        let err = Config::parse_with_env(EXAMPLE, "config/example.yaml", &|_| None).unwrap_err();
        let line = EXAMPLE.lines().position(|l| l.contains("Authorization:")).unwrap() + 1;
        let expected = format!(
            "config/example.yaml:{line}: upstreams[1].headers.Authorization: \
             environment variable UPSTREAM_TOKEN is not set"
        );
        assert_eq!(err.to_string(), expected);
    }

    #[test]
    fn example_yaml_documents_every_default() {
        // Each default-valued key written in the example equals the built-in default, so
        // the reference cannot drift from the code silently.
        let config = Config::parse_with_env(EXAMPLE, "x", &example_env).unwrap();
        let defaults = Config::default();
        assert_eq!(config.listen, defaults.listen);
        assert_eq!(config.admin_listen, defaults.admin_listen);
        assert_eq!(config.admin, defaults.admin);
        assert_eq!(config.shutdown, defaults.shutdown);
        let files = config.upstream("files").unwrap();
        let stdio_defaults = crate::config::UpstreamConfig::default();
        assert_eq!(files.restart, stdio_defaults.restart);
        assert_eq!(files.shutdown_grace, stdio_defaults.shutdown_grace);
        assert_eq!(config.tracing, defaults.tracing, "the tracing keys written are the defaults");
    }
}
