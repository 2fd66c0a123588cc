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
pub struct SchemaKey {
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
mod tests;
