//! Defaults, syntax and type errors, `${VAR}` expansion, error rendering and accessors.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use super::super::{
    Config, ConfigError, RestartConfig, StdioShare, TimeoutOverrides, Timeouts, UpstreamConfig, UpstreamKind,
};
use super::{ONE_UPSTREAM, assert_issue, assert_one, env, issues, ok, with_upstream};

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
        upstreams: vec![UpstreamConfig { name: "a".into(), command: Some("x".into()), ..UpstreamConfig::default() }],
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
    assert_eq!(a.restart, RestartConfig { base_delay: Duration::from_millis(100), max_delay: Duration::from_secs(60) });
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
    let err = super::parse(&with_upstream(&["# comment", "", "listen: abc"])).unwrap_err();
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
    for (text, last) in [("upstreams: [", 1), ("listen: x\r\nupstreams: [", 2), ("listen: x\u{85}upstreams: [", 2)] {
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
    let err = super::parse(&lines).unwrap_err();
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
