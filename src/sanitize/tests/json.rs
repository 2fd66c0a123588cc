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
