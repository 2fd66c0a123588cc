//! The JSON Schema of the configuration: the committed copy is what the config types
//! generate, and every example config in the repository is accepted both by the schema
//! (what an editor checks) and by seawall's own loader (what `check-config` checks).

use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde_json::Value;

use crate::support::TestDir;

const SCHEMA_FILE: &str = "config/seawall.schema.json";
const MODELINE: &str = "# yaml-language-server: $schema=";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn validator() -> jsonschema::Validator {
    jsonschema::options()
        .offline()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(&seawall::config::json_schema())
        .unwrap_or_else(|e| panic!("the generated schema does not compile: {e}"))
}

/// The schema's complaints about `yaml` (empty when it is valid).
fn schema_errors(validator: &jsonschema::Validator, yaml: &str) -> Vec<String> {
    let instance: Value = yaml_serde::from_str(yaml).unwrap_or_else(|e| panic!("not YAML: {e}\n{yaml}"));
    validator.iter_errors(&instance).map(|e| format!("{}: {e}", e.instance_path())).collect()
}

/// Looks up every `${VAR}` as a placeholder long enough for any check, and valid as a
/// session key (32 bytes in base64).
fn any_var(_: &str) -> Option<String> {
    Some("cGxhY2Vob2xkZXItdmFsdWUtMDEyMzQ1Njc4OWFiY2Q=".to_owned())
}

#[test]
fn the_committed_schema_is_what_the_config_types_generate() {
    let generated = seawall::config::json_schema();
    assert!(jsonschema::meta::is_valid(&generated), "the generated schema is not a valid JSON Schema");
    assert_eq!(generated["$schema"], "http://json-schema.org/draft-07/schema#");
    let expected = format!("{}\n", serde_json::to_string_pretty(&generated).expect("schema renders"));
    let committed = std::fs::read_to_string(repo().join(SCHEMA_FILE)).unwrap_or_default();
    assert!(
        committed == expected,
        "{SCHEMA_FILE} is not what the config types generate; regenerate it with\n    \
         cargo run --quiet -- schema > {SCHEMA_FILE}"
    );
}

/// Every YAML file of the repository whose modeline names seawall's schema, with the
/// schema path the modeline gives.
fn example_configs() -> Vec<(PathBuf, String)> {
    fn walk(dir: &Path, out: &mut Vec<(PathBuf, String)>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir).expect("read dir").flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if path.is_dir() {
                if !matches!(name, "target" | "node_modules" | ".venv" | ".git") {
                    walk(&path, out);
                }
            } else if name.ends_with(".yaml") || name.ends_with(".yml") {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let first = text.lines().next().unwrap_or_default();
                if let Some(schema) = first.strip_prefix(MODELINE)
                    && schema.ends_with("seawall.schema.json")
                {
                    out.push((path, schema.to_owned()));
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&repo(), &mut out);
    out
}

#[test]
fn every_example_config_names_the_schema_and_passes_it_and_the_loader() {
    let examples = example_configs();
    // Every config under config/ is an example and must carry the modeline.
    for entry in std::fs::read_dir(repo().join("config")).expect("config/").flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "yaml") {
            assert!(
                examples.iter().any(|(p, _)| *p == path),
                "{} does not start with `{MODELINE}./seawall.schema.json`",
                path.display()
            );
        }
    }
    assert!(examples.len() >= 5, "too few example configs found: {examples:?}");
    let validator = validator();
    let schema_file = repo().join(SCHEMA_FILE).canonicalize().expect("schema file");
    for (path, schema) in &examples {
        let shown = path.strip_prefix(repo()).unwrap_or(path).display().to_string();
        let dir = path.parent().expect("a parent");
        let target = dir.join(schema).canonicalize().unwrap_or_else(|e| panic!("{shown}: {schema}: {e}"));
        assert_eq!(target, schema_file, "{shown}: the modeline names another file");
        let text = std::fs::read_to_string(path).expect("read");
        let errors = schema_errors(&validator, &text);
        assert!(errors.is_empty(), "{shown} fails the schema:\n{}", errors.join("\n"));
        let (text, _mounted) = with_mounted_key_files(&text);
        if let Err(e) = seawall::config::Config::parse_with_env(&text, &path.display().to_string(), &any_var) {
            panic!("{shown} fails seawall's validation:\n{e}");
        }
    }
}

/// `text` with the session key files it names that are not here — those a deployment
/// mounts, such as the Kubernetes Secret at `/var/run/secrets/seawall` — replaced by
/// files of a generated key, kept in the returned directory.
fn with_mounted_key_files(text: &str) -> (String, Option<TestDir>) {
    let config: Value = yaml_serde::from_str(text).unwrap_or(Value::Null);
    let missing: Vec<String> = ["key_file", "previous_key_file"]
        .iter()
        .filter_map(|field| config["session"][field].as_str())
        .filter(|path| !Path::new(path).exists())
        .map(str::to_owned)
        .collect();
    if missing.is_empty() {
        return (text.to_owned(), None);
    }
    let dir = TestDir::new("schema-keys");
    let mut text = text.to_owned();
    for (i, path) in missing.iter().enumerate() {
        let key = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 32]>());
        let local = dir.path().join(format!("key-{i}"));
        std::fs::write(&local, format!("{key}\n")).expect("write a key file");
        text = text.replace(path.as_str(), &local.display().to_string());
    }
    (text, Some(dir))
}

/// Documents the schema and the loader both refuse, and some both accept.
#[test]
fn the_schema_and_the_loader_agree_on_what_custom_deserializers_read() {
    let validator = validator();
    let with = |extra: &str| format!("upstreams:\n  - name: a\n    command: x\n{extra}");
    let cases: &[(&str, bool)] = &[
        ("", true),
        ("defaults:\n  timeouts:\n    connect: 1h 30m\n", true),
        ("defaults:\n  timeouts:\n    connect: 1.5s\n", true),
        ("defaults:\n  timeouts:\n    connect: 250ms\n", true),
        ("defaults:\n  timeouts:\n    connect: 5\n", false),
        ("defaults:\n  timeouts:\n    connect: five seconds\n", false),
        ("defaults:\n  timeouts:\n    attempt: null\n", true),
        ("listen: 0.0.0.0:8080\n", true),
        ("listen: \"[::1]:8080\"\n", true),
        ("listen: localhost\n", false),
        ("admin_listen: null\n", true),
        ("unknown_key: 1\n", false),
        ("defaults:\n  breaker:\n    break: 10s\n    hide_open_tools: true\n", true),
        ("defaults:\n  breaker:\n    break_duration: 10s\n", false),
        ("session:\n  max_sessions: -1\n", false),
        ("access_log:\n  format: xml\n", false),
        ("rate_limits:\n  limits:\n    - per: global\n      rate: 10/s\n", true),
        ("rate_limits:\n  limits:\n    - rate: 10/s\n", false),
        // yaml_serde reads any scalar as a string; the values of these maps are where
        // that is natural (a port, a flag), so the schema takes scalars there too.
        ("    env: { PORT: 8080, DEBUG: true, RATIO: 0.5, NAME: x }\n", true),
        ("    env: { LIST: [a] }\n", false),
        ("tracing:\n  resource: { service.version: 2 }\n", true),
    ];
    for (extra, valid) in cases {
        let doc = with(extra);
        let by_schema = schema_errors(&validator, &doc);
        let by_loader = seawall::config::Config::parse_with_env(&doc, "case.yaml", &any_var);
        assert_eq!(by_schema.is_empty(), *valid, "schema on\n{doc}\n{by_schema:?}");
        assert_eq!(by_loader.is_ok(), *valid, "loader on\n{doc}\n{:?}", by_loader.err());
    }
    // A document-level problem the schema describes: an upstream needs a name.
    assert!(!schema_errors(&validator, "upstreams:\n  - command: x\n").is_empty());
}

#[test]
fn descriptions_come_from_the_doc_comments() {
    let schema = seawall::config::json_schema();
    let listen = schema["properties"]["listen"]["description"].as_str().unwrap_or_default();
    assert!(listen.contains("MCP listener"), "{listen}");
    let upstream = &schema["definitions"]["UpstreamConfig"];
    assert_eq!(upstream["required"], serde_json::json!(["name"]));
    let grace = upstream["properties"]["shutdown_grace"]["description"].as_str().unwrap_or_default();
    assert!(grace.contains("SIGTERM"), "{grace}");
    assert_eq!(schema["properties"]["listen"]["default"], "127.0.0.1:8080");
}
