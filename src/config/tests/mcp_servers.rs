//! `mcpServers` files: their shapes, variable references, names and what is warned of;
//! and `include_mcp_servers:` in a config.

use super::super::{Config, HttpTransport, McpServers, McpServersFormat, parse_mcp_servers};
use super::assert_issue;

fn read(json: &str) -> McpServers {
    parse_mcp_servers(json, "m.json", "__").unwrap_or_else(|e| panic!("{e}"))
}

fn warned(servers: &McpServers, part: &str) -> bool {
    servers.warnings.iter().any(|w| w.contains(part))
}

#[test]
fn claude_desktop_entries_become_stdio_upstreams() {
    let servers =
        read(r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "pkg", 3], "env": {"A": "1", "N": 2}}}}"#);
    assert_eq!(servers.format, McpServersFormat::McpServers);
    let fs = &servers.upstreams[0];
    assert_eq!((fs.name.as_str(), fs.command.as_deref()), ("fs", Some("npx")));
    assert_eq!(fs.args, ["-y", "pkg", "3"]);
    assert_eq!(fs.env["N"], "2");
    assert!(servers.warnings.is_empty(), "{:?}", servers.warnings);
}

#[test]
fn url_entries_become_http_upstreams_sse_by_type_or_path() {
    let servers = read(
        r#"{"mcpServers": {
            "a": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
            "b": {"url": "http://h/sse"},
            "c": {"type": "sse", "url": "http://h/events"},
            "d": {"type": "http", "url": "http://h/sse"},
            "e": {"serverUrl": "http://h/mcp"}
        }}"#,
    );
    let transports: Vec<HttpTransport> = servers.upstreams.iter().map(|u| u.transport).collect();
    use HttpTransport::{Sse, StreamableHttp};
    assert_eq!(transports, [StreamableHttp, Sse, Sse, StreamableHttp, StreamableHttp]);
    assert_eq!(servers.upstreams[0].headers["Authorization"], "Bearer ${TOKEN}");
    assert_eq!(servers.variables, ["TOKEN"]);
    assert!(warned(&servers, "mcpServers.b.url: taken as an HTTP+SSE server"));
    assert_eq!(servers.warnings.len(), 1, "{:?}", servers.warnings);
}

#[test]
fn vs_code_files_with_comments_inputs_and_editor_variables() {
    let servers = read(
        "// VS Code\n{\n  \"inputs\": [{\"type\": \"promptString\", \"id\": \"gh-token\", \"description\": \"GitHub\"}],\n  \
         \"servers\": {\n    \"gh\": {\"type\": \"stdio\", \"command\": \"gh-mcp\", /* why */ \"env\": {\n      \
         \"T\": \"${input:gh-token}\",\n      \"H\": \"${env:HOME}/x\",\n      \"W\": \"${workspaceFolder}\",\n      \
         \"C\": \"${config:a.b}\",\n    }},\n  },\n}\n",
    );
    assert_eq!(servers.format, McpServersFormat::VsCode);
    let env = &servers.upstreams[0].env;
    assert_eq!(env["T"], "${GH_TOKEN}");
    assert_eq!(env["H"], "${HOME}/x");
    assert_eq!(env["W"], "${workspaceFolder}");
    assert_eq!(env["C"], "$${config:a.b}", "kept as literal text");
    assert_eq!(servers.variables, ["GH_TOKEN", "HOME", "workspaceFolder"]);
    assert!(warned(&servers, "m.json:6: servers.gh.env.T: VS Code input `gh-token` (GitHub) becomes"));
    assert!(warned(&servers, "servers.gh.env.W: `${workspaceFolder}` is a variable of the editor"));
    assert!(warned(&servers, "servers.gh.env.C: `${config:a.b}` has no equivalent"));
    assert!(!warned(&servers, "env.H"), "{:?}", servers.warnings);
}

#[test]
fn vs_code_settings_hold_servers_under_mcp() {
    let servers = read(r#"{"mcp": {"servers": {"a": {"command": "x"}}}, "editor.fontSize": 14}"#);
    assert_eq!(servers.format, McpServersFormat::VsCodeSettings);
    assert_eq!(servers.upstreams.len(), 1);
    // The editor's other settings are not about MCP servers: not worth a warning each.
    assert!(servers.warnings.is_empty(), "{:?}", servers.warnings);
    let servers = read(r#"{"mcp": {"servers": {"a": {"command": "x"}}, "discovery": true}}"#);
    assert!(warned(&servers, "mcp.discovery: not used by seawall"), "{:?}", servers.warnings);
}

#[test]
fn references_outside_env_and_headers_stay_as_written_with_a_warning() {
    let servers = read(r#"{"mcpServers": {"a": {"command": "run-${X}", "args": ["--key=${input:k}", "5$"]}}}"#);
    let a = &servers.upstreams[0];
    assert_eq!(a.command.as_deref(), Some("run-${X}"));
    assert_eq!(a.args, ["--key=${input:k}", "5$"]);
    assert!(warned(&servers, "mcpServers.a.command: `${X}` is kept as written"));
    assert!(warned(&servers, "mcpServers.a.args[0]: `${input:k}` is kept as written"));
    assert!(servers.variables.is_empty());
}

#[test]
fn literal_dollars_and_defaults_in_expanded_values() {
    let servers = read(r#"{"mcpServers": {"a": {"command": "x", "env": {"P": "a$$b$", "D": "${PORT:-8080}"}}}}"#);
    let env = &servers.upstreams[0].env;
    assert_eq!(env["P"], "a$$$$b$$");
    assert_eq!(env["D"], "${PORT}");
    assert!(warned(&servers, "seawall has no default values, so PORT must be set (default \"8080\" dropped)"));
    // seawall expands them back to what the file meant.
    let p = super::super::expand::expand(&env["P"], &|_| None);
    assert_eq!(p.as_deref(), Ok("a$$b$"));
}

#[test]
fn names_are_made_valid_and_distinct() {
    let servers = read(
        r#"{"mcpServers": {"a b": {"command": "x"}, "a-b": {"command": "x"}, "x__y": {"command": "x"},
            "": {"command": "x"}, "ünï": {"command": "x"}}}"#,
    );
    let names: Vec<&str> = servers.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["a-b", "a-b-2", "x-y", "server", "-n-"]);
    assert_eq!(servers.original_names, ["a b", "a-b", "x__y", "", "ünï"]);
    assert!(warned(&servers, "mcpServers.a-b: the upstream is named \"a-b-2\""));
    let long = format!(r#"{{"mcpServers": {{"{}": {{"command": "x"}}}}}}"#, "n".repeat(80));
    assert_eq!(read(&long).upstreams[0].name.len(), 64);
}

#[test]
fn unknown_fields_are_warned_of_and_disabled_servers_left_out() {
    let servers = read(
        r#"{"mcpServers": {"a": {"command": "x", "autoApprove": ["t"], "headers": {"A": "b"}},
            "b": {"command": "y", "disabled": true}}, "theme": "dark"}"#,
    );
    assert_eq!(servers.upstreams.len(), 1);
    assert!(warned(&servers, "m.json:1: mcpServers.a.autoApprove: not used by seawall; ignored"));
    assert!(warned(&servers, "mcpServers.a.headers: applies to remote servers only"));
    assert!(warned(&servers, "mcpServers.b.disabled: the server is disabled: not imported"));
    assert!(warned(&servers, "m.json:2: theme: not used by seawall"), "{:?}", servers.warnings);
}

#[test]
fn entries_that_cannot_be_upstreams_are_errors_with_lines() {
    let json = "{\"mcpServers\": {\n  \"a\": {\"args\": []},\n  \"b\": {\"command\": \"x\", \"url\": \"http://h\"},\n  \
                \"c\": {\"type\": \"ws\", \"url\": \"ws://h\"},\n  \"d\": {\"command\": 5},\n  \"e\": 1\n}}\n";
    let err = parse_mcp_servers(json, "m.json", "__").unwrap_err();
    let issues = err.errors();
    assert_eq!(issues.len(), 5, "{issues:#?}");
    assert_issue(&issues[0], 2, "mcpServers.a", "needs `command`");
    assert_issue(&issues[1], 3, "mcpServers.b", "has both `command` and `url`");
    assert_issue(&issues[2], 4, "mcpServers.c.type", "unknown type \"ws\"");
    assert_issue(&issues[3], 5, "mcpServers.d.command", "must be a string");
    assert_issue(&issues[4], 6, "mcpServers.e", "must be an object");
    for bad in ["[]", "{\"other\": {}}", "{\"mcpServers\": []}", "{\"mcpServers\": {"] {
        assert!(parse_mcp_servers(bad, "m.json", "__").is_err(), "{bad}");
    }
}

/// A config in a fresh directory next to an `mcpServers` file.
fn dir_with(json: &str) -> std::path::PathBuf {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("seawall-include-{}-{n}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/servers.json"), json).unwrap();
    dir
}

#[test]
fn include_mcp_servers_adds_upstreams_from_a_file_next_to_the_config() {
    let dir = dir_with(r#"{"mcpServers": {"b": {"command": "y", "env": {"T": "${TOKEN}"}, "extra": 1}}}"#);
    let text = "include_mcp_servers: sub/servers.json\nupstreams:\n  - name: a\n    command: x\n";
    let origin = dir.join("seawall.yaml").display().to_string();
    let config = Config::parse_with_env(text, &origin, &super::env).unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(config.upstreams[1].env["T"], "secret", "expanded like any upstream");
    assert_eq!(config.warnings, ["sub/servers.json:1: mcpServers.b.extra: not used by seawall; ignored"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn include_mcp_servers_problems_are_reported_at_its_line() {
    let dir =
        dir_with(r#"{"mcpServers": {"a": {"command": "y"}, "c": {"url": "ftp://h", "headers": {"H": "${NOPE}"}}}}"#);
    let origin = dir.join("seawall.yaml").display().to_string();
    let text = "upstreams:\n  - name: a\n    command: x\ninclude_mcp_servers: sub/servers.json\n";
    let err = Config::parse_with_env(text, &origin, &super::env).unwrap_err();
    let issues = err.errors();
    assert_eq!(issues.len(), 3, "{issues:#?}");
    let clash = "sub/servers.json: server \"a\" would be upstream \"a\", the name of upstreams[0]";
    assert_issue(&issues[0], 4, "include_mcp_servers", clash);
    let messages: Vec<&str> = issues[1..].iter().map(|i| i.message.as_str()).collect();
    assert!(messages.contains(&"sub/servers.json: server \"c\": headers.H: environment variable NOPE is not set"));
    assert!(messages.contains(&"sub/servers.json: server \"c\": url: not an http(s) URL: \"ftp://h\""));
    let missing = Config::parse_with_env("include_mcp_servers: none.json\n", &origin, &super::env).unwrap_err();
    assert_issue(&missing.errors()[0], 1, "include_mcp_servers", "none.json: cannot read");
    let _ = std::fs::remove_dir_all(dir);
}
