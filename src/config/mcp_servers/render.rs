//! `seawall import`: an `mcpServers` file written out as a seawall config (YAML with a
//! comment header), checked by the loader before it is handed over.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use super::super::{Config, ConfigError, HttpTransport, UpstreamConfig};
use super::{McpServers, read_mcp_servers};

/// A seawall config made from an `mcpServers` file.
#[derive(Debug, Clone, PartialEq)]
pub struct Imported {
    /// The config, YAML.
    pub yaml: String,
    /// What was not carried over as written, one `FILE:LINE: FIELD: message` line each.
    pub warnings: Vec<String>,
}

/// Reads the `mcpServers` file at `path` (`origin` names it in messages) and writes its
/// servers as a seawall config. The config is checked as `check-config` would, with
/// every `${VAR}` taken as set; a problem there is an error naming the generated line.
pub fn import(path: &Path, origin: &str) -> Result<Imported, ConfigError> {
    let servers = read_mcp_servers(path, origin, &Config::default().name_separator)?;
    let yaml = render(&servers, origin);
    Config::parse_with_env(&yaml, &format!("{origin} (imported)"), &|_| Some("set".to_owned()))?;
    Ok(Imported { yaml, warnings: servers.warnings })
}

/// JSON strings are YAML double-quoted scalars, so every value is written as one.
fn quote(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

fn render(servers: &McpServers, origin: &str) -> String {
    let mut y = String::new();
    let _ = writeln!(y, "# seawall configuration imported from {origin} ({}).", servers.format.clients());
    y.push_str(concat!(
        "# Check it with `seawall check-config FILE`, run it with `seawall run --config FILE`.\n",
        "# Each server is an upstream with seawall's default timeouts, retries and breakers;\n",
        "# config/example.yaml shows every key. `${VAR}` in env and headers is read from\n",
        "# seawall's environment when it starts (an unset one is an error).\n",
    ));
    if !servers.variables.is_empty() {
        let _ = writeln!(y, "# Variables to set: {}.", servers.variables.join(", "));
    }
    y.push_str("listen: 127.0.0.1:8080        # MCP endpoint for clients: http://127.0.0.1:8080/mcp\n");
    y.push_str("admin_listen: 127.0.0.1:9090  # /metrics, /healthz, /readyz\n");
    if servers.upstreams.is_empty() {
        y.push_str("upstreams: []                 # the file names no server\n");
        return y;
    }
    y.push_str("upstreams:\n");
    for (upstream, original) in servers.upstreams.iter().zip(&servers.original_names) {
        if upstream.name != *original {
            let _ = writeln!(y, "  # {} in {origin}", quote(original));
        }
        let _ = writeln!(y, "  - name: {}", quote(&upstream.name));
        upstream_body(&mut y, upstream);
    }
    y
}

fn upstream_body(y: &mut String, upstream: &UpstreamConfig) {
    if let Some(command) = &upstream.command {
        let _ = writeln!(y, "    command: {}", quote(command));
        if !upstream.args.is_empty() {
            let args: Vec<String> = upstream.args.iter().map(|a| quote(a)).collect();
            let _ = writeln!(y, "    args: [{}]", args.join(", "));
        }
        table(y, "env", &upstream.env);
        if let Some(cwd) = &upstream.cwd {
            let _ = writeln!(y, "    cwd: {}", quote(&cwd.to_string_lossy()));
        }
    }
    if let Some(url) = &upstream.url {
        let _ = writeln!(y, "    url: {}", quote(url));
        if upstream.transport == HttpTransport::Sse {
            y.push_str("    transport: sse                # HTTP+SSE (protocol version 2024-11-05)\n");
        }
        table(y, "headers", &upstream.headers);
    }
}

fn table(y: &mut String, key: &str, values: &BTreeMap<String, String>) {
    if values.is_empty() {
        return;
    }
    let _ = writeln!(y, "    {key}:");
    for (name, value) in values {
        let _ = writeln!(y, "      {}: {}", quote(name), quote(value));
    }
}
