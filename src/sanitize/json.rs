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
