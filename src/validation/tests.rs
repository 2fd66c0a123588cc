use serde_json::{Value, json};

use super::*;

fn violations(schema: &Value, instance: &Value) -> Vec<Violation> {
    SchemaCache::new(8).validate(schema, instance).err().unwrap_or_default()
}

fn pointers(found: &[Violation]) -> Vec<&str> {
    found.iter().map(|v| v.pointer.as_str()).collect()
}

#[test]
fn valid_arguments_pass() {
    let schema = json!({
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
        "required": ["query"],
    });
    let cache = SchemaCache::default();
    assert_eq!(cache.validate(&schema, &json!({"query": "rust", "limit": 5})), Ok(()));
}

#[test]
fn missing_required_property_points_at_the_object_that_lacks_it() {
    let schema = json!({"type": "object", "required": ["name"]});
    let found = violations(&schema, &json!({}));
    assert_eq!(found, vec![Violation { pointer: String::new(), message: "missing required property 'name'".into() }]);
    let nested = json!({"properties": {"user": {"required": ["id"]}}});
    let found = violations(&nested, &json!({"user": {}}));
    assert_eq!(pointers(&found), ["/user"]);
}

#[test]
fn wrong_type_deep_inside_is_reported_with_its_pointer() {
    let schema = json!({
        "properties": {"a": {"properties": {"b": {"type": "array", "items": {"type": "integer"}}}}}
    });
    let found = violations(&schema, &json!({"a": {"b": ["x", 2]}}));
    assert_eq!(found, vec![Violation { pointer: "/a/b/0".into(), message: "expected integer, got string".into() }]);
    let union = json!({"type": ["string", "null"]});
    assert_eq!(violations(&union, &json!(3))[0].message, "expected null or string, got integer");
}

#[test]
fn pointers_escape_slashes_and_tildes() {
    let schema = json!({"properties": {"a/b": {"properties": {"c~d": {"type": "string"}}}}});
    let found = violations(&schema, &json!({"a/b": {"c~d": 1}}));
    assert_eq!(pointers(&found), ["/a~1b/c~0d"]);
}

#[test]
fn at_most_eight_violations_are_reported() {
    let names: Vec<String> = (0..12).map(|n| format!("p{n}")).collect();
    let schema = json!({"type": "object", "required": names});
    let found = violations(&schema, &json!({}));
    assert_eq!(found.len(), MAX_VIOLATIONS);
    assert_eq!(found[0].message, "missing required property 'p0'");

    let properties: serde_json::Map<String, Value> =
        names.iter().map(|n| (n.clone(), json!({"type": "integer"}))).collect();
    let instance: serde_json::Map<String, Value> = names.iter().map(|n| (n.clone(), json!("x"))).collect();
    let found = violations(&json!({"properties": properties}), &Value::Object(instance));
    assert_eq!(found.len(), MAX_VIOLATIONS);
}

#[test]
fn a_schema_that_does_not_compile_validates_everything() {
    let cache = SchemaCache::new(8);
    for broken in [
        json!({"type": 12}),
        json!({"minLength": "three"}),
        json!({"$ref": "#/$defs/missing"}),
        // Never fetched: remote references make the schema fail to compile, offline.
        json!({"$ref": "https://example.com/schemas/tool.json"}),
        json!({"$ref": "file:///etc/passwd"}),
        // Look-around needs a backtracking engine, which is not used.
        json!({"type": "string", "pattern": "^(?=.*\\d).+$"}),
    ] {
        assert_eq!(cache.validate(&broken, &json!({"anything": [1, 2]})), Ok(()), "{broken}");
    }
    // Each broken schema is remembered, so it is compiled (and logged) once.
    let compiled = cache.compiled();
    cache.validate(&json!({"type": 12}), &json!(1)).ok();
    assert_eq!(cache.compiled(), compiled);
}

#[test]
fn the_default_dialect_is_2020_12() {
    // `prefixItems` exists only from 2020-12 on.
    let schema = json!({"prefixItems": [{"type": "string"}]});
    assert_eq!(pointers(&violations(&schema, &json!([1]))), ["/0"]);
    // An explicit `$schema` selects an older draft: there, `prefixItems` means nothing.
    let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "prefixItems": [{"type": "string"}]});
    assert_eq!(violations(&draft7, &json!([1])), vec![]);
}

#[test]
fn cache_hits_reuse_the_compiled_validator() {
    let cache = SchemaCache::new(8);
    let schema = json!({"type": "object", "required": ["q"]});
    assert!(cache.validate(&schema, &json!({})).is_err());
    assert!(cache.validate(&schema, &json!({"q": 1})).is_ok());
    assert!(cache.validate(&schema.clone(), &json!([])).is_err());
    assert_eq!(cache.compiled(), 1);
    assert_eq!(cache.len(), 1);
    cache.validate(&json!({"type": "string"}), &json!("x")).ok();
    assert_eq!(cache.compiled(), 2);
    assert_eq!(cache.len(), 2);
}

#[test]
fn the_oldest_schema_is_evicted_when_full() {
    let cache = SchemaCache::new(2);
    let schemas: Vec<Value> = (0..3).map(|n| json!({"maxLength": n})).collect();
    for schema in &schemas {
        cache.validate(schema, &json!("")).ok();
    }
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.compiled(), 3);
    // The newest two are still cached; the first must be compiled again.
    cache.validate(&schemas[2], &json!("")).ok();
    cache.validate(&schemas[1], &json!("")).ok();
    assert_eq!(cache.compiled(), 3);
    cache.validate(&schemas[0], &json!("")).ok();
    assert_eq!(cache.compiled(), 4);
    assert_eq!(cache.len(), 2);
}

#[test]
fn messages_never_echo_the_instance() {
    let secret = format!("sk-live-{}", "A1b2".repeat(10));
    let huge = "x".repeat(100_000);
    let schema = json!({
        "properties": {
            "key": {"type": "integer"},
            "text": {"maxLength": 10},
            "mode": {"enum": ["fast", "slow"]},
            "pattern": {"pattern": "^[a-z]+$"},
            "n": {"minimum": 10, "multipleOf": 3},
        },
        "additionalProperties": false,
    });
    let found = violations(
        &schema,
        &json!({"key": secret, "text": huge, "mode": secret, "pattern": secret, "n": 5, "extra": 1}),
    );
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    for message in &messages {
        assert!(!message.contains(&secret) && !message.contains("xxxxxxxxxx"), "{message}");
        assert!(message.len() <= 256);
    }
    for expected in [
        "expected integer, got string",
        "must be at most 10 character(s) long",
        "must be one of [\"fast\",\"slow\"]",
        "must match the pattern '^[a-z]+$'",
        "must be >= 10",
        "must be a multiple of 3",
        "unexpected property 'extra'",
    ] {
        assert!(messages.contains(&expected), "{expected} not in {messages:?}");
    }
}

#[test]
fn messages_quoting_the_schema_are_sanitised() {
    let schema = json!({"required": ["pass\nword", "x".repeat(300)], "properties": {"a": {"enum": ["y".repeat(200)]}}});
    let found = violations(&schema, &json!({"a": 1}));
    let messages: Vec<&str> = found.iter().map(|v| v.message.as_str()).collect();
    assert!(messages.contains(&"missing required property 'pass\\x0aword'"), "{messages:?}");
    assert!(messages.iter().all(|m| m.len() <= 256 && m.bytes().all(|c| (0x20..=0x7e).contains(&c))));
    assert!(messages.contains(&"must be one of the allowed values"), "{messages:?}");
}

#[test]
fn numbers_keep_their_meaning_under_arbitrary_precision() {
    let schema = json!({"type": "integer", "minimum": 10, "maximum": 1e30});
    let cache = SchemaCache::new(8);
    assert_eq!(cache.validate(&schema, &json!(12)), Ok(()));
    assert_eq!(cache.validate(&schema, &serde_json::from_str::<Value>("12.0").unwrap()), Ok(()));
    assert!(cache.validate(&schema, &json!(12.5)).is_err());
    assert!(cache.validate(&schema, &json!(9)).is_err());
    let huge: Value = serde_json::from_str(&format!("1{}", "0".repeat(400))).unwrap();
    assert!(cache.validate(&schema, &huge).is_err());
}

#[test]
fn the_cache_is_shared_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<SchemaCache>();
    let cache = std::sync::Arc::new(SchemaCache::new(4));
    let handles: Vec<_> = (0..4)
        .map(|n| {
            let cache = cache.clone();
            std::thread::spawn(move || {
                for k in 0..50 {
                    let schema = json!({"maxItems": (n + k) % 6});
                    let _ = cache.validate(&schema, &json!([1, 2, 3]));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert!(cache.len() <= 4);
}

#[test]
fn a_precomputed_key_finds_the_same_entry_without_serialising_again() {
    let cache = SchemaCache::new(8);
    let schema = json!({"type": "object", "required": ["q"]});
    let key = SchemaKey::of(&schema);
    assert_eq!(key, SchemaKey::of(&schema.clone()));
    assert_ne!(key, SchemaKey::of(&json!({"type": "object"})));
    let found = cache.validate_with_key(&key, &schema, &json!({})).unwrap_err();
    assert_eq!(pointers(&found), vec![""]);
    assert_eq!(cache.validate_with_key(&key, &schema, &json!({"q": 1})), Ok(()));
    // Keyed and unkeyed calls share one compiled validator.
    assert_eq!(cache.validate(&schema, &json!({"q": 1})), Ok(()));
    assert_eq!(cache.compiled(), 1);
    assert_eq!(cache.len(), 1);
}

#[test]
fn learnt_tools_carry_the_keys_of_their_schemas() {
    use crate::catalog::ToolCatalog;
    let list = crate::jsonrpc::raw_from_str(
        r#"{"tools":[{"name":"search","inputSchema":{"type":"object","required":["q"]},"outputSchema":{"type":"object"}},{"name":"bare"}]}"#,
    )
    .unwrap();
    let catalog = ToolCatalog::default();
    catalog.learn(&list);
    let search = catalog.get("search").unwrap();
    let input = search.input_schema.as_deref().unwrap();
    assert_eq!(search.input_key.as_ref(), Some(&SchemaKey::of(input)));
    assert_eq!(search.output_key.as_ref(), Some(&SchemaKey::of(search.output_schema.as_deref().unwrap())));
    let cache = SchemaCache::new(8);
    assert!(cache.validate_with_key(search.input_key.as_ref().unwrap(), input, &json!({})).is_err());
    let bare = catalog.get("bare").unwrap();
    assert!(bare.input_key.is_none() && bare.output_key.is_none());
}
