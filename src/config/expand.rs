//! `${VAR}` expansion in upstream `env` and `headers` values, in `tracing.headers`, in
//! the API keys of `auth.api_keys`, `admin.token` and the session keys (`session.key`,
//! `session.previous_keys`), done once at load so a missing secret is a config error
//! rather than a request failure.
//!
//! Syntax: `${NAME}` is replaced by the variable's value (NAME is `[A-Za-z_][A-Za-z0-9_]*`),
//! `$$` is a literal `$`, and any other `$` is kept as is.

use super::Config;
use super::locate::{FieldPath, Problem};

/// Expands every `env` and `headers` value of every upstream, every `tracing.headers`
/// value, `admin.token` and the session keys, in place, looking variables up with `lookup`; returns one
/// problem per value that cannot be expanded.
pub(crate) fn expand_config(config: &mut Config, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(token) = config.admin.token.as_mut() {
        match expand(token, lookup) {
            Ok(expanded) => *token = expanded,
            Err(message) => problems.push(Problem::new(FieldPath::root().key("admin").key("token"), message)),
        }
    }
    let session = FieldPath::root().key("session");
    if let Some(key) = config.session.key.as_mut() {
        match expand(key, lookup) {
            Ok(expanded) => *key = expanded,
            Err(message) => problems.push(Problem::new(session.key("key"), message)),
        }
    }
    for (i, key) in config.session.previous_keys.iter_mut().enumerate() {
        match expand(key, lookup) {
            Ok(expanded) => *key = expanded,
            Err(message) => problems.push(Problem::new(session.key("previous_keys").index(i), message)),
        }
    }
    let at = FieldPath::root().key("tracing").key("headers");
    for (key, value) in config.tracing.headers.iter_mut() {
        match expand(value, lookup) {
            Ok(expanded) => *value = expanded,
            Err(message) => problems.push(Problem::new(at.key(key), message)),
        }
    }
    if let Some(auth) = config.auth.as_mut() {
        let at = FieldPath::root().key("auth").key("api_keys");
        for (i, entry) in auth.api_keys.iter_mut().enumerate() {
            for (field, value) in [("key", &mut entry.key), ("sha256", &mut entry.sha256)] {
                let Some(value) = value.as_mut() else { continue };
                match expand(value, lookup) {
                    Ok(expanded) => *value = expanded,
                    Err(message) => problems.push(Problem::new(at.index(i).key(field), message)),
                }
            }
        }
    }
    for (i, upstream) in config.upstreams.iter_mut().enumerate() {
        let at = FieldPath::root().key("upstreams").index(i);
        for (table, values) in [("env", &mut upstream.env), ("headers", &mut upstream.headers)] {
            for (key, value) in values.iter_mut() {
                match expand(value, lookup) {
                    Ok(expanded) => *value = expanded,
                    Err(message) => problems.push(Problem::new(at.key(table).key(key), message)),
                }
            }
        }
        // Fixed arguments from the environment are read when an upstream is built: an
        // unset one is a configuration error, as a missing `${VAR}` is.
        for (field, var) in super::tools::env_sources(&at, &upstream.tools) {
            if lookup(var).is_none() {
                problems.push(Problem::new(field, format!("environment variable {var} is not set")));
            }
        }
    }
    problems
}

/// Expands one value; the error names the variable or says what is malformed.
pub(crate) fn expand(value: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('{') {
            let Some(end) = tail.find('}') else {
                return Err("unterminated `${` (write `$$` for a literal `$`)".to_owned());
            };
            let name = &tail[..end];
            if !is_var_name(name) {
                return Err(format!("invalid variable name {name:?} in `${{...}}`"));
            }
            match lookup(name) {
                Some(found) => out.push_str(&found),
                None => return Err(format!("environment variable {name} is not set")),
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
