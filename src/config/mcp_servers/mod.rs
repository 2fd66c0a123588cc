//! `mcpServers` files, the JSON that desktop MCP clients keep their servers in, read as
//! seawall upstreams: by `seawall import` (which prints a config) and by the
//! `include_mcp_servers:` key (which uses the file as it is).
//!
//! Three shapes are read, told apart by their top-level key:
//! * Claude Desktop and Cursor: `{"mcpServers": {NAME: {command, args, env}}}`, Cursor
//!   also `{url, headers}` entries for remote servers (and Claude Code a `type`);
//! * VS Code: `{"servers": {NAME: {type: "stdio"|"http"|"sse", command, args, env, url,
//!   headers}}, "inputs": [...]}` (`.vscode/mcp.json`, comments allowed), or the same
//!   under `"mcp"` in its settings.json.
//!
//! Every server becomes an upstream with default settings: a stdio upstream for a
//! `command`, an HTTP one (`transport: sse` for an SSE server) for a `url`. Names are
//! made valid upstream names. A field seawall has no use for is reported as a warning
//! naming the file, the server and the field, never dropped silently. Variable
//! references are turned into seawall's (see [`vars`]).

mod jsonc;
mod render;
mod vars;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use serde_json::{Map, Value};

use super::locate::{self, FieldPath};
use super::{ConfigError, ConfigIssue, HttpTransport, UpstreamConfig};

pub use render::{Imported, import};

/// Which client's file it is, from its shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McpServersFormat {
    /// `{"mcpServers": {...}}`: Claude Desktop, Claude Code, Cursor and most others.
    McpServers,
    /// `{"servers": {...}, "inputs": [...]}`: VS Code's `mcp.json`.
    VsCode,
    /// `{"mcp": {"servers": {...}}}`: VS Code's settings.json.
    VsCodeSettings,
}

impl McpServersFormat {
    /// The clients that write this shape, for messages.
    pub fn clients(self) -> &'static str {
        match self {
            McpServersFormat::McpServers => "Claude Desktop / Cursor `mcpServers`",
            McpServersFormat::VsCode => "VS Code `servers`",
            McpServersFormat::VsCodeSettings => "VS Code settings `mcp.servers`",
        }
    }
}

/// The servers of one `mcpServers` file, as upstreams.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServers {
    /// The file's shape.
    pub format: McpServersFormat,
    /// One upstream per server, in the file's order.
    pub upstreams: Vec<UpstreamConfig>,
    /// For each upstream, the server's name in the file (which may differ).
    pub original_names: Vec<String>,
    /// Environment variables the upstreams' `${VAR}` references need, sorted.
    pub variables: Vec<String>,
    /// What was not carried over as written, one `FILE:LINE: FIELD: message` line each.
    pub warnings: Vec<String>,
}

/// Reads the `mcpServers` file at `path`; `origin` names it in messages. Upstream names
/// are made valid and distinct, and never contain `separator`.
pub fn read_mcp_servers(path: &Path, origin: &str, separator: &str) -> Result<McpServers, ConfigError> {
    let text =
        std::fs::read_to_string(path).map_err(|source| ConfigError::Read { origin: origin.to_owned(), source })?;
    parse_mcp_servers(&text, origin, separator)
}

/// Like [`read_mcp_servers`], from the file's text.
pub fn parse_mcp_servers(text: &str, origin: &str, separator: &str) -> Result<McpServers, ConfigError> {
    let clean = jsonc::strip(text);
    let invalid = |line: Option<usize>, field: &str, message: String| ConfigError::Invalid {
        origin: origin.to_owned(),
        issues: vec![ConfigIssue { line, field: field.to_owned(), message }],
    };
    let root: Value =
        serde_json::from_str(&clean).map_err(|e| invalid(Some(e.line()), "", format!("not JSON: {e}")))?;
    let Value::Object(root) = root else {
        return Err(invalid(Some(1), "", "expected a JSON object with `mcpServers` or `servers`".to_owned()));
    };
    let mut reader = Reader::new(origin, &clean, separator);
    let (format, at, servers, inputs) = reader.find_servers(&root).map_err(|message| invalid(Some(1), "", message))?;
    reader.inputs = inputs;
    for (name, entry) in servers {
        reader.server(&at.key(name), name, entry);
    }
    if !reader.errors.is_empty() {
        reader.errors.sort_by_key(|issue| issue.line);
        return Err(ConfigError::Invalid { origin: origin.to_owned(), issues: reader.errors });
    }
    let mut variables: Vec<String> = reader.variables.into_iter().collect();
    variables.sort();
    Ok(McpServers {
        format,
        upstreams: reader.upstreams,
        original_names: reader.original_names,
        variables,
        warnings: reader.warnings,
    })
}

/// The fields of a server entry that seawall reads.
const KNOWN_FIELDS: [&str; 10] =
    ["type", "command", "args", "env", "cwd", "url", "serverUrl", "headers", "envFile", "disabled"];

/// Reads server entries, collecting upstreams, warnings and errors.
struct Reader<'a> {
    origin: &'a str,
    /// The file without comments, for line lookups (JSON is YAML, so `locate` reads it).
    text: String,
    separator: &'a str,
    names: HashSet<String>,
    /// VS Code inputs: id → description.
    inputs: BTreeMap<String, String>,
    upstreams: Vec<UpstreamConfig>,
    original_names: Vec<String>,
    variables: HashSet<String>,
    warnings: Vec<String>,
    errors: Vec<ConfigIssue>,
}

type Servers<'v> = (McpServersFormat, FieldPath, &'v Map<String, Value>, BTreeMap<String, String>);

impl<'a> Reader<'a> {
    fn new(origin: &'a str, clean: &str, separator: &'a str) -> Self {
        Reader {
            origin,
            // YAML takes no tabs where JSON allows them; JSON strings hold none unescaped.
            text: clean.replace('\t', " "),
            separator,
            names: HashSet::new(),
            inputs: BTreeMap::new(),
            upstreams: Vec::new(),
            original_names: Vec::new(),
            variables: HashSet::new(),
            warnings: Vec::new(),
            errors: Vec::new(),
        }
    }

    fn line(&self, path: &FieldPath) -> usize {
        locate::line_of(&self.text, path)
    }

    fn warn(&mut self, path: &FieldPath, message: impl std::fmt::Display) {
        let line = self.line(path);
        self.warnings.push(format!("{}:{line}: {path}: {message}", self.origin));
    }

    fn error(&mut self, path: &FieldPath, message: impl Into<String>) {
        let line = Some(self.line(path));
        self.errors.push(ConfigIssue { line, field: path.to_string(), message: message.into() });
    }

    /// The servers object, by the file's shape; top-level keys of no use are warned of.
    fn find_servers<'v>(&mut self, root: &'v Map<String, Value>) -> Result<Servers<'v>, String> {
        let (format, at, holder) = if root.contains_key("mcpServers") {
            (McpServersFormat::McpServers, FieldPath::root(), root)
        } else if root.contains_key("servers") {
            (McpServersFormat::VsCode, FieldPath::root(), root)
        } else if let Some(Value::Object(mcp)) = root.get("mcp") {
            (McpServersFormat::VsCodeSettings, FieldPath::root().key("mcp"), mcp)
        } else {
            return Err(
                "expected a JSON object with `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code)".to_owned()
            );
        };
        let key = if format == McpServersFormat::McpServers { "mcpServers" } else { "servers" };
        let Some(Value::Object(servers)) = holder.get(key) else {
            return Err(format!("`{}` must be an object of servers by name", at.key(key)));
        };
        // In VS Code's settings.json only the `mcp` object is about MCP servers.
        for field in holder.keys() {
            if field != key && field != "inputs" {
                self.warn(&at.key(field), "not used by seawall; ignored");
            }
        }
        let inputs = self.inputs(&at.key("inputs"), holder.get("inputs"));
        Ok((format, at.key(key), servers, inputs))
    }

    /// VS Code `inputs`: `[{type, id, description, password}]`, id → description.
    fn inputs(&mut self, at: &FieldPath, inputs: Option<&Value>) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        match inputs {
            None => {}
            Some(Value::Array(items)) => {
                for item in items {
                    if let Some(id) = item.get("id").and_then(Value::as_str) {
                        let description = item.get("description").and_then(Value::as_str).unwrap_or_default();
                        out.insert(id.to_owned(), description.to_owned());
                    }
                }
            }
            Some(_) => self.warn(at, "not a list of inputs; ignored"),
        }
        out
    }

    /// Converts one server entry; problems become errors or warnings.
    fn server(&mut self, at: &FieldPath, name: &str, entry: &Value) {
        let Value::Object(entry) = entry else {
            self.error(at, "a server must be an object with `command` or `url`");
            return;
        };
        for field in entry.keys().filter(|f| !KNOWN_FIELDS.contains(&f.as_str())) {
            self.warn(&at.key(field), "not used by seawall; ignored");
        }
        if entry.get("disabled").and_then(Value::as_bool) == Some(true) {
            self.warn(&at.key("disabled"), "the server is disabled: not imported");
            return;
        }
        if entry.contains_key("envFile") {
            let why = "seawall reads no env files: set these variables in seawall's own environment; ignored";
            self.warn(&at.key("envFile"), why);
        }
        let url_key = if entry.contains_key("url") { "url" } else { "serverUrl" };
        let kind = match entry.get("type") {
            None => None,
            Some(Value::String(kind)) => Some(kind.as_str()),
            Some(_) => {
                self.error(&at.key("type"), "must be a string: stdio, http or sse");
                return;
            }
        };
        let errors = self.errors.len();
        let command = self.string(at, entry, "command");
        let url = self.string(at, entry, url_key);
        if self.errors.len() > errors {
            return;
        }
        let mut upstream = UpstreamConfig { name: self.upstream_name(at, name), ..UpstreamConfig::default() };
        match (command, url, kind) {
            (Some(_), Some(_), _) => self.error(at, format!("has both `command` and `{url_key}`; give one")),
            (None, None, _) => {
                self.error(at, "needs `command` (a local server) or `url` (a remote one)");
            }
            (Some(command), None, None | Some("stdio")) => {
                upstream.command = Some(self.text_value(&at.key("command"), &command, false));
                upstream.args = self.args(at, entry);
                upstream.env = self.table(at, entry, "env");
                upstream.cwd =
                    self.string(at, entry, "cwd").map(|cwd| self.text_value(&at.key("cwd"), &cwd, false).into());
                for field in ["headers"] {
                    if entry.contains_key(field) {
                        self.warn(
                            &at.key(field),
                            "applies to remote servers only, and this one has `command`; ignored",
                        );
                    }
                }
            }
            (
                None,
                Some(url),
                None | Some("http" | "sse" | "streamable-http" | "streamableHttp" | "streamable_http"),
            ) => {
                upstream.url = Some(self.text_value(&at.key(url_key), &url, false));
                upstream.headers = self.table(at, entry, "headers");
                upstream.transport = self.transport(at, kind, &url);
                for field in ["args", "env", "cwd"] {
                    if entry.contains_key(field) {
                        self.warn(
                            &at.key(field),
                            format!("applies to local servers only, and this one has `{url_key}`; ignored"),
                        );
                    }
                }
            }
            (_, _, Some(kind)) => {
                let why =
                    format!("unknown type {kind:?} for this entry: stdio (with `command`), http or sse (with `url`)");
                self.error(&at.key("type"), why);
            }
        }
        if upstream.command.is_some() || upstream.url.is_some() {
            self.names.insert(upstream.name.clone());
            self.original_names.push(name.to_owned());
            self.upstreams.push(upstream);
        }
    }

    /// HTTP+SSE for `type: sse`, or for a URL ending in `/sse` when no type is given.
    fn transport(&mut self, at: &FieldPath, kind: Option<&str>, url: &str) -> HttpTransport {
        match kind {
            Some("sse") => HttpTransport::Sse,
            Some(_) => HttpTransport::StreamableHttp,
            None if url.split(['?', '#']).next().is_some_and(|path| path.trim_end_matches('/').ends_with("/sse")) => {
                let why = "taken as an HTTP+SSE server (`transport: sse`) since its URL ends in /sse; \
                           give \"type\": \"http\" if it speaks Streamable HTTP";
                self.warn(&at.key("url"), why);
                HttpTransport::Sse
            }
            None => HttpTransport::StreamableHttp,
        }
    }

    /// A valid upstream name for server `name`, distinct from those given so far.
    fn upstream_name(&mut self, at: &FieldPath, name: &str) -> String {
        let base = vars::upstream_name(name, self.separator);
        let mut candidate = base.clone();
        let mut n = 2;
        while self.names.contains(&candidate) {
            let suffix = format!("-{n}");
            let keep = base.len().min(64 - suffix.len());
            candidate = format!("{}{suffix}", &base[..keep]);
            n += 1;
        }
        if candidate != name {
            let why = format!(
                "the upstream is named {candidate:?} (upstream names are 1 to 64 of A-Z a-z 0-9 _ -, without {:?}, \
                 and unique)",
                self.separator
            );
            self.warn(at, why);
        }
        candidate
    }

    /// A string field, if present; anything else is an error.
    fn string(&mut self, at: &FieldPath, entry: &Map<String, Value>, field: &str) -> Option<String> {
        match entry.get(field)? {
            Value::String(text) => Some(text.clone()),
            _ => {
                self.error(&at.key(field), "must be a string");
                None
            }
        }
    }

    fn args(&mut self, at: &FieldPath, entry: &Map<String, Value>) -> Vec<String> {
        let at = at.key("args");
        match entry.get("args") {
            None => Vec::new(),
            Some(Value::Array(items)) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    match scalar_text(item) {
                        Some(text) => out.push(self.text_value(&at.index(i), &text, false)),
                        None => self.error(&at.index(i), "must be a string"),
                    }
                }
                out
            }
            Some(_) => {
                self.error(&at, "must be a list of strings");
                Vec::new()
            }
        }
    }

    /// `env` or `headers`: an object of strings, whose values seawall expands.
    fn table(&mut self, at: &FieldPath, entry: &Map<String, Value>, field: &str) -> BTreeMap<String, String> {
        let at = at.key(field);
        let mut out = BTreeMap::new();
        match entry.get(field) {
            None => {}
            Some(Value::Object(values)) => {
                for (key, value) in values {
                    match scalar_text(value) {
                        Some(text) => {
                            let converted = self.text_value(&at.key(key), &text, true);
                            out.insert(key.clone(), converted);
                        }
                        None => self.error(&at.key(key), "must be a string"),
                    }
                }
            }
            Some(_) => self.error(&at, "must be an object of strings"),
        }
        out
    }

    /// Converts the variable references of one value (see [`vars::convert`]), warning
    /// of each one that changed meaning or could not be carried.
    fn text_value(&mut self, at: &FieldPath, text: &str, expanded: bool) -> String {
        let converted = vars::convert(text, expanded, &self.inputs);
        for note in &converted.notes {
            self.warn(at, note);
        }
        self.variables.extend(converted.variables);
        converted.text
    }
}

/// A JSON scalar as text: strings as they are, numbers and booleans as written.
fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    //! `mcpServers` files: their shapes, variable references, names and what is warned of;
    //! and `include_mcp_servers:` in a config.

    use crate::config::test_support::{assert_issue, env};
    use crate::config::{Config, HttpTransport, McpServers, McpServersFormat, parse_mcp_servers};

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
        let p = crate::config::expand::expand(&env["P"], &|_| None);
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
        let config = Config::parse_with_env(text, &origin, &env).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(config.upstreams[1].env["T"], "secret", "expanded like any upstream");
        assert_eq!(config.warnings, ["sub/servers.json:1: mcpServers.b.extra: not used by seawall; ignored"]);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn include_mcp_servers_problems_are_reported_at_its_line() {
        let dir = dir_with(
            r#"{"mcpServers": {"a": {"command": "y"}, "c": {"url": "ftp://h", "headers": {"H": "${NOPE}"}}}}"#,
        );
        let origin = dir.join("seawall.yaml").display().to_string();
        let text = "upstreams:\n  - name: a\n    command: x\ninclude_mcp_servers: sub/servers.json\n";
        let err = Config::parse_with_env(text, &origin, &env).unwrap_err();
        let issues = err.errors();
        assert_eq!(issues.len(), 3, "{issues:#?}");
        let clash = "sub/servers.json: server \"a\" would be upstream \"a\", the name of upstreams[0]";
        assert_issue(&issues[0], 4, "include_mcp_servers", clash);
        let messages: Vec<&str> = issues[1..].iter().map(|i| i.message.as_str()).collect();
        assert!(messages.contains(&"sub/servers.json: server \"c\": headers.H: environment variable NOPE is not set"));
        assert!(messages.contains(&"sub/servers.json: server \"c\": url: not an http(s) URL: \"ftp://h\""));
        let missing = Config::parse_with_env("include_mcp_servers: none.json\n", &origin, &env).unwrap_err();
        assert_issue(&missing.errors()[0], 1, "include_mcp_servers", "none.json: cannot read");
        let _ = std::fs::remove_dir_all(dir);
    }
}
