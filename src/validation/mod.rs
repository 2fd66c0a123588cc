//! Validation of tool arguments against the tool's `inputSchema`, at the gateway.
//!
//! A model that sends bad arguments learns what is wrong from the violations (at most
//! `MAX_VIOLATIONS`, each with its JSON Pointer and a sanitised message) and can correct
//! itself without a round trip to the upstream.
//!
//! The schema is the upstream's; a broken one must never block calls, so a schema that
//! does not compile validates everything (and is logged once, when first seen). Schemas
//! are compiled once and kept in a bounded `SchemaCache`, found by a `SchemaKey` that
//! callers compute once per schema rather than once per call. Compilation is offline — no
//! remote `$ref` is ever fetched — and `pattern`s use the linear-time `regex` engine, so a
//! hostile pattern cannot stall the gateway (patterns needing look-around or
//! back-references make the schema fail to compile, which again means "not validated").

mod message;

use std::collections::VecDeque;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use jsonschema::{PatternOptions, Validator};
use serde_json::Value;

use crate::sanitize;

/// Most violations reported for one instance; further ones are not computed.
pub(crate) const MAX_VIOLATIONS: usize = 8;
/// A sensible cache size: one entry per distinct tool schema.
pub(crate) const DEFAULT_CAPACITY: usize = 1024;

/// One way in which an instance fails its schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// RFC 6901 pointer to the offending value in the instance; `""` is the root.
    ///
    /// As jsonschema reports it, a missing required property points at the object that
    /// lacks it (`""` for a missing top-level argument), not at the absent member.
    pub pointer: String,
    /// What is wrong, built from the kind of failure rather than from the (possibly huge)
    /// offending value, and sanitised to at most 256 bytes.
    pub message: String,
}

/// The check of a `tools/call`'s arguments against the tool's `inputSchema`
/// (`errors.validate_arguments`), with the compiled schemas it keeps.
pub(crate) struct ArgumentCheck {
    enabled: bool,
    schemas: SchemaCache,
}

impl ArgumentCheck {
    /// The check, on or off.
    pub(crate) fn new(enabled: bool) -> ArgumentCheck {
        ArgumentCheck { enabled, schemas: SchemaCache::new(DEFAULT_CAPACITY) }
    }

    /// Checks `arguments` (none: `{}`) against `schema`, whose key `key` is when known:
    /// `Err` holds what is wrong. Without a schema, or with the check off, anything goes.
    pub(crate) fn check(
        &self,
        schema: Option<&Value>,
        key: Option<&SchemaKey>,
        arguments: Option<&Value>,
    ) -> Result<(), Vec<Violation>> {
        let Some(schema) = schema.filter(|_| self.enabled) else { return Ok(()) };
        let empty = Value::Object(serde_json::Map::new());
        let arguments = arguments.unwrap_or(&empty);
        match key {
            Some(key) => self.schemas.validate_with_key(key, schema, arguments),
            None => self.schemas.validate(schema, arguments),
        }
    }
}

/// Where a schema lives in the `SchemaCache`: its JSON text and the hash of that text.
///
/// Finding the entry takes the schema's text, and serialising the schema on every call
/// would be wasted work; callers that validate against the same schema again and again
/// (every `tools/call` of a tool) compute the key once, when they learn the schema, and
/// use `SchemaCache::validate_with_key`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct SchemaKey {
    /// Compared on every hit so that a hash collision cannot pick the wrong validator;
    /// shared with the cache entry, so a miss does not copy it.
    text: Arc<str>,
    hash: u64,
}

impl SchemaKey {
    /// The key of `schema`.
    pub(crate) fn of(schema: &Value) -> Self {
        // Serialising a `Value` cannot fail: its map keys are strings.
        let text: Arc<str> = serde_json::to_string(schema).unwrap_or_default().into();
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        SchemaKey { hash: hasher.finish(), text }
    }
}

impl std::fmt::Debug for SchemaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The schema itself is printed next to its key; its text again would be noise.
        f.debug_struct("SchemaKey")
            .field("hash", &format_args!("{:016x}", self.hash))
            .field("len", &self.text.len())
            .finish()
    }
}

/// Compiled validators keyed by the schema's JSON text, bounded, safe to share.
///
/// When full, the entry inserted first is evicted. A schema that fails to compile is
/// cached too (as "validate nothing"), so its warning is logged once.
pub(crate) struct SchemaCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_hash: crate::hashing::Map<u64, Entry>,
    /// Insertion order, oldest first.
    order: VecDeque<u64>,
    /// Schemas compiled so far (tests check that hits do not recompile).
    compiled: usize,
}

struct Entry {
    /// The schema's text, compared on every hit so a hash collision cannot pick the wrong
    /// validator.
    text: Arc<str>,
    /// `None` when the schema did not compile.
    validator: Option<Arc<Validator>>,
}

impl SchemaCache {
    /// A cache holding at most `capacity` compiled schemas (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        SchemaCache { capacity: capacity.max(1), entries: Mutex::new(Entries::default()) }
    }

    /// Validates `instance` against `schema`: `Ok(())`, or up to [`MAX_VIOLATIONS`]
    /// violations in the order jsonschema finds them.
    ///
    /// A schema that fails to compile (invalid, unresolvable `$ref`, unsupported
    /// pattern) yields `Ok(())` and a warning in the log. Without `$schema`, the dialect
    /// is JSON Schema 2020-12, as MCP 2025-11-25 specifies.
    pub(crate) fn validate(&self, schema: &Value, instance: &Value) -> Result<(), Vec<Violation>> {
        self.validate_with_key(&SchemaKey::of(schema), schema, instance)
    }

    /// [`validate`](Self::validate) with the schema's key computed beforehand, so that
    /// the schema is not serialised again. `key` must be `SchemaKey::of(schema)`.
    pub(crate) fn validate_with_key(
        &self,
        key: &SchemaKey,
        schema: &Value,
        instance: &Value,
    ) -> Result<(), Vec<Violation>> {
        let Some(validator) = self.validator(key, schema) else {
            return Ok(());
        };
        // The usual instance is valid: checked without collecting errors first.
        if validator.is_valid(instance) {
            return Ok(());
        }
        let violations: Vec<Violation> = validator
            .iter_errors(instance)
            .take(MAX_VIOLATIONS)
            .map(|error| Violation {
                pointer: error.instance_path().as_str().to_owned(),
                message: sanitize::text(&message::describe(error.kind(), error.instance())),
            })
            .collect();
        if violations.is_empty() { Ok(()) } else { Err(violations) }
    }

    /// Number of schemas currently cached.
    pub(crate) fn len(&self) -> usize {
        self.lock().by_hash.len()
    }

    /// The compiled validator for `schema` (whose key is `key`), compiling and caching it
    /// on a miss; `None` when it does not compile.
    fn validator(&self, key: &SchemaKey, schema: &Value) -> Option<Arc<Validator>> {
        if let Some(entry) = self.lock().by_hash.get(&key.hash)
            && entry.text == key.text
        {
            return entry.validator.clone();
        }
        // Compile without holding the lock; a concurrent miss on the same schema compiles
        // it twice, which is harmless.
        let validator = compile(schema).map(Arc::new);
        let mut entries = self.lock();
        entries.compiled += 1;
        let entry = Entry { text: Arc::clone(&key.text), validator: validator.clone() };
        if entries.by_hash.insert(key.hash, entry).is_none() {
            entries.order.push_back(key.hash);
        }
        while entries.by_hash.len() > self.capacity {
            let Some(oldest) = entries.order.pop_front() else {
                break;
            };
            entries.by_hash.remove(&oldest);
        }
        validator
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // The entries stay consistent even if a holder panicked: every update is a
        // single insert or remove.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    #[cfg(test)]
    fn compiled(&self) -> usize {
        self.lock().compiled
    }
}

impl Default for SchemaCache {
    fn default() -> Self {
        SchemaCache::new(DEFAULT_CAPACITY)
    }
}

impl std::fmt::Debug for SchemaCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaCache").field("capacity", &self.capacity).field("len", &self.len()).finish()
    }
}

/// Compiles offline with the linear-time regex engine; logs and returns `None` on error.
fn compile(schema: &Value) -> Option<Validator> {
    match jsonschema::options().offline().with_pattern_options(PatternOptions::regex()).build(schema) {
        Ok(validator) => Some(validator),
        Err(error) => {
            tracing::warn!(
                error = %sanitize::text(&error.to_string()),
                "tool input schema does not compile; its arguments are not validated"
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            found,
            vec![Violation { pointer: String::new(), message: "missing required property 'name'".into() }]
        );
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
        let schema =
            json!({"required": ["pass\nword", "x".repeat(300)], "properties": {"a": {"enum": ["y".repeat(200)]}}});
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
}
