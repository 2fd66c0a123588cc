//! JSON values quoted from a peer: every string sanitised, the whole bounded.

use serde_json::{Map, Value};

use super::markers::ELLIPSIS;
use super::{Quoting, sanitize_quoting};

/// Containers deeper than this become [`JSON_TRUNCATED`].
const JSON_MAX_DEPTH: usize = 8;
/// Entries kept per array or object.
const JSON_MAX_ENTRIES: usize = 64;
/// Rough bound on the serialised size of the result, in bytes.
pub(super) const JSON_BUDGET: usize = 4096;
/// No child is started with less budget than this left.
const JSON_RESERVE: usize = 32;
/// Numbers with longer text than this (possible with arbitrary precision) are dropped.
const JSON_MAX_NUMBER: usize = 40;
/// Stands for a container nested too deep.
const JSON_TRUNCATED: &str = "[truncated]";

/// `value` sanitised at nesting `depth`, each string to `cap` bytes, charging what is
/// kept to `budget`.
pub(super) fn json_value(value: &Value, cap: usize, depth: usize, budget: &mut usize, q: &Quoting<'_>) -> Value {
    match value {
        Value::Null | Value::Bool(_) => {
            charge(budget, 5);
            value.clone()
        }
        Value::Number(n) => {
            let len = n.to_string().len();
            if len > JSON_MAX_NUMBER {
                Value::String(json_string("[number]", cap, budget, q))
            } else {
                charge(budget, len);
                value.clone()
            }
        }
        Value::String(s) => Value::String(json_string(s, cap, budget, q)),
        Value::Array(_) | Value::Object(_) if depth >= JSON_MAX_DEPTH => {
            Value::String(json_string(JSON_TRUNCATED, cap, budget, q))
        }
        Value::Array(items) => {
            charge(budget, 2);
            let mut out = Vec::new();
            for item in items {
                if out.len() >= JSON_MAX_ENTRIES || *budget < JSON_RESERVE {
                    break;
                }
                out.push(json_value(item, cap, depth + 1, budget, q));
            }
            let dropped = items.len() - out.len();
            if dropped > 0 {
                out.push(Value::String(more(dropped)));
            }
            Value::Array(out)
        }
        Value::Object(map) => {
            charge(budget, 2);
            let mut out = Map::new();
            let mut dropped = 0;
            for (taken, (key, item)) in map.iter().enumerate() {
                if taken >= JSON_MAX_ENTRIES || *budget < JSON_RESERVE {
                    dropped = map.len() - taken;
                    break;
                }
                let key = json_string(key, cap, budget, q);
                if out.contains_key(&key) {
                    dropped += 1;
                    continue;
                }
                let item = json_value(item, cap, depth + 1, budget, q);
                out.insert(key, item);
            }
            if dropped > 0 {
                out.insert(ELLIPSIS.to_owned(), Value::String(more(dropped)));
            }
            Value::Object(out)
        }
    }
}

fn json_string(s: &str, cap: usize, budget: &mut usize, q: &Quoting<'_>) -> String {
    let out = sanitize_quoting(s, cap.min(budget.saturating_sub(3)), q);
    charge(budget, out.len() + 3);
    out
}

fn charge(budget: &mut usize, cost: usize) {
    *budget = budget.saturating_sub(cost);
}

fn more(dropped: usize) -> String {
    format!("[{dropped} more]")
}

#[cfg(test)]
mod tests {
    //! JSON values: every string sanitised, nesting, width and size bounded.

    use serde_json::{Value, json};

    use crate::sanitize::sanitize_json;

    #[test]
    fn json_strings_and_keys_are_sanitised() {
        let value = json!({
            "path": "/home/alice/secret.txt",
            "password=hunter2": "x\ny",
            "nested": [{"url": "https://10.0.0.1/a"}, 1, true, null, 2.5],
        });
        assert_eq!(
            sanitize_json(&value, 64),
            json!({
                "path": "[path]",
                "password=[redacted]": "x\\x0ay",
                "nested": [{"url": "[url]"}, 1, true, null, 2.5],
            })
        );
    }

    #[test]
    fn json_is_bounded() {
        let mut deep = json!("bottom");
        for _ in 0..20 {
            deep = json!([deep]);
        }
        let mut expected = json!("[truncated]");
        for _ in 0..8 {
            expected = json!([expected]);
        }
        assert_eq!(sanitize_json(&deep, 64), expected);

        let wide: Vec<u32> = (0..100).collect();
        let out = sanitize_json(&json!(wide), 64);
        let items = out.as_array().unwrap();
        assert_eq!(items.len(), 65);
        assert_eq!(items[64], json!("[36 more]"));

        let object: serde_json::Map<String, Value> = (0..100).map(|n| (format!("k{n}"), json!(n))).collect();
        let out = sanitize_json(&Value::Object(object), 64);
        assert_eq!(out.as_object().unwrap().len(), 65);
        assert_eq!(out["..."], json!("[36 more]"));

        let huge = json!(vec!["x".repeat(1000); 60]);
        let text = serde_json::to_string(&sanitize_json(&huge, 1000)).unwrap();
        assert!(text.len() <= 4096 + 64, "{}", text.len());
        assert!(text.ends_with(" more]\"]"), "{text}");

        let number: Value = serde_json::from_str(&"9".repeat(500)).unwrap();
        assert_eq!(sanitize_json(&number, 64), json!("[number]"));
    }

    #[test]
    fn colliding_keys_keep_the_first() {
        let value = json!({"token=a": 1, "token=b": 2});
        assert_eq!(sanitize_json(&value, 64), json!({"token=[redacted]": 1, "...": "[1 more]"}));
    }
}
