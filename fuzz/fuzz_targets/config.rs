//! Config loader: any YAML text, with `${VAR}` references, either loads or is refused with
//! one `FILE:LINE: FIELD: message` line per problem, in line order, a syntax error alone;
//! never a panic.
//!
//! Texts whose `include_mcp_servers`, `key_file` or `previous_key_file` names an
//! absolute path are skipped, so that the fuzzer never reads a device or another file of
//! the machine; relative ones are taken from the directory of `ORIGIN`, which does not
//! exist.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::IgnoredAny;
use seawall::config::{Config, ConfigError};
use yaml_serde::Value;

const ORIGIN: &str = "/nonexistent-seawall-fuzz/seawall.yaml";

fn lookup(name: &str) -> Option<String> {
    match name {
        "TOKEN" => Some("s3cr3t-t0ken".to_owned()),
        "EMPTY" => Some(String::new()),
        "DOLLARS" => Some("$${TOKEN} $".to_owned()),
        "MULTI" => Some("line one\nline two: x\r\n".to_owned()),
        "HOME" => Some("/home/seawall".to_owned()),
        _ => None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if reads_a_file(text) {
        return;
    }
    let err = match Config::parse_with_env(text, ORIGIN, &lookup) {
        Ok(_) => return,
        Err(err) => err,
    };
    let ConfigError::Invalid { issues, .. } = &err else {
        panic!("parsing a text read a file: {err}");
    };
    assert!(!issues.is_empty(), "refused without a reason");
    if yaml_serde::from_str::<IgnoredAny>(text).is_err() {
        assert_eq!(issues.len(), 1, "a syntax error is the only problem reported: {err}");
    }
    let rendered = err.to_string();
    let lines: Vec<&str> = rendered.split('\n').collect();
    assert_eq!(lines.len(), issues.len(), "not one line per issue:\n{rendered}");
    // YAML breaks lines at LF, CR, CRLF and (YAML 1.1) NEL, LS and PS.
    let last_line = 1 + text.chars().filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}')).count();
    for (line, issue) in lines.iter().zip(issues) {
        assert!(!line.contains('\r'), "a carriage return in {line:?}");
        assert!(!issue.message.is_empty(), "an issue without a message: {line:?}");
        let rest = line.strip_prefix(ORIGIN).unwrap_or_else(|| panic!("{line:?} does not start with the file"));
        let rest = match issue.line {
            Some(n) => {
                assert!((1..=last_line).contains(&n), "line {n} of a text of {last_line} lines: {line:?}");
                rest.strip_prefix(&format!(":{n}")).unwrap_or_else(|| panic!("{line:?} lacks its line {n}"))
            }
            None => rest,
        };
        let expected = if issue.field.is_empty() {
            format!(": {}", one_line(&issue.message))
        } else {
            format!(": {}: {}", one_line(&issue.field), one_line(&issue.message))
        };
        assert_eq!(rest, expected, "in {line:?}");
    }
    assert!(issues.is_sorted_by_key(|issue| issue.line), "issues out of line order:\n{rendered}");
});

/// `text` with its control characters (but tab) and line separators escaped.
fn one_line(text: &str) -> String {
    text.chars()
        .map(|c| {
            let escape = (c.is_control() && c != '\t') || matches!(c, '\u{2028}' | '\u{2029}');
            if escape { c.escape_debug().to_string() } else { c.to_string() }
        })
        .collect()
}

/// Whether `text` might make the loader read a file outside the missing directory: an
/// `include_mcp_servers`, `key_file` or `previous_key_file` key anywhere whose value is
/// an absolute path or anything other than a plain scalar. A text yaml_serde cannot read as a tree is refused before any
/// include. The key can only be written literally or with a `\` escape (in double
/// quotes), so other texts need no look.
fn reads_a_file(text: &str) -> bool {
    const READ: [&str; 3] = ["include_mcp_servers", "key_file", "previous_key_file"];
    if !READ.iter().any(|key| text.contains(key)) && !text.contains('\\') {
        return false;
    }
    fn walk(value: &Value) -> bool {
        match value {
            Value::Mapping(map) => map.iter().any(|(key, value)| {
                let dangerous = match value {
                    Value::String(s) => s.starts_with('/'),
                    Value::Null | Value::Bool(_) | Value::Number(_) => false,
                    _ => true,
                };
                let name = match key {
                    Value::Tagged(tagged) => tagged.value.as_str(),
                    key => key.as_str(),
                };
                (name.is_some_and(|n| READ.contains(&n)) && dangerous) || walk(key) || walk(value)
            }),
            Value::Sequence(items) => items.iter().any(walk),
            Value::Tagged(tagged) => walk(&tagged.value),
            _ => false,
        }
    }
    yaml_serde::from_str::<Value>(text).is_ok_and(|tree| walk(&tree))
}
