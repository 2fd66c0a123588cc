//! Adoption from an `mcpServers` file through the real binary: `seawall import` on the
//! sample Claude Desktop, Cursor and VS Code files gives configs that the schema and
//! `seawall check-config` accept, one of them serves a real `tools/list`, and a config
//! that names such a file with `include_mcp_servers:` runs as well.

use std::path::{Path, PathBuf};
use std::process::Output;

use crate::support::mcp_client::Client;
use crate::support::{Seawall, TestDir, seawall_bin};
use serde_json::{Value, json};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_servers").join(name)
}

/// The variables the samples' `${VAR}` references need.
const VARIABLES: [(&str, &str); 6] = [
    ("GITHUB_TOKEN", "ghp-test"),
    ("DEMO_API_KEY", "demo-key"),
    ("DOCS_TOKEN", "docs-token"),
    ("API_KEY", "vs-code-input"),
    ("HOME", "/home/test"),
    ("workspaceFolder", "/work/project"),
];

fn seawall(args: &[&str], env: &[(&str, &str)]) -> Output {
    std::process::Command::new(seawall_bin())
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("run seawall {args:?}: {e}"))
}

/// `seawall import FILE`: the config it printed and its warnings, one per line.
fn import(name: &str) -> (String, Vec<String>) {
    let file = fixture(name);
    let out = seawall(&["import", &file.display().to_string()], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "seawall import {name} failed:\n{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr.lines().map(str::to_owned).collect())
}

/// Imports `name`, checks the result with the schema and `seawall check-config`, and
/// returns it with the warnings.
fn import_and_check(name: &str) -> (String, Vec<String>) {
    let (yaml, warnings) = import(name);
    let schema = jsonschema::options()
        .offline()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(&seawall::config::json_schema())
        .expect("schema");
    let instance: Value = yaml_serde::from_str(&yaml).unwrap_or_else(|e| panic!("not YAML: {e}\n{yaml}"));
    let errors: Vec<String> = schema.iter_errors(&instance).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "import of {name} fails the schema: {errors:?}\n{yaml}");

    let dir = TestDir::new("import");
    let config = dir.write("seawall.yaml", &yaml);
    let out = seawall(&["check-config", &config.display().to_string()], &VARIABLES);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains(": ok ("),
        "check-config refused the import of {name}:\n{}\n{yaml}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Without the variables the references need, check-config says which are missing.
    let out = seawall(&["check-config", &config.display().to_string()], &[]);
    if yaml.contains("${") {
        assert!(!out.status.success(), "check-config accepted {name} without its variables");
        assert!(String::from_utf8_lossy(&out.stderr).contains("is not set"));
    }
    (yaml, warnings)
}

fn assert_warned(warnings: &[String], part: &str) {
    assert!(warnings.iter().any(|w| w.contains(part)), "no warning with {part:?} in {warnings:#?}");
}

#[test]
fn claude_desktop_config_imports_to_stdio_upstreams() {
    let (yaml, warnings) = import_and_check("claude_desktop_config.json");
    assert!(yaml.starts_with("# seawall configuration imported from "), "{yaml}");
    assert!(yaml.contains("# Variables to set: GITHUB_TOKEN."), "{yaml}");
    assert!(yaml.contains("  - name: \"github-com-github\"\n    command: \"docker\"\n"), "{yaml}");
    assert!(yaml.contains("\"GITHUB_PERSONAL_ACCESS_TOKEN\": \"${GITHUB_TOKEN}\""), "{yaml}");
    assert!(yaml.contains("\"PRICE\": \"5$$ a month\""), "a literal $ is escaped: {yaml}");
    assert_warned(&warnings, "claude_desktop_config.json:18: globalShortcut: not used by seawall; ignored");
    assert_warned(&warnings, "mcpServers.github.com/github: the upstream is named \"github-com-github\"");
    assert!(warnings.iter().all(|w| w.starts_with("warning: ")), "{warnings:#?}");
}

#[test]
fn cursor_config_imports_remote_servers_with_headers() {
    let (yaml, warnings) = import_and_check("cursor_mcp.json");
    assert!(yaml.contains("  - name: \"remote-docs\"\n    url: \"http://127.0.0.1:59871/mcp\"\n"), "{yaml}");
    assert!(yaml.contains("\"Authorization\": \"Bearer ${DOCS_TOKEN}\""), "{yaml}");
    assert!(yaml.contains("\"API_KEY\": \"${DEMO_API_KEY}\""), "{yaml}");
    assert!(yaml.contains("url: \"http://127.0.0.1:59872/sse\"\n    transport: sse"), "{yaml}");
    assert_warned(&warnings, "cursor_mcp.json:18: mcpServers.web__search.autoApprove: not used by seawall; ignored");
    assert_warned(&warnings, "cursor_mcp.json:19: mcpServers.web__search.timeout: not used by seawall; ignored");
    assert_warned(&warnings, "mcpServers.legacy_events.url: taken as an HTTP+SSE server");
}

#[test]
fn vs_code_mcp_json_imports_with_inputs_as_variables() {
    let (yaml, warnings) = import_and_check("vscode_mcp.json");
    assert!(yaml.contains("(VS Code `servers`)"), "{yaml}");
    assert!(yaml.contains("\"API_KEY\": \"${API_KEY}\""), "{yaml}");
    assert!(yaml.contains("\"HOME_DIR\": \"${HOME}\""), "{yaml}");
    assert!(yaml.contains("  - name: \"Remote-Tools\"\n    url: \"http://127.0.0.1:59873/mcp\"\n"), "{yaml}");
    assert!(yaml.contains("url: \"http://127.0.0.1:59874/events\"\n    transport: sse"), "{yaml}");
    assert_warned(
        &warnings,
        "servers.demo.env.API_KEY: VS Code input `api-key` (Demo API key) becomes the environment variable API_KEY",
    );
    assert_warned(&warnings, "vscode_mcp.json:16: servers.demo.envFile: seawall reads no env files");
    assert_warned(&warnings, "servers.events.dev: not used by seawall; ignored");
}

#[test]
fn import_of_a_file_that_is_no_mcp_servers_file_fails_with_its_line() {
    let dir = TestDir::new("import-bad");
    let bad = dir.write("bad.json", "{\n  \"mcpServers\": {\n    \"x\": {\"args\": [\"a\"]}\n  }\n}\n");
    let out = seawall(&["import", &bad.display().to_string()], &[]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.json:3: mcpServers.x: needs `command`"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout for a failed import");
}

async fn tools_of(client: &Client) -> Vec<String> {
    let tools = client.request(1, "tools/list", json!({})).await;
    let list = tools.result()["tools"].as_array().cloned().unwrap_or_default();
    list.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_config_runs_and_serves_tools_list() {
    let (yaml, _) = import("vscode_mcp.json");
    let mut gw = Seawall::start_with(&yaml, &[], &VARIABLES).await;
    // The demo entry is a stdio upstream running `seawall demo-upstream --stdio`.
    let client = Client::connect(&gw.upstream_url("demo"), json!({})).await;
    let tools = tools_of(&client).await;
    assert!(tools.iter().any(|t| t == "echo"), "{tools:?}");
    let echoed = client.call_tool(2, "echo", json!({"message": "imported"})).await;
    assert_eq!(echoed["content"][0]["text"], "imported", "{echoed}");
    gw.stop(std::time::Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_including_an_mcp_servers_file_runs() {
    let files = TestDir::new("include");
    let servers = json!({"mcpServers": {"from-file": {"command": "seawall", "args": ["demo-upstream", "--stdio"]}}});
    let servers = files.write("mcp.json", &servers.to_string());
    let config = format!(
        "include_mcp_servers: {}\nupstreams:\n  - name: own\n    command: seawall\n    args: [demo-upstream, --stdio]\n",
        serde_json::to_string(&servers.display().to_string()).expect("path")
    );
    let mut gw = Seawall::start(&config).await;
    let client = Client::connect(&gw.url, json!({})).await;
    let tools = tools_of(&client).await;
    for expected in ["own__echo", "from-file__echo"] {
        assert!(tools.iter().any(|t| t == expected), "{expected} missing from {tools:?}");
    }
    gw.stop(std::time::Duration::from_secs(5)).await;
}

/// Servers of an included `mcpServers` file have no `inherit_env` of their own: they
/// get what `defaults.inherit_env` names (here a stand-in for the TLS variables `npx`
/// needs), and still nothing else of seawall's environment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn included_servers_get_the_variables_defaults_inherit_env_names() {
    let files = TestDir::new("include-env");
    let record = files.join("noisy.json");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/support/noisy_server.py");
    let python = std::env::var("SEAWALL_TEST_PYTHON").unwrap_or_else(|_| "python3".into());
    let servers = json!({"mcpServers": {"noisy": {"command": python, "args": [script],
        "env": {"NOISY_RECORD": record.display().to_string()}}}});
    let servers = files.write("mcp.json", &servers.to_string());
    let config = format!(
        "include_mcp_servers: {}\ndefaults:\n  inherit_env: [SEAWALL_TEST_CA_FILE]\n",
        serde_json::to_string(&servers.display().to_string()).expect("path")
    );
    let env = [("SEAWALL_TEST_CA_FILE", "/etc/ssl/test-ca.pem"), ("SEAWALL_TEST_SECRET", "gateway-credential")];
    let mut gw = Seawall::start_with(&config, &[], &env).await;
    let client = Client::connect(&gw.url, json!({})).await;
    let echoed = client.call_tool(1, "noisy__echo", json!({"message": "hi"})).await;
    assert_eq!(echoed["content"][0]["text"], "hi", "{echoed}");
    let recorded: Value = serde_json::from_str(&std::fs::read_to_string(&record).expect("record")).expect("JSON");
    let names: Vec<&str> = recorded["env"].as_array().expect("env").iter().filter_map(Value::as_str).collect();
    assert!(names.contains(&"SEAWALL_TEST_CA_FILE"), "{names:?}");
    assert!(!names.contains(&"SEAWALL_TEST_SECRET"), "{names:?}");
    gw.stop(std::time::Duration::from_secs(5)).await;
}
