//! Names and variable references of `mcpServers` files, in seawall's terms.
//!
//! Clients write references their own way: Claude Code `${VAR}` and `${VAR:-default}`,
//! Cursor and VS Code `${env:VAR}`, VS Code `${input:ID}` (a value the editor prompts
//! for) and editor variables such as `${workspaceFolder}`. seawall expands `${VAR}` in
//! `env` and `headers` values only (see `config::expand`), so there each reference
//! becomes a `${VAR}` and a literal `$` is written `$$`; elsewhere values stay as written.

use std::collections::BTreeMap;

/// One value with its references converted.
pub(super) struct Converted {
    /// The value as seawall should read it.
    pub(super) text: String,
    /// One message per reference whose meaning changed or could not be carried.
    pub(super) notes: Vec<String>,
    /// The environment variables the value now needs.
    pub(super) variables: Vec<String>,
}

/// Converts the references of `text`. `expanded` says whether seawall expands `${VAR}`
/// in this value (`env` and `headers`); `inputs` are VS Code's input ids with their
/// descriptions.
pub(super) fn convert(text: &str, expanded: bool, inputs: &BTreeMap<String, String>) -> Converted {
    let mut out = Converted { text: String::with_capacity(text.len()), notes: Vec::new(), variables: Vec::new() };
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        let (before, from) = rest.split_at(at);
        out.text.push_str(before);
        let reference = from.strip_prefix("${").and_then(|tail| tail.find('}').map(|end| &tail[..end]));
        let Some(inner) = reference else {
            out.text.push_str(if expanded { "$$" } else { "$" });
            rest = &from[1..];
            continue;
        };
        let written = &from[..inner.len() + 3];
        rest = &from[written.len()..];
        if !expanded {
            out.text.push_str(written);
            out.notes.push(format!(
                "`{written}` is kept as written: seawall expands variables only in `env` and `headers` values"
            ));
            continue;
        }
        match reference_of(inner, inputs) {
            Some((name, note)) => {
                out.text.push_str(&format!("${{{name}}}"));
                out.notes.extend(note);
                out.variables.push(name);
            }
            None => {
                out.text.push('$');
                out.text.push_str(written);
                out.notes.push(format!("`{written}` has no equivalent in seawall: kept as literal text"));
            }
        }
    }
    out.text.push_str(rest);
    out
}

/// The environment variable `${inner}` stands for, with a note when that is not what
/// the client meant; `None` when it cannot be one.
fn reference_of(inner: &str, inputs: &BTreeMap<String, String>) -> Option<(String, Option<String>)> {
    if let Some(name) = inner.strip_prefix("env:") {
        return is_var_name(name).then(|| (name.to_owned(), None));
    }
    if let Some(id) = inner.strip_prefix("input:") {
        let name = input_variable(id);
        let described = inputs.get(id).filter(|d| !d.is_empty()).map(|d| format!(" ({d})")).unwrap_or_default();
        let note = format!(
            "VS Code input `{id}`{described} becomes the environment variable {name}: set it before starting seawall"
        );
        return Some((name, Some(note)));
    }
    if let Some((name, default)) = inner.split_once(":-")
        && is_var_name(name)
    {
        let note = format!(
            "`${{{inner}}}`: seawall has no default values, so {name} must be set (default {default:?} dropped)"
        );
        return Some((name.to_owned(), Some(note)));
    }
    if !is_var_name(inner) {
        return None;
    }
    let note = EDITOR_VARIABLES.contains(&inner).then(|| {
        format!("`${{{inner}}}` is a variable of the editor; seawall reads it from the environment variable {inner}")
    });
    Some((inner.to_owned(), note))
}

/// Variables that Cursor and VS Code fill in themselves.
const EDITOR_VARIABLES: [&str; 6] =
    ["workspaceFolder", "workspaceFolderBasename", "userHome", "pathSeparator", "cwd", "file"];

/// The environment variable for VS Code input `id`: upper case, `_` for anything else.
fn input_variable(id: &str) -> String {
    let mut name: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect();
    if !name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        name.insert(0, '_');
    }
    name
}

/// `[A-Za-z_][A-Za-z0-9_]*`, as seawall's expansion reads it.
fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A valid upstream name for `name`: `[A-Za-z0-9_-]{1,64}` without `separator`.
pub(super) fn upstream_name(name: &str, separator: &str) -> String {
    let mut out: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect();
    let replacement = ["-", "_", "x"].into_iter().find(|r| !separator.contains(r)).unwrap_or("x");
    while !separator.is_empty() && out.contains(separator) {
        out = out.replace(separator, replacement);
    }
    out.truncate(64);
    if out.is_empty() { "server".to_owned() } else { out }
}
