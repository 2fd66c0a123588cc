//! The shipped YAML files parse, validate and say what they claim.

use std::time::Duration;

use super::super::{Config, StdioShare, UpstreamKind};

const DEMO: &str = include_str!("../../../config/demo.yaml");
const EXAMPLE: &str = include_str!("../../../config/example.yaml");

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
    let stdio_defaults = super::super::UpstreamConfig::default();
    assert_eq!(files.restart, stdio_defaults.restart);
    assert_eq!(files.shutdown_grace, stdio_defaults.shutdown_grace);
    assert_eq!(config.tracing, defaults.tracing, "the tracing keys written are the defaults");
}
