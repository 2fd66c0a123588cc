//! The documentation is checked so that it cannot drift from the code:
//!
//! * the generated reference pages are what `seawall docs` writes now, and the
//!   configuration page names every key of the schema;
//! * every ```` ```yaml ```` block of README.md and docs/src, and every file of
//!   config/examples/, passes `seawall check-config`;
//! * the `sh` blocks of docs/src/getting-started run, page by page, against the demo;
//! * `mdbook build docs` succeeds without a warning;
//! * every relative link of README.md, ARCHITECTURE.md, CONTRIBUTING.md and docs/src
//!   reaches a file, and its anchor a heading of that file.
//!
//! Markdown is read with pulldown-cmark, the parser mdBook renders the book with.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use serde_json::Value;

use crate::support::{TestDir, seawall_bin};

const REFERENCE_DIR: &str = "docs/src/reference";
const REGENERATE: &str = "cargo run --quiet -- docs --out docs/src/reference";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `path` relative to the repository, for messages.
fn shown(path: &Path) -> String {
    path.strip_prefix(repo()).unwrap_or(path).display().to_string()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", shown(path)))
}

/// The Markdown options mdBook turns on.
fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// Every `.md` file under `dir`, sorted.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("read {}: {e}", shown(&dir))).flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The pages whose YAML blocks and links are checked: README.md and the book's.
fn checked_pages() -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CONTRIBUTING.md"]
        .iter()
        .map(|name| repo().join(name))
        .filter(|path| path.exists())
        .collect();
    pages.extend(markdown_files(&repo().join("docs/src")));
    pages
}

/// A fenced code block: its info string, its text and the line of its opening fence.
struct Block {
    info: String,
    text: String,
    line: usize,
}

/// Every fenced code block of `markdown`, in order.
fn fenced_blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
                let line = markdown[..range.start].lines().count() + 1;
                open = Some(Block { info: info.to_string(), text: String::new(), line });
            }
            Event::Text(text) => {
                if let Some(block) = open.as_mut() {
                    block.text.push_str(&text);
                }
            }
            Event::End(TagEnd::CodeBlock) => blocks.extend(open.take()),
            _ => {}
        }
    }
    blocks
}

// ---------------------------------------------------------------------------------------
// (a) the generated reference, (b) every schema key in it
// ---------------------------------------------------------------------------------------

#[test]
fn the_reference_pages_are_what_the_code_generates() {
    let dir = TestDir::new("docs-reference");
    let out = Command::new(seawall_bin()).arg("docs").arg("--out").arg(dir.path()).output().expect("run seawall docs");
    assert!(out.status.success(), "seawall docs failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let mut generated: Vec<PathBuf> =
        std::fs::read_dir(dir.path()).expect("read the output").flatten().map(|e| e.path()).collect();
    generated.sort();
    assert!(generated.len() >= 3, "seawall docs wrote {generated:?}");
    let mut stale = Vec::new();
    for path in &generated {
        let name = path.file_name().and_then(|n| n.to_str()).expect("a file name");
        let committed = std::fs::read_to_string(repo().join(REFERENCE_DIR).join(name)).unwrap_or_default();
        if committed != read(path) {
            stale.push(format!("{REFERENCE_DIR}/{name}"));
        }
    }
    assert!(
        stale.is_empty(),
        "{} not what the code generates; regenerate with\n    {REGENERATE}",
        stale.join(", ") + if stale.len() == 1 { " is" } else { " are" }
    );
}

/// Every key path of the schema, written as the configuration page writes them:
/// `session.replay_buffer.messages`, `upstreams[].name`, `upstreams[].tools.<name>.timeout`,
/// each with whether it has a default or is required.
fn schema_keys() -> Vec<(String, bool)> {
    fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
        if let Some(target) = schema.get("$ref").and_then(Value::as_str) {
            let name = target.rsplit('/').next().unwrap_or_default();
            return resolve(&root["definitions"][name], root);
        }
        for combinator in ["allOf", "anyOf"] {
            if let Some(branches) = schema.get(combinator).and_then(Value::as_array) {
                let real: Vec<&Value> = branches.iter().filter(|b| b["type"] != "null").collect();
                if let [only] = real.as_slice() {
                    return resolve(only, root);
                }
            }
        }
        schema
    }
    fn walk(schema: &Value, root: &Value, path: &str, out: &mut Vec<(String, bool)>) {
        let schema = resolve(schema, root);
        if let Some(items) = schema.get("items") {
            walk(items, root, &format!("{path}[]"), out);
        }
        if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
            walk(values, root, &format!("{path}.<name>"), out);
        }
        let required: Vec<&str> =
            schema["required"].as_array().map(|r| r.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
            for (key, property) in properties {
                let key_path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                let settled = property.get("default").is_some() || required.contains(&key.as_str());
                out.push((key_path.clone(), settled));
                walk(property, root, &key_path, out);
            }
        }
    }
    let schema = seawall::config::json_schema();
    let mut out = Vec::new();
    walk(&schema, &schema, "", &mut out);
    out
}

#[test]
fn every_schema_key_is_in_the_configuration_reference_with_its_default() {
    let page = read(&repo().join(REFERENCE_DIR).join("configuration.md"));
    let keys = schema_keys();
    assert!(keys.len() > 150, "the schema walk found only {} keys", keys.len());
    let missing: Vec<&str> = keys
        .iter()
        .map(|(k, _)| k.as_str())
        .filter(|key| !page.contains(&format!("| `{key}` |")) && !page.contains(&format!("\n## {key}\n")))
        .collect();
    assert!(
        missing.is_empty(),
        "configuration.md has no row for {}; regenerate with\n    {REGENERATE}",
        missing.join(", ")
    );
    let without_default: Vec<&str> = keys.iter().filter(|(_, settled)| !settled).map(|(k, _)| k.as_str()).collect();
    assert!(
        without_default.is_empty(),
        "keys with neither a default nor `required` in the schema: {without_default:?}"
    );
}

// ---------------------------------------------------------------------------------------
// (c) every configuration in the docs passes check-config
// ---------------------------------------------------------------------------------------

/// The environment variables `text` references: `${VAR}`, and `env: VAR` of a fixed tool argument.
fn variables(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            names.insert(name.to_owned());
        }
        rest = &after[end..];
    }
    // A fixed tool argument read from the environment: `{ env: NAME }`.
    for (i, _) in text.match_indices("env: ") {
        let name: String = text[i + 5..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_') {
            names.insert(name);
        }
    }
    names
}

/// A value for `${name}` (or `env: name`) that passes the checks its use makes: a Redis URL, a URL, a
/// session key (32 bytes in base64), or a token long enough for any key or secret.
fn placeholder(name: &str) -> String {
    let upper = name.to_ascii_uppercase();
    if upper.contains("REDIS") {
        "redis://127.0.0.1:6379".to_owned()
    } else if upper.contains("URL") || upper.contains("ENDPOINT") {
        "https://placeholder.example/".to_owned()
    } else if upper.contains("SESSION_KEY") {
        "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=".to_owned()
    } else {
        "placeholder-value-0123456789abcdef".to_owned()
    }
}

/// The text of the `mcpServers` file a configuration includes, if any: its variables
/// are expanded at load too.
fn included(file: &Path, text: &str) -> String {
    let Ok(Value::Object(config)) = yaml_serde::from_str::<Value>(text) else { return String::new() };
    let Some(name) = config.get("include_mcp_servers").and_then(Value::as_str) else { return String::new() };
    let dir = file.parent().unwrap_or(Path::new("."));
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

/// Runs `seawall check-config` on `file` (whose text is `text`), with every variable it
/// references set; the error output when it fails.
fn check_config(file: &Path, text: &str) -> Result<(), String> {
    let mut command = Command::new(seawall_bin());
    command.arg("check-config").arg(file).current_dir(repo());
    for name in variables(text).into_iter().chain(variables(&included(file, text))) {
        command.env(&name, placeholder(&name));
    }
    let out = command.output().map_err(|e| format!("cannot run seawall: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

#[test]
fn every_yaml_block_and_example_config_passes_check_config() {
    let dir = TestDir::new("docs-yaml");
    let mut failures = Vec::new();
    let mut checked = 0;
    for page in checked_pages() {
        for block in fenced_blocks(&read(&page)).into_iter().filter(|b| b.info == "yaml") {
            let place = format!("{}:{}", shown(&page), block.line);
            let file = dir.write(&format!("block-{checked}.yaml"), &block.text);
            checked += 1;
            if let Err(e) = check_config(&file, &block.text) {
                failures.push(format!("{place}: the ```yaml block fails check-config:\n{e}"));
            }
        }
    }
    let mut examples: Vec<PathBuf> = std::fs::read_dir(repo().join("config/examples"))
        .expect("config/examples/")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    examples.sort();
    assert!(examples.len() >= 4, "too few examples in config/examples: {examples:?}");
    for example in &examples {
        checked += 1;
        if let Err(e) = check_config(example, &read(example)) {
            failures.push(format!("{} fails check-config:\n{e}", shown(example)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 4, "only {checked} configurations found");
}

// ---------------------------------------------------------------------------------------
// (d) the getting-started commands run
// ---------------------------------------------------------------------------------------

/// The commands of one page's `sh` blocks: continuation lines joined, comments and blank
/// lines left out, each with its line in the page.
fn commands(markdown: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for block in fenced_blocks(markdown).into_iter().filter(|b| b.info == "sh") {
        let mut pending: Option<(usize, String)> = None;
        for (i, line) in block.text.lines().enumerate() {
            let line_no = block.line + 1 + i;
            let (start, mut text) = pending.take().unwrap_or((line_no, String::new()));
            let trimmed = line.trim();
            if text.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
                continue;
            }
            match line.strip_suffix('\\') {
                Some(head) => {
                    text.push_str(head);
                    text.push(' ');
                    pending = Some((start, text));
                }
                None => {
                    text.push_str(line);
                    out.push((start, text));
                }
            }
        }
        out.extend(pending);
    }
    out
}

/// The bash script that runs one page's commands: a `cargo run --release --` prefix
/// becomes the seawall binary; a command ending in ` &` is a server, waited for until it
/// prints a `listening on` line and stopped when the script ends; any other command
/// must exit 0.
fn script(page: &str, commands: &[(usize, String)], logs: &Path) -> String {
    let bin = seawall_bin().display().to_string();
    let mut out = String::from(
        r#"set -uo pipefail
servers=()
stop_servers() {
    for pid in "${servers[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${servers[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
    done
}
trap stop_servers EXIT
wait_listening() { # LOG PID WHERE
    for _ in $(seq 1 600); do
        if ! kill -0 "$2" 2>/dev/null; then echo "$3: the server exited:" >&2; cat "$1" >&2; return 1; fi
        if grep -q 'listening on' "$1"; then sleep 0.5; return 0; fi
        sleep 0.1
    done
    echo "$3: no 'listening on' line within 60 s:" >&2; cat "$1" >&2; return 1
}
"#,
    );
    for (n, (line, command)) in commands.iter().enumerate() {
        let where_ = format!("{page}:{line}");
        let command = match command.trim_start().strip_prefix("cargo run --release --") {
            Some(rest) => format!("{bin}{rest}"),
            None => command.trim_start().to_owned(),
        };
        out.push_str(&format!("echo '$ {}' >&2\n", command.replace('\'', "'\\''")));
        match command.trim_end().strip_suffix('&').filter(|c| !c.ends_with('&')) {
            Some(server) => {
                let log = logs.join(format!("server-{n}.log")).display().to_string();
                out.push_str(&format!(
                    "{server} >{log} 2>&1 &\nservers+=($!)\nwait_listening {log} $! '{where_}' || exit 1\n"
                ));
            }
            None => out.push_str(&format!(
                "{command}\nrc=$?\nif [ $rc -ne 0 ]; then echo '{where_}: exited with '$rc >&2; exit 1; fi\n"
            )),
        }
    }
    out
}

#[test]
fn the_getting_started_commands_run() {
    let pages = markdown_files(&repo().join("docs/src/getting-started"));
    let mut ran = 0;
    for page in pages {
        let commands = commands(&read(&page));
        if commands.is_empty() {
            continue;
        }
        ran += commands.len();
        let logs = TestDir::new("docs-sh");
        let text = script(&shown(&page), &commands, logs.path());
        let started = Instant::now();
        let out = Command::new("bash")
            .arg("-c")
            .arg(&text)
            .current_dir(repo())
            .stdin(Stdio::null())
            .output()
            .expect("run bash");
        assert!(
            out.status.success(),
            "{}: its commands failed after {:?}\n--- stdout\n{}\n--- stderr\n{}",
            shown(&page),
            started.elapsed(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(ran > 0, "docs/src/getting-started has no sh commands");
}

// ---------------------------------------------------------------------------------------
// (e) mdbook build
// ---------------------------------------------------------------------------------------

/// The mdbook to build with: `SEAWALL_TEST_MDBOOK` (tests/run installs it), else one on
/// PATH.
fn mdbook() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SEAWALL_TEST_MDBOOK") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("mdbook")).find(|candidate| candidate.is_file())
}

#[test]
fn the_book_builds_without_a_warning() {
    let Some(mdbook) = mdbook() else {
        eprintln!(
            "SKIPPED the_book_builds_without_a_warning: no mdbook (set SEAWALL_TEST_MDBOOK, or run \
             `bash tests/run`, which installs it)"
        );
        return;
    };
    let dest = TestDir::new("docs-book");
    let out = Command::new(&mdbook)
        .arg("build")
        .arg(repo().join("docs"))
        .arg("--dest-dir")
        .arg(dest.path())
        .env("RUST_LOG", "info")
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", mdbook.display()));
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mdbook build docs failed:\n{log}");
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains("WARN") || l.contains("ERROR")).collect();
    assert!(warnings.is_empty(), "mdbook build docs warned:\n{}", warnings.join("\n"));
    assert!(dest.join("index.html").is_file(), "mdbook wrote no index.html:\n{log}");
}

// ---------------------------------------------------------------------------------------
// (f) links
// ---------------------------------------------------------------------------------------

/// The anchor of a heading, as mdBook and GitHub make it: lower case, spaces to `-`,
/// everything but letters, digits, `-` and `_` removed.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c.to_lowercase().next().unwrap_or(c)),
            _ => None,
        })
        .collect()
}

/// A link of a page: its destination and the line it is on.
struct Link {
    dest: String,
    line: usize,
}

/// The anchors of a page's headings (a repeated heading's later ones get `-1`, `-2`, …)
/// and its links.
fn read_page(markdown: &str) -> (BTreeSet<String>, Vec<Link>) {
    let mut anchors = BTreeSet::new();
    let mut links = Vec::new();
    let mut heading: Option<(String, Option<String>)> = None;
    for (event, range) in Parser::new_ext(markdown, options()).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { id, .. }) => heading = Some((String::new(), id.map(|i| i.to_string()))),
            Event::Text(text) | Event::Code(text) => {
                if let Some((title, _)) = heading.as_mut() {
                    title.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((title, id)) = heading.take() {
                    let base = id.unwrap_or_else(|| anchor(&title));
                    let mut candidate = base.clone();
                    let mut n = 0;
                    while anchors.contains(&candidate) {
                        n += 1;
                        candidate = format!("{base}-{n}");
                    }
                    anchors.insert(candidate);
                }
            }
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                let line = markdown[..range.start].lines().count().max(1);
                links.push(Link { dest: dest_url.to_string(), line });
            }
            _ => {}
        }
    }
    (anchors, links)
}

/// Why `link` of `page` does not reach its target, if it does not.
fn broken(page: &Path, link: &str, anchors_of: &mut dyn FnMut(&Path) -> BTreeSet<String>) -> Option<String> {
    if link.starts_with("https://github.com/seawall/seawall") {
        return Some("an absolute link to the project itself; use a relative one".to_owned());
    }
    if link.contains("://") || link.starts_with("mailto:") {
        return None;
    }
    if link.starts_with('/') {
        return Some("an absolute path; use a relative link".to_owned());
    }
    let (path, fragment) = match link.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (link, None),
    };
    let target = if path.is_empty() { page.to_path_buf() } else { page.parent()?.join(path) };
    if !target.exists() {
        return Some(format!("{} does not exist", shown(&target)));
    }
    let fragment = fragment.filter(|f| !f.is_empty())?;
    if target.extension().is_none_or(|e| e != "md") {
        return Some(format!("an anchor into {}, which is not a Markdown page", shown(&target)));
    }
    let target = target.canonicalize().ok()?;
    (!anchors_of(&target).contains(fragment)).then(|| format!("{} has no heading #{fragment}", shown(&target)))
}

#[test]
fn every_relative_link_reaches_its_file_and_heading() {
    let mut cache: std::collections::HashMap<PathBuf, BTreeSet<String>> = std::collections::HashMap::new();
    let mut anchors_of =
        |path: &Path| cache.entry(path.to_path_buf()).or_insert_with(|| read_page(&read(path)).0).clone();
    let mut failures = Vec::new();
    let mut followed = 0;
    for page in checked_pages() {
        let (_, links) = read_page(&read(&page));
        for link in links {
            followed += 1;
            if let Some(why) = broken(&page, &link.dest, &mut anchors_of) {
                failures.push(format!("{}:{}: ({}) {why}", shown(&page), link.line, link.dest));
            }
        }
    }
    assert!(failures.is_empty(), "broken links:\n{}", failures.join("\n"));
    assert!(followed > 20, "only {followed} links found");
}

#[test]
fn anchors_follow_the_rule_of_mdbook_and_github() {
    assert_eq!(anchor("Rate limits"), "rate-limits");
    assert_eq!(anchor("`session.replay_buffer`"), "sessionreplay_buffer");
    assert_eq!(anchor("HTTP+SSE (2024-11-05) towards clients"), "httpsse-2024-11-05-towards-clients");
    let (anchors, _) = read_page("# A\n\n## `upstreams[].tools.<name>`\n\n## A\n");
    assert_eq!(anchors, ["a", "a-1", "upstreamstoolsname"].iter().map(|s| s.to_string()).collect());
}
