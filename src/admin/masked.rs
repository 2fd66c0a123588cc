//! The configuration in force, as the admin API shows it: every secret replaced by
//! `***`. The rules work on the serialised form, by field name and shape rather than by
//! config type, so a secret field added later is masked as long as its name says what
//! it is:
//!
//! - values of fields named like a secret (`key`, `token`, `secret`, `password`,
//!   `sha256`, or ending in `_key`, `_keys`, `_token`, `_secret`, `_password`), and the
//!   strings of lists under such names;
//! - every value of a `headers` or `env` table (credentials travel there);
//! - in any URL (upstreams, endpoints, JWKS, OTLP, a Redis backend): the user name, the
//!   password, every query value and the fragment;
//! - in stdio `args`: the value of `--flag=value` and the argument after `--flag` when
//!   the flag's name mentions a key, token, secret, password, credential or auth.

use serde_json::{Map, Value};

use crate::config::Config;

/// What a masked value reads.
pub(super) const MASK: &str = "***";

/// Tables whose every value is masked.
const SECRET_TABLES: [&str; 2] = ["headers", "env"];
/// Words that make a command-line flag's value secret.
const SECRET_FLAG_WORDS: [&str; 7] = ["key", "token", "secret", "password", "passwd", "credential", "auth"];

/// `config` serialised with its secrets masked.
pub(super) fn masked(config: &Config) -> Result<Value, serde_json::Error> {
    let mut value = serde_json::to_value(config)?;
    walk(&mut value, false);
    Ok(value)
}

/// Masks in place; `secret`: `value` sits under a secret-named field.
fn walk(value: &mut Value, secret: bool) {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) if secret => *value = Value::String(MASK.to_owned()),
        Value::String(text) => {
            if let Some(shown) = masked_url(text) {
                *text = shown;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| walk(item, secret)),
        Value::Object(fields) => walk_fields(fields),
        _ => {}
    }
}

fn walk_fields(fields: &mut Map<String, Value>) {
    for (name, value) in fields.iter_mut() {
        match value {
            Value::Object(table) if SECRET_TABLES.contains(&name.as_str()) => {
                table.values_mut().for_each(|v| walk(v, true));
            }
            Value::Array(args) if name == "args" => mask_args(args),
            _ => walk(value, is_secret_name(name)),
        }
    }
}

fn is_secret_name(name: &str) -> bool {
    matches!(name, "key" | "keys" | "token" | "secret" | "password" | "sha256")
        || ["_key", "_keys", "_token", "_secret", "_password"].iter().any(|s| name.ends_with(s))
}

/// `--token=abc` → `--token=***`; `--token abc` → `--token ***`; URLs masked.
fn mask_args(args: &mut [Value]) {
    let mut next_is_secret = false;
    for arg in args.iter_mut() {
        let Value::String(text) = arg else { continue };
        if std::mem::take(&mut next_is_secret) && !text.starts_with('-') {
            *text = MASK.to_owned();
            continue;
        }
        let replaced = match text.strip_prefix('-').map(|f| f.trim_start_matches('-')) {
            Some(flag) => match flag.split_once('=') {
                Some((name, _)) if is_secret_flag(name) => {
                    Some(format!("{}={MASK}", &text[..text.len() - flag.len() + name.len()]))
                }
                Some(_) => None,
                None => {
                    next_is_secret = is_secret_flag(flag);
                    None
                }
            },
            None => None,
        };
        if let Some(shown) = replaced.or_else(|| masked_url(text)) {
            *text = shown;
        }
    }
}

fn is_secret_flag(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_FLAG_WORDS.iter().any(|w| name.contains(w))
}

/// The URL in `text` (if it is one) with its credentials, query values and fragment
/// masked; `None` when there is nothing to mask.
fn masked_url(text: &str) -> Option<String> {
    if !text.contains("://") {
        return None;
    }
    let mut url = url::Url::parse(text).ok()?;
    if url.cannot_be_a_base() {
        return None;
    }
    let mut changed = false;
    if !url.username().is_empty() {
        changed |= url.set_username(MASK).is_ok();
    }
    if url.password().is_some() {
        changed |= url.set_password(Some(MASK)).is_ok();
    }
    if url.query().is_some() {
        let names: Vec<String> = url.query_pairs().map(|(name, _)| name.into_owned()).collect();
        url.query_pairs_mut().clear().extend_pairs(names.iter().map(|n| (n.as_str(), MASK)));
        changed = true;
    }
    if url.fragment().is_some() {
        url.set_fragment(Some(MASK));
        changed = true;
    }
    // The serialiser escapes `*` nowhere, so the masks read as written.
    changed.then(|| url.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_wherever_they_sit() {
        let yaml = r#"
admin:
  token: admin-token-0123456789
auth:
  api_keys:
    - name: ops
      key: sk-live-0123456789abcdef
      scopes: [read]
    - name: ci
      sha256: "0000000000000000000000000000000000000000000000000000000000000000"
rate_limits:
  backend: "redis://:hunter2-redis@cache.internal:6379/0"
session:
  key: "c2Vzc2lvbi1rZXktc2Vzc2lvbi1rZXktc2Vzc2lvbi0="
  previous_keys: ["b2xkLWtleS1vbGQta2V5LW9sZC1rZXktb2xkLWtleS0="]
tracing:
  endpoint: "https://otel-user:otel-pass@collector.example/v1/traces"
  headers: { x-honeycomb-team: hc-secret-value }
upstreams:
  - name: search
    url: "https://bob:pw-in-url@search.internal/mcp?api_key=q-secret&region=eu#frag"
    endpoints: ["https://search-2.internal/mcp?token=t-secret"]
    headers: { Authorization: "Bearer upstream-secret-token" }
  - name: files
    command: files-server
    args: ["--root", "/srv/files", "--api-key", "arg-secret-1", "--token=arg-secret-2", "--verbose"]
    env: { FILES_TOKEN: env-secret-value, PORT: 4711 }
"#;
        let config = Config::parse_with_env(yaml, "test.yaml", &|_| None).unwrap();
        let shown = masked(&config).unwrap();
        let text = shown.to_string();
        for secret in [
            "admin-token-0123456789",
            "sk-live-0123456789abcdef",
            "0000000000",
            "hunter2-redis",
            "c2Vzc2lvbi1rZXkt",
            "b2xkLWtleS1vbGQt",
            "otel-user",
            "otel-pass",
            "hc-secret-value",
            "bob",
            "pw-in-url",
            "q-secret",
            "frag",
            "t-secret",
            "upstream-secret-token",
            "arg-secret-1",
            "arg-secret-2",
            "env-secret-value",
            "4711",
        ] {
            assert!(!text.contains(secret), "{secret} is shown: {text}");
        }
        // What is not secret stays readable.
        assert_eq!(shown["auth"]["api_keys"][0]["name"], "ops");
        assert_eq!(shown["auth"]["api_keys"][0]["scopes"][0], "read");
        assert_eq!(shown["auth"]["api_keys"][0]["key"], MASK);
        assert_eq!(shown["admin"]["token"], MASK);
        assert_eq!(shown["session"]["key"], MASK);
        assert_eq!(shown["session"]["previous_keys"][0], MASK);
        assert_eq!(shown["rate_limits"]["backend"], "redis://:***@cache.internal:6379/0");
        assert_eq!(shown["rate_limits"]["key_prefix"], "seawall:rl:");
        let search = &shown["upstreams"][0];
        assert_eq!(search["url"], "https://***:***@search.internal/mcp?api_key=***&region=***#***");
        assert_eq!(search["headers"]["Authorization"], MASK);
        let files = &shown["upstreams"][1];
        assert_eq!(files["command"], "files-server");
        assert_eq!(
            files["args"],
            serde_json::json!(["--root", "/srv/files", "--api-key", MASK, "--token=***", "--verbose"])
        );
        assert_eq!(files["env"]["FILES_TOKEN"], MASK);
        assert_eq!(shown["listen"], "127.0.0.1:8080");
    }

    #[test]
    fn lists_of_secrets_and_names_that_say_secret_are_masked() {
        let mut value = serde_json::json!({
            "session": { "key": "k1", "previous_keys": ["k0", "k-1"], "key_prefix": "keep" },
            "nested": [{ "client_secret": 42, "refresh_token": true, "name": "keep-too" }],
        });
        walk(&mut value, false);
        assert_eq!(
            value,
            serde_json::json!({
                "session": { "key": MASK, "previous_keys": [MASK, MASK], "key_prefix": "keep" },
                "nested": [{ "client_secret": MASK, "refresh_token": MASK, "name": "keep-too" }],
            })
        );
    }
}
